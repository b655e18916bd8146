"""A run's comparisons: which permutation is compared with which, on what metric.

:func:`run_comparisons` is the one list, read by the auto rounds, the analysis and the key
table: every dialog strategy against one dialog per thread (:data:`BASELINE_STRATEGY`), every
technique value against its axis' baseline, everything else equal. Permutations are plain rows
(a summary's flat row plus its repetitions' values in order, :func:`permutation_rows`);
:func:`samples` keeps out what :func:`harness.results.counts_in_verdicts` keeps out.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Mapping

from ..results import counts_in_verdicts, number
from ..results.fields import COMPARISON_KEYS, axis_names
from .comparison_metrics import RECEIVE_RATE, Metric
from .rule import GAIN, NOT_EXERCISED, Outcome, Rule, judge
from .techniques import TECHNIQUE_AXES, VALUE_BY_NAME, VALUES, engaged, not_exercised_words


BASELINE_STRATEGY = "per_thread"
#: everything else equal in a dialog-strategy comparison: every compared axis but the strategy
GAIN_KEYS = tuple(k for k in COMPARISON_KEYS if k not in axis_names("strategy"))
#: the technique axes and the offered rate: part of "everything else equal", shown beside
OTHER_AXES = axis_names("load", "technique")
#: what else must be equal for two permutations to be compared on a technique axis
CONTEXT_KEYS = tuple(k for k in COMPARISON_KEYS if k not in axis_names("technique"))


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

def permutation_rows(reps: Iterable[Mapping[str, Any]], metrics: Iterable[Metric] = VALUES) -> list[dict[str, Any]]:
    """One row per permutation from its repetitions' flat rows (harness.results.fields.flat_row,
    or the analysis' repetitions table): the first repetition's axes and identity, then the
    repetitions' numbers, statuses, windows and values of ``metrics`` in repetition order."""
    by_perm: dict[tuple[Any, Any], list[Mapping[str, Any]]] = defaultdict(list)
    for r in reps:
        by_perm[(r.get("run_id"), r.get("perm_id"))].append(r)
    metrics = tuple(metrics)
    out = []
    for mine in by_perm.values():
        mine.sort(key=lambda r: r.get("rep") or 0)
        row = {k: mine[0].get(k) for k in ("run_id", "perm_id", "perm_index", *axis_names(but=("id", "index")))}
        row.update(rep_numbers=[r.get("rep") for r in mine], rep_statuses=[r.get("status") for r in mine],
                   rep_windows=[r.get("alt_window") for r in mine])
        for m in metrics:
            row[f"{m.name}_values"] = [number(r.get(m.name)) for r in mine]
        out.append(row)
    out.sort(key=lambda r: (r.get("run_id") or "", r.get("perm_index") or 0, r["perm_id"]))
    return out


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


def judge_metric(pairing: Pairing, metric: Metric, rule: Rule, explain: bool = True) -> Outcome:
    """The pairing's verdict on ``metric`` under ``rule`` (:func:`harness.verdicts.rule.judge`
    on the repetitions that count; the baseline arm's values of ``metric.baseline`` when it has
    one). A technique whose mechanism never engaged is :data:`~.rule.NOT_EXERCISED`
    whatever its values say (they are kept: gain and interval as measured), with why and how to
    exercise it as its reason. ``explain`` False: an inconclusive verdict without its reason
    (:func:`~.rule.judge`; a simulation reads the verdicts only)."""
    base_metric = VALUE_BY_NAME.get(metric.baseline or "", metric)
    out = judge(samples(pairing.treatment, metric), samples(pairing.baseline, base_metric), rule,
                metric.higher_is_better, paired=shared_windows(pairing.treatment, pairing.baseline), explain=explain)
    if pairing.family == "technique" and engaged(pairing.axis, pairing.treatment, pairing.baseline,
                                               pairing.base_raw)[0] is False:
        out = replace(out, verdict=NOT_EXERCISED, reason=not_exercised_words(pairing.axis), needed=None)
    return out


@dataclass(frozen=True, eq=False)
class Judged:
    """A comparison with its outcome under its run's rule."""

    pairing: Pairing
    outcome: Outcome
    rule: Rule


def judge_all(rows: list[Mapping[str, Any]], rules: Mapping[str, Rule] | None = None,
              default: Rule = Rule(), explain: bool = True) -> list[Judged]:
    """Every comparison of ``rows`` (:func:`run_comparisons`) judged under its run's rule
    (``rules[run_id]``, else ``default``); ``explain``: as :func:`judge_metric`."""
    rules = rules or {}
    out = []
    for p in run_comparisons(rows):
        rule = rules.get(p.treatment.get("run_id") or "", default)
        out.append(Judged(p, judge_metric(p, p.metric, rule, explain), rule))
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
