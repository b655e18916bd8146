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
``<metric>_values`` in repetition order (:func:`rows_from_summaries` for the runner,
:func:`with_repetitions` from the analysis' repetitions table; :func:`samples` reads them,
keeping out what :func:`harness.results.counts_in_verdicts` keeps out). A technique comparison
is judged on its axis' primary metric, or is "not exercised" (:mod:`.techniques`).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Mapping

from ..results import RepetitionSummary, counts_in_verdicts
from .metrics import METRIC_BY_NAME, METRICS, RECEIVE_RATE, Metric, metric_value  # noqa: F401  (re-exported)
from .rule import GAIN, Outcome, Rule, judge
from .techniques import NOT_EXERCISED, TECHNIQUE_AXES, VALUE_BY_NAME, VALUES, engaged, not_exercised_words


BASELINE_STRATEGY = "per_thread"
#: the technique axes and the offered rate are part of "everything else equal" (a matrix that
#: crosses dialog strategies with, say, receive_top compares strategies at each receive_top)
OTHER_AXES = ("rate", "messages_per_dialog", "fire_and_forget", "waitfor_timeout_ms", "high_priority_share",
              "max_queue_readers", "receive_top")
GAIN_KEYS = ("run_id", "server", "initiators", "threads", "payload_bytes") + OTHER_AXES
#: the flat axes of a permutation row
FLAT_AXES = ("initiators", "threads", "total_threads", "dialogs", "payload_bytes", "server") + OTHER_AXES
BROKER_AXES = ("waitfor_timeout_ms", "high_priority_share", "max_queue_readers", "receive_top")


#: what else must be equal for two permutations to be compared on a technique axis
CONTEXT_KEYS = ("run_id", "server", "initiators", "threads", "dialogs", "payload_bytes", "rate")


@dataclass(frozen=True, eq=False)
class Pairing:
    """One comparison of a run: ``treatment`` against ``baseline`` (permutation rows) on
    ``metric``."""

    family: str                     # "strategy" or "technique"
    axis: str                       # "dialogs" or the technique axis
    value: str
    baseline_value: str
    treatment: Mapping[str, Any] = field(repr=False)
    baseline: Mapping[str, Any] = field(repr=False)
    metric: Metric = RECEIVE_RATE
    context: str = ""               # the other technique axes' values, where they vary
    base_raw: Any = None            # the baseline's axis value as the rows have it (a technique)

    @property
    def label(self) -> str:
        return self.value if self.family == "strategy" else f"{self.axis}={self.value}"

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


def rows_from_summaries(summaries: Iterable[RepetitionSummary], run_id: str = "",
                        metrics: Iterable[Metric] = VALUES) -> list[dict[str, Any]]:
    """Permutation rows (:func:`flat_permutation`) with their repetitions' numbers, statuses and
    values (every metric and measure of :data:`~.techniques.VALUES`) in repetition order: what
    the runner judges after each round."""
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
        row["rep_windows"] = [s.window.measure_start if s.alternation else None for s in reps]
        for m in metrics:
            row[f"{m.name}_values"] = [metric_value(s, m) for s in reps]
        rows.append(row)
    rows.sort(key=lambda r: (r.get("perm_index") or 0, r["perm_id"]))
    return rows


def with_repetitions(rows: Iterable[Mapping[str, Any]], reps: Iterable[Mapping[str, Any]],
                     metrics: Iterable[Metric] = VALUES) -> list[dict[str, Any]]:
    """The permutation rows with their repetitions' numbers, statuses and values of ``metrics``
    in repetition order, from repetition rows (``run_id``, ``perm_id``, ``rep``, ``status`` and
    a column per metric name, as the analysis' repetitions table has them): the shape
    :func:`rows_from_summaries` gives the runner."""
    by_perm: dict[tuple[Any, Any], list[Mapping[str, Any]]] = defaultdict(list)
    for r in reps:
        by_perm[(r.get("run_id"), r.get("perm_id"))].append(r)
    metrics = tuple(metrics)
    out = []
    for row in rows:
        mine = sorted(by_perm.get((row.get("run_id"), row.get("perm_id")), []), key=lambda r: r.get("rep") or 0)
        new = dict(row, rep_numbers=[r.get("rep") for r in mine], rep_statuses=[r.get("status") for r in mine],
                   rep_windows=[r.get("alt_window") for r in mine])
        for m in metrics:
            new[f"{m.name}_values"] = [_number(r.get(m.name)) for r in mine]
        out.append(new)
    return out


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def samples(row: Mapping[str, Any], metric: Metric) -> list[tuple[int, float]]:
    """``(repetition, value)`` of the repetitions that count in verdicts. A row without
    ``rep_numbers`` (older tables) numbers its values 1, 2, ... in order."""
    values = list(row.get(f"{metric.name}_values") or [])
    reps = list(row.get("rep_numbers") or range(1, len(values) + 1))
    statuses = list(row.get("rep_statuses") or [None] * len(values))
    return [(int(r), float(v)) for r, s, v in zip(reps, statuses, values)
            if v is not None and counts_in_verdicts(s)]


def shared_windows(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Were the two rows' repetitions measured in the same alternated windows (run.alternate):
    every repetition number both have, in one window (the same start), and at least one?"""
    wa = dict(zip(a.get("rep_numbers") or [], a.get("rep_windows") or []))
    wb = dict(zip(b.get("rep_numbers") or [], b.get("rep_windows") or []))
    common = set(wa) & set(wb)
    return bool(common) and all(wa[r] is not None and wa[r] == wb[r] for r in common)


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
    """Every technique value against its axis' baseline, everything else equal, on the axis'
    primary metric (:data:`~.techniques.TECHNIQUE_AXES`); axes absent from the rows (or with one
    value) give none. The context names the other technique axes that vary where everything but
    them is equal (in the same block of the matrix). In :data:`TECHNIQUE_AXES` order, then by
    context, server, initiators, threads, offered rate and value."""
    out: list[Pairing] = []
    for axis, spec in TECHNIQUE_AXES.items():
        present = [r for r in rows if axis in r]
        if len({_norm(axis, r.get(axis)) for r in present}) < 2:
            continue
        others = [a for a in TECHNIQUE_AXES if a != axis]
        groups: dict[tuple, list[Mapping[str, Any]]] = defaultdict(list)
        settings: dict[tuple, list[Mapping[str, Any]]] = defaultdict(list)   # same run, load, ...
        for r in present:
            key = tuple(r.get(k) for k in CONTEXT_KEYS)
            groups[key + tuple(_norm(a, r.get(a)) for a in others)].append(r)
            settings[key].append(r)
        for key, members in groups.items():
            values = [_norm(axis, r.get(axis)) for r in members]
            if len(set(values)) < 2:
                continue
            base_value = _baseline_value(spec.baseline, values)
            base = next((r for r, v in zip(members, values) if v == base_value), None)
            if base is None:
                continue
            near = settings[key[:len(CONTEXT_KEYS)]]
            context = ", ".join(f"{a}={axis_text(a, _norm(a, base.get(a)))}" for a in others
                                if len({_norm(a, q.get(a)) for q in near}) > 1)
            out += [Pairing("technique", axis, axis_text(axis, v), axis_text(axis, base_value), r, base,
                            spec.primary, context, base_value)
                    for r, v in zip(members, values) if r is not base]
    order = list(TECHNIQUE_AXES)
    out.sort(key=lambda p: (p.treatment.get("run_id") or "", order.index(p.axis), p.context,
                            p.treatment.get("server") or "", p.treatment.get("initiators") or 0,
                            p.treatment.get("threads") or 0, p.treatment.get("rate") or 0.0, p.value))
    return out


def run_comparisons(rows: list[Mapping[str, Any]]) -> list[Pairing]:
    """Every comparison of the runs' permutation rows: the dialog strategies, then the
    technique axes."""
    return strategy_pairings(rows) + technique_pairings(rows)


def judge_metric(pairing: Pairing, metric: Metric, rule: Rule) -> Outcome:
    """The pairing's verdict on ``metric`` under ``rule`` (:func:`harness.verdicts.rule.judge`
    on the repetitions that count; the baseline arm's values of ``metric.baseline`` when it has
    one). A technique whose mechanism never engaged is :data:`~.techniques.NOT_EXERCISED`
    whatever its values say (they are kept: gain and interval as measured), with why and how to
    exercise it as its reason."""
    base_metric = VALUE_BY_NAME.get(metric.baseline or "", metric)
    out = judge(samples(pairing.treatment, metric), samples(pairing.baseline, base_metric), rule,
                metric.higher_is_better, paired=shared_windows(pairing.treatment, pairing.baseline))
    if pairing.family == "technique" and engaged(pairing.axis, pairing.treatment, pairing.baseline,
                                               pairing.base_raw)[0] is False:
        out = replace(out, verdict=NOT_EXERCISED, reason=not_exercised_words(pairing.axis), needed=None)
    return out


def judge_pairing(pairing: Pairing, rule: Rule) -> Outcome:
    """The pairing's verdict on its metric under ``rule`` (:func:`judge_metric`)."""
    return judge_metric(pairing, pairing.metric, rule)


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
