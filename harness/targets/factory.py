"""The target ``--target`` names, through the registry (entry-point group ``ssbench.targets``).

A registered name (``embedded``), ``NAME:ARG`` (``mssql:lab.yaml``) or an existing file (for the
target that opens files). :func:`target_config` reads it without connecting, so commands check
their input before anything starts; :func:`make_target` builds the target.
"""

from __future__ import annotations

import difflib
from dataclasses import replace
from pathlib import Path

from ..errors import UserError
from . import registry
from .base import Target, TargetConfig

#: what --target takes, for error messages
EXPECTED = "a registered target's name, NAME:ARG, or a file a registered target opens"


def target_class(name: str) -> type[Target]:
    cls = registry.load(registry.TARGETS, name)
    if not (isinstance(cls, type) and issubclass(cls, Target)):
        raise TypeError(f"the target registered as {name!r} is not a Target subclass: {cls!r}")
    return cls


def choose(where: str) -> tuple[str, str | None]:
    """The registered name of the target ``--target`` names, and its argument (UserError, field
    --target, if it names none; a near miss gets a suggestion)."""
    names = registry.names(registry.TARGETS)
    path = Path(where).expanduser()
    if where not in names and path.is_file():
        files = [n for n in names if target_class(n).opens_files]
        if len(files) == 1:
            return files[0], str(path)
        raise UserError(f"{where!r} is a file, and " + (f"several targets open files ({', '.join(files)}): "
                                                         "give NAME:FILE" if files else "no registered target opens files"),
                        field="--target")
    name, sep, arg = where.partition(":")
    if name in names:
        cls = target_class(name)
        if sep and cls.option is None:
            raise UserError(f"the {name} target takes no argument, got {arg!r}", field="--target")
        return name, (arg if sep else None)
    raise _no_such(where, names)


def _no_such(where: str, names: list[str]) -> UserError:
    p = Path(where).expanduser()
    candidates = list(names)
    parent = p.parent if str(p.parent) not in ("", ".") else Path(".")
    if parent.is_dir():
        prefix = "" if str(p.parent) in ("", ".") and not where.startswith("./") else str(p.parent) + "/"
        candidates += sorted(prefix + f.name for f in parent.iterdir()
                             if f.is_file() and f.suffix in (".yaml", ".yml"))
    close = difflib.get_close_matches(where, candidates, n=1, cutoff=0.75)
    known = ", ".join(repr(n) for n in names) or "none"
    if close:
        return UserError(f"{where!r} is neither a registered target nor a file; did you mean {close[0]!r}?",
                         field="--target")
    if p.exists():
        return UserError(f"{where!r} is not a file; give {EXPECTED}", field="--target")
    return UserError(f"{where!r}: no such file, nor a registered target ({known}); give {EXPECTED}",
                     field="--target")


def target_config(where: str) -> TargetConfig:
    """``--target`` read and checked, without connecting or starting anything."""
    name, arg = choose(where)
    return replace(target_class(name).read_config(arg), name=name)


def make_target(where: str | TargetConfig) -> Target:
    """The target ``--target`` names (or an already read :class:`TargetConfig`)."""
    config = where if isinstance(where, TargetConfig) else target_config(where)
    return target_class(config.name).from_config(config)
