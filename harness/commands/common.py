"""Helpers shared by the command modules (not a command itself)."""

from __future__ import annotations

import difflib
from pathlib import Path

TARGET_HELP = "'embedded' (PostgreSQL emulation, default) or a SQL Server topology YAML file"


def check_target(value: str) -> str:
    """Validate a ``--target`` value before anything starts: ``embedded`` or an existing file.
    A near miss of ``embedded`` or of a YAML file beside the one named gets a suggestion.
    Raises UserError (one line, exit 2)."""
    from ..errors import UserError

    if value == "embedded" or Path(value).expanduser().is_file():
        return value
    p = Path(value).expanduser()
    candidates = ["embedded"]
    parent = p.parent if str(p.parent) not in ("", ".") else Path(".")
    if parent.is_dir():
        prefix = "" if str(p.parent) in ("", ".") and not value.startswith("./") else str(p.parent) + "/"
        candidates += sorted(prefix + f.name for f in parent.iterdir()
                             if f.is_file() and f.suffix in (".yaml", ".yml"))
    close = difflib.get_close_matches(value, candidates, n=1, cutoff=0.75)
    if close:
        raise UserError(f"{value!r} is neither 'embedded' nor a file; did you mean {close[0]!r}?", field="--target")
    if p.exists():
        raise UserError(f"{value!r} is not a file; give {TARGET_HELP}", field="--target")
    raise UserError(f"{value!r}: no such file; give {TARGET_HELP}", field="--target")
