"""The metrics a comparison is judged on, and the per-repetition values it reads.

A :class:`Metric` is a field of the registry (harness.results.fields: unit, place in
``summary.json``, direction) with a reader's label; its name is also its column in the
repetitions table and ``<name>_values`` in a permutation row (:mod:`.pairs`). :data:`METRICS`
is the gate's catalog (docs/gate.md); the technique axes add theirs (:mod:`.techniques`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..results.fields import BY_NAME, LOWER, Field


@dataclass(frozen=True)
class Metric:
    """A summary field compared per repetition. ``baseline``: the metric of the baseline arm when
    it differs (the high-priority messages' p99 against the p99 of every message of a baseline
    without priority)."""

    name: str
    label: str = ""
    baseline: str | None = None

    @property
    def field(self) -> Field:
        return BY_NAME[self.name]

    @property
    def higher_is_better(self) -> bool:
        return self.field.direction != LOWER

    @property
    def text(self) -> str:
        """How a reader names it: its label, else its name."""
        return self.label or self.name


RECEIVE_RATE = Metric("receive_rate", "receive rate (msg/s)")
E2E_P99 = Metric("e2e_p99_ms", "e2e p99 (ms)")
#: the gate's catalog of metrics (harness.verdicts.regression)
METRICS: tuple[Metric, ...] = (
    RECEIVE_RATE,
    Metric("send_rate", "send rate (msg/s)"),
    Metric("send_p50_ms", "SEND p50 (ms)"),
    Metric("send_p99_ms", "SEND p99 (ms)"),
    E2E_P99,
)
METRIC_BY_NAME = {m.name: m for m in METRICS}
