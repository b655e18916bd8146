"""Small, robust statistics for the regression gate (in the spirit of asv and pyperf).

Benchmark repetitions are few (4 to 10) and their noise is not Gaussian (a repetition that
hit a checkpoint or a noisy neighbour is an outlier), so the gate uses order statistics only:

* :func:`median` for the location of a sample (:func:`harness.results.median`);
* :func:`robust_spread` for its spread: ``MAD x 1.4826`` (default) or ``IQR / 1.349``, both
  consistent estimators of the standard deviation for normal data and insensitive to one
  outlier; :func:`relative_spread` divides by the median;
* :func:`mann_whitney_worse` for significance: the one-sided exact Mann-Whitney U test
  (``scipy.stats.mannwhitneyu(method='exact')``), which needs no distributional assumption.
  With ties the exact no-ties distribution is wrong, so the exact permutation distribution of
  the tie-corrected U statistic is enumerated instead (small samples) or the normal
  approximation with tie correction is used (large samples);
* :func:`benjamini_hochberg` for many tests at once (controls the false discovery rate).
"""

from __future__ import annotations

import functools
import math
from typing import Iterable, Sequence

from .. import results

MAD_TO_SIGMA = 1.4826    # 1 / Phi^-1(3/4): MAD x 1.4826 estimates sigma for normal data
IQR_TO_SIGMA = 1.349     # IQR / 1.349 estimates sigma for normal data
SPREAD_METHODS = ("mad", "iqr")
EXACT_PERMUTATION_LIMIT = 200_000   # enumerate at most this many splits when there are ties


def _clean(xs: Iterable[float]) -> list[float]:
    out = []
    for x in xs:
        if x is None:
            continue
        x = float(x)
        if math.isnan(x):
            continue
        out.append(x)
    return out


def median(xs: Iterable[float]) -> float:
    """:func:`harness.results.median` (the one median over repetitions), ignoring NaN, and
    NaN for no data (the convention of this module's other statistics)."""
    m = results.median(_clean(xs))
    return math.nan if m is None else float(m)


def mad(xs: Iterable[float]) -> float:
    """The raw median absolute deviation from the median (not scaled)."""
    v = _clean(xs)
    if not v:
        return math.nan
    m = median(v)
    return median(abs(x - m) for x in v)


def quantile(xs: Iterable[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default 'linear' method)."""
    v = sorted(_clean(xs))
    if not v:
        return math.nan
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile must be in [0, 1], got {q}")
    pos = q * (len(v) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def iqr(xs: Iterable[float]) -> float:
    """Interquartile range Q3 - Q1."""
    v = _clean(xs)
    return quantile(v, 0.75) - quantile(v, 0.25)


def robust_spread(xs: Iterable[float], method: str = "mad") -> float:
    """A robust estimate of the standard deviation: MAD x 1.4826 or IQR / 1.349.

    0 for a single value, NaN for none.
    """
    v = _clean(xs)
    if method == "mad":
        return mad(v) * MAD_TO_SIGMA
    if method == "iqr":
        return iqr(v) / IQR_TO_SIGMA
    raise ValueError(f"unknown spread method {method!r} (expected one of {', '.join(SPREAD_METHODS)})")


def relative_spread(xs: Iterable[float], method: str = "mad") -> float:
    """:func:`robust_spread` divided by ``|median|`` (a fraction: 0.03 is 3 %).

    0 when every value is 0 (no spread at all), infinity when the median is 0 but the values
    are not all equal, NaN for no data.
    """
    v = _clean(xs)
    if not v:
        return math.nan
    s = robust_spread(v, method)
    m = abs(median(v))
    if m == 0.0:
        return 0.0 if s == 0.0 else math.inf
    return s / m


def mann_whitney_worse(baseline: Sequence[float], candidate: Sequence[float],
                       higher_is_better: bool) -> float:
    """One-sided p-value of the null "the candidate is not worse than the baseline".

    "Worse" is stochastically smaller for a higher-is-better metric (a rate) and stochastically
    larger for a lower-is-better one (a latency). Without ties this is the exact Mann-Whitney U
    test, ``scipy.stats.mannwhitneyu(candidate, baseline, alternative=..., method='exact')``.
    With ties it is the exact permutation test of the same (mid-rank) statistic, or the
    tie-corrected normal approximation when there are more than
    ``EXACT_PERMUTATION_LIMIT`` ways to split the pooled sample.

    Returns 1.0 when both samples are constant and equal; raises ValueError on an empty side.
    """
    import numpy as np
    from scipy import stats

    b = _clean(baseline)
    c = _clean(candidate)
    if not b or not c:
        raise ValueError("Mann-Whitney U needs at least one value on each side")
    alternative = "less" if higher_is_better else "greater"
    pooled = b + c
    if len(set(pooled)) == 1:
        return 1.0
    if len(set(pooled)) == len(pooled):
        # Without ties the exact p-value depends only on which ranks the candidate holds:
        # cache scipy's answer per rank pattern (simulations call this thousands of times).
        order = sorted(range(len(pooled)), key=pooled.__getitem__)
        pattern = tuple(i >= len(b) for i in order)
        return _exact_p(pattern, alternative)
    if math.comb(len(pooled), len(c)) <= EXACT_PERMUTATION_LIMIT:
        res = stats.mannwhitneyu(c, b, alternative=alternative,
                                 method=stats.PermutationMethod(n_resamples=np.inf))
    else:
        res = stats.mannwhitneyu(c, b, alternative=alternative, method="asymptotic")
    return float(min(1.0, max(0.0, res.pvalue)))


@functools.lru_cache(maxsize=65536)
def _exact_p(pattern: tuple[bool, ...], alternative: str) -> float:
    """Exact Mann-Whitney p-value for a tie-free sample given as the rank pattern (True = a
    candidate value at that rank, ranks ascending)."""
    from scipy import stats

    c = [rank for rank, is_c in enumerate(pattern, start=1) if is_c]
    b = [rank for rank, is_c in enumerate(pattern, start=1) if not is_c]
    res = stats.mannwhitneyu(c, b, alternative=alternative, method="exact")
    return float(min(1.0, max(0.0, res.pvalue)))


def min_p_value(n_baseline: int, n_candidate: int) -> float:
    """The smallest p-value an exact Mann-Whitney test can give: 1 / C(n + m, n).

    4 against 4 repetitions: 1/70 = 0.0143; 5 against 5: 1/252 = 0.0040.
    """
    return 1.0 / math.comb(n_baseline + n_candidate, n_candidate)


def benjamini_hochberg(pvalues: Sequence[float | None]) -> list[float | None]:
    """Benjamini-Hochberg adjusted p-values (q-values), in the input order.

    ``None`` entries (tests that were not run) stay ``None`` and do not count in the family
    size. A test is a discovery at false discovery rate ``alpha`` when its q-value <= alpha;
    this is the BH step-up procedure: q_(i) = min_{j >= i} min(1, m p_(j) / j).
    """
    idx = [i for i, p in enumerate(pvalues) if p is not None]
    m = len(idx)
    out: list[float | None] = [None] * len(pvalues)
    if m == 0:
        return out
    for i in idx:
        p = pvalues[i]
        if not (0.0 <= p <= 1.0):  # type: ignore[operator]
            raise ValueError(f"p-value out of [0, 1]: {p!r}")
    order = sorted(idx, key=lambda i: pvalues[i])  # type: ignore[arg-type, return-value]
    running = 1.0
    for rank in range(m, 0, -1):
        i = order[rank - 1]
        running = min(running, pvalues[i] * m / rank)  # type: ignore[operator]
        out[i] = min(1.0, running)
    return out


def benjamini_hochberg_reject(pvalues: Sequence[float | None], alpha: float) -> list[bool]:
    """Which tests BH declares discoveries at false discovery rate ``alpha``."""
    return [q is not None and q <= alpha for q in benjamini_hochberg(pvalues)]
