"""harness.gate.stats: the gate's small statistics module."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest
from scipy import stats as sps

from harness.gate import stats


# --------------------------------------------------------------------------- location and spread

def test_median():
    assert stats.median([3, 1, 2]) == 2
    assert stats.median([4, 1, 3, 2]) == 2.5
    assert stats.median([7]) == 7
    assert math.isnan(stats.median([]))
    assert stats.median([1, None, float("nan"), 3]) == 2  # None and NaN are ignored


def test_mad_and_robust_spread_known_values():
    xs = [1, 2, 3, 4, 100]
    assert stats.mad(xs) == 1.0                    # |x - 3| = 2 1 0 1 97 -> median 1
    assert stats.robust_spread(xs, "mad") == pytest.approx(1.4826)
    assert stats.iqr(xs) == 2.0                    # Q1 = 2, Q3 = 4 (linear interpolation)
    assert stats.robust_spread(xs, "iqr") == pytest.approx(2 / 1.349)
    assert stats.robust_spread([5.0], "mad") == 0.0
    assert math.isnan(stats.robust_spread([], "mad"))
    with pytest.raises(ValueError):
        stats.robust_spread(xs, "stdev")


@pytest.mark.parametrize("q", [0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0])
def test_quantile_matches_numpy(q):
    rng = np.random.default_rng(3)
    for n in (1, 2, 5, 8, 13):
        xs = list(rng.normal(size=n))
        assert stats.quantile(xs, q) == pytest.approx(float(np.quantile(xs, q)))


def test_spread_estimates_sigma_for_normal_data():
    rng = random.Random(11)
    xs = [rng.gauss(100.0, 3.0) for _ in range(20000)]
    assert stats.robust_spread(xs, "mad") == pytest.approx(3.0, rel=0.03)
    assert stats.robust_spread(xs, "iqr") == pytest.approx(3.0, rel=0.03)
    assert stats.relative_spread(xs, "mad") == pytest.approx(0.03, rel=0.03)


def test_spread_is_robust_to_one_outlier():
    xs = [100, 101, 99, 100.5, 99.5]
    with_outlier = xs[:-1] + [1000]
    assert stats.robust_spread(with_outlier, "mad") < 2 * stats.robust_spread(xs, "mad")
    assert stats.median(with_outlier) == pytest.approx(100.5)


def test_relative_spread_edge_cases():
    assert stats.relative_spread([0, 0, 0]) == 0.0
    assert stats.relative_spread([-5, -1, 0, 1, 5]) == math.inf  # median 0, spread > 0
    assert math.isnan(stats.relative_spread([]))
    assert stats.relative_spread([10, 11, 9]) == pytest.approx(1.4826 / 10)


# --------------------------------------------------------------------------- Mann-Whitney

def test_mann_whitney_matches_scipy_exact_without_ties():
    rng = np.random.default_rng(5)
    for n, m in [(4, 4), (5, 5), (4, 6), (3, 8), (10, 10)]:
        for _ in range(20):
            b = list(rng.normal(0, 1, n))
            c = list(rng.normal(-0.5, 1, m))
            want_rate = sps.mannwhitneyu(c, b, alternative="less", method="exact").pvalue
            want_lat = sps.mannwhitneyu(c, b, alternative="greater", method="exact").pvalue
            assert stats.mann_whitney_worse(b, c, higher_is_better=True) == pytest.approx(want_rate)
            assert stats.mann_whitney_worse(b, c, higher_is_better=False) == pytest.approx(want_lat)


def test_mann_whitney_direction_and_minimum():
    base = [100, 101, 102, 103, 104]
    worse_rate = [90, 91, 92, 93, 94]
    assert stats.mann_whitney_worse(base, worse_rate, True) == pytest.approx(1 / 252)
    assert stats.mann_whitney_worse(base, worse_rate, False) == pytest.approx(1.0)
    assert stats.mann_whitney_worse(base[:4], worse_rate[:4], True) == pytest.approx(1 / 70)
    assert stats.min_p_value(4, 4) == pytest.approx(1 / 70)
    assert stats.min_p_value(5, 5) == pytest.approx(1 / 252)
    assert stats.mann_whitney_worse([5, 5, 5], [5, 5, 5], True) == 1.0
    with pytest.raises(ValueError):
        stats.mann_whitney_worse([], [1.0], True)


def _brute_force_p(b, c, higher_is_better):
    """Exact permutation p-value of the mid-rank U statistic, by enumeration."""
    pooled = b + c
    ranks = sps.rankdata(pooled)
    n_c = len(c)

    def u(idx):  # U of the candidate group
        return sum(ranks[i] for i in idx) - n_c * (n_c + 1) / 2

    observed = u(range(len(b), len(pooled)))
    splits = list(itertools.combinations(range(len(pooled)), n_c))
    if higher_is_better:   # worse = candidate small = U small
        hits = sum(1 for s in splits if u(s) <= observed + 1e-9)
    else:
        hits = sum(1 for s in splits if u(s) >= observed - 1e-9)
    return hits / len(splits)


def test_mann_whitney_with_ties_is_the_exact_permutation_test():
    cases = [([2.1, 2.1, 2.2, 2.3], [2.1, 2.3, 2.4, 2.4]),
             ([10, 10, 10, 11, 12], [9, 10, 10, 10, 10]),
             ([1, 2, 2, 3], [2, 2, 2, 2])]
    for b, c in cases:
        for hib in (True, False):
            assert stats.mann_whitney_worse(b, c, hib) == pytest.approx(_brute_force_p(b, c, hib)), (b, c, hib)


# --------------------------------------------------------------------------- Benjamini-Hochberg

def test_benjamini_hochberg_matches_scipy():
    rng = np.random.default_rng(9)
    for m in (1, 2, 5, 17):
        ps = list(rng.uniform(0, 0.2, m))
        want = sps.false_discovery_control(ps, method="bh")
        assert stats.benjamini_hochberg(ps) == pytest.approx(list(want))


def test_benjamini_hochberg_textbook_example_and_none():
    ps = [0.01, 0.04, 0.03, 0.005, None]
    qs = stats.benjamini_hochberg(ps)
    assert qs[4] is None
    assert qs[:4] == pytest.approx([0.02, 0.04, 0.04, 0.02])   # family of 4: None does not count
    assert stats.benjamini_hochberg_reject(ps, 0.03) == [True, False, False, True, False]
    assert stats.benjamini_hochberg([]) == []
    assert stats.benjamini_hochberg([None]) == [None]
    with pytest.raises(ValueError):
        stats.benjamini_hochberg([1.5])


def test_bh_with_four_reps_needs_several_hits():
    """The limit docs/gate.md states: with 4 reps a side the smallest p is 1/70, so among 10
    tests one lone hit cannot pass BH at 0.05, while three or more at the minimum can."""
    p = stats.min_p_value(4, 4)
    assert not any(stats.benjamini_hochberg_reject([p] + [0.5] * 9, 0.05))
    assert all(stats.benjamini_hochberg_reject([p] * 3 + [0.5] * 7, 0.05)[:3])
