"""The stopping rule's error guarantee and power, measured by simulation (many seeded trials
with a known truth; harness.verdicts.simulate). docs/statistics.md documents these levels:

* per comparison, over all the looks of an auto run: a false gain in at most 2.5 % of
  no-effect comparisons, a false loss in at most 2.5 %, any wrong verdict in at most 5 %;
* a true effect just beyond the margin is called ``no difference`` in at most 5 % of
  comparisons (equivalence read from the 1 - 2 alpha interval), fixed or auto;
* across a run's family of m comparisons: a wrong verdict somewhere in at most m x 5 % of runs
  (no correction across comparisons: each keeps its own 5 %);
* a true +-20 % effect is decided the right way in at least 95 % of comparisons, never the
  wrong way: at the default threshold of 5 % with a repetition spread of about 1.10 (log-normal
  s.d. 5 %), and at make bench's 10 % with the spread of a quiet target (s.d. 3 %).

Each level is checked with 3 standard errors of slack for the simulation's own noise; peeking
at every look at 95 % (what a rule without spending would do) breaks the same level, so the
test can tell a rule that spends its error from one that does not."""

from __future__ import annotations

import math

import pytest

from harness.verdicts.rule import GAIN, LOSS, NO_DIFFERENCE, Rule
from harness.verdicts.simulate import simulate_comparisons, simulate_runs

pytestmark = pytest.mark.simulation     # make test runs it; make test-fast leaves it out

AUTO = dict(min_reps=3, max_reps=8)          # 6 looks
ALPHA = 0.05


def within(rate: float, level: float, trials: int) -> bool:
    return rate <= level + 3 * math.sqrt(level * (1 - level) / trials)


@pytest.mark.parametrize("model,spread", [("lognormal", 0.05), ("uniform", 0.25), ("outliers", 0.05),
                                          ("drift", 0.05)])
def test_without_an_effect_false_gains_and_losses_stay_within_the_level(model, spread):
    trials = 2000
    # threshold 0: every interval that misses 0 is a false gain or loss (the level is tight)
    for thr in (0.0, 5.0):
        t = simulate_comparisons(0.0, Rule(threshold_pct=thr, **AUTO), model=model, spread=spread,
                                 trials=trials, seed=11)
        assert within(t.rate(GAIN), ALPHA / 2, trials), (thr, t.verdicts)
        assert within(t.rate(LOSS), ALPHA / 2, trials), (thr, t.verdicts)
        assert within(t.wrong_rate, ALPHA, trials), (thr, t.verdicts)


def test_peeking_without_spending_breaks_the_level():
    """The same looks, each at 95 % (alpha x looks spent): false gains well above 2.5 %."""
    trials = 2000
    naive = Rule(threshold_pct=0.0, alpha=ALPHA * 6, rho=None, **AUTO)
    t = simulate_comparisons(0.0, naive, trials=trials, seed=11)
    assert t.rate(GAIN) > ALPHA / 2 + 3 * math.sqrt(ALPHA / 2 * (1 - ALPHA / 2) / trials), t.verdicts
    assert t.wrong_rate > ALPHA, t.verdicts


@pytest.mark.parametrize("effect", [5.05, -5.05])
def test_a_truth_just_beyond_the_margin_is_rarely_called_no_difference(effect):
    """Where the equivalence bound is tight (a small spread, a truth 0.05 points beyond the
    5 % margin): no difference in at most alpha of comparisons, with one look (about 3.8 %
    measured) and with six. Reading it from a 1 - 4 alpha interval (alpha doubled) breaks the
    level with one look, so the test tells the two apart."""
    trials = 2000
    for rule in (Rule(threshold_pct=5.0), Rule(threshold_pct=5.0, **AUTO)):
        t = simulate_comparisons(effect, rule, spread=0.01, trials=trials, seed=7)
        assert within(t.rate(NO_DIFFERENCE), ALPHA, trials), (rule, t.verdicts)
        assert within(t.wrong_rate, ALPHA, trials), (rule, t.verdicts)
    loose = simulate_comparisons(effect, Rule(threshold_pct=5.0, alpha=2 * ALPHA), spread=0.01, trials=trials, seed=7)
    assert not within(loose.rate(NO_DIFFERENCE), ALPHA, trials), loose.verdicts


@pytest.mark.parametrize("thr,spread", [(5.0, 0.05), (10.0, 0.03)])
@pytest.mark.parametrize("effect", [20.0, -20.0])
def test_a_true_20_percent_effect_is_decided(thr, spread, effect):
    """At the default threshold (5 %) and a spread of 1.10, and at make bench's 10 % on a quiet
    target (spread about 1.06): decided the right way, never the wrong way."""
    trials = 1000
    t = simulate_comparisons(effect, Rule(threshold_pct=thr, **AUTO), spread=spread, trials=trials, seed=5)
    right = GAIN if effect > 0 else LOSS
    assert t.rate(right) >= 0.95, t.verdicts
    assert t.wrong == 0, t.verdicts
    assert t.median_reps <= 5, t.median_reps


def test_a_family_like_make_bench_through_the_auto_loop():
    """Six comparisons sharing their baselines, rounds chosen by the real loop: no effect
    anywhere stays within the levels per comparison and per run; the expected truth on
    PostgreSQL (the 150 trick a small loss, one shared dialog a loss from 8 threads, identical
    at 1) is found on a quiet target, never contradicted."""
    rule = Rule(threshold_pct=5.0, **AUTO)
    null = simulate_runs({"trick150": 0.0, "shared": 0.0}, rule, model="uniform", spread=0.25, trials=300, seed=3)
    c = null.comparisons
    assert c.trials == 6 * 300
    assert within(c.rate(GAIN), ALPHA / 2, c.trials) and within(c.rate(LOSS), ALPHA / 2, c.trials), c.verdicts
    assert null.runs_with_wrong / null.runs <= 6 * ALPHA, null.runs_with_wrong
    bench = Rule(threshold_pct=10.0, min_reps=3, max_reps=5)
    truth = {"trick150": -3.0, "shared": {1: 0.0, 8: -70.0, 32: -88.0}}
    run = simulate_runs(truth, bench, spread=0.02, trials=100, seed=4, budget=40)
    assert run.comparisons.wrong == 0, run.comparisons.verdicts
    assert run.comparisons.decided_rate >= 5 / 6, run.comparisons.verdicts
    assert run.comparisons.verdicts[LOSS] == 200 and run.comparisons.verdicts[NO_DIFFERENCE] >= 300
    assert max(run.rounds) <= 5


# --------------------------------------------------------------------------- paired (alternated runs)

#: the machine's window level (docs/embedded.md: 8 to 9 % for the vCPU alone) and the noise left
#: inside a window, per side (alternating slices measured 5.4 % per window of the ratio: 3.8 % a side)
LEVEL, WITHIN = 0.10, 0.038


@pytest.mark.parametrize("model", ["lognormal", "outliers", "drift"])
def test_paired_windows_keep_the_level_without_an_effect(model):
    """Both sides in the same windows, judged on the windows' ratios over six looks: false gains
    and losses within 2.5 % each, any wrong verdict within 5 %, however large the level the
    windows share."""
    trials = 2000
    for thr in (0.0, 5.0):
        t = simulate_comparisons(0.0, Rule(threshold_pct=thr, **AUTO), model=model, spread=WITHIN, level=LEVEL,
                                 paired=True, trials=trials, seed=13)
        assert within(t.rate(GAIN), ALPHA / 2, trials), (thr, t.verdicts)
        assert within(t.rate(LOSS), ALPHA / 2, trials), (thr, t.verdicts)
        assert within(t.wrong_rate, ALPHA, trials), (thr, t.verdicts)


@pytest.mark.parametrize("effect,right", [(0.0, NO_DIFFERENCE), (20.0, GAIN), (-20.0, LOSS)])
def test_paired_windows_decide_what_separate_windows_cannot(effect, right):
    """make bench's threshold (10 %), 3 to 8 windows, the machine's level shared by both sides:
    no effect is no difference, +-20 % a gain or a loss, in most comparisons and never the wrong
    way. Each repetition in a window of its own (the present design, Welch), the same level and
    noise decide few."""
    trials, rule = 1000, Rule(threshold_pct=10.0, **AUTO)
    paired = simulate_comparisons(effect, rule, spread=WITHIN, level=LEVEL, paired=True, trials=trials, seed=17)
    apart = simulate_comparisons(effect, rule, spread=WITHIN, level=LEVEL, trials=trials, seed=17)
    assert paired.wrong == 0 and apart.wrong <= 0.01 * trials, (paired.verdicts, apart.verdicts)
    assert paired.rate(right) >= 0.85, paired.verdicts
    assert apart.rate(right) <= 0.6, apart.verdicts
