"""harness.verdicts.estimate: the one estimate every judgement rests on, against scipy."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from scipy import stats as sps

from harness.verdicts.estimate import benjamini_hochberg, estimate, mean_interval, relative_spread


@pytest.mark.parametrize("seed", range(5))
def test_unpaired_is_welchs_t_test_of_the_logs(seed):
    rng = np.random.default_rng(seed)
    t, b = np.exp(rng.normal(0.1, 0.1, 5)), np.exp(rng.normal(0.0, 0.2, 7))
    e = estimate(list(t), list(b))
    ref = sps.ttest_ind(np.log(t), np.log(b), equal_var=False, alternative="less")
    assert e.d == pytest.approx(np.log(t).mean() - np.log(b).mean())
    assert e.p_worse() == pytest.approx(ref.pvalue)
    lo, hi = e.interval(0.9)
    ci = sps.ttest_ind(np.log(t), np.log(b), equal_var=False).confidence_interval(0.9)
    assert (lo, hi) == pytest.approx((ci.low, ci.high))
    # lower is better: the same estimate, read the other way
    assert estimate(list(t), list(b), higher_is_better=False).p_better() == pytest.approx(ref.pvalue)


@pytest.mark.parametrize("seed", range(5))
def test_paired_is_the_one_sample_t_test_of_the_units_ratios(seed):
    rng = np.random.default_rng(seed)
    level = np.exp(rng.normal(0, 0.3, 6))            # each unit's own level: cancels
    t, b = level * np.exp(rng.normal(0.05, 0.02, 6)), level * np.exp(rng.normal(0, 0.02, 6))
    e = estimate(list(t), list(b), paired=True)
    ref = sps.ttest_rel(np.log(t), np.log(b), alternative="greater")
    assert e.p_better() == pytest.approx(ref.pvalue) and e.df == 5
    assert e.p_better() < estimate(list(t), list(b)).p_better()    # the shared level is not noise


def test_mean_interval_is_the_t_interval_of_the_geometric_mean():
    v = [100.0, 110.0, 95.0, 105.0]
    lo, hi = mean_interval(v, 0.95)
    ci = sps.ttest_1samp(np.log(v), 0).confidence_interval(0.95)
    assert (math.log(lo), math.log(hi)) == pytest.approx((ci.low, ci.high))
    assert mean_interval([100.0], 0.95) is None and mean_interval([100.0, None, 0.0]) is None


def test_benjamini_hochberg_matches_scipy_and_leaves_untested_out():
    rng = np.random.default_rng(9)
    for m in (1, 2, 5, 17):
        ps = list(rng.uniform(0, 0.2, m))
        assert benjamini_hochberg(ps) == pytest.approx(list(sps.false_discovery_control(ps, method="bh")))
    qs = benjamini_hochberg([0.01, 0.04, 0.03, 0.005, None])
    assert qs[4] is None and qs[:4] == pytest.approx([0.02, 0.04, 0.04, 0.02])   # a family of 4
    assert benjamini_hochberg([]) == [] and benjamini_hochberg([None]) == [None]
    with pytest.raises(ValueError):
        benjamini_hochberg([1.5])


def test_relative_spread_is_robust_and_estimates_sigma():
    xs = [1, 2, 3, 4, 100]
    assert relative_spread(xs, "mad") == pytest.approx(1.4826 / 3)       # MAD 1 around the median 3
    assert relative_spread(xs, "iqr") == pytest.approx(2 / 1.349 / 3)    # Q1 2, Q3 4
    rng = random.Random(11)
    normal = [rng.gauss(100.0, 3.0) for _ in range(20000)]
    assert relative_spread(normal, "mad") == pytest.approx(0.03, rel=0.03)
    assert relative_spread(normal, "iqr") == pytest.approx(0.03, rel=0.03)
    assert relative_spread([100, 101, 99, 100.5, 1000]) < 2 * relative_spread([100, 101, 99, 100.5, 99.5])
    assert relative_spread([0, 0, 0]) == 0.0 and relative_spread([-5, -1, 0, 1, 5]) == math.inf
    assert math.isnan(relative_spread([])) and relative_spread([5.0]) == 0.0
    with pytest.raises(ValueError):
        relative_spread(xs, "stdev")
