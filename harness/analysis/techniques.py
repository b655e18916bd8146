"""Techniques against their baselines: each technique judged on the metric it moves, and
"not exercised" when its mechanism never engaged.

A technique axis is a matrix axis whose values are "a technique" and "what you would do
without it" (docs/matrices.md, docs/statistics.md). For each axis present in a run with more
than one value, every permutation whose value is not the baseline is compared with the
permutation that has the baseline value and everything else equal (run, server, initiators,
threads, dialog strategy, payload, offered rate and the other technique axes).

Each axis declares, in :data:`TECHNIQUE_AXES` and nowhere else, the metrics it moves (the first
is its primary metric, whose verdict is the comparison's), whether lower is better, what shows
that its mechanism engaged in a repetition, and how to make it engage. Every metric is compared
as the dialog strategies' gains are (:func:`harness.analysis.uncertainty.compare`: the change of
the median over the repetitions in percent, its bootstrap interval and verdict; latencies read
"lower is better"). When the mechanism never engaged in any repetition of either arm (no
activation task started or ended inside the window of a WAITFOR comparison, no dialog ended in
a lifetime comparison, no high-priority message in a priority comparison) the verdict is
:data:`NOT_EXERCISED` and the row says how to exercise it: the arms then differ in a setting
that did nothing, and whatever their medians say is not the technique's effect.

Pure Python on the driver's permutation and repetition rows (no Spark): its table schema is a
DDL string. One row per comparison and compared metric (``primary`` marks the axis' primary one).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable

from ..results import median
from . import uncertainty as U

NOT_EXERCISED = "not exercised"


@dataclass(frozen=True)
class Metric:
    """A per-repetition column of the repetitions table (harness.analysis.discovery)."""

    column: str
    label: str
    lower_is_better: bool = False
    #: the baseline arm's column when it differs (priority: the high-priority messages' p99
    #: against the p99 of all messages of the baseline, where every message is normal)
    baseline_column: str | None = None


@dataclass(frozen=True)
class Engagement:
    """What shows a technique's mechanism at work in one repetition."""

    #: the amount of engagement in a repetition (0: none; None: not recorded) given the
    #: repetition's row and the baseline's axis value
    amount: Callable[[dict[str, Any], Any], float | None]
    words: str
    #: how to exercise the mechanism, in words (shown with a "not exercised" verdict)
    how: str
    #: only the technique arm can engage it (priority: the baseline has no high-priority dialog)
    treatment_only: bool = False


@dataclass(frozen=True)
class TechniqueAxis:
    baseline: str                    # how the baseline value is chosen (:func:`_baseline`)
    metrics: tuple[Metric, ...]      # the first is the primary metric
    why: str
    engagement: Engagement | None = None
    shown: str | None = None         # a column whose medians are shown beside, without a verdict


def _sum(*cols: str) -> Callable[[dict[str, Any], Any], float | None]:
    def amount(rep: dict[str, Any], _base: Any) -> float | None:
        vals = [rep.get(c) for c in cols]
        return None if any(v is None for v in vals) else float(sum(vals))
    return amount


def _readers_above_baseline(rep: dict[str, Any], base: Any) -> float | None:
    running = rep.get("activation_tasks_max_running")
    return None if running is None or base is None else max(0.0, float(running) - float(base))


RATE = Metric("receive_rate", "receive rate (msg/s)")
E2E_P99 = Metric("e2e_p99_ms", "e2e p99 (ms)", lower_is_better=True)
E2E_P50 = Metric("e2e_p50_ms", "e2e p50 (ms)", lower_is_better=True)
DIALOGS_ENDED = Engagement(
    _sum("dialogs_ended_in_window"), "dialogs ended inside the window",
    "a retired dialog ends after messages_per_dialog messages: give each thread enough SENDs in the window "
    "to reach that many (a longer window, fewer threads, closed loop or a higher rate)")

#: axis -> its baseline, the metrics it moves (primary first), why, what shows it engaged
TECHNIQUE_AXES: dict[str, TechniqueAxis] = {
    "messages_per_dialog": TechniqueAxis(
        "unlimited", (RATE,), "dialog reuse (unlimited) is the baseline; 1 = a new dialog per message, N = "
        "recycle after N; judged on the receive rate", DIALOGS_ENDED, shown="e2e_p99_ms"),
    "fire_and_forget": TechniqueAxis(
        "false", (RATE,), "the target ending first is the baseline; judged on the receive rate",
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
        "zero", (Metric("e2e_high_p99_ms", "high-priority e2e p99 (ms)", True, "e2e_p99_ms"),
                 Metric("e2e_normal_p99_ms", "normal-priority e2e p99 (ms)", True, "e2e_p99_ms")),
        "no high-priority dialogs is the baseline; judged on the high-priority messages' end-to-end "
        "latency against the baseline's (lower is better), and on what the others pay",
        Engagement(_sum("high_priority_sends"), "high-priority messages sent inside the window",
                   "SQL Server target only: a share of dialogs at high priority and enough dialogs that some "
                   "are high (with share 0.5, every other dialog: 2 threads or more), and a backlog for them "
                   "to overtake (closed loop, or a rate above what the readers keep up with)",
                   treatment_only=True)),
    "max_queue_readers": TechniqueAxis(
        "smallest", (RATE, E2E_P99), "the fewest queue readers is the baseline; judged on the receive rate "
        "and the end-to-end p99",
        Engagement(_readers_above_baseline, "more activation tasks running at once than the baseline allows",
                   "the queue monitor starts another reader only while messages wait in the queue: offer "
                   "more than the baseline's readers keep up with (more threads, closed loop), for several "
                   "monitor periods", treatment_only=True)),
    "receive_top": TechniqueAxis(
        "smallest", (RATE, E2E_P99), "the smallest RECEIVE TOP (n) is the baseline; judged on the receive "
        "rate and the end-to-end p99"),
}
#: what else must be equal for two permutations to be compared
CONTEXT_KEYS = ("run_id", "server", "initiators", "threads", "dialogs", "payload_bytes", "rate")

TECHNIQUE_SCHEMA = ("run_id string, synthetic boolean, axis string, value string, baseline_value string, "
                    "server string, initiators bigint, threads bigint, dialogs string, payload_bytes bigint, "
                    "rate double, context string, perm_id string, baseline_perm_id string, metric string, "
                    "metric_label string, primary boolean, lower_is_better boolean, n bigint, baseline_n bigint, "
                    "baseline_median double, median double, change_pct double, change_ci_low_pct double, "
                    "change_ci_high_pct double, verdict string, exercised boolean, engagement string, "
                    "baseline_engagement double, engagement_value double, how_to_exercise string, "
                    "shown_metric string, baseline_shown double, shown double")


def _norm(axis: str, v: Any) -> Any:
    """The axis' value with its default made explicit (None: unlimited / false / 0)."""
    if axis == "fire_and_forget":
        return bool(v)
    if axis == "high_priority_share":
        return float(v or 0.0)
    return v


def _text(axis: str, v: Any) -> str:
    if v is None and axis == "messages_per_dialog":
        return "unlimited"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def _baseline(rule: str, values: list[Any]) -> Any:
    pick: dict[str, Callable[[list[Any]], Any]] = {
        "unlimited": lambda vs: None if None in vs else max(vs),
        "false": lambda vs: False,
        "zero": lambda vs: 0.0,
        "largest": max, "smallest": min,
    }
    return pick[rule](values)


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _reps_by_perm(reps: list[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    out: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in sorted(reps, key=lambda r: (r["run_id"], r["perm_id"], r.get("rep") or 0)):
        out[(r["run_id"], r["perm_id"])].append(r)
    return out


def engaged(spec: Engagement, treatment: list[dict[str, Any]], baseline: list[dict[str, Any]],
            base_value: Any) -> tuple[bool | None, float | None, float | None]:
    """Did the mechanism engage? (True / False / None: not recorded in every repetition), and the
    largest amount of it in a repetition of each arm (technique, baseline)."""
    t = [spec.amount(r, base_value) for r in treatment]
    b = [spec.amount(r, base_value) for r in baseline]
    t_max = max(t) if t and None not in t else None
    b_max = max(b) if b and None not in b else None
    if t_max is None or (b_max is None and not spec.treatment_only):
        return None, t_max, b_max
    return t_max > 0 or (not spec.treatment_only and b_max > 0), t_max, b_max


def _values(reps: list[dict[str, Any]], column: str) -> list[float]:
    return [float(r[column]) for r in reps if _num(r.get(column)) is not None]


def _compare_rows(ax: TechniqueAxis, t_reps: list[dict[str, Any]], b_reps: list[dict[str, Any]],
                  base_value: Any, threshold_pct: float) -> list[dict[str, Any]]:
    """One row per metric of ``ax``: the technique's repetitions ``t_reps`` against the
    baseline's ``b_reps``."""
    spec = ax.engagement
    ok, t_amount, b_amount = engaged(spec, t_reps, b_reps, base_value) if spec else (None, None, None)
    shown = ax.shown
    rows = []
    for k, m in enumerate(ax.metrics):
        t, b = _values(t_reps, m.column), _values(b_reps, m.baseline_column or m.column)
        c = U.compare(t, b, threshold_pct, lower_is_better=m.lower_is_better)
        rows.append({
            "metric": m.column, "metric_label": m.label, "primary": k == 0, "lower_is_better": m.lower_is_better,
            "n": c.n_treatment, "baseline_n": c.n_baseline,
            "baseline_median": median(b), "median": median(t), "change_pct": c.gain_pct,
            "change_ci_low_pct": c.ci_low_pct, "change_ci_high_pct": c.ci_high_pct,
            "verdict": NOT_EXERCISED if ok is False else c.verdict, "exercised": ok,
            "engagement": spec.words if spec else None, "engagement_value": t_amount,
            "baseline_engagement": b_amount, "how_to_exercise": spec.how if spec and ok is False else None,
            "shown_metric": shown, "baseline_shown": median(_values(b_reps, shown)) if shown else None,
            "shown": median(_values(t_reps, shown)) if shown else None,
        })
    return rows


def technique_gains(perms: list[dict[str, Any]], reps: list[dict[str, Any]],
                    threshold_pct: float) -> list[dict[str, Any]]:
    """Rows of :data:`TECHNIQUE_SCHEMA`: every technique value against its axis' baseline,
    everything else equal, on each metric the axis moves. ``perms``: the permutations table's
    rows; ``reps``: the repetitions table's rows (the per-repetition values). Axes absent from
    the rows (or with one value) give no rows."""
    by_perm = _reps_by_perm(reps)
    rows: list[dict[str, Any]] = []
    for axis, ax in TECHNIQUE_AXES.items():
        present = [p for p in perms if axis in p]
        if len({_norm(axis, p.get(axis)) for p in present}) < 2:
            continue
        others = [a for a in TECHNIQUE_AXES if a != axis]
        groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
        settings: dict[tuple, list[dict[str, Any]]] = defaultdict(list)   # same run, load, ...
        for p in present:
            key = tuple(p.get(k) for k in CONTEXT_KEYS)
            groups[key + tuple(_norm(a, p.get(a)) for a in others)].append(p)
            settings[key].append(p)
        for key, members in groups.items():
            values = [_norm(axis, p.get(axis)) for p in members]
            if len(set(values)) < 2:
                continue
            base_value = _baseline(ax.baseline, values)
            base = next((p for p, v in zip(members, values) if v == base_value), None)
            if base is None:
                continue
            # the context names the other technique axes that vary where everything but them is
            # equal (in the same block of the matrix)
            near = settings[key[:len(CONTEXT_KEYS)]]
            context = ", ".join(f"{a}={_text(a, _norm(a, base.get(a)))}" for a in others
                                if len({_norm(a, q.get(a)) for q in near}) > 1)
            for p, v in zip(members, values):
                if p is base:
                    continue
                head = {"run_id": p["run_id"], "synthetic": bool(p.get("synthetic")), "axis": axis,
                        "value": _text(axis, v), "baseline_value": _text(axis, base_value),
                        "server": p.get("server"), "initiators": p.get("initiators"), "threads": p.get("threads"),
                        "dialogs": p.get("dialogs"), "payload_bytes": p.get("payload_bytes"),
                        "rate": _num(p.get("rate")), "context": context, "perm_id": p["perm_id"],
                        "baseline_perm_id": base["perm_id"]}
                rows += [{**head, **r} for r in _compare_rows(
                    ax, by_perm.get((p["run_id"], p["perm_id"]), []),
                    by_perm.get((base["run_id"], base["perm_id"]), []), base_value, threshold_pct)]
    order = list(TECHNIQUE_AXES)
    rows.sort(key=lambda r: (r["run_id"], order.index(r["axis"]), r["context"], r["server"] or "",
                             r["initiators"] or 0, r["threads"] or 0, r["rate"] or 0.0, r["value"], not r["primary"]))
    return rows


def axis_note(axis: str) -> str:
    return TECHNIQUE_AXES[axis].why


def how_to_exercise(axis: str) -> str | None:
    spec = TECHNIQUE_AXES[axis].engagement
    return spec.how if spec else None
