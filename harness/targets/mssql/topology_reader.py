"""The value checks :func:`.topology.load_topology` applies to a topology file (no literal
passwords, driver names, TDS versions, environment variable names)."""

from __future__ import annotations

import re

from ...errors import UserError
from ...yamlsrc import Located

ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")

NOT_ENV_NAME = "is not an environment variable name (name the one holding the password, never the password)"


def check_env_name(v: str, fld: str) -> str:
    if not ENV_NAME_RE.match(v):
        raise ValueError(NOT_ENV_NAME)  # never echoed: it may be the password itself
    return v


def check_tds_version(v: str, fld: str) -> str:
    if not re.fullmatch(r"\d\.\d", v):
        raise ValueError(f"{v!r} is not a TDS version such as 7.4")
    return v


def check_driver_name(v: str, fld: str) -> str:
    if not v or any(c in v for c in "{};=\0\n\r"):
        raise ValueError(f"{v!r} is not an ODBC driver name")
    return v


def refuse_literal_passwords(loc: Located, file: str, path: str = "") -> None:
    """Passwords come only from environment variables: any password-like key is an error."""
    if isinstance(loc.value, list):
        for i, item in enumerate(loc.value):
            refuse_literal_passwords(item, file, f"{path}[{i}]")
    if not isinstance(loc.value, dict):
        return
    for key, item in loc.value.items():
        sub = f"{path}.{key}" if path else key
        low = key.lower()
        if low in ("password", "pwd", "passwd") or low.endswith("_password"):
            raise UserError("literal passwords are not allowed in a topology file: export the "
                            "password in an environment variable and name that variable with "
                            "password_env: (for example password_env: SSBENCH_MSSQL_PASSWORD)",
                            file=file, line=item.line, field=sub)
        refuse_literal_passwords(item, file, sub)
