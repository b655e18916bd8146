"""Plugins by name, through Python entry points: targets, senders and collectors.

A distribution registers them in the groups ``ssbench.targets``, ``ssbench.senders`` and
``ssbench.collectors`` of its metadata, as ssbench's own pyproject.toml does; a third target is
a package that registers itself, with no edit to ssbench (docs/targets.md). Every process that
needs a plugin (the runner, each Locust worker) looks it up on its own ``sys.path``.
"""

from __future__ import annotations

import sys
from importlib import metadata
from typing import Any

from ..errors import UserError

TARGETS = "ssbench.targets"
SENDERS = "ssbench.senders"
COLLECTORS = "ssbench.collectors"

_WHAT = {TARGETS: "target", SENDERS: "sender", COLLECTORS: "collector"}
_cache: dict[tuple[str, tuple[str, ...]], dict[str, metadata.EntryPoint]] = {}


def entry_points(group: str) -> dict[str, metadata.EntryPoint]:
    """The entry points of ``group`` by name (sorted), read once per ``sys.path``. Two
    distributions registering one name is an error: which one would run is not obvious."""
    key = (group, tuple(sys.path))
    found = _cache.get(key)
    if found is None:
        found, origin = {}, {}
        for ep in metadata.entry_points(group=group):
            dist = ep.dist.name if ep.dist is not None else "?"
            if ep.name in found and found[ep.name].value != ep.value:
                raise UserError(f"two {_WHAT.get(group, group)}s are registered as {ep.name!r}: "
                                f"{found[ep.name].value} ({origin[ep.name]}) and {ep.value} ({dist})",
                                field=group)
            found[ep.name], origin[ep.name] = ep, dist
        found = dict(sorted(found.items()))
        _cache[key] = found
    return found


def names(group: str) -> list[str]:
    return list(entry_points(group))


def load(group: str, name: str) -> Any:
    """The object registered as ``name`` in ``group`` (its module imported now)."""
    ep = entry_points(group).get(name)
    if ep is None:
        known = ", ".join(names(group)) or "none"
        raise UserError(f"no {_WHAT.get(group, group)} is registered as {name!r} (registered: {known}; "
                        "a plugin registers itself with an entry point in the group "
                        f"{group!r}, docs/targets.md)", field=group)
    return ep.load()


def load_all(group: str) -> list[tuple[str, Any]]:
    """Every object registered in ``group``, by name."""
    return [(name, ep.load()) for name, ep in entry_points(group).items()]
