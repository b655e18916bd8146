"""harness.verdicts.rule: the Welch interval against scipy (the reference), the verdict rules,
the looks of a sequential rule and what an undecided comparison says. Fast: no Spark."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from harness.verdicts.estimate import estimate
from harness.verdicts.rule import GAIN, INCONCLUSIVE, LOSS, NO_DIFFERENCE, Rule, decide, judge, needed_reps


def reps(*values, start=1):
    return list(enumerate(values, start=start))


@pytest.mark.parametrize("n_t,n_b,conf,seed", [(3, 3, 0.95, 1), (4, 6, 0.99, 2), (10, 7, 0.9875, 3),
                                               (30, 30, 0.95, 4), (5, 3, 0.995, 5)])
def test_the_interval_is_scipys_welch_interval_of_the_log_ratio(n_t, n_b, conf, seed):
    rng = np.random.default_rng(seed)
    t = 1200 * rng.lognormal(0, 0.1, n_t)
    b = 1000 * rng.lognormal(0, 0.2, n_b)
    ref = stats.ttest_ind(np.log(t), np.log(b), equal_var=False).confidence_interval(conf)
    e = estimate(t, b)
    assert e.d == pytest.approx(np.log(t).mean() - np.log(b).mean(), rel=1e-12)
    assert e.interval(conf) == pytest.approx((ref.low, ref.high), rel=1e-10)
    # lower is better: the same interval, negated
    lower = estimate(t, b, higher_is_better=False)
    assert (lower.d, *lower.interval(conf)) == pytest.approx((-e.d, -ref.high, -ref.low), rel=1e-10)


@pytest.mark.parametrize("lo,hi,expected", [
    (5.1, 80.0, GAIN), (5.0, 80.0, INCONCLUSIVE),          # the whole interval above +5 %
    (-80.0, -5.1, LOSS), (-80.0, -5.0, INCONCLUSIVE),      # wholly below -5 %
    (-5.0, 5.0, NO_DIFFERENCE), (-1.0, 2.0, NO_DIFFERENCE),
    (-6.0, 2.0, INCONCLUSIVE), (-2.0, 30.0, INCONCLUSIVE), (-30.0, 30.0, INCONCLUSIVE),
    (None, None, INCONCLUSIVE),
])
def test_verdict_rules(lo, hi, expected):
    assert decide(lo, hi, 5.0) == expected


def test_a_fixed_rule_looks_once_with_every_repetition():
    rule = Rule(threshold_pct=5.0)
    assert rule.looks == 1 and rule.alpha_at(3) == rule.alpha_at(7) == 0.05
    assert rule.confidence_at(3) == pytest.approx(0.95) and rule.confidence_at(3, equivalence=True) == pytest.approx(0.90)
    o = judge(reps(200, 205, 198), reps(100, 101, 99), rule)
    assert o.verdict == GAIN and o.look == 3 and (o.n_treatment, o.n_baseline) == (3, 3)
    assert o.gain_pct == pytest.approx(100 * (math.exp(np.mean(np.log([200, 205, 198])) -
                                                      np.mean(np.log([100, 101, 99]))) - 1))
    assert judge(reps(50, 52, 49), reps(100, 101, 99), rule).verdict == LOSS
    o = judge(reps(100, 101, 99, 100.5, 99.8), reps(100.2, 100.9, 99.1, 100, 99.7), rule)
    assert o.verdict == NO_DIFFERENCE and abs(o.gain_pct) < 0.5
    # identical repetitions: a zero-width interval at the point
    o = judge(reps(200.0, 200.0, 200.0), reps(100.0, 100.0, 100.0), rule)
    assert o.ci_low_pct == o.ci_high_pct == pytest.approx(100.0) and o.verdict == GAIN


@pytest.mark.parametrize("n_t,n_b", [(1, 5), (2, 5), (5, 2), (1, 1), (2, 2)])
def test_fewer_than_three_repetitions_a_side_are_inconclusive_and_say_so(n_t, n_b):
    o = judge(reps(*[200.0] * n_t), reps(*[100.0] * n_b), Rule())
    assert o.verdict == INCONCLUSIVE and o.ci_low_pct is None and o.gain_pct == pytest.approx(100.0)
    assert o.reason == f"fewer than 3 repetitions on a side ({n_t} and {n_b} counted)"


def test_values_that_have_no_ratio_are_left_out():
    o = judge([(1, 10.0), (2, None), (3, 0.0), (4, float("nan")), (5, 11.0)], reps(10.0, 11.0, 12.0), Rule())
    assert o.n_treatment == 2 and o.verdict == INCONCLUSIVE
    assert judge([], [], Rule()).gain_pct is None


def test_lower_is_better_turns_a_latency_drop_into_a_gain():
    o = judge(reps(10.0, 10.5, 9.8), reps(20.0, 19.5, 20.4), Rule(), higher_is_better=False)
    assert o.verdict == GAIN and o.gain_pct == pytest.approx(100.0, abs=3.0)


def test_a_sequential_rule_spends_its_error_over_its_looks():
    rule = Rule.of_run({"repetitions": "auto", "min_repetitions": 3, "max_repetitions": 8, "threshold_pct": 10})
    assert (rule.min_reps, rule.max_reps, rule.looks, rule.threshold_pct) == (3, 8, 6, 10.0)
    # the power family alpha * (r / 8) ** 3 (Kim and DeMets): the first look takes all of it up
    # to round 3, each later look the increment, and the looks add up to alpha
    spent = [rule.alpha_at(r) for r in range(3, 9)]
    assert spent[0] == pytest.approx(0.05 * (3 / 8) ** 3) and spent[-1] == pytest.approx(0.05 * (1 - (7 / 8) ** 3))
    assert sum(spent) == pytest.approx(0.05) and spent == sorted(spent)
    assert rule.alpha_at(2) == rule.alpha_at(9) == 0.0
    assert rule.confidence_at(3) == pytest.approx(1 - spent[0])
    assert rule.confidence_at(8, equivalence=True) == pytest.approx(1 - 2 * spent[-1])
    assert rule.confidence_at(20) == rule.confidence_at(8)      # past the last look: the last look's level
    # the same data: a fixed 95 % look decides, the sequential rule's first look (99.7 %) does not
    t, b = reps(112.0, 118.0, 115.0), reps(100.0, 101.0, 102.0)
    assert judge(t, b, Rule(threshold_pct=5)).verdict == GAIN
    assert judge(t, b, Rule(threshold_pct=5, max_reps=8)).verdict == INCONCLUSIVE


def test_no_difference_reads_the_one_sided_level_and_gain_the_two_sided_one():
    """Equivalence at alpha is read from the 1 - 2 alpha interval (two one-sided tests); a gain
    or a loss from the 1 - alpha one. Both against scipy's Welch interval."""
    t, b = reps(103.0, 97.0, 101.5, 98.0), reps(100.0, 96.5, 103.0, 99.0)
    lt, lb = np.log([v for _, v in t]), np.log([v for _, v in b])
    ref = stats.ttest_ind(lt, lb, equal_var=False)
    wide, narrow = ref.confidence_interval(0.95), ref.confidence_interval(0.90)
    pct = lambda x: 100 * math.expm1(x)     # noqa: E731
    thr = 100 * math.expm1(max(abs(narrow.low), abs(narrow.high))) + 0.3     # the 90 % fits, the 95 % does not
    assert pct(wide.low) < -thr or pct(wide.high) > thr
    o = judge(t, b, Rule(threshold_pct=thr))
    assert o.verdict == NO_DIFFERENCE and o.confidence == pytest.approx(0.90)
    assert (o.ci_low_pct, o.ci_high_pct) == pytest.approx((pct(narrow.low), pct(narrow.high)), rel=1e-9)
    # a margin the 90 % interval does not fit in: inconclusive, reporting the 95 % interval
    o = judge(t, b, Rule(threshold_pct=thr - 0.6))
    assert o.verdict == INCONCLUSIVE and o.confidence == pytest.approx(0.95)
    assert (o.ci_low_pct, o.ci_high_pct) == pytest.approx((pct(wide.low), pct(wide.high)), rel=1e-9)
    # a gain needs the 95 % interval above the threshold: the 90 % one above is not enough
    g = reps(112.0, 106.0, 110.5, 107.0)
    ref = stats.ttest_ind(np.log([v for _, v in g]), lb, equal_var=False)
    w, n = ref.confidence_interval(0.95), ref.confidence_interval(0.90)
    between = (pct(w.low) + pct(n.low)) / 2
    o = judge(g, b, Rule(threshold_pct=between))
    assert o.verdict == INCONCLUSIVE and o.confidence == pytest.approx(0.95)
    assert judge(g, b, Rule(threshold_pct=pct(w.low) - 0.1)).verdict == GAIN


def test_the_first_decisive_look_is_final():
    rule = Rule(threshold_pct=5.0, min_reps=3, max_reps=6)
    t = reps(200.0, 202.0, 199.0, 100.0, 101.0, 99.0)     # a clear gain at look 3, then noise
    b = reps(100.0, 101.0, 99.0, 100.0, 101.0, 99.0)
    o = judge(t, b, rule)
    assert o.verdict == GAIN and o.look == 3 and (o.n_treatment, o.n_baseline) == (3, 3)
    # the baseline's later repetitions (another comparison's rounds) do not change it
    assert judge(t[:3], b, rule) == o


def test_looks_go_by_round_and_only_when_the_data_grew():
    rule = Rule(threshold_pct=5.0, min_reps=3, max_reps=5)
    # round 2 of the treatment is missing (kept out): its look at round 3 has 2 values, none;
    # round 4 brings the third
    t = [(1, 150.0), (3, 151.0), (4, 149.0)]
    b = reps(100.0, 100.5, 99.5, 100.2)
    o = judge(t, b, rule)
    assert o.look == 4 and (o.n_treatment, o.n_baseline) == (3, 4)
    # repetitions past the rule's maximum are not looked at
    assert judge(reps(150.0, 151.0, 149.0, start=6), reps(100.0, 100.5, 99.5, start=6), rule).n_treatment == 0


def test_an_undecided_comparison_says_how_many_repetitions_would_decide():
    rule = Rule(threshold_pct=10.0, min_reps=3, max_reps=5)
    o = judge(reps(100.0, 104.0, 97.0), reps(101.0, 96.0, 103.0), rule)
    assert o.verdict == INCONCLUSIVE and o.needed is not None and o.needed > 3
    assert f"about {o.needed} repetitions a side would decide" in o.reason and "straddles" in o.reason
    # with that many repetitions at the same spread it does decide
    rng = np.random.default_rng(3)
    sd = np.std(np.log([100.0, 104.0, 97.0]), ddof=1)
    many = judge(reps(*(100 * np.exp(rng.normal(0, sd, 40)))), reps(*(100 * np.exp(rng.normal(0, sd, 40)))),
                 Rule(threshold_pct=10.0, min_reps=o.needed + 5, max_reps=o.needed + 5))
    assert many.verdict == NO_DIFFERENCE
    # an estimate on the threshold itself: more repetitions help little
    from harness.verdicts.estimate import Estimate

    assert needed_reps(Estimate(math.log(1.10), 0.01, 3, 0.01, 3), rule, 3) is None
    o = judge(reps(110.0, 100.0, 120.0, 110.0), reps(100.0, 100.0, 100.0, 100.0), rule)
    assert o.verdict == INCONCLUSIVE and "sits on the +-10 % threshold" in o.reason
    # a huge spread: more than the limit, said as such (not "on the threshold")
    o = judge(reps(100.0, 400.0, 30.0), reps(100.0, 101.0, 99.0), rule)
    assert "more than 1000 repetitions a side would be needed" in o.reason


@pytest.mark.parametrize("paired", [False, True])
def test_a_verdict_without_its_explanation_is_the_same_verdict(paired):
    """``explain=False`` (what the simulations ask): every look's verdict, interval, level and
    counts as with it; only an inconclusive answer's reason and ``needed`` are left out."""
    from dataclasses import replace

    rng = np.random.default_rng(8)
    rule = Rule(threshold_pct=5.0, min_reps=3, max_reps=8)
    seen = set()
    for effect in (0.0, 0.04, 0.2) * 30:
        t = reps(*(1000 * np.exp(effect + rng.normal(0, 0.05, 8))))
        b = reps(*(1000 * np.exp(rng.normal(0, 0.05, 8))))
        full, bare = judge(t, b, rule, paired=paired), judge(t, b, rule, paired=paired, explain=False)
        assert bare == replace(full, reason="", needed=None), (full, bare)
        seen.add(full.verdict)
    assert seen == {GAIN, NO_DIFFERENCE, INCONCLUSIVE}


def test_a_threshold_override_replaces_the_runs():
    assert Rule.of_run({"threshold_pct": 12.0}).threshold_pct == 12.0
    assert Rule.of_run({"threshold_pct": 12.0}, 3.0).threshold_pct == 3.0
    assert Rule.of_run(None) == Rule()
    assert Rule.of_run({"repetitions": 5}).sequential is False
    assert Rule.of_run({"repetitions": "auto"}).max_reps == 10


def _needed_one_by_one(var_t, var_b, d, rule, start):
    """needed_reps as it was: every count in turn (1 up to 50, then 10 % apart)."""
    from harness.verdicts.estimate import Estimate
    from harness.verdicts.rule import NEEDED_LIMIT, _gap

    gap, equivalence = _gap(d, rule.threshold_pct)
    if gap <= 0.0:
        return None
    n = max(start, 2)
    while n <= NEEDED_LIMIT:
        if Estimate(d, var_t, n, var_b, n).half_width(rule.confidence_at(n, equivalence)) < gap:
            return n
        n = n + 1 if n < 50 else int(n * 1.1)
    return None


@settings(max_examples=400, deadline=None)
@given(var_t=st.floats(1e-7, 1.0), var_b=st.floats(1e-7, 1.0), d=st.floats(-0.4, 0.4),
       threshold=st.sampled_from([0.0, 5.0, 10.0]),
       looks=st.sampled_from([(3, 5), (3, 8), (4, 9), (5, 6), (6, 12), None]),
       rho=st.sampled_from([3.0, None]), start=st.integers(2, 80))
def test_needed_reps_is_the_first_count_that_decides(var_t, var_b, d, threshold, looks, rho, start):
    """The bracketing search past the last look finds the count trying each in turn finds
    (before the last look each count's own level, which need not fall, is tried in turn)."""
    rule = Rule(threshold_pct=threshold) if looks is None else Rule(threshold_pct=threshold, min_reps=looks[0],
                                                                    max_reps=looks[1], rho=rho)
    from harness.verdicts.estimate import Estimate

    e = Estimate(d, var_t, 2, var_b, 2)
    assert needed_reps(e, rule, start) == _needed_one_by_one(var_t, var_b, d, rule, start)


# --------------------------------------------------------------------------- paired (alternated runs)

@pytest.mark.parametrize("n,conf,seed", [(3, 0.95, 1), (5, 0.9512, 2), (8, 0.99, 3)])
def test_a_paired_look_is_scipys_one_sample_interval_of_the_windows_ratios(n, conf, seed):
    """Both sides measured in the same windows: the interval is the one-sample t interval of
    the per-window log ratios (scipy.stats.ttest_1samp), which a level the windows share
    leaves untouched."""
    rng = np.random.default_rng(seed)
    level = rng.lognormal(0, 0.3, n)                   # each window's own level, shared
    t = 1100 * level * rng.lognormal(0, 0.02, n)
    b = 1000 * level * rng.lognormal(0, 0.02, n)
    ref = stats.ttest_1samp(np.log(t) - np.log(b), 0.0).confidence_interval(conf)
    rule = Rule(threshold_pct=0.0, alpha=1 - conf)     # a fixed rule: one look at this level
    o = judge(reps(*t), reps(*b), rule, paired=True)
    assert o.confidence == pytest.approx(conf)
    assert (o.ci_low_pct, o.ci_high_pct) == pytest.approx((100 * math.expm1(ref.low), 100 * math.expm1(ref.high)),
                                                          rel=1e-9)
    # the same values judged as independent windows: the shared level is noise, far wider
    w = judge(reps(*t), reps(*b), rule)
    assert w.ci_high_pct - w.ci_low_pct > 3 * (o.ci_high_pct - o.ci_low_pct)


def test_paired_windows_pair_by_repetition_and_a_window_one_side_lost_counts_for_neither():
    rule = Rule(threshold_pct=5.0)
    t = [(1, 110.0), (2, 220.0), (3, 330.0), (5, 550.0)]       # window 4 lost on this side
    b = [(1, 100.0), (2, 200.0), (3, 300.0), (4, 999.0), (5, 500.0)]
    o = judge(t, b, rule, paired=True)
    assert (o.n_treatment, o.n_baseline) == (4, 4) and o.gain_pct == pytest.approx(10.0)
    assert o.verdict == GAIN and o.ci_low_pct == pytest.approx(10.0)    # every window +10 %: zero width
    o = judge([(1, 110.0), (2, 220.0)], b, rule, paired=True)
    assert o.verdict == INCONCLUSIVE and "fewer than 3 windows both sides count (2 and 2 counted)" in o.reason
    # lower is better: the ratio is read the other way
    assert judge(t, b, rule, higher_is_better=False, paired=True).verdict == LOSS


def test_an_undecided_paired_look_says_how_many_windows_would_decide():
    o = judge(reps(104.0, 98.0, 109.0), reps(100.0, 100.0, 100.0), Rule(threshold_pct=10.0), paired=True)
    assert o.verdict == INCONCLUSIVE and "of a window's ratio" in o.reason and "windows would decide" in o.reason
    diffs = np.log([1.04, 0.98, 1.09])
    # the count is the paired one: the ratios' variance, none on the other side
    from harness.verdicts.estimate import Estimate

    e = Estimate(float(diffs.mean()), float(np.var(diffs, ddof=1)), 3, 0.0, 3, paired=True)
    assert o.needed == needed_reps(e, Rule(threshold_pct=10.0), 4)
    assert o.needed is not None and o.needed > 3
