"""harness.analysis.uncertainty: the intervals against scipy.stats.bootstrap (the reference
implementation) and hand-checked cases, and the verdict rules. Fast: no Spark."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.analysis import uncertainty as U

stats = pytest.importorskip("scipy.stats")


def _ratio(x, y, axis=-1):
    return np.median(x, axis=axis) / np.median(y, axis=axis)


def _scipy(data, statistic, **kw):
    res = stats.bootstrap(data, statistic, vectorized=True, paired=False, method="percentile",
                          n_resamples=U.RESAMPLES, confidence_level=U.CONFIDENCE,
                          rng=np.random.default_rng(U.SEED), **kw)
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


@pytest.mark.parametrize("n_t,n_b,seed", [(5, 5, 1), (3, 3, 2), (4, 6, 3), (10, 7, 4), (30, 30, 5)])
def test_ratio_interval_equals_scipy_bootstrap(n_t, n_b, seed):
    rng = np.random.default_rng(seed)
    t = rng.uniform(0.75, 1.25, n_t) * 3000 * 1.2
    b = rng.uniform(0.75, 1.25, n_b) * 3000
    mine = U.bootstrap_ratio(t, b)
    ref = _scipy((t, b), _ratio)
    assert mine == pytest.approx(ref, rel=1e-12)


@pytest.mark.parametrize("n,seed", [(3, 1), (5, 2), (6, 3), (11, 4)])
def test_median_interval_equals_scipy_bootstrap(n, seed):
    x = np.random.default_rng(seed).lognormal(8, 0.3, n)
    assert U.bootstrap_median(x) == pytest.approx(_scipy((x,), np.median), rel=1e-12)


def test_hand_checked_cases():
    # identical repetitions: the interval is the point
    assert U.bootstrap_ratio([200.0] * 5, [100.0] * 5) == (2.0, 2.0)
    assert U.bootstrap_median([7.0, 7.0, 7.0]) == (7.0, 7.0)
    # the median of a resample of 3 values is one of them: the interval's ends are too, and
    # with 4000 resamples P(median = min) = P(median = max) = 7/27 > 2.5 %, so the 95 %
    # interval of the median of three values is [min, max]
    assert U.bootstrap_median([1.0, 2.0, 10.0]) == (1.0, 10.0)
    # every resampled ratio lies between min(t)/max(b) and max(t)/min(b)
    lo, hi = U.bootstrap_ratio([90.0, 100.0, 110.0, 95.0, 105.0], [40.0, 50.0, 60.0, 45.0, 55.0])
    assert 90 / 60 <= lo <= 2.0 <= hi <= 110 / 40
    # a scale factor on the treatment scales the interval
    t, b = [3.0, 5.0, 4.0, 6.0], [2.0, 2.5, 3.0]
    lo1, hi1 = U.bootstrap_ratio(t, b)
    lo2, hi2 = U.bootstrap_ratio([2 * x for x in t], b)
    assert (lo2, hi2) == pytest.approx((2 * lo1, 2 * hi1))


def test_too_few_repetitions_give_no_interval():
    assert U.bootstrap_ratio([1.0, 2.0], [1.0, 2.0, 3.0]) is None
    assert U.bootstrap_ratio([1.0, 2.0, 3.0], [1.0, None, 3.0]) is None   # None values do not count
    assert U.bootstrap_median([5.0, 6.0]) is None
    c = U.compare([120.0, 130.0], [100.0, 100.0, 100.0], 5.0)
    assert c.gain_pct == pytest.approx(25.0) and c.ci_low_pct is None and c.verdict == U.INCONCLUSIVE


def test_a_zero_baseline_is_inconclusive():
    c = U.compare([10.0, 11.0, 12.0], [0.0, 0.0, 0.0], 5.0)
    assert c.gain_pct is None and c.verdict == U.INCONCLUSIVE
    c = U.compare([10.0, 11.0, 12.0], [0.0, 5.0, 6.0], 5.0)   # some resamples have a zero median
    assert c.ci_low_pct is None and c.verdict == U.INCONCLUSIVE


@pytest.mark.parametrize("lo,hi,expected", [
    (5.1, 80.0, U.GAIN), (5.0, 80.0, U.INCONCLUSIVE),          # the whole interval above +5 %
    (-80.0, -5.1, U.LOSS), (-80.0, -5.0, U.INCONCLUSIVE),      # wholly below -5 %
    (-5.0, 5.0, U.NO_DIFFERENCE), (-1.0, 2.0, U.NO_DIFFERENCE),
    (-6.0, 2.0, U.INCONCLUSIVE), (-2.0, 30.0, U.INCONCLUSIVE), (-30.0, 30.0, U.INCONCLUSIVE),
    (None, None, U.INCONCLUSIVE),
])
def test_verdict_rules(lo, hi, expected):
    assert U.verdict(lo, hi, 5.0, 5, 5) == expected


@pytest.mark.parametrize("n_t,n_b", [(1, 5), (2, 5), (5, 2), (1, 1), (2, 2)])
def test_fewer_than_three_repetitions_are_always_inconclusive(n_t, n_b):
    assert U.verdict(50.0, 60.0, 5.0, n_t, n_b) == U.INCONCLUSIVE
    assert U.verdict(-1.0, 1.0, 5.0, n_t, n_b) == U.INCONCLUSIVE
    assert U.compare([200.0] * n_t, [100.0] * n_b, 5.0).verdict == U.INCONCLUSIVE


def test_clear_effects_and_no_effect():
    assert U.compare([200.0, 205.0, 198.0, 202.0, 201.0], [100.0, 101.0, 99.0, 100.5, 99.5], 5.0).verdict == U.GAIN
    assert U.compare([50.0, 52.0, 49.0], [100.0, 101.0, 99.0], 5.0).verdict == U.LOSS
    c = U.compare([100.0, 101.0, 99.0, 100.5, 99.8], [100.2, 100.9, 99.1, 100.0, 99.7], 5.0)
    assert c.verdict == U.NO_DIFFERENCE and math.isclose(c.gain_pct, 0.0, abs_tol=0.5)


def test_false_gains_are_rare_without_an_effect():
    """The percentile bootstrap under-covers with 5 repetitions; with the 5 % threshold on top
    a comparison without any effect is called a gain rarely (docs/statistics.md quotes this)."""
    rng = np.random.default_rng(7)
    gains = sum(U.compare(rng.uniform(0.75, 1.25, 5), rng.uniform(0.75, 1.25, 5), 5.0).verdict == U.GAIN
                for _ in range(400))
    assert gains <= 8   # <= 2 % (about 1 % expected)
