"""Build the target a command names: ``embedded`` or a SQL Server topology file."""

from __future__ import annotations

from .base import Target


def make_target(where: str) -> Target:
    """``embedded`` or a path to a SQL Server topology YAML file."""
    if where == "embedded":
        from .embedded.target import EmbeddedTarget

        return EmbeddedTarget.default()
    from .mssql.target import MssqlTarget

    return MssqlTarget.from_file(where)
