"""User-facing errors: the CLI prints them without a traceback and exits 2."""

from __future__ import annotations

import re
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


def show(value: Any, limit: int = 60) -> str:
    """A value as an error message shows it: repr'd (YAML line wrappers show their plain value),
    control characters escaped, cut to about ``limit`` characters."""
    text = escape_controls(repr(value))
    if len(text) > limit:
        text = text[:limit] + "...(" + str(len(text)) + " characters)"
    return text


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


class TargetDiskFull(OSError):
    """The target's own disk is full (its data, log or filegroup): an ENOSPC like the results
    directory's, so ``ssbench run`` exits 5 and leaves the repetition to be redone by
    ``--resume``; its text is the one line naming what is full and what to do."""

    def __init__(self, message: str):
        super().__init__(28, escape_controls(message))   # errno.ENOSPC

    def __str__(self) -> str:
        return self.strerror


class DiskFull(UserError):
    """A full disk (or quota) where ssbench writes: one line naming the place, exit code 5."""

    exit_code = 5


#: how a full disk reads where only its text crosses over (the JVM's, pyarrow's, a helper process's)
_NO_SPACE_TEXT = ("no space left on device", "disk quota exceeded")


def no_space(e: BaseException | None) -> bool:
    """Whether ``e`` (or an exception it came from) is a full disk: ENOSPC or EDQUOT, or their
    message from Java or Arrow, whose errors do not carry the errno."""
    import errno

    seen = 0
    while e is not None and seen < 20:
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if any(t in str(e).lower() for t in _NO_SPACE_TEXT):
            return True
        e, seen = e.__cause__ or e.__context__, seen + 1
    return False
