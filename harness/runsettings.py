"""A matrix's ``run:`` settings (:class:`RunSettings`) and their parsing (docs/matrices.md).

``repetitions`` is an integer or ``auto`` (:mod:`harness.verdicts.auto`); :func:`settings`
checks any settings section against its spec, naming the file, line and field of a bad value.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from .errors import show
from .yamlsrc import Located

#: the width of the time buckets a worker records its SENDs in (harness.load.recorder); an
#: alternated window's slice is a whole number of them (harness.plan)
BUCKET_SECONDS = 0.1

#: repetitions: auto's default bounds; the stopping rule's (harness.verdicts.rule.MIN_REPS: fewer
#: kept repetitions than this on either side, no look and the verdict inconclusive)
AUTO, AUTO_MIN, AUTO_MAX = "auto", 3, 10
AUTO_FIELDS = ("min_repetitions", "max_repetitions", "budget_minutes")   # only with repetitions: auto
RUN_ORDERS = ("interleaved", "sequential")
SEND_MODES = ("auto", "thread")   # harness.load.locustfile
KINDS = {"int": int, "float": float, "str": str, "bool": bool}


def bounded(default, low, high=None):
    """A settings field with its default and the bounds :func:`settings` checks (a ``str``
    field: its choices as ``low``), read back by :func:`spec`."""
    return field(default=default, metadata={"bounds": (low, high)})


def spec(cls) -> dict[str, tuple]:
    """A settings dataclass's fields as :func:`settings` checks them: name -> (type, low,
    high), the type its annotation's first (``int | None``: int)."""
    return {f.name: (KINDS[f.type.split(" |")[0]], *f.metadata.get("bounds", (None, None))) for f in fields(cls)}


@dataclass(frozen=True)
class RunSettings:
    warmup_seconds: float = bounded(10.0, 0, 86_400)
    measure_seconds: float = bounded(60.0, 0.5, 86_400)
    #: an integer, or ``auto``: interleaved rounds until every comparison is decided
    #: (harness.verdicts.auto), from ``min_repetitions`` to ``max_repetitions`` within ``budget_minutes``
    repetitions: int | str = bounded(1, 1, 1000)
    min_repetitions: int | None = bounded(None, AUTO_MIN, 1000)
    max_repetitions: int | None = bounded(None, AUTO_MIN, 1000)
    budget_minutes: float | None = bounded(None, 0.1, 10_080)
    #: a comparison is a gain or a loss beyond +-this percent, no difference within it
    threshold_pct: float = bounded(5.0, 0.0, 99.0)
    drain_timeout_seconds: float = bounded(120.0, 1, 86_400)
    sample_interval_seconds: float = bounded(1.0, 0.05, 3600)
    spawn_rate: float = bounded(50.0, 0.1, 100_000)  # Locust users started per second per run
    #: ``interleaved``: repetition 1 of every permutation, then repetition 2 of every
    #: permutation, ... (A B A B: drift hits every permutation alike); ``sequential``: every
    #: repetition of a permutation before the next (A A B B)
    order: str = bounded("interleaved", RUN_ORDERS)
    #: pin the database server and the load generator to separate CPUs (where the host allows)
    pin_cpus: bool = False
    #: while the run lasts, ask Linux (PM QoS) to keep idle CPUs awake: they poll instead of
    #: halting, so a woken process runs at once (harness.cpuawake; needs root, else a warning)
    keep_cpus_awake: bool = False
    #: open loop (a ``rate`` axis): a repetition whose achieved SEND rate falls short of the
    #: offered one by more than this fraction is flagged ``behind``
    rate_tolerance: float = bounded(0.05, 0.0, 1.0)
    #: backlog drain (docs/matrices.md): > 0 fills the target queue with this many messages
    #: with activation off, then turns activation on and measures the drain
    backlog_messages: int = bounded(0, 0, 100_000_000)
    #: Locust worker processes per initiator; its threads split over them as evenly as possible
    #: (5 over 2: 3 + 2), and an initiator gets no more processes than threads
    workers_per_initiator: int = bounded(1, 1, 64)
    #: the SEND path: ``auto`` (gevent's hub for a sender that can pump, an OS thread per user
    #: otherwise) or ``thread`` (an OS thread per user always: how the SQL Server path is
    #: exercised on the embedded target)
    send_mode: str = bounded("auto", SEND_MODES)
    #: the permutations that differ only in their dialog strategy share each window, every
    #: client thread switching between their dialogs every ``slice_seconds`` on the wall clock
    #: (harness.plan; docs/matrices.md): their comparisons are judged window by window
    alternate: bool = False
    slice_seconds: float = bounded(0.5, 0.1, 60)

    @property
    def auto(self) -> bool:
        return self.repetitions == AUTO

    @property
    def planned_repetitions(self) -> int:
        """Repetitions every permutation gets: the number, or the auto minimum."""
        return (self.min_repetitions or AUTO_MIN) if self.auto else int(self.repetitions)

    @property
    def most_repetitions(self) -> int:
        return (self.max_repetitions or AUTO_MAX) if self.auto else int(self.repetitions)

    def describe_repetitions(self) -> str:
        budget = f" within {self.budget_minutes:g} min" if self.budget_minutes else ""
        return (f"auto repetitions ({self.planned_repetitions} to {self.most_repetitions}{budget})" if self.auto
                else f"{self.repetitions} repetition(s)")


RUN_FIELDS = spec(RunSettings)


def run_settings(doc, err) -> RunSettings:
    """The run: section; ``repetitions`` is an integer or ``auto``, whose limits need it."""
    section = doc.get("run")
    if section is None or not isinstance(section.value, dict):
        return RunSettings(**settings(doc, "run", RUN_FIELDS, err))   # absent, empty or not a mapping
    items = section.value
    rep = items.get("repetitions")
    auto = rep is not None and rep.value == AUTO
    if rep is not None and isinstance(rep.value, str) and not auto:
        raise err(f"must be an integer from 1 to {RUN_FIELDS['repetitions'][2]} or auto, got {show(rep.value)}",
                  rep, "run.repetitions")
    rest = {k: v for k, v in items.items() if not (auto and k == "repetitions")}
    values = settings({"run": Located(rest, section.line)}, "run", RUN_FIELDS, err)
    for key in AUTO_FIELDS:
        if key in values and not auto:
            raise err("only with repetitions: auto", items[key], f"run.{key}")
    if auto:
        values["repetitions"] = AUTO
        lo, hi = values.get("min_repetitions", AUTO_MIN), values.get("max_repetitions", AUTO_MAX)
        if hi < lo:
            where = "max_repetitions" if "max_repetitions" in values else "min_repetitions"
            raise err(f"the maximum ({hi}) is below the minimum ({lo})", items[where], f"run.{where}")
    return RunSettings(**values)


def settings(doc, section: str, spec: dict, err) -> dict[str, Any]:
    """The values of the mapping ``doc[section]`` (absent or null: none), each key one of
    ``spec`` (name -> (type, low, high), or (str, choices, None)) and within its bounds;
    ``err(message, located, field)`` builds the UserError."""
    if section not in doc:
        return {}
    loc = doc[section]
    if loc.value is None:
        return {}
    if not isinstance(loc.value, dict):
        raise err("must be a mapping", loc, section)
    out = {}
    for key, item in loc.value.items():
        fld = f"{section}.{key}"
        if key not in spec:
            raise err(f"unknown key (expected one of {', '.join(spec)})", item, fld)
        kind, lo, hi = spec[key]
        v = item.value
        if kind is str:
            if v not in lo:
                raise err(f"must be one of {', '.join(lo)}, got {show(v)}", item, fld)
            out[key] = v
            continue
        if kind is bool:
            if not isinstance(v, bool):
                raise err(f"must be true or false, got {show(v)}", item, fld)
            out[key] = v
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (kind is int and not isinstance(v, int)):
            raise err(f"must be {'an integer' if kind is int else 'a number'}, got {type(v).__name__} {show(v)}",
                      item, fld)
        if not lo <= v <= hi:
            raise err(f"must be between {lo} and {hi}, got {v}", item, fld)
        out[key] = kind(v)
    return out
