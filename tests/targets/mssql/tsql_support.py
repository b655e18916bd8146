"""What the tests read of the T-SQL templates beyond what ssbench renders: the template files,
their sections and placeholders, and the ODBC ``?`` markers of a statement (the T-SQL parser
checks send it as SQL Server receives it)."""

from __future__ import annotations

import re
from pathlib import Path

from harness.targets.mssql import tsql


def template_files() -> list[Path]:
    return sorted(tsql.TEMPLATE_DIR.glob("*.sql"))


def sections(file: str) -> list[str]:
    """Section names of ``workloads/mssql/<file>.sql``."""
    return list(tsql._sections(str(tsql.TEMPLATE_DIR / f"{file}.sql")))


def placeholders(file: str, name: str) -> set[tuple[str, str]]:
    """``{(kind, param), ...}`` used by a section."""
    return set(tsql._PLACEHOLDER_RE.findall(tsql.section(file, name)))


#: a string literal ('' inside is a quote; an unterminated one runs to the end), a ``--``
#: comment to the end of its line, or a ``?`` marker: scanned left to right, so a ``?`` or
#: ``--`` inside a literal, or a quote inside a comment, is part of that token
_MARKER_TOKENS = re.compile(r"'(?:[^']|'')*'?|--[^\n]*|\?")


def marker_positions(sql: str) -> list[int]:
    """Offsets of the ODBC ``?`` markers outside string literals and ``--`` comments."""
    return [m.start() for m in _MARKER_TOKENS.finditer(sql) if m.group() == "?"]


def parameter_markers(sql: str) -> int:
    """ODBC ``?`` markers outside string literals and comments."""
    return len(marker_positions(sql))


def named_markers(sql: str) -> str:
    """The statement as SQL Server receives it from its ODBC driver: ``?`` markers become
    ``@P1``, ``@P2``, ... (the driver sends them with sp_prepexec / sp_executesql)."""
    out, last = [], 0
    for n, pos in enumerate(marker_positions(sql), start=1):
        out.append(sql[last:pos] + f"@P{n}")
        last = pos + 1
    return "".join(out) + sql[last:]
