"""harness.analysis.uncertainty: the throughput points' intervals against scipy.stats.bootstrap
(the reference implementation) and hand-checked cases. Fast: no Spark. (The comparisons'
intervals and verdicts are the stopping rule's: tests/verdicts.)"""

from __future__ import annotations

import numpy as np
import pytest

from harness.analysis import uncertainty as U

stats = pytest.importorskip("scipy.stats")


def _scipy(data, statistic, **kw):
    res = stats.bootstrap(data, statistic, vectorized=True, paired=False, method="percentile",
                          n_resamples=U.RESAMPLES, confidence_level=U.CONFIDENCE,
                          rng=np.random.default_rng(U.SEED), **kw)
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


@pytest.mark.parametrize("n,seed", [(3, 1), (5, 2), (6, 3), (11, 4)])
def test_median_interval_equals_scipy_bootstrap(n, seed):
    x = np.random.default_rng(seed).lognormal(8, 0.3, n)
    assert U.bootstrap_median(x) == pytest.approx(_scipy((x,), np.median), rel=1e-12)


def test_hand_checked_cases():
    # identical repetitions: the interval is the point
    assert U.bootstrap_median([7.0, 7.0, 7.0]) == (7.0, 7.0)
    # the median of a resample of 3 values is one of them: the interval's ends are too, and
    # with 4000 resamples P(median = min) = P(median = max) = 7/27 > 2.5 %, so the 95 %
    # interval of the median of three values is [min, max]
    assert U.bootstrap_median([1.0, 2.0, 10.0]) == (1.0, 10.0)


def test_too_few_repetitions_give_no_interval():
    assert U.bootstrap_median([5.0, 6.0]) is None
    assert U.bootstrap_median([5.0, None, 6.0]) is None   # None values do not count
