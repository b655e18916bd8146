"""Keep secrets out of logs, results and plots."""

from __future__ import annotations

import re
from typing import Any

REDACTED = "***"
SECRET_KEY = re.compile(r"(pass(word)?|pwd|secret|token|credential|api[_-]?key)", re.I)
# key=value pairs inside connection strings (ODBC "PWD=...;", libpq "password=...", Azure
# "AccountKey=..." / "SharedAccessKey=...", "secret=...", "token=...")
SECRET_IN_STRING = re.compile(
    r"(?i)\b(pwd|password|passwd|secret|client_secret|token|accountkey|sharedaccesskey|api[_-]?key)"
    r"\s*=\s*(\{[^}]*\}|'[^']*'|\"[^\"]*\"|[^;\s]*)")


def redact_string(s: str) -> str:
    """``s`` with every connection-string secret (``PWD=...``, ``password=...``, ...) replaced:
    for anything that may echo a value a user gave, logs and error messages alike (a topology
    value ``host: db1;PWD=...`` is reported as ``db1;PWD=***``)."""
    return SECRET_IN_STRING.sub(lambda m: f"{m.group(1)}={REDACTED}", s)


def redact(obj: Any) -> Any:
    """A copy of ``obj`` with secret-looking keys' values and connection-string passwords
    replaced. Keys that only *name* an environment variable holding a secret (``*_env``) keep
    their value: the name is not the secret."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if isinstance(k, str) and SECRET_KEY.search(k) and not k.lower().endswith("_env") \
                    and v not in (None, "", REDACTED):
                out[k] = REDACTED
            else:
                out[k] = redact(v)
        return out
    if isinstance(obj, (list, tuple)):
        return [redact(v) for v in obj]
    if isinstance(obj, str):
        return redact_string(obj)
    return obj


def error_line(e: BaseException, limit: int = 500) -> str:
    """Why something failed, for a record (run.json's ``error``): ``Type: message``, one line
    (controls escaped), secrets redacted, cut to about ``limit`` characters."""
    from .errors import escape_controls

    text = escape_controls(redact_string(f"{type(e).__name__}: {e}".rstrip(": ")))
    return text if len(text) <= limit else text[:limit] + "..."
