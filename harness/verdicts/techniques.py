"""The technique axes: the one declaration of what each technique is judged on.

:data:`TECHNIQUE_AXES`: per axis its baseline, the metrics it moves (primary first), what shows
its mechanism engaged (:class:`Engagement`) and how to make it engage. Where it engaged in no
repetition that counts, the verdict is :data:`~.rule.NOT_EXERCISED`, settled: more repetitions at the
same settings would not engage it (docs/statistics.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ..results import counts_in_verdicts
from .comparison_metrics import E2E_P99, METRICS, RECEIVE_RATE, Metric


@dataclass(frozen=True)
class Engagement:
    """What shows a technique's mechanism at work in one repetition."""

    #: the amount of engagement in a repetition (0: none; None: not recorded) given the
    #: repetition's values (by measure name) and the baseline's axis value
    amount: Callable[[Mapping[str, Any], Any], float | None]
    words: str
    #: how to exercise the mechanism, in words (said with a "not exercised" verdict)
    how: str
    #: only the technique arm can engage it (priority: the baseline has no high-priority dialog)
    treatment_only: bool = False


@dataclass(frozen=True)
class TechniqueAxis:
    baseline: str                    # how the baseline value is chosen (harness.verdicts.pairs)
    metrics: tuple[Metric, ...]      # the first is the primary metric
    why: str
    engagement: Engagement | None = None
    shown: str | None = None         # a measure whose medians are shown beside, without a verdict

    @property
    def primary(self) -> Metric:
        return self.metrics[0]


def _measure(name: str) -> Metric:
    """A per-repetition count or rate read for engagement or shown beside (never judged)."""
    return Metric(name)


#: what the technique axes read besides their metrics (engagement, shown values)
MEASURES: tuple[Metric, ...] = (
    _measure("dialogs_ended_in_window"), _measure("activation_tasks_started_in_window"),
    _measure("activation_tasks_ended_in_window"), _measure("activation_tasks_max_running"),
    _measure("high_priority_sends"),
    _measure("activation_tasks_started_per_s"), _measure("dialog_errors_lost"),
)


def _sum(*names: str) -> Callable[[Mapping[str, Any], Any], float | None]:
    def amount(rep: Mapping[str, Any], _base: Any) -> float | None:
        vals = [rep.get(n) for n in names]
        return None if any(v is None for v in vals) else float(sum(vals))
    return amount


def _readers_above_baseline(rep: Mapping[str, Any], base: Any) -> float | None:
    running = rep.get("activation_tasks_max_running")
    return None if running is None or base is None else max(0.0, float(running) - float(base))


E2E_P50 = Metric("e2e_p50_ms", "e2e p50 (ms)")
DIALOGS_ENDED = Engagement(
    _sum("dialogs_ended_in_window"), "dialogs ended inside the window",
    "a retired dialog ends after messages_per_dialog messages: give each thread enough SENDs in the window "
    "to reach that many (a longer window, fewer threads, closed loop or a higher rate)")

#: axis -> its baseline, the metrics it moves (primary first), why, what shows it engaged
TECHNIQUE_AXES: dict[str, TechniqueAxis] = {
    "messages_per_dialog": TechniqueAxis(
        "unlimited", (RECEIVE_RATE,), "dialog reuse (unlimited) is the baseline; 1 = a new dialog per message, "
        "N = recycle after N; judged on the receive rate", DIALOGS_ENDED, shown="e2e_p99_ms"),
    "fire_and_forget": TechniqueAxis(
        "false", (RECEIVE_RATE,), "the target ending first is the baseline; judged on the receive rate",
        Engagement(_sum("dialogs_ended_in_window"), "dialogs ended inside the window",
                   "fire and forget ends retired dialogs: give messages_per_dialog a value small enough that "
                   "dialogs end inside the window"), shown="dialog_errors_lost"),
    "waitfor_timeout_ms": TechniqueAxis(
        "largest", (E2E_P99, E2E_P50), "the longest WAITFOR timeout is the baseline (the paper's advice: long "
        "enough that activated tasks live on); judged on end-to-end latency, lower is better",
        Engagement(_sum("activation_tasks_started_in_window", "activation_tasks_ended_in_window"),
                   "activation tasks started or ended inside the window",
                   "a task ends only when its WAITFOR finds the queue empty for the whole timeout: offer a rate "
                   "below saturation (a rate axis, open loop) whose gap between messages, 1/rate per initiator, "
                   "outlasts the short timeout (rate 10 leaves 100 ms gaps for a 50 ms WAITFOR), with a window "
                   "of several queue-monitor periods"),
        shown="activation_tasks_started_per_s"),
    "high_priority_share": TechniqueAxis(
        "zero", (Metric("e2e_high_p99_ms", "high-priority e2e p99 (ms)", "e2e_p99_ms"),
                 Metric("e2e_normal_p99_ms", "normal-priority e2e p99 (ms)", "e2e_p99_ms")),
        "no high-priority dialogs is the baseline; judged on the high-priority messages' end-to-end "
        "latency against the baseline's (lower is better), and on what the others pay",
        Engagement(_sum("high_priority_sends"), "high-priority messages sent inside the window",
                   "SQL Server target only: a share of dialogs at high priority and enough dialogs that some "
                   "are high (with share 0.5, every other dialog: 2 threads or more), and a backlog for them "
                   "to overtake (closed loop, or a rate above what the readers keep up with)",
                   treatment_only=True)),
    "max_queue_readers": TechniqueAxis(
        "smallest", (RECEIVE_RATE, E2E_P99), "the fewest queue readers is the baseline; judged on the receive "
        "rate and the end-to-end p99",
        Engagement(_readers_above_baseline, "more activation tasks running at once than the baseline allows",
                   "the queue monitor starts another reader only while messages wait in the queue: offer "
                   "more than the baseline's readers keep up with (more threads, closed loop), for several "
                   "monitor periods", treatment_only=True)),
    "receive_top": TechniqueAxis(
        "smallest", (RECEIVE_RATE, E2E_P99), "the smallest RECEIVE TOP (n) is the baseline; judged on the "
        "receive rate and the end-to-end p99"),
}


#: every per-repetition value a permutation row carries (``<name>_values``): the gate's metrics,
#: the technique axes' metrics and their measures, by name and in that order
VALUE_BY_NAME = {m.name: m for m in METRICS + tuple(m for ax in TECHNIQUE_AXES.values() for m in ax.metrics)
                 + MEASURES}
VALUES: tuple[Metric, ...] = tuple(VALUE_BY_NAME.values())


def repetitions(row: Mapping[str, Any], disturbed: bool = False) -> list[dict[str, Any]]:
    """The repetitions of a permutation row that count in verdicts (``disturbed``: every measured
    one), each as its values by name (``<name>_values`` of the row; a name it lacks is None)."""
    numbers = list(row.get("rep_numbers") or [])
    statuses = list(row.get("rep_statuses") or [None] * len(numbers))
    out = []
    for i, status in enumerate(statuses):
        if not (disturbed or counts_in_verdicts(status)):
            continue
        rep = {}
        for m in VALUES:
            vals = row.get(f"{m.name}_values")
            rep[m.name] = vals[i] if isinstance(vals, list) and i < len(vals) else None
        out.append(rep)
    return out


def engaged(axis: str, treatment: Mapping[str, Any], baseline: Mapping[str, Any],
            base_value: Any) -> tuple[bool | None, float | None, float | None]:
    """Did the axis' mechanism engage? (True / False / None: the axis has no such measure, or it
    was not recorded in every repetition), and the largest amount of it in a repetition of each
    arm (technique, baseline). Disturbed repetitions count here: a disturbance moves the timing,
    not whether the mechanism engaged."""
    spec = TECHNIQUE_AXES[axis].engagement
    if spec is None:
        return None, None, None
    t = [spec.amount(r, base_value) for r in repetitions(treatment, disturbed=True)]
    b = [spec.amount(r, base_value) for r in repetitions(baseline, disturbed=True)]
    t_max = max(t) if t and None not in t else None
    b_max = max(b) if b and None not in b else None
    if t_max is None or (b_max is None and not spec.treatment_only):
        return None, t_max, b_max
    return t_max > 0 or (not spec.treatment_only and bool(b_max and b_max > 0)), t_max, b_max


def not_exercised_words(axis: str) -> str:
    """Why a comparison of ``axis`` is not exercised and how to exercise it, in one sentence."""
    spec = TECHNIQUE_AXES[axis].engagement
    if spec is None:
        return ""
    arms = "of the technique" if spec.treatment_only else "of either arm"
    return f"no {spec.words} in any repetition {arms}. To exercise it: {spec.how}"


def axis_note(axis: str) -> str:
    return TECHNIQUE_AXES[axis].why


def how_to_exercise(axis: str) -> str | None:
    spec = TECHNIQUE_AXES[axis].engagement
    return spec.how if spec else None
