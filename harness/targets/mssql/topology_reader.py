"""Reading a topology file: typed field access with file/line/field errors, and the value
checks :func:`.topology.load_topology` applies (no literal passwords, driver names, TDS
versions, environment variable names)."""

from __future__ import annotations

import re
from typing import Any, Callable

from ...errors import UserError
from ...redact import redact_string
from ...yamlsrc import Located

ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


class Reader:
    """Typed field access with file/line/field errors."""

    def __init__(self, file: str, top_line: int):
        self.file = file
        self.top_line = top_line

    def err(self, msg: str, loc: Located | None, fld: str) -> UserError:
        """Every topology error. Messages echo the bad value: never a connection-string
        secret inside it (a host given as ``db1;PWD=...``)."""
        return UserError(redact_string(msg), file=self.file, line=loc.line if loc else self.top_line,
                         field=fld)

    def mapping(self, loc: Located | None, fld: str, allowed: set[str]) -> dict[str, Located]:
        if loc is None or loc.value is None:
            return {}
        if not isinstance(loc.value, dict):
            raise self.err(f"must be a mapping, got {type(loc.value).__name__}", loc, fld)
        for k, v in loc.value.items():
            if k not in allowed:
                raise self.err(f"unknown key (expected one of {', '.join(sorted(allowed))})", v,
                               f"{fld}.{k}" if fld else k)
        return loc.value

    def string(self, m: dict[str, Located], key: str, fld: str, default: str | None = None,
               required: bool = False, check: Callable[[str, str], str] | None = None,
               parent: Located | None = None) -> str | None:
        if key not in m or m[key].value is None:
            if required:
                raise self.err("missing", parent, fld)
            return default
        loc = m[key]
        if not isinstance(loc.value, str):
            raise self.err(f"must be a string, got {type(loc.value).__name__} {loc.value!r}", loc, fld)
        if check:
            try:
                return check(loc.value, "value")
            except ValueError as e:
                raise self.err(str(e), loc, fld) from None
        return loc.value

    def choice(self, m: dict[str, Located], key: str, fld: str, choices: tuple[str, ...],
               default: str) -> str:
        v = self.string(m, key, fld, default)
        if v not in choices:
            raise self.err(f"must be one of {', '.join(choices)}, got {v!r}", m.get(key), fld)
        return v

    def boolean(self, m: dict[str, Located], key: str, fld: str, default: bool) -> bool:
        if key not in m or m[key].value is None:
            return default
        v = m[key].value
        if not isinstance(v, bool):
            raise self.err(f"must be true or false, got {v!r}", m[key], fld)
        return v

    def number(self, m: dict[str, Located], key: str, fld: str, default: float, lo: float, hi: float,
               integer: bool = False) -> Any:
        if key not in m or m[key].value is None:
            return default
        v = m[key].value
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (integer and not isinstance(v, int)):
            raise self.err(f"must be {'an integer' if integer else 'a number'}, got {v!r}", m[key], fld)
        if not lo <= v <= hi:
            raise self.err(f"must be between {lo:g} and {hi:g}, got {v}", m[key], fld)
        return int(v) if integer else float(v)


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
