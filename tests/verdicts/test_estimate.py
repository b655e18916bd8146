"""harness.verdicts.estimate: the one estimate every judgement rests on, against scipy."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from scipy import stats as sps
from scipy.special import polygamma

from harness.verdicts.estimate import (Estimate, _trigamma_inverse, benjamini_hochberg, estimate, mean_interval,
                                       moderate, p_values, relative_spread)


@pytest.mark.parametrize("seed", range(5))
def test_unpaired_is_welchs_t_test_of_the_logs(seed):
    rng = np.random.default_rng(seed)
    t, b = np.exp(rng.normal(0.1, 0.1, 5)), np.exp(rng.normal(0.0, 0.2, 7))
    e = estimate(list(t), list(b))
    ref = sps.ttest_ind(np.log(t), np.log(b), equal_var=False, alternative="less")
    assert e.d == pytest.approx(np.log(t).mean() - np.log(b).mean())
    assert p_values([e])[0][0] == pytest.approx(ref.pvalue)
    lo, hi = e.interval(0.9)
    ci = sps.ttest_ind(np.log(t), np.log(b), equal_var=False).confidence_interval(0.9)
    assert (lo, hi) == pytest.approx((ci.low, ci.high))
    # lower is better: the same estimate, read the other way
    assert p_values([estimate(list(t), list(b), higher_is_better=False)])[1][0] == pytest.approx(ref.pvalue)


@pytest.mark.parametrize("seed", range(5))
def test_paired_is_the_one_sample_t_test_of_the_units_ratios(seed):
    rng = np.random.default_rng(seed)
    level = np.exp(rng.normal(0, 0.3, 6))            # each unit's own level: cancels
    t, b = level * np.exp(rng.normal(0.05, 0.02, 6)), level * np.exp(rng.normal(0, 0.02, 6))
    e = estimate(list(t), list(b), paired=True)
    ref = sps.ttest_rel(np.log(t), np.log(b), alternative="greater")
    assert p_values([e])[1][0] == pytest.approx(ref.pvalue) and e.df == 5
    assert p_values([e])[1][0] < p_values([estimate(list(t), list(b))])[1][0]    # the shared level is not noise


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


def _paired(var: float, n: int = 5) -> Estimate:
    """A paired estimate of ``n`` units whose log ratios have sample variance ``var``."""
    return Estimate(0.0, var, n, 0.0, n, paired=True)


def test_trigamma_inverse_inverts_trigamma():
    for x in (1e-4, 0.05, 0.6, 3.0, 50.0):
        assert float(polygamma(1, _trigamma_inverse(x))) == pytest.approx(x, rel=1e-6)


def test_moderate_recovers_the_prior_of_inverse_chi_square_variances():
    """Smyth (2004)'s model: sigma^2 = d0 s0^2 / chi2(d0), s^2 = sigma^2 chi2(d) / d. From 4,000
    rows of 4 degrees of freedom, the fitted d0 and s0^2 are near the true 10 and 0.01, and
    each moderated variance lies between the row's own and the prior's."""
    rng = np.random.default_rng(3)
    own = 10 * 0.01 / rng.chisquare(10, 4000) * rng.chisquare(4, 4000) / 4
    rows = moderate([_paired(v) for v in own])
    d0 = rows[0].prior_df
    assert 7 < d0 < 14 and all(r.df == pytest.approx(4 + d0) for r in rows)
    # each row's prior, predicted from the 3,999 others, is near 0.01 and hardly moves by row
    s0 = [(r.var_t * (4 + d0) - 4 * v) / d0 for v, r in zip(own, rows)]
    assert 0.008 < min(s0) and max(s0) < 0.012 and max(s0) / min(s0) < 1.01
    assert all(min(v, p) - 1e-12 <= r.var_t <= max(v, p) + 1e-12 for v, p, r in zip(own, s0, rows))
    # like rows: no excess beyond sampling, the prior weighs the other rows' df, and the
    # moderated variances are all near the rows' common level
    like = [r.var_t for r in moderate([_paired(v) for v in 0.01 * rng.chisquare(4, 50) / 4])]
    assert max(like) / min(like) < 1.1 and 0.008 < np.mean(like) < 0.012


def test_moderate_fits_the_prior_by_label_and_counts_a_cell_once():
    """Two families whose variances differ 9-fold: each row is pulled towards its own family's
    level, not the run's. A row's prior is predicted from the other labels' cells, each counted
    as one row (its rates may be twins): one permutation's rows borrow nothing, two
    permutations' at most what three rows' log variances are worth."""
    rng = np.random.default_rng(5)
    labels = [(p, f) for p in range(9) for f in (True, False, False)]
    var = [0.01 if f else 0.09 for _, f in labels]
    rows = moderate([_paired(v * rng.chisquare(4) / 4) for v in var], labels)
    rate = np.exp(np.mean([math.log(r.var_t) for r, (_, f) in zip(rows, labels) if f]))
    lat = np.exp(np.mean([math.log(r.var_t) for r, (_, f) in zip(rows, labels) if not f]))
    assert 0.005 < rate < 0.02 and 0.045 < lat < 0.18
    one = [(0, True), (0, True), (0, False), (0, False), (0, False)]
    assert [r.prior_df for r in moderate([_paired(v) for v in (1, 2, 3, 4, 5)], one)] == [0.0] * 5
    two = [(p, f) for p in range(2) for f in (True, True, False, False, False)]
    rows = moderate([_paired(1.0 + 0.01 * i) for i in range(10)], two)
    three_rows = 2 * _trigamma_inverse(3 * float(polygamma(1, 2.0)))   # 4 cells, 3 parameters
    assert all(0 < r.prior_df <= three_rows + 1e-9 for r in rows) and three_rows < 2


def test_moderate_leaves_unpaired_zero_and_too_few_rows_alone():
    unpaired = [Estimate(0.0, 1.0, 5, 1.0, 5) for _ in range(5)]
    assert moderate(unpaired) == unpaired
    assert moderate([_paired(1.0), _paired(0.0), _paired(2.0)]) == [_paired(1.0), _paired(0.0), _paired(2.0)]
    assert moderate([_paired(1.0), _paired(2.0)]) == [_paired(1.0), _paired(2.0)]
