"""The metrics a comparison is judged on, and the per-repetition values it reads.

A :class:`Metric` is one value of a repetition: where it is in ``rep-NN/summary.json`` (its
``path`` in :class:`harness.results.RepetitionSummary`), which way is better, and its name, which
is also its column in the analysis' repetitions table (harness.analysis.discovery) and the key
of its values in a permutation row (``<name>_values``, :mod:`.pairs`).

:data:`METRICS` is the gate's catalog (docs/gate.md); the technique axes add the metrics they
are judged on and what shows their mechanism at work (:mod:`.techniques`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..results import RepetitionSummary


@dataclass(frozen=True)
class Metric:
    """A metric compared per repetition: where it is in ``rep-NN/summary.json`` and which way
    is better. ``baseline``: the metric of the baseline arm when it differs (the high-priority
    messages' p99 against the p99 of every message of a baseline without priority)."""

    name: str
    path: tuple[str, ...]
    higher_is_better: bool
    unit: str
    label: str = ""
    baseline: str | None = None

    @property
    def text(self) -> str:
        """How a reader names it: its label, else its name."""
        return self.label or self.name


RECEIVE_RATE = Metric("receive_rate", ("receive_rate",), True, "msg/s", "receive rate (msg/s)")
E2E_P99 = Metric("e2e_p99_ms", ("e2e_latency_ms", "p99"), False, "ms", "e2e p99 (ms)")
#: the gate's catalog of metrics (harness.gate.method)
METRICS: tuple[Metric, ...] = (
    RECEIVE_RATE,
    Metric("send_rate", ("send_rate",), True, "msg/s", "send rate (msg/s)"),
    Metric("send_p50_ms", ("send_latency_ms", "p50"), False, "ms", "SEND p50 (ms)"),
    Metric("send_p99_ms", ("send_latency_ms", "p99"), False, "ms", "SEND p99 (ms)"),
    E2E_P99,
)
METRIC_BY_NAME = {m.name: m for m in METRICS}


def metric_value(summary: RepetitionSummary, metric: Metric) -> float | None:
    """The metric's value in one summary (None: absent, or not a number)."""
    cur: Any = summary
    for key in metric.path:
        cur = getattr(cur, key, None)
        if cur is None:
            return None
    return float(cur) if isinstance(cur, (int, float)) and not isinstance(cur, bool) else None
