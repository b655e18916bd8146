"""YAML input files (matrices, topologies) with line numbers for every value.

Every value is wrapped in :class:`Located` (value + 1-based line), so validation errors can
name the file, the line and the field. Duplicate keys and non-string keys are errors.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import yaml

from .errors import UserError


class Located:
    """A YAML value with the line it came from (1-based)."""

    __slots__ = ("value", "line")

    def __init__(self, value: Any, line: int):
        self.value = value
        self.line = line


def construct(node: yaml.Node) -> Any:
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_object(node, deep=True)
    finally:
        loader.dispose()


def wrap(node: yaml.Node, file: str, path: str = "") -> Located:
    """Convert a composed YAML node to :class:`Located` values, recursively."""
    line = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Located] = {}
        for key_node, value_node in node.value:
            key = construct(key_node)
            kline = key_node.start_mark.line + 1
            if not isinstance(key, str):
                raise UserError("mapping keys must be strings", file=file, line=kline, field=path or "<top>")
            sub = f"{path}.{key}" if path else key
            if key in out:
                raise UserError("duplicate key", file=file, line=kline, field=sub)
            out[key] = wrap(value_node, file, sub)
        return Located(out, line)
    if isinstance(node, yaml.SequenceNode):
        return Located([wrap(n, file, f"{path}[{i}]") for i, n in enumerate(node.value)], line)
    return Located(construct(node), line)


def unwrap(loc: Located) -> Any:
    v = loc.value
    if isinstance(v, dict):
        return {k: unwrap(x) for k, x in v.items()}
    if isinstance(v, list):
        return [unwrap(x) for x in v]
    return v


def load_located(path: str | Path, what: str) -> tuple[Located, str]:
    """Read and parse a YAML file; returns its top value (a mapping) and the file's sha256.
    ``what`` names the kind of file in errors ("matrix", "topology")."""
    p = Path(path)
    file = str(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise UserError("no such file", file=file) from None
    except OSError as e:
        raise UserError(f"cannot read: {e.strerror}", file=file) from None
    try:
        node = yaml.compose(raw.decode("utf-8"), Loader=yaml.SafeLoader)
    except UnicodeDecodeError:
        raise UserError("not UTF-8 text", file=file) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise UserError(f"invalid YAML: {getattr(e, 'problem', e)}", file=file,
                        line=mark.line + 1 if mark else None) from None
    if node is None:
        raise UserError(f"empty {what} file", file=file)
    top = wrap(node, file)
    if not isinstance(top.value, dict):
        raise UserError(f"a {what} file is a mapping of keys to values", file=file, line=top.line)
    return top, hashlib.sha256(raw).hexdigest()
