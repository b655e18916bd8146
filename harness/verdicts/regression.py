"""The regression rule: a candidate against a baseline, one row per permutation and metric.

An effect beyond a threshold scaled by the baseline's robust spread, and a one-sided t test of
the log ratio (paired by round where rounds interleave, its variance moderated by the run's
other rows) with Benjamini-Hochberg in two families,
the rates first (most of alpha) and the latencies: ``regression`` needs both, ``warning`` one,
``improved`` the mirror; too few repetitions are ``inconclusive``, never a failure.
docs/gate.md has the method and the defaults.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from ..errors import UserError
from ..results import median
from .estimate import SPREAD_METHODS, Estimate, benjamini_hochberg, estimate, moderate, p_values, relative_spread
from .comparison_metrics import METRIC_BY_NAME, METRICS
from .rule import INCONCLUSIVE   # too few repetitions to judge significance

#: a sample: (repetition or round, value) of the repetitions that count, or the values alone
Sample = Sequence[tuple[int, float]] | Sequence[float]

# verdicts of a row (permutation x metric), of a permutation and of the whole comparison
PASS, IMPROVED, NO_DATA = "pass", "improved", "no-data"
WARNING = "warning"             # an effect without significance, or significance without effect
REGRESSION = "regression"       # effect beyond the threshold AND significant
FAIL = "fail"                   # integrity: messages lost, errors rose, queue disabled
SEVERITY = {NO_DATA: 0, PASS: 0, IMPROVED: 0, INCONCLUSIVE: 1, WARNING: 2, REGRESSION: 3, FAIL: 4}
#: the verdicts that exit 1
FAILING = (FAIL, REGRESSION)

@dataclass(frozen=True)
class GateSettings:
    """The gate's knobs; the defaults are documented in docs/gate.md."""

    k: float = 2.0                # threshold = min(max_effect, max(min_effect, k x relative baseline spread))
    min_effect: float = 0.05      # never call anything under 5 % a regression
    #: a rate halved (a latency doubled) is beyond the threshold however wide the baseline's
    #: spread: without a ceiling a spread over 50 % would put the threshold past 100 %, which no
    #: drop of a rate can pass
    max_effect: float = 0.5
    min_reps: int = 4             # repetitions (paired: rounds) a side needed to judge significance
    alpha: float = 0.01           # false discovery rate for Benjamini-Hochberg
    #: the share of ``alpha`` the rates' family gets, the rest the latencies': a rate regression
    #: (the gate's first question) is tested in a family of its own, a latency one still fails
    rate_share: float = 0.8
    spread: str = "mad"           # mad (MAD x 1.4826) or iqr (IQR / 1.349)
    metrics: tuple[str, ...] = tuple(m.name for m in METRICS)

    def validate(self) -> "GateSettings":
        if not (self.k >= 0 and math.isfinite(self.k)):
            raise UserError(f"--k must be a finite number >= 0, got {self.k}")
        if not 0 <= self.min_effect < 1:
            raise UserError(f"--min-effect must be a fraction in [0, 1), got {self.min_effect}")
        if not self.min_effect <= self.max_effect < 1:
            raise UserError(f"--max-effect must be a fraction in [min-effect, 1), got {self.max_effect}")
        if self.min_reps < 2:
            raise UserError(f"--min-reps must be at least 2, got {self.min_reps}")
        if not 0 < self.alpha < 1:
            raise UserError(f"--alpha must be in (0, 1), got {self.alpha}")
        if not 0 < self.rate_share < 1:
            raise UserError(f"the rates' share of alpha must be in (0, 1), got {self.rate_share}")
        if self.spread not in SPREAD_METHODS:
            raise UserError(f"--spread must be one of {', '.join(SPREAD_METHODS)}, got {self.spread!r}")
        unknown = [m for m in self.metrics if m not in METRIC_BY_NAME]
        if unknown or not self.metrics:
            raise UserError(f"unknown metric(s) {', '.join(unknown) or '(none given)'} "
                            f"(expected some of {', '.join(METRIC_BY_NAME)})")
        return self

    def can_judge(self, n_baseline: int, n_candidate: int) -> bool:
        """Whether significance can be judged with these repetition counts: at least
        ``min_reps`` a side. Otherwise a row can never be a regression: it is inconclusive."""
        return n_baseline >= self.min_reps and n_candidate >= self.min_reps

    def describe(self) -> str:
        spread = "MAD x 1.4826" if self.spread == "mad" else "IQR / 1.349"
        return (f"threshold = max({self.min_effect:.0%}, k={self.k:g} x baseline spread ({spread}) / median), "
                f"at most {self.max_effect:.0%}; "
                f"significance = one-sided t test of the log ratio (>= {self.min_reps} reps a side), paired "
                f"by round where the rounds interleave, its variance moderated towards a prior predicted "
                f"from the run's other permutation x family cells (empirical Bayes), "
                f"Benjamini-Hochberg over the permutation x metric tests at FDR {self.alpha:g}, in two "
                f"families: the rates at {self.rate_share:g} of it, the latencies at the rest; "
                f"regression = beyond the threshold AND significant; fewer reps: inconclusive")


def worst(a: str, b: str) -> str:
    return a if SEVERITY[a] >= SEVERITY[b] else b


def overall(verdicts: Iterable[str]) -> str:
    """A whole comparison's verdict: the worst of ``verdicts`` if it is fail, regression, warning
    or inconclusive, else pass."""
    w = functools.reduce(worst, verdicts, PASS)
    return w if w in (FAIL, REGRESSION, WARNING, INCONCLUSIVE) else PASS


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
    p: float | None                    # one-sided t test, candidate worse (None: not judged)
    q: float | None = None             # Benjamini-Hochberg adjusted p
    p_better: float | None = None      # the mirror test: one-sided, "the candidate is better"
    q_better: float | None = None      # its Benjamini-Hochberg adjusted p (improvements' family)
    effect_beyond: bool = False
    significant: bool | None = None    # None: not judged (too few repetitions)
    significance_judged: bool = False
    paired: bool = False               # judged round by round
    verdict: str = PASS
    reason: str = ""
    estimate: Estimate | None = field(default=None, repr=False, compare=False)


def _ratio(num: float, den: float) -> float:
    if den == 0.0:
        return 1.0 if num == 0.0 else math.inf
    return num / den


def _numbered(sample: Sample) -> dict[int, float]:
    """{repetition: value} of the finite positive values (plain values are numbered 1, 2, ...)."""
    pairs = [x if isinstance(x, tuple) else (i, x) for i, x in enumerate(sample, start=1)]
    return {int(r): float(v) for r, v in pairs if v is not None and math.isfinite(float(v)) and float(v) > 0}


def compare_samples(baseline: Mapping[str, Mapping[str, Sample]], candidate: Mapping[str, Mapping[str, Sample]],
                    settings: GateSettings = GateSettings(), paired: bool = False) -> list[MetricResult]:
    """The statistical core: ``{permutation: {metric: sample}}`` per side. Compares the
    permutations present on both sides, for ``settings.metrics``; ``paired``: repetition ``i`` of
    each side ran in round ``i`` (only the rounds both sides count are compared). Applies
    Benjamini-Hochberg within each family (:func:`family_q`) and sets each row's verdict."""
    settings.validate()
    rows: list[MetricResult] = []
    for perm in [p for p in baseline if p in candidate]:
        for name in settings.metrics:
            rows.append(_row(perm, name, _numbered(baseline[perm].get(name, ())),
                             _numbered(candidate[perm].get(name, ())), settings, paired))
    _moderate(rows)
    qs = family_q(rows, [r.p for r in rows], settings)
    qs_better = family_q(rows, [r.p_better for r in rows], settings)
    for row, q, q_better in zip(rows, qs, qs_better):
        row.q, row.q_better = q, q_better
        if row.verdict != NO_DATA:
            _verdict(row, settings)
    return rows


def _moderate(rows: Sequence[MetricResult]) -> None:
    """Each judged row's p-values, from its variance moderated towards a prior predicted from
    the run's other paired rows' cells, the log level additive in the permutation and the
    family (:func:`~.estimate.moderate`): 4 degrees of freedom at 5 rounds borrow from the
    other permutations' rows as far as their variances agree."""
    judged = [r for r in rows if r.estimate is not None]
    labels = [(r.permutation, r.higher_is_better) for r in judged]
    estimates = moderate([r.estimate for r in judged], labels)   # type: ignore[misc]
    for r, e, worse, better in zip(judged, estimates, *p_values(estimates)):
        r.estimate, r.p, r.p_better = e, worse, better


def family_q(rows: Sequence[MetricResult], ps: Sequence[float | None],
             settings: GateSettings) -> list[float | None]:
    """Each row's q: Benjamini-Hochberg within its family (the rates, the latencies), divided by
    the family's share of alpha, so ``q <= alpha`` is the family's own test at its share. A
    family alone gets all of alpha. With only noise, a gate fails at most ``alpha`` of the time
    (Bonferroni across the families); a rate regression is found with fewer tests in its way."""
    family = [r.higher_is_better for r in rows]
    present = {f for f, p in zip(family, ps) if p is not None}
    out: list[float | None] = [None] * len(rows)
    for f in present:
        share = 1.0 if len(present) == 1 else settings.rate_share if f else 1.0 - settings.rate_share
        idx = [i for i, g in enumerate(family) if g == f]
        for i, q in zip(idx, benjamini_hochberg([ps[i] for i in idx])):
            out[i] = None if q is None else min(1.0, q / share)
    return out


def _row(perm: str, name: str, b: dict[int, float], c: dict[int, float], settings: GateSettings,
         paired: bool) -> MetricResult:
    higher = METRIC_BY_NAME[name].higher_is_better
    if paired:
        b, c = ({r: v for r, v in side.items() if r in b and r in c} for side in (b, c))
    row = MetricResult(permutation=perm, metric=name, higher_is_better=higher, n_baseline=len(b),
                       n_candidate=len(c), baseline_median=None, candidate_median=None, r=None,
                       baseline_spread=None, threshold=None, p=None, paired=paired)
    if not b or not c:
        row.verdict = NO_DATA
        row.reason = "no data on " + ("either side" if not b and not c else "the baseline" if not b else "the candidate")
        return row
    bv, cv = [b[r] for r in sorted(b)], [c[r] for r in sorted(c)]
    bm, cm = row.baseline_median, row.candidate_median = median(bv), median(cv)
    row.r = _ratio(cm, bm) if higher else _ratio(bm, cm)   # r < 1 is worse (a latency's: baseline / candidate)
    row.baseline_spread = (relative_spread([x / y for x, y in zip(cv, bv)], settings.spread) / math.sqrt(2)
                           if paired else relative_spread(bv, settings.spread))
    row.threshold = min(settings.max_effect, max(settings.min_effect, settings.k * row.baseline_spread))
    row.effect_beyond = row.r < 1.0 - row.threshold
    if settings.can_judge(len(b), len(c)):
        row.estimate = estimate(cv, bv, higher, paired)    # its p-values: after _moderate
        row.significance_judged = True
    return row


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
    return (f"{n_baseline}/{n_candidate} repetitions, fewer than {settings.min_reps} a side: "
            "significance is not judged and an effect alone never fails the gate")


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
        row.reason = f"{_effect_words(row)}, but not significant (q={row.q:.3g} > {settings.alpha:g})"
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


