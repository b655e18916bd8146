"""User-facing errors: the CLI prints them without a traceback and exits 2."""

from __future__ import annotations


class UserError(Exception):
    """Bad input from the user (a file, a flag, a setting). Exit code 2, no traceback."""

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
            where = self.file
            if self.line:
                where += f":{self.line}"
            where += ": "
        field = f"{self.field}: " if self.field else ""
        return f"{where}{field}{self.detail}"


class TargetError(Exception):
    """The system under test failed or is unreachable. Exit code 3 from the CLI."""

    exit_code = 3
