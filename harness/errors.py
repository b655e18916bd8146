"""User-facing errors: the CLI prints them without a traceback and exits 2 (5 for a full disk);
and the one recognizer of a full disk's words."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

# C0 and C1 controls, DEL and the Unicode line/paragraph separators: never printed raw, so
# an error is always one line and a value cannot forge terminal output.
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def escape_controls(text: str) -> str:
    """``text`` with every control character written as an escape (``\\n``, ``\\x00``, ...)."""
    def esc(m: re.Match) -> str:
        c = m.group(0)
        return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(c) or (
            f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")
    return _CONTROL_RE.sub(esc, text)


def first_line(e: BaseException) -> str:
    """The first line of an exception's message (its type's name when it has none)."""
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def show(value: Any, limit: int = 60) -> str:
    """A value as an error message shows it: repr'd (YAML line wrappers show their plain value),
    control characters escaped, cut to about ``limit`` characters."""
    text = escape_controls(repr(value))
    if len(text) > limit:
        text = text[:limit] + "...(" + str(len(text)) + " characters)"
    return text


class Terminated(KeyboardInterrupt):
    """SIGTERM (kill, systemd, a CI timeout): every command stops as on Ctrl-C (exit 130); one
    that runs a child outside the terminal's process group passes the signal on."""


class UserError(Exception):
    """Bad input from the user (a file, a flag, a setting). Exit code 2, no traceback.

    Printed as one line, ``file:line: field: message``; control characters in any part are
    escaped."""

    exit_code = 2

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 field: str | None = None):
        self.file = file
        self.line = line
        self.field = field
        self.detail = message
        super().__init__(self.format())

    def format(self) -> str:
        where = ""
        if self.file:
            where = str(self.file)
            if self.line:
                where += f":{self.line}"
            where += ": "
        field = str(self.field or "")
        if len(field) > 120:  # a path into a deeply nested or oddly keyed document
            field = field[:120] + "..."
        field = f"{field}: " if field else ""
        detail = str(self.detail)
        if len(detail) > 300:  # a value echoed whole: the start says enough
            detail = detail[:300] + "..."
        return escape_controls(f"{where}{field}{detail}")


class TargetError(Exception):
    """The system under test failed or is unreachable. Exit code 3 from the CLI."""

    exit_code = 3


class DiskFull(UserError):
    """A full disk (or quota): where ssbench writes (the results' or the report's directory) or
    the target's own (its data directory, transaction log or filegroup). One line naming what
    is full and what to do; exit code 5, and a run leaves the repetition to ``--resume``."""

    exit_code = 5


#: the words of a full disk, wherever only its text crosses over: the OS's (Python's, the JVM's,
#: Arrow's, a helper process's, PostgreSQL's), PostgreSQL's SQLSTATE 53100 and its names, SQL
#: Server's 9002 (transaction log full) and 1105 (filegroup full), naming the database and filegroup
FULL_DISK = re.compile(
    r"(?i:no space left on device|disk quota exceeded)|(?:ERROR:\s+|SQLSTATE\W*|\()53100\b|\bdisk_full\b|\bDiskFull\b"
    r"|(?P<log>transaction log for database '(?P<log_db>[^']*)' is full|\(9002\))"
    r"|(?P<filegroup>in database '(?P<fg_db>[^']*)' because the '(?P<fg>[^']*)' filegroup is full|\(1105\))")


def full_disk(evidence: BaseException | Iterable[str] | None) -> str | None:
    """The words saying a disk is full, from an exception (or one it came from: ENOSPC, EDQUOT,
    or the words above where the errno did not cross over) or from texts (errors, log lines):
    the first line that says it, cut to 200 characters; None when nothing does."""
    texts = _said(evidence) if isinstance(evidence, BaseException) else evidence or ()
    for t in texts:
        if t and FULL_DISK.search(t):
            line = next((x for x in str(t).splitlines() if FULL_DISK.search(x)), str(t)).strip()
            return line if len(line) <= 200 else line[:200] + "..."
    return None


def _said(e: BaseException | None) -> Iterator[str]:
    """What an exception and those it came from say, the errno of a full disk in words."""
    import errno
    import os

    for _ in range(20):
        if e is None:
            return
        text = str(e)
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT) and not FULL_DISK.search(text):
            text = f"{os.strerror(e.errno)}: {text}"
        yield text
        e = e.__cause__ or e.__context__
