"""Typed JSON documents: the :class:`Document` mixin and the small records a summary nests.

A document is a frozen dataclass of JSON-able fields and nested documents. ``from_json``
checks each value against its field's type and names the file and field of what does not fit
(one line); fields a newer minor writer added are kept in ``extra`` and written back.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from dataclasses import dataclass
from typing import Any

from ..errors import UserError


class Document:
    """to_json/from_json for a dataclass of JSON-able fields and nested Documents. None values
    are not written; a field absent from the JSON takes its default, unless it has none or its
    metadata says ``required``."""

    #: fields added by a newer writer that this version does not know (round-tripped)
    extra: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        out = {f.name: dump(getattr(self, f.name)) for f in dataclasses.fields(self)
               if f.name != "extra" and getattr(self, f.name) is not None}
        out.update(getattr(self, "extra", {}) or {})
        return out

    @classmethod
    def from_json(cls, data: Any, file: str | None = None, where: str = ""):
        if not isinstance(data, dict):
            raise UserError(f"{where or cls.__name__}: expected an object, got {type(data).__name__}", file=file,
                            field=where or None)
        hints = hints_of(cls)
        kwargs: dict[str, Any] = {}
        known = set()
        for f in dataclasses.fields(cls):
            if f.name == "extra":
                continue
            known.add(f.name)
            name = f"{where}.{f.name}" if where else f.name
            if data.get(f.name) is None:
                if f.metadata.get("required") or (f.default is dataclasses.MISSING
                                                  and f.default_factory is dataclasses.MISSING):
                    raise UserError("missing field", file=file, field=name)
                continue
            kwargs[f.name] = load(hints[f.name], data[f.name], file, name)
            # the registry's range (harness.results.fields.Field.minimum); a nested record's
            # integer is a count, like the registry's
            low, v = f.metadata.get("minimum", 0 if _integer(hints[f.name]) else None), kwargs[f.name]
            if low is not None and isinstance(v, (int, float)) and v < low:
                raise UserError(f"must be at least {low:g}, got {v!r}", file=file, field=name)
        if "extra" in cls.__dataclass_fields__:
            kwargs["extra"] = {k: v for k, v in data.items() if k not in known}
        return cls(**kwargs)


@functools.cache
def hints_of(cls: type) -> dict[str, Any]:
    """A document class's resolved field types (resolving evaluates every annotation: cached)."""
    return typing.get_type_hints(cls)


def dump(v: Any) -> Any:
    if isinstance(v, Document):
        return v.to_json()
    if isinstance(v, (list, tuple)):
        return [dump(x) for x in v]
    if isinstance(v, dict):
        return {k: dump(x) for k, x in v.items()}
    return v


def load(tp: Any, v: Any, file: str | None, name: str) -> Any:
    """``v`` checked against the type ``tp`` (documents built, numbers and strings checked)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if v is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return load(inner[0], v, file, name) if len(inner) == 1 else v
    if isinstance(tp, type) and issubclass(tp, Document):
        return v if isinstance(v, tp) else tp.from_json(v, file, name)
    if origin in (list, tuple):
        if not isinstance(v, list):
            raise UserError(f"expected a list, got {type(v).__name__}", file=file, field=name)
        item = args[0] if args else Any
        return [load(item, x, file, f"{name}[{i}]") for i, x in enumerate(v)]
    if origin is dict:
        if not isinstance(v, dict):
            raise UserError(f"expected an object, got {type(v).__name__}", file=file, field=name)
        return dict(v)
    checks = {bool: (lambda x: isinstance(x, bool), "true/false"),
              int: (lambda x: _finite(x) and x == int(x), "an integer"),
              float: (_finite, "a number"),
              str: (lambda x: isinstance(x, str), "a string")}
    if tp in checks:
        ok, what = checks[tp]
        if not ok(v):
            raise UserError(f"expected {what}, got {v!r}", file=file, field=name)
        return int(v) if tp is int else v
    return v


def _integer(tp: Any) -> bool:
    """``int`` or ``int | None``."""
    return tp is int or set(typing.get_args(tp)) == {int, type(None)}


def _finite(x: Any) -> bool:
    """A JSON number that is one: a float finite (1e999 parses to inf; NaN is refused when
    parsing), an integer within 64 bits (what Spark's long holds)."""
    if isinstance(x, bool):
        return False
    return abs(x) < 2**63 if isinstance(x, int) else isinstance(x, float) and math.isfinite(x)


# --------------------------------------------------------------------------- nested records

@dataclass(frozen=True)
class LatencySummary(Document):
    """Milliseconds from exact microsecond histograms (latency.json); None when empty."""

    count: int = 0
    mean: float | None = None
    p50: float | None = None
    p95: float | None = None
    p99: float | None = None
    max: float | None = None


@dataclass(frozen=True)
class TargetRef(Document):
    kind: str
    label: str
    profile: str


@dataclass(frozen=True)
class Alternation(Document):
    """An alternated window (run.alternate): the permutations sharing it, in slice order, the
    slice's seconds and this member's index."""

    members: list[str]
    slice_seconds: float
    member: int


@dataclass(frozen=True)
class InitiatorResult(Document):
    """One initiator's accounting (harness.results.summary.InitiatorAccount): the summary's
    totals are the sums of these."""

    initiator: int
    sent: int
    received: int
    lost: int
    xmitq_left: int = 0
    queued: int = 0
    poison: int = 0
    duplicates: int = 0
    phantoms: int = 0


@dataclass(frozen=True)
class WorkerResult(Document):
    """One Locust worker process over the measured window (its own recording and probe)."""

    initiator: int
    worker: int                      # 1..workers_per_initiator
    host: str = ""
    users: int = 0                   # users that ran on this process
    users_active: int = 0
    sends: int = 0                   # SENDs completed in the window
    errors: int = 0                  # failed SENDs in the window
    cpu_percent: float | None = None  # this process, percent of one core (window mean)
    client_bound: bool = False        # cpu_percent at or above the client-bound threshold


@dataclass(frozen=True)
class ClientHost(Document):
    """A client host's CPU and memory over the measured window (its workers' probes)."""

    host: str
    workers: int = 0
    cpu_percent: float | None = None          # percent of the whole machine (window mean)
    memory_percent: float | None = None       # window mean
    memory_used_bytes: float | None = None    # window maximum


@dataclass(frozen=True)
class TopWait(Document):
    wait_type: str
    wait_time_ms: float                # sys.dm_os_wait_stats' total: signal wait included
    waiting_tasks: int
    share: float
    #: the part of wait_time_ms spent runnable, waiting for a CPU (absent where the target
    #: cannot tell: the embedded target, older summaries)
    signal_wait_ms: float | None = None


@dataclass(frozen=True)
class Growth(Document):
    """How a queue's depth changed over the measured window: the Theil-Sen slope in messages per
    second with its 95 % interval, the first and last depth sampled, and the samples."""

    per_s: float
    ci_low: float
    ci_high: float
    first: float
    last: float
    samples: int
