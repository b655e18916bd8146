"""A matrix's ``run:`` settings (how each permutation is run, not what it is) and the checking of
a settings section (``run:``, ``broker:``) against its field specs. Re-exported by
:mod:`harness.matrix`; see ``docs/matrices.md`` for the format."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import show


@dataclass(frozen=True)
class RunSettings:
    warmup_seconds: float = 10.0
    measure_seconds: float = 60.0
    repetitions: int = 1
    drain_timeout_seconds: float = 120.0
    sample_interval_seconds: float = 1.0
    spawn_rate: float = 50.0  # Locust users started per second per run
    #: ``interleaved``: repetition 1 of every permutation, then repetition 2 of every
    #: permutation, ... (A B A B: drift hits every permutation alike); ``sequential``: every
    #: repetition of a permutation before the next (A A B B)
    order: str = "interleaved"
    #: pin the database server and the load generator to separate CPUs (where the host allows)
    pin_cpus: bool = False
    #: open loop (a ``rate`` axis): a repetition whose achieved SEND rate falls short of the
    #: offered one by more than this fraction is flagged ``behind``
    rate_tolerance: float = 0.05
    #: backlog drain (docs/matrices.md): > 0 fills the target queue with this many messages
    #: with activation off, then turns activation on and measures the drain
    backlog_messages: int = 0
    #: Locust worker processes per initiator; its threads split over them as evenly as possible
    #: (5 over 2: 3 + 2), and an initiator gets no more processes than threads
    workers_per_initiator: int = 1
    #: the SEND path (harness.load.spec.SEND_MODES): ``auto`` (gevent's hub for a sender that
    #: can pump, an OS thread per user otherwise) or ``thread`` (an OS thread per user always)
    send_mode: str = "auto"


RUN_FIELDS = {
    "warmup_seconds": (float, 0, 86_400),
    "measure_seconds": (float, 0.5, 86_400),
    "repetitions": (int, 1, 1000),
    "drain_timeout_seconds": (float, 1, 86_400),
    "sample_interval_seconds": (float, 0.05, 3600),
    "spawn_rate": (float, 0.1, 100_000),
    "order": (str, ("interleaved", "sequential"), None),
    "pin_cpus": (bool, None, None),
    "rate_tolerance": (float, 0.0, 1.0),
    "backlog_messages": (int, 0, 100_000_000),
    "workers_per_initiator": (int, 1, 64),
    "send_mode": (str, ("auto", "thread"), None),
}
RUN_ORDERS = ("interleaved", "sequential")


def settings_section(doc, section: str, spec: dict, err) -> dict[str, Any]:
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
