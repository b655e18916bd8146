"""T-SQL rendering: validated, quoted identifiers and N'...' literals, never string concatenation.

The templates live in ``workloads/mssql/*.sql``: named sections (``-- @@ name``) split into
batches on ``GO`` lines, with typed placeholders (``{{ident:queue}}``, ``{{lit:queue}}``, ...),
each value rendered by its kind's formatter. There is no "raw" kind: nothing is pasted into
T-SQL as is. docs/sqlserver.md lists the kinds.
"""

from __future__ import annotations

import datetime as _dt
import re
import uuid
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from ...paths import WORKLOADS

TEMPLATE_DIR = WORKLOADS / "mssql"

#: sysname is nvarchar(128)
MAX_NAME = 128

#: Keywords a template may take as a parameter (``{{kw:...}}``), e.g. ENCRYPTION = {{kw:x}}.
KEYWORDS = frozenset({
    "ON", "OFF", "DISABLED", "SUPPORTED", "REQUIRED", "ALLOWED", "FORCED", "ENABLED",
})

# Plain object names (databases, tables, procedures, queues, users, logins, certificates,
# endpoints, routes): a letter or underscore, then letters, digits, _ $ # @ or -.
_SQL_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_$#@-]*$")
# Service Broker names (services, contracts, message types) are URIs by convention:
# //MySSB.com/Lab/S_Test. Letters, digits and _ / : . - only.
_BROKER_NAME_RE = re.compile(r"^[A-Za-z0-9_/:.-]+$")
_PLACEHOLDER_RE = re.compile(r"\{\{\s*([a-z]+)\s*:\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_SECTION_RE = re.compile(r"^--\s*@@\s*([A-Za-z_][A-Za-z0-9_]*)\s*$")
_GO_RE = re.compile(r"^\s*GO\s*;?\s*$", re.IGNORECASE)
_HOST_RE = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?"
                      r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?)*\.?$")
_IPV4_RE = re.compile(r"^(?:\d{1,3}\.){3}\d{1,3}$")


class TemplateError(ValueError):
    """A template or a parameter is wrong (a bug in ssbench, or an invalid value)."""


# --------------------------------------------------------------------------- validation

def _common_checks(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a string, got {type(value).__name__}")
    if value == "":
        raise ValueError(f"{what} is empty")
    if len(value) > MAX_NAME:
        raise ValueError(f"{what} is {len(value)} characters long; SQL Server names are at most "
                         f"{MAX_NAME} (sysname)")
    bad = [c for c in value if ord(c) < 32 or ord(c) == 127]
    if bad:
        raise ValueError(f"{what} {value!r} contains control characters")
    for seq in ("--", "/*", "*/"):
        if seq in value:
            raise ValueError(f"{what} {value!r} contains {seq!r} (a T-SQL comment marker)")
    return value


def validate_name(value: Any, what: str = "name") -> str:
    """A plain SQL Server object name: letters, digits, ``_ $ # @ -``, not starting with a
    digit, 1-128 characters. Raises ValueError saying why not."""
    return _only(value, what, _SQL_NAME_RE, "[A-Za-z0-9_$#@-]", "_ $ # @ -")


def validate_broker_name(value: Any, what: str = "Service Broker name") -> str:
    """A service, contract or message type name (``//MySSB.com/Lab/S_Test``): letters,
    digits and ``_ / : . -``, 1-128 characters."""
    return _only(value, what, _BROKER_NAME_RE, "[A-Za-z0-9_/:.-]", "_ / : . -")


def _only(value: Any, what: str, name_re: re.Pattern, char: str, others: str) -> str:
    value = _common_checks(value, what)
    if not name_re.match(value):
        odd = sorted({c for c in value if not re.match(char, c)})
        if odd:
            raise ValueError(f"{what} {value!r} contains {', '.join(repr(c) for c in odd)}; "
                             f"use letters, digits and {others} only")
        raise ValueError(f"{what} {value!r} must start with a letter or '_'")
    return value


def validate_host(value: Any, what: str = "host") -> str:
    """A DNS name or an IPv4 address (it ends up in a route's TCP:// address)."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string")
    if _IPV4_RE.match(value):
        if all(0 <= int(p) <= 255 for p in value.split(".")):
            return value
        raise ValueError(f"{what} {value!r} is not a valid IPv4 address")
    if not _HOST_RE.match(value):
        raise ValueError(f"{what} {value!r} is not a host name (letters, digits, '-' and '.') "
                         "or an IPv4 address")
    return value


# --------------------------------------------------------------------------- quoting

def quote_ident(name: str, what: str = "name", validate=validate_name) -> str:
    """``[name]`` for a validated plain object name (``]`` doubled regardless)."""
    try:
        validate(name, what)
    except ValueError as e:
        raise TemplateError(str(e)) from None
    return "[" + name.replace("]", "]]") + "]"


def quote_broker_name(name: str, what: str = "Service Broker name") -> str:
    """``[//MySSB.com/Lab/S_Test]`` for a validated service, contract or message type name."""
    return quote_ident(name, what, validate_broker_name)


def quote_literal(text: str, what: str = "value") -> str:
    """``N'text'`` with single quotes doubled; control characters other than tab, CR and LF
    are refused."""
    if not isinstance(text, str):
        raise TemplateError(f"{what} must be a string, got {type(text).__name__}")
    bad = [c for c in text if (ord(c) < 32 and c not in "\t\r\n") or ord(c) == 127]
    if bad:
        raise TemplateError(f"{what} contains control characters")
    return "N'" + text.replace("'", "''") + "'"


def hex_literal(data: bytes, what: str = "value") -> str:
    if not isinstance(data, (bytes, bytearray)) or not data:
        raise TemplateError(f"{what} must be non-empty bytes")
    return "0x" + bytes(data).hex().upper()


def int_literal(value: int, what: str = "value") -> str:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TemplateError(f"{what} must be an integer, got {type(value).__name__}")
    if not -(2 ** 63) <= value < 2 ** 63:
        raise TemplateError(f"{what} {value} is out of bigint range")
    return str(value)


def guid_literal(value: Any, what: str = "value") -> str:
    try:
        u = value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
    except (ValueError, AttributeError, TypeError):
        raise TemplateError(f"{what} {value!r} is not a GUID") from None
    return "N'" + str(u) + "'"


def keyword(value: Any, what: str = "value") -> str:
    if not isinstance(value, str) or value.upper() not in KEYWORDS:
        raise TemplateError(f"{what} {value!r} is not one of {', '.join(sorted(KEYWORDS))}")
    return value.upper()


def date_literal(value: Any, what: str = "value") -> str:
    if not isinstance(value, _dt.date) or isinstance(value, _dt.datetime):
        raise TemplateError(f"{what} must be a datetime.date, got {type(value).__name__}")
    return "N'" + value.strftime("%Y%m%d") + "'"


FORMATTERS = {
    "ident": quote_ident,
    "sbname": quote_broker_name,
    "lit": quote_literal,
    "int": int_literal,
    "hex": hex_literal,
    "guid": guid_literal,
    "kw": keyword,
    "date": date_literal,
}


# --------------------------------------------------------------------------- templates

def render(template: str, params: Mapping[str, Any]) -> str:
    """Substitute every ``{{kind:name}}``. Missing parameters, unknown kinds and stray
    ``{{`` are errors; unused parameters are allowed (sections share parameter sets)."""

    def sub(m: re.Match) -> str:
        kind, name = m.group(1), m.group(2)
        if kind not in FORMATTERS:
            raise TemplateError(f"unknown placeholder kind {kind!r} in {m.group(0)}")
        if name not in params:
            raise TemplateError(f"template parameter {name!r} ({m.group(0)}) is missing")
        return FORMATTERS[kind](params[name], name)

    out = _PLACEHOLDER_RE.sub(sub, template)
    if "{{" in out or "}}" in out:
        raise TemplateError("malformed placeholder left in template: "
                            + out[max(0, out.find("{{") - 20):out.find("{{") + 40])
    return out


def split_batches(sql: str) -> list[str]:
    """Split on ``GO`` lines like sqlcmd; empty batches are dropped."""
    batches: list[list[str]] = [[]]
    for line in sql.splitlines():
        if _GO_RE.match(line):
            batches.append([])
        else:
            batches[-1].append(line)
    return [b for b in ("\n".join(lines).strip() for lines in batches) if _has_code(b)]


def _has_code(batch: str) -> bool:
    return any(line.strip() and not line.strip().startswith("--") for line in batch.splitlines())


@lru_cache(maxsize=None)
def _sections(path: str) -> dict[str, str]:
    text = Path(path).read_text(encoding="utf-8")
    sections: dict[str, list[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        m = _SECTION_RE.match(line.strip())
        if m:
            current = m.group(1)
            if current in sections:
                raise TemplateError(f"{path}: section {current!r} defined twice")
            sections[current] = []
        elif current is not None:
            sections[current].append(line)
    return {k: "\n".join(v) for k, v in sections.items()}


def section(file: str, name: str) -> str:
    """The raw (unrendered) text of one section."""
    path = TEMPLATE_DIR / f"{file}.sql"
    try:
        secs = _sections(str(path))
    except FileNotFoundError:
        raise TemplateError(f"no template file {path}") from None
    if name not in secs:
        raise TemplateError(f"{path}: no section {name!r} (have: {', '.join(secs)})")
    return secs[name]


def batches(file: str, name: str, params: Mapping[str, Any] | None = None) -> list[str]:
    """Render one section and split it into batches."""
    return split_batches(render(section(file, name), params or {}))


def statement(file: str, name: str, params: Mapping[str, Any] | None = None) -> str:
    """Render a one-batch section (a query, possibly with ``?`` parameter markers). Whole-line
    comments are dropped, so a ``?`` in a comment can never count as a parameter marker."""
    out = batches(file, name, params)
    if len(out) != 1:
        raise TemplateError(f"{file}.sql section {name!r} has {len(out)} batches, expected 1")
    return "\n".join(line for line in out[0].splitlines() if not line.lstrip().startswith("--"))
