"""Shared delta logic for cumulative performance counters (sys.dm_os_performance_counters)."""

from __future__ import annotations

import re
from collections.abc import Iterable


def slug(name: str) -> str:
    """'Tasks Started/sec' -> 'tasks_started'."""
    name = re.sub(r"/sec$", "", name.strip(), flags=re.I)
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


#: the instance sys.dm_os_performance_counters sums a per-database counter's instances into
TOTAL = "_Total"


class CounterDeltas:
    """Turns cumulative counters into per-second rates; gauges pass through."""

    def __init__(self):
        self.prev: dict[tuple[str, str, str], float] = {}
        self.prev_ts: float | None = None

    def update(self, counters, now: float):
        out = []
        dt = (now - self.prev_ts) if self.prev_ts is not None else None
        for c in counters:
            key = (c.object_name, c.counter_name, c.instance_name)
            if c.is_gauge:
                out.append((c, slug(c.counter_name), c.value))
            elif dt and key in self.prev:
                out.append((c, slug(c.counter_name) + "_per_s", max(0.0, c.value - self.prev[key]) / max(dt, 1e-6)))
            self.prev[key] = c.value
        self.prev_ts = now
        return out


def over_instances(values: list[tuple[str, float]]) -> float:
    """A counter's (instance, value) pairs as one value: its ``_Total`` instance's where there is
    one (SQL Server reports each database and _Total, which already sums them), else the sum."""
    return sum(v for _, v in [x for x in values if x[0] == TOTAL] or values)


def window_ticks(ticks: Iterable[tuple], start: float, end: float) -> tuple[tuple, tuple] | None:
    """The two ticks that bound the measured window [start, end] in ``ticks`` (tuples whose
    first item is the tick's epoch seconds, in time order; read once): the last at or before
    ``start`` (else the first after it) and the last at or before ``end``. None without two such
    ticks. The increase of a cumulative counter inside the window is its value at the second
    minus its value at the first."""
    first = last = None
    for t in ticks:
        first = t if first is None or t[0] <= start else first
        last = t if t[0] <= end else last
    return None if first is None or last is None or last[0] <= first[0] else (first, last)
