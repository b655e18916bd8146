"""The comparison proper: effect, threshold, significance and a verdict per row; integrity.

Per permutation and metric, with ``b`` the baseline's repetitions and ``c`` the candidate's:

* effect ``r = median(c) / median(b)`` for rates, inverted for latencies
  (``median(b) / median(c)``), so ``r < 1`` always means "worse";
* threshold ``t = min(max_effect, max(min_effect, k x relative robust spread of b))`` (default
  ``max(5 %, 2 x MAD x 1.4826 / median)``, at most 50 %); the effect is beyond it when
  ``r < 1 - t``;
* significance: one-sided exact Mann-Whitney U (candidate worse), Benjamini-Hochberg across
  all permutation x metric p-values of the comparison: significant when ``q <= alpha``;
* verdict: ``regression`` when beyond the threshold AND significant; ``warning`` when only
  one holds; ``improved`` when beyond the threshold the other way AND significantly better
  (the mirror test, one-sided the other way, its p-values adjusted as a family of their own:
  improvements are claims too); else ``pass``. With too
  few repetitions for the test to ever reach significance (fewer than ``min_reps`` a side, or
  a smallest possible p-value above ``alpha``) no test is run and the row is
  ``inconclusive``, whatever its effect: one repetition never fails on effect size alone;
* integrity per permutation: ``fail`` whenever the candidate lost messages, its error count
  per repetition rose over the baseline's, or its queue was disabled, whatever the
  throughput and however few the repetitions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from ..results import median
from . import stats
from .method import (IMPROVED, INCONCLUSIVE, METRIC_BY_NAME, NO_DATA, PASS, REGRESSION, WARNING, FAIL,
                     GateSettings)
from .rundata import PermData


@dataclass
class MetricResult:
    permutation: str
    metric: str
    higher_is_better: bool
    n_baseline: int
    n_candidate: int
    baseline_median: float | None
    candidate_median: float | None
    r: float | None
    baseline_spread: float | None      # relative robust spread of the baseline (fraction)
    threshold: float | None            # fraction: effect beyond it when r < 1 - threshold
    p: float | None                    # one-sided exact Mann-Whitney U (None: not judged)
    q: float | None = None             # Benjamini-Hochberg adjusted p
    p_better: float | None = None      # the mirror test: one-sided, "the candidate is better"
    q_better: float | None = None      # its Benjamini-Hochberg adjusted p (improvements' family)
    effect_beyond: bool = False
    significant: bool | None = None    # None: not judged (too few repetitions)
    significance_judged: bool = False
    min_p: float | None = None         # smallest p-value the exact test can give with these reps
    verdict: str = PASS
    reason: str = ""


@dataclass
class IntegrityResult:
    permutation: str
    candidate_lost: int
    baseline_lost: int
    candidate_errors_per_rep: float
    baseline_errors_per_rep: float
    candidate_queue_disabled: bool
    verdict: str = PASS
    reasons: list[str] = field(default_factory=list)


def _ratio(num: float, den: float) -> float:
    if den == 0.0:
        return 1.0 if num == 0.0 else math.inf
    return num / den


def effect_ratio(baseline_median: float, candidate_median: float, higher_is_better: bool) -> float:
    """``r``: candidate / baseline for rates, baseline / candidate for latencies (r < 1 = worse)."""
    if higher_is_better:
        return _ratio(candidate_median, baseline_median)
    return _ratio(baseline_median, candidate_median)


def compare_samples(baseline: Mapping[str, Mapping[str, Sequence[float]]],
                    candidate: Mapping[str, Mapping[str, Sequence[float]]],
                    settings: GateSettings = GateSettings()) -> list[MetricResult]:
    """The statistical core: ``{permutation: {metric: [values per repetition]}}`` per side.

    Compares the permutations present on both sides, for ``settings.metrics``; applies
    Benjamini-Hochberg across every permutation x metric p-value and sets each row's verdict.
    """
    settings.validate()
    rows: list[MetricResult] = []
    for perm in [p for p in baseline if p in candidate]:
        for name in settings.metrics:
            metric = METRIC_BY_NAME[name]
            b = stats._clean(baseline[perm].get(name, ()))
            c = stats._clean(candidate[perm].get(name, ()))
            row = MetricResult(permutation=perm, metric=name, higher_is_better=metric.higher_is_better,
                               n_baseline=len(b), n_candidate=len(c), baseline_median=None,
                               candidate_median=None, r=None, baseline_spread=None, threshold=None, p=None)
            rows.append(row)
            if not b or not c:
                row.verdict = NO_DATA
                row.reason = "no data on " + ("either side" if not b and not c else
                                              "the baseline" if not b else "the candidate")
                continue
            row.baseline_median = median(b)
            row.candidate_median = median(c)
            row.r = effect_ratio(row.baseline_median, row.candidate_median, metric.higher_is_better)
            row.baseline_spread = stats.relative_spread(b, settings.spread)
            row.threshold = min(settings.max_effect, max(settings.min_effect, settings.k * row.baseline_spread))
            row.effect_beyond = row.r < 1.0 - row.threshold
            row.min_p = stats.min_p_value(len(b), len(c))
            if settings.can_judge(len(b), len(c)):
                row.significance_judged = True
                row.p = stats.mann_whitney_worse(b, c, metric.higher_is_better)
                row.p_better = stats.mann_whitney_worse(c, b, metric.higher_is_better)
    qs = stats.benjamini_hochberg([r.p for r in rows])
    qs_better = stats.benjamini_hochberg([r.p_better for r in rows])
    for row, q, q_better in zip(rows, qs, qs_better):
        row.q, row.q_better = q, q_better
        if row.verdict == NO_DATA:
            continue
        _verdict(row, settings)
    return rows


def _effect_words(row: MetricResult) -> str:
    assert row.r is not None and row.threshold is not None
    if row.effect_beyond:
        worse = f"{(1 - row.r):.1%} worse" if math.isfinite(row.r) else "worse"
        return f"{worse}, beyond threshold {row.threshold:.1%}"
    if row.r > 1.0 + row.threshold:
        better = f"{(row.r - 1):.1%} better" if math.isfinite(row.r) else "better"
        return f"{better}, beyond threshold {row.threshold:.1%}"
    return f"within threshold {row.threshold:.1%} (r={row.r:.3f})"


def why_inconclusive(n_baseline: int, n_candidate: int, settings: GateSettings) -> str:
    minp = stats.min_p_value(n_baseline, n_candidate)
    if n_baseline < settings.min_reps or n_candidate < settings.min_reps:
        return (f"{n_baseline}/{n_candidate} repetitions, fewer than {settings.min_reps} a side: "
                f"significance is not judged and an effect alone never fails the gate "
                f"(smallest possible p with these repetitions {minp:.3g})")
    return (f"{n_baseline}/{n_candidate} repetitions: the smallest possible p-value {minp:.3g} is above "
            f"alpha {settings.alpha:g}, the test can never be significant")


def _verdict(row: MetricResult, settings: GateSettings) -> None:
    assert row.r is not None and row.threshold is not None
    better_beyond = row.r > 1.0 + row.threshold
    if not math.isfinite(row.threshold):
        row.verdict = WARNING
        row.reason = "baseline median is 0: no relative threshold, effect not judged"
        return
    if not row.significance_judged:
        row.significant = None
        row.verdict = INCONCLUSIVE
        row.reason = f"{_effect_words(row)}; {why_inconclusive(row.n_baseline, row.n_candidate, settings)}"
        return
    row.significant = row.q is not None and row.q <= settings.alpha
    if row.effect_beyond and row.significant:
        row.verdict = REGRESSION
        row.reason = f"{_effect_words(row)}, significant (q={row.q:.3g})"
    elif row.effect_beyond:
        row.verdict = WARNING
        row.reason = (f"{_effect_words(row)}, but not significant (q={row.q:.3g} > {settings.alpha:g}; "
                      f"smallest possible p with {row.n_baseline}/{row.n_candidate} reps is {row.min_p:.3g})")
    elif row.significant:
        row.verdict = WARNING
        row.reason = (f"significantly worse (q={row.q:.3g}) but within threshold "
                      f"{row.threshold:.1%} (r={row.r:.3f})")
    elif better_beyond and row.q_better is not None and row.q_better <= settings.alpha:
        row.verdict = IMPROVED
        row.reason = f"{_effect_words(row)}, significant (q={row.q_better:.3g})"
    elif better_beyond:
        row.verdict = PASS
        row.reason = (f"{_effect_words(row)}, but not significant (q={row.q_better:.3g} > {settings.alpha:g}): "
                      "not called an improvement")
    else:
        row.verdict = PASS


def check_integrity(perm: str, baseline: PermData, candidate: PermData) -> IntegrityResult:
    """Messages lost, errors and disabled queues: a failure whatever the throughput."""
    c_lost = sum(r.messages_lost for r in candidate.reps)
    b_lost = sum(r.messages_lost for r in baseline.reps)
    c_err = sum(r.errors for r in candidate.reps) / len(candidate.reps)
    b_err = sum(r.errors for r in baseline.reps) / len(baseline.reps)
    disabled = any(r.queue_disabled for r in candidate.reps)
    res = IntegrityResult(permutation=perm, candidate_lost=c_lost, baseline_lost=b_lost,
                          candidate_errors_per_rep=c_err, baseline_errors_per_rep=b_err,
                          candidate_queue_disabled=disabled)
    if c_lost > 0:
        reps = [r.repetition for r in candidate.reps if r.messages_lost > 0]
        res.reasons.append(f"candidate lost {c_lost} message(s) (rep {', '.join(map(str, reps))})")
    if c_err > b_err:
        res.reasons.append(f"errors rose: {c_err:g} per repetition (baseline {b_err:g})")
    if disabled:
        res.reasons.append("candidate queue disabled (poison messages)")
    if res.reasons:
        res.verdict = FAIL
    return res
