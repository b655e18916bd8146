"""A run's comparisons: which permutation is compared with which, on what metric.

:func:`run_comparisons` is the one list of a run's comparisons, used by the auto-repetition
loop (harness.runner, after every round), the analysis (the ``dialog_gains`` and
``technique_gains`` tables, the report) and the terminal answer (:mod:`.answer`):

* every **dialog strategy** against one dialog per thread (:data:`BASELINE_STRATEGY`) with
  everything else equal (:data:`GAIN_KEYS`);
* every **technique axis** value against its axis' baseline (:data:`TECHNIQUE_AXES`) with
  everything else equal (:data:`CONTEXT_KEYS` and the other technique axes).

A comparison is metric-agnostic: two samples of a named :class:`Metric` with a direction.

Permutations are plain rows (dicts) with the axes flat, as the analysis' permutations table has
them: :func:`flat_permutation` makes one from a summary's ``permutation`` (what the runner
reads), and the repetitions' values ride along as ``rep_numbers``, ``rep_statuses`` and
``<metric>_values`` in repetition order (:func:`samples` reads them, keeping out what
:func:`harness.results.counts_in_verdicts` keeps out).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from ..results import RepetitionSummary, counts_in_verdicts
from .rule import GAIN, Outcome, Rule, judge


@dataclass(frozen=True)
class Metric:
    """A metric compared per repetition: where it is in ``rep-NN/summary.json`` and which way
    is better."""

    name: str
    path: tuple[str, ...]
    higher_is_better: bool
    unit: str


RECEIVE_RATE = Metric("receive_rate", ("receive_rate",), True, "msg/s")
METRICS: tuple[Metric, ...] = (
    RECEIVE_RATE,
    Metric("send_rate", ("send_rate",), True, "msg/s"),
    Metric("send_p50_ms", ("send_latency_ms", "p50"), False, "ms"),
    Metric("send_p99_ms", ("send_latency_ms", "p99"), False, "ms"),
    Metric("e2e_p99_ms", ("e2e_latency_ms", "p99"), False, "ms"),
)
METRIC_BY_NAME = {m.name: m for m in METRICS}

BASELINE_STRATEGY = "per_thread"
#: the technique axes and the offered rate are part of "everything else equal" (a matrix that
#: crosses dialog strategies with, say, receive_top compares strategies at each receive_top)
OTHER_AXES = ("rate", "messages_per_dialog", "fire_and_forget", "waitfor_timeout_ms", "high_priority_share",
              "max_queue_readers", "receive_top")
GAIN_KEYS = ("run_id", "server", "initiators", "threads", "payload_bytes") + OTHER_AXES
#: the flat axes of a permutation row
FLAT_AXES = ("initiators", "threads", "total_threads", "dialogs", "payload_bytes", "server") + OTHER_AXES
BROKER_AXES = ("waitfor_timeout_ms", "high_priority_share", "max_queue_readers", "receive_top")


@dataclass(frozen=True)
class Axis:
    """A technique axis: how its baseline is chosen, the metric it is judged on, the secondary
    metric shown beside it and why that baseline."""

    baseline: str
    secondary: str | None
    note: str
    metric: Metric = RECEIVE_RATE


#: ``None`` in a row means the axis' default (absent from the matrix or the permutation values).
TECHNIQUE_AXES: dict[str, Axis] = {
    "messages_per_dialog": Axis("unlimited", None, "dialog reuse (unlimited) is the baseline; 1 = a new "
                                "dialog per message, N = recycle after N"),
    "fire_and_forget": Axis("false", "dialog_errors_lost", "the target ending first is the baseline"),
    "waitfor_timeout_ms": Axis("largest", "activation_tasks_started_per_s", "the longest WAITFOR timeout is "
                               "the baseline (the paper's advice: long enough that activated tasks live on)"),
    "high_priority_share": Axis("zero", None, "no high-priority dialogs is the baseline"),
    "max_queue_readers": Axis("smallest", None, "the fewest queue readers is the baseline"),
    "receive_top": Axis("smallest", None, "the smallest RECEIVE TOP (n) is the baseline"),
}
#: what else must be equal for two permutations to be compared on a technique axis
CONTEXT_KEYS = ("run_id", "server", "initiators", "threads", "dialogs", "payload_bytes", "rate")


@dataclass(frozen=True, eq=False)
class Pairing:
    """One comparison of a run: ``treatment`` against ``baseline`` (permutation rows) on
    ``metric``."""

    kind: str                       # "strategy" or "technique"
    axis: str                       # "dialogs" or the technique axis
    value: str
    baseline_value: str
    treatment: Mapping[str, Any] = field(repr=False)
    baseline: Mapping[str, Any] = field(repr=False)
    metric: Metric = RECEIVE_RATE
    context: str = ""               # the other technique axes' values, where they vary

    @property
    def label(self) -> str:
        return self.value if self.kind == "strategy" else f"{self.axis}={self.value}"

    @property
    def perm_ids(self) -> tuple[str, str]:
        return self.treatment["perm_id"], self.baseline["perm_id"]

    @property
    def key(self) -> str:
        """Stable within a run: the two permutations and the metric."""
        return f"{self.treatment['perm_id']} vs {self.baseline['perm_id']} ({self.metric.name})"


# --------------------------------------------------------------------------- rows

def flat_permutation(values: Mapping[str, Any], run_id: str = "") -> dict[str, Any]:
    """A permutation row from a summary's ``permutation`` (harness.matrix.Permutation.values):
    the axes flat, as the analysis reads them (harness.analysis.discovery)."""
    broker = values.get("broker") if isinstance(values.get("broker"), Mapping) else {}
    row = {"run_id": run_id, "perm_id": values.get("id"), "perm_index": values.get("index")}
    for k in ("initiators", "threads", "total_threads", "dialogs", "payload_bytes", "server", "rate",
              "messages_per_dialog", "fire_and_forget"):
        row[k] = values.get(k)
    if row["total_threads"] is None and row["initiators"] and row["threads"]:
        row["total_threads"] = row["initiators"] * row["threads"]
    for k in BROKER_AXES:
        row[k] = broker.get(k)
    return row


def metric_value(summary: RepetitionSummary, metric: Metric) -> float | None:
    cur: Any = summary
    for key in metric.path:
        cur = getattr(cur, key, None)
        if cur is None:
            return None
    return float(cur) if isinstance(cur, (int, float)) and not isinstance(cur, bool) else None


def rows_from_summaries(summaries: Iterable[RepetitionSummary], run_id: str = "",
                        metrics: Iterable[Metric] = METRICS) -> list[dict[str, Any]]:
    """Permutation rows (:func:`flat_permutation`) with their repetitions' numbers, statuses and
    metric values in repetition order: what the runner judges after each round."""
    by_perm: dict[str, list[RepetitionSummary]] = defaultdict(list)
    for s in summaries:
        by_perm[s.permutation_id].append(s)
    rows = []
    metrics = tuple(metrics)
    for reps in by_perm.values():
        reps.sort(key=lambda s: s.repetition)
        row = flat_permutation({**reps[0].permutation, "id": reps[0].permutation_id}, run_id or reps[0].run_id)
        row["rep_numbers"] = [s.repetition for s in reps]
        row["rep_statuses"] = [s.status for s in reps]
        for m in metrics:
            row[f"{m.name}_values"] = [metric_value(s, m) for s in reps]
        rows.append(row)
    rows.sort(key=lambda r: (r.get("perm_index") or 0, r["perm_id"]))
    return rows


def samples(row: Mapping[str, Any], metric: Metric) -> list[tuple[int, float]]:
    """``(repetition, value)`` of the repetitions that count in verdicts. A row without
    ``rep_numbers`` (older tables) numbers its values 1, 2, ... in order."""
    values = list(row.get(f"{metric.name}_values") or [])
    reps = list(row.get("rep_numbers") or range(1, len(values) + 1))
    statuses = list(row.get("rep_statuses") or [None] * len(values))
    return [(int(r), float(v)) for r, s, v in zip(reps, statuses, values)
            if v is not None and counts_in_verdicts(s)]


def kept_out(row: Mapping[str, Any]) -> list[tuple[int, str]]:
    """``(repetition, status)`` of the repetitions kept out of verdicts."""
    reps = row.get("rep_numbers") or []
    return [(int(r), s) for r, s in zip(reps, row.get("rep_statuses") or []) if not counts_in_verdicts(s)]


# --------------------------------------------------------------------------- the comparisons

def _norm(axis: str, v: Any) -> Any:
    """The axis' value with its default made explicit (None: unlimited / false / 0)."""
    if axis == "fire_and_forget":
        return bool(v)
    if axis == "high_priority_share":
        return float(v or 0.0)
    return v


def axis_text(axis: str, v: Any) -> str:
    if v is None and axis == "messages_per_dialog":
        return "unlimited"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def _baseline_value(rule: str, values: list[Any]) -> Any:
    pick: dict[str, Callable[[list[Any]], Any]] = {
        "unlimited": lambda vs: None if None in vs else max(vs),
        "false": lambda vs: False,
        "zero": lambda vs: 0.0,
        "largest": max, "smallest": min,
    }
    return pick[rule](values)


def strategy_pairings(rows: list[Mapping[str, Any]], baseline: str = BASELINE_STRATEGY) -> list[Pairing]:
    """Every dialog strategy other than ``baseline`` against ``baseline`` at the same
    :data:`GAIN_KEYS`."""
    base = {tuple(r.get(k) for k in GAIN_KEYS): r for r in rows if r.get("dialogs") == baseline}
    out = []
    for r in rows:
        if r.get("dialogs") == baseline:
            continue
        b = base.get(tuple(r.get(k) for k in GAIN_KEYS))
        if b is not None:
            out.append(Pairing("strategy", "dialogs", str(r["dialogs"]), baseline, r, b))
    return out


def technique_pairings(rows: list[Mapping[str, Any]]) -> list[Pairing]:
    """Every technique value against its axis' baseline, everything else equal; axes absent
    from the rows (or with one value) give none. In :data:`TECHNIQUE_AXES` order, then by
    context, server, initiators, threads and value."""
    out: list[Pairing] = []
    for axis, spec in TECHNIQUE_AXES.items():
        present = [r for r in rows if axis in r]
        if len({_norm(axis, r.get(axis)) for r in present}) < 2:
            continue
        others = [a for a in TECHNIQUE_AXES if a != axis]
        varying = [a for a in others if len({_norm(a, r.get(a)) for r in present}) > 1]
        groups: dict[tuple, list[Mapping[str, Any]]] = defaultdict(list)
        for r in present:
            groups[tuple(r.get(k) for k in CONTEXT_KEYS) + tuple(_norm(a, r.get(a)) for a in others)].append(r)
        found: list[Pairing] = []
        for members in groups.values():
            values = [_norm(axis, r.get(axis)) for r in members]
            if len(set(values)) < 2:
                continue
            base_value = _baseline_value(spec.baseline, values)
            base = next((r for r, v in zip(members, values) if v == base_value), None)
            if base is None:
                continue
            context = ", ".join(f"{a}={axis_text(a, _norm(a, base.get(a)))}" for a in varying)
            found += [Pairing("technique", axis, axis_text(axis, v), axis_text(axis, base_value), r, base,
                              spec.metric, context)
                      for r, v in zip(members, values) if r is not base]
        out += found
    order = list(TECHNIQUE_AXES)
    out.sort(key=lambda p: (p.treatment.get("run_id") or "", order.index(p.axis), p.context,
                            p.treatment.get("server") or "", p.treatment.get("initiators") or 0,
                            p.treatment.get("threads") or 0, p.value))
    return out


def run_comparisons(rows: list[Mapping[str, Any]]) -> list[Pairing]:
    """Every comparison of the runs' permutation rows: the dialog strategies, then the
    technique axes."""
    return strategy_pairings(rows) + technique_pairings(rows)


def judge_pairing(pairing: Pairing, rule: Rule) -> Outcome:
    """The pairing's verdict under ``rule`` (:func:`harness.verdicts.rule.judge` on the
    repetitions that count)."""
    return judge(samples(pairing.treatment, pairing.metric), samples(pairing.baseline, pairing.metric), rule,
                 pairing.metric.higher_is_better)


@dataclass(frozen=True, eq=False)
class Judged:
    """A comparison with its outcome under its run's rule."""

    pairing: Pairing
    outcome: Outcome
    rule: Rule


def judge_all(rows: list[Mapping[str, Any]], rules: Mapping[str, Rule] | None = None,
              default: Rule = Rule()) -> list[Judged]:
    """Every comparison of ``rows`` (:func:`run_comparisons`) judged under its run's rule
    (``rules[run_id]``, else ``default``)."""
    rules = rules or {}
    out = []
    for p in run_comparisons(rows):
        rule = rules.get(p.treatment.get("run_id") or "", default)
        out.append(Judged(p, judge_pairing(p, rule), rule))
    return out


def pays_from(points: Iterable[tuple[int, str]]) -> int | None:
    """The first total thread count from which the verdict is ``gain`` at that and every larger
    thread count measured (the crossover; None: never)."""
    cross = None
    for threads, verdict in sorted(points, reverse=True):
        if verdict != GAIN:
            break
        cross = threads
    return cross
