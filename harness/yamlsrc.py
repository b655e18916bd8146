"""YAML input files (matrices, topologies) with line numbers for every value.

Every value is a :class:`Located` (value and line) so errors name the file, line and field.
The loader is strict and bounded, for small hand-written files: size, depth and node limits, no
duplicate or non-string keys, no anchors or aliases, core-schema tags only, no recursion. Each
refusal is a :class:`~harness.errors.UserError`.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any, Callable

import yaml

from .errors import UserError, show
from .redact import redact_string

MAX_FILE_BYTES = 1 << 20
MAX_DEPTH = 50
MAX_NODES = 10_000  # a 64-instance topology has under 1,000; the paper matrix under 100
CORE_TAGS = frozenset(f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null",
                                                         "seq", "map"))
# what YAML 1.1 (and PyYAML's reader) accepts: TAB, LF, CR and the printable characters
_NON_PRINTABLE = re.compile("[^\x09\x0A\x0D\x20-\x7E\x85\xA0-\uD7FF\uE000-\uFFFD"
                            "\U00010000-\U0010FFFF]")
_LINE_BREAK = re.compile("\r\n|[\n\r\x85\u2028\u2029]")
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class Located:
    """A YAML value with the line it came from (1-based)."""

    __slots__ = ("value", "line")

    def __init__(self, value: Any, line: int):
        self.value = value
        self.line = line

    def __repr__(self) -> str:  # messages show the plain value, never the wrapper
        return repr(unwrap(self))


def unwrap(loc: Located) -> Any:
    v = loc.value
    if isinstance(v, dict):
        return {k: unwrap(x) for k, x in v.items()}
    if isinstance(v, list):
        return [unwrap(x) for x in v]
    return v


def _line_of(text: str, pos: int) -> int:
    return len(_LINE_BREAK.findall(text, 0, pos)) + 1


class _Builder:
    """Builds the :class:`Located` tree from the parser's events, one event at a time."""

    def __init__(self, loader: Any, file: str):
        self.loader = loader
        self.file = file
        self.nodes = 0
        self.scalars: dict[tuple[str, str], Any] = {}
        # open collections: [Located, field path, pending key (mappings only)]
        self.stack: list[list[Any]] = []

    def err(self, msg: str, line: int | None, fld: str | None = None) -> UserError:
        return UserError(msg, file=self.file, line=line, field=fld)

    def path(self) -> str | None:
        """The field path of the value being read (for messages)."""
        if not self.stack:
            return None
        loc, path, key = self.stack[-1]
        if isinstance(loc.value, list):
            return f"{path}[{len(loc.value)}]"
        if key is None:
            return path or None
        return f"{path}.{key}" if path else key

    def check(self, event: Any, line: int) -> None:
        if getattr(event, "anchor", None) is not None:
            raise self.err(f"anchors and aliases (&{event.anchor}) are not allowed: write the "
                           "value out", line, self.path())
        tag = getattr(event, "tag", None)
        if tag is not None and tag != "!" and tag not in CORE_TAGS:
            shown = "!!" + tag[18:] if tag.startswith("tag:yaml.org,2002:") else tag
            raise self.err(f"YAML tag {show(shown)} is not allowed: write a plain value", line,
                           self.path())
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise self.err(f"more than {MAX_NODES} values: not a hand-written file", line)

    def scalar(self, event: Any, line: int) -> Any:
        ld = self.loader
        tag = event.tag
        if tag is None or tag == "!":
            tag = ld.resolve(yaml.ScalarNode, event.value, event.implicit)
        if tag == "tag:yaml.org,2002:merge":
            raise self.err("merge keys (<<) are not allowed: write the keys out", line, self.path())
        if tag not in CORE_TAGS and tag != "tag:yaml.org,2002:timestamp":
            tag = "tag:yaml.org,2002:str"
        key = (tag, event.value)
        if key in self.scalars:  # values are immutable: construct each distinct one once
            return self.scalars[key]
        node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)
        try:
            value = self.scalars[key] = ld.construct_object(node, deep=True)
            return value
        except Exception:  # PyYAML's constructors fail in many ways (`!!int ''`: IndexError)
            kind = tag.rsplit(":", 1)[-1]
            # the value is not echoed: it may be a secret put in the wrong place
            raise self.err(f"not a valid {kind}", line, self.path()) from None

    def add(self, value: Located) -> Located | None:
        """Put a finished value into the open collection; returns it if it is the top."""
        if not self.stack:
            return value
        top = self.stack[-1]
        loc, path, key = top
        if isinstance(loc.value, list):
            loc.value.append(value)
        elif key is None:  # this value is a key
            k = value.value
            fld = path or "<top>"
            if not isinstance(k, str):
                raise self.err("mapping keys must be strings", value.line, fld)
            if k in loc.value:
                raise self.err("duplicate key", value.line, f"{path}.{k}" if path else k)
            top[2] = k
        else:
            loc.value[key] = value
            top[2] = None
        return None

    def build(self) -> Located | None:
        ld = self.loader
        ld.get_event()  # StreamStart
        if ld.check_event(yaml.StreamEndEvent):
            return None
        ld.get_event()  # DocumentStart
        result: Located | None = None
        while result is None:
            event = ld.get_event()
            line = event.start_mark.line + 1
            if isinstance(event, yaml.AliasEvent):
                raise self.err(f"anchors and aliases (*{event.anchor}) are not allowed: write the "
                               "value out", line, self.path())
            if isinstance(event, yaml.ScalarEvent):
                self.check(event, line)
                result = self.add(Located(self.scalar(event, line), line))
            elif isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                self.check(event, line)
                if len(self.stack) >= MAX_DEPTH:
                    raise self.err(f"nested more than {MAX_DEPTH} deep", line)
                fld = self.path() or ""
                value: Any = [] if isinstance(event, yaml.SequenceStartEvent) else {}
                self.stack.append([Located(value, line), fld, None])
            elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                result = self.add(self.stack.pop()[0])
        ld.get_event()  # DocumentEnd
        if not ld.check_event(yaml.StreamEndEvent):
            event = ld.peek_event()
            raise self.err("more than one YAML document (---): give one", event.start_mark.line + 1)
        return result


def parse_located(text: str, file: str) -> Located | None:
    """Parse YAML text into :class:`Located` values (None for an empty document);
    UserError for anything refused or malformed."""
    bad = _NON_PRINTABLE.search(text)
    if bad:
        c = bad.group(0)
        raise UserError(f"control character U+{ord(c):04X} is not allowed in a YAML file",
                        file=file, line=_line_of(text, bad.start()))
    loader = _Loader(text)
    try:
        return _Builder(loader, file).build()
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        problem = getattr(e, "problem", None) or getattr(e, "reason", None) or type(e).__name__
        line = mark.line + 1 if mark is not None else None
        if line is None and isinstance(getattr(e, "position", None), int):
            line = _line_of(text, e.position)
        if "maximum nesting depth" in str(problem):   # PyYAML >= 6.0.4's own limit (deeper than
            # ours), met first where the scanner reads a deep flow collection ahead of the events
            raise UserError(f"nested more than {MAX_DEPTH} deep", file=file, line=line) from None
        context, cmark = getattr(e, "context", None), getattr(e, "context_mark", None)
        if context and cmark is not None and cmark.line + 1 != line:
            problem = f"{problem} ({context} at line {cmark.line + 1})"
        raise UserError(f"invalid YAML: {problem}", file=file, line=line) from None
    finally:
        loader.dispose()


def load_located(path: str | Path, what: str) -> tuple[Located, str]:
    """Read and parse a YAML file; returns its top value (a mapping) and the file's sha256.
    ``what`` names the kind of file in errors ("matrix", "topology")."""
    p = Path(path)
    file = str(path)
    try:
        with open(p, "rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise UserError("no such file", file=file) from None
    except OSError as e:
        raise UserError(f"cannot read: {e.strerror or e}", file=file) from None
    if len(raw) > MAX_FILE_BYTES:
        raise UserError(f"larger than {MAX_FILE_BYTES} bytes: not a {what} file", file=file)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError("not UTF-8 text", file=file, line=raw.count(b"\n", 0, e.start) + 1) from None
    top = parse_located(text, file)
    if top is None:
        raise UserError(f"empty {what} file", file=file)
    if not isinstance(top.value, dict):
        raise UserError(f"a {what} file is a mapping of keys to values", file=file, line=top.line)
    return top, hashlib.sha256(raw).hexdigest()


class Reader:
    """Typed field access to a located YAML document, with file/line/field errors (topology
    files, the load layer's ``client_hosts:`` section; matrices build their errors with
    :meth:`err`)."""

    def __init__(self, file: str, top_line: int):
        self.file = file
        self.top_line = top_line

    def err(self, msg: str, loc: Located | None, fld: str) -> UserError:
        """Every error of a typed read. Messages echo the bad value: never a connection-string
        secret inside it (a host given as ``db1;PWD=...``)."""
        return UserError(redact_string(msg), file=self.file, line=loc.line if loc else self.top_line, field=fld)

    def mapping(self, loc: Located | None, fld: str, allowed: set[str]) -> dict[str, Located]:
        if loc is None or loc.value is None:
            return {}
        if not isinstance(loc.value, dict):
            raise self.err(f"must be a mapping, got {type(loc.value).__name__}", loc, fld)
        for k, v in loc.value.items():
            if k not in allowed:
                raise self.err(f"unknown key (expected one of {', '.join(sorted(allowed))})", v,
                               f"{fld}.{k}" if fld else k)
        return loc.value

    def string(self, m: dict[str, Located], key: str, fld: str, default: str | None = None,
               required: bool = False, check: Callable[[str, str], str] | None = None,
               parent: Located | None = None) -> str | None:
        if key not in m or m[key].value is None:
            if required:
                raise self.err("missing", parent, fld)
            return default
        loc = m[key]
        if not isinstance(loc.value, str):
            raise self.err(f"must be a string, got {type(loc.value).__name__} {loc.value!r}", loc, fld)
        if check:
            try:
                return check(loc.value, "value")
            except ValueError as e:
                raise self.err(str(e), loc, fld) from None
        return loc.value

    def choice(self, m: dict[str, Located], key: str, fld: str, choices: tuple[str, ...],
               default: str) -> str:
        v = self.string(m, key, fld, default)
        if v not in choices:
            raise self.err(f"must be one of {', '.join(choices)}, got {v!r}", m.get(key), fld)
        return v

    def boolean(self, m: dict[str, Located], key: str, fld: str, default: bool) -> bool:
        if key not in m or m[key].value is None:
            return default
        v = m[key].value
        if not isinstance(v, bool):
            raise self.err(f"must be true or false, got {v!r}", m[key], fld)
        return v

    def number(self, m: dict[str, Located], key: str, fld: str, default: float, lo: float, hi: float,
               integer: bool = False) -> Any:
        if key not in m or m[key].value is None:
            return default
        v = m[key].value
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (integer and not isinstance(v, int)):
            raise self.err(f"must be {'an integer' if integer else 'a number'}, got {v!r}", m[key], fld)
        if not lo <= v <= hi:
            raise self.err(f"must be between {lo:g} and {hi:g}, got {v}", m[key], fld)
        return int(v) if integer else float(v)
