"""A target's full disk, recognized in the words of its errors and its server log:
PostgreSQL's ENOSPC (``could not extend file``, ``No space left on device``, SQLSTATE 53100
disk_full) and SQL Server's 9002 (transaction log full) and 1105 (filegroup full)."""

from __future__ import annotations

import re
from collections.abc import Iterable

_PG = re.compile(r"could not (?:extend|write to|create) file [^\n]*?No space left on device"
                 r"|No space left on device|\b53100\b|\bdisk_full\b|\bDiskFull\b")
_MSSQL_LOG = re.compile(r"transaction log for database '([^']*)' is full|\(9002\)")
_MSSQL_FILEGROUP = re.compile(r"in database '([^']*)' because the '([^']*)' filegroup is full|\(1105\)")
_ANY = re.compile("|".join(p.pattern for p in (_PG, _MSSQL_LOG, _MSSQL_FILEGROUP)))


def disk_full_evidence(texts: Iterable[str]) -> str | None:
    """The first text (an error message, a log line) that says the server's disk is full,
    cut to one line of at most 200 characters; None when none does."""
    for t in texts:
        if t and _ANY.search(t):
            line = next((x for x in str(t).splitlines() if _ANY.search(x)), str(t)).strip()
            return line if len(line) <= 200 else line[:200] + "..."
    return None


def mssql_disk_full_line(evidence: str) -> str:
    """What is full on a SQL Server and what to do, from an error's words (9002, 1105)."""
    m = _MSSQL_LOG.search(evidence)
    if m:
        db = f" of database '{m.group(1)}'" if m.group(1) else ""
        return (f"the SQL Server transaction log{db} is full (error 9002): back up the log or give "
                f"it room (log_reuse_wait_desc in sys.databases says why it cannot be reused)")
    m = _MSSQL_FILEGROUP.search(evidence)
    if m and m.group(1):
        return (f"the '{m.group(2)}' filegroup of SQL Server database '{m.group(1)}' is full (error 1105): "
                "free space on its disk, grow its files or add one")
    if m:
        return "a SQL Server filegroup is full (error 1105): free space on its disk, grow its files or add one"
    return f"the SQL Server's disk is full ({evidence}): free space on it"


def pg_disk_full_line(data_dir, evidence: str) -> str:
    """What is full on the embedded PostgreSQL server and what to do."""
    return (f"the embedded PostgreSQL server's data directory {data_dir} is full ({evidence}): "
            f"free space on its file system (df {data_dir})")
