"""Helpers shared by the command modules (not a command itself)."""

from __future__ import annotations

TARGET_HELP = ("a registered target: 'embedded' (the PostgreSQL emulation, default), NAME:ARG, or a SQL "
               "Server topology YAML file (docs/targets.md)")


def check_target(value: str) -> str:
    """Validate a ``--target`` value before anything starts: a registered target's name,
    ``NAME:ARG``, or a file a registered target opens. A near miss gets a suggestion. Raises
    UserError (one line, exit 2)."""
    from ..targets.factory import choose

    choose(value)
    return value
