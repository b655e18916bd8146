"""The stopping rule's error rates and power, and the fixed rule it replaced, by simulation.

    PYTHONPATH=. python benchmarks/stopping_rule.py [--trials 2000] [--runs 300]

Every repetition's rate is 1000 x (1 + effect) x noise, independent per repetition
(:mod:`harness.verdicts.simulate`). Three tables, quoted by docs/statistics.md:

1. no effect, one comparison: how often each rule calls a false gain or loss (and no
   difference), by noise model. "bootstrap, 3 reps" is the rule ssbench used before (percentile
   bootstrap of the ratio of medians, 95 %, 4000 resamples: computed here with
   ``scipy.stats.bootstrap``, which it matched exactly); "Welch, fixed" is the new rule looking
   once; "auto 3-8" the new rule looking after every round from 3 to 8; "peeking 3-8" the same
   looks each at 95 % (no spending: what not to do);
1b. a truth just beyond the margin (+-5.05 % at 5 %): how often each rule calls it no
   difference (a wrong verdict; equivalence at level alpha reads the 1 - 2 alpha interval), and
   the rule spending twice alpha on it;
2. a true +-20 % effect, the auto rule: how often and how fast it is decided;
3. families like make bench's (6 comparisons sharing baselines, through the real auto loop):
   no effect anywhere, and the expected truth on PostgreSQL, with and without a time budget.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.verdicts.rule import GAIN, LOSS, NO_DIFFERENCE, Rule, decide  # noqa: E402
from harness.verdicts.simulate import NOISE_MODELS, simulate_comparisons, simulate_runs  # noqa: E402

MODELS = [("lognormal", 0.03), ("lognormal", 0.05), ("lognormal", 0.15), ("uniform", 0.25), ("outliers", 0.05),
          ("drift", 0.05)]


def former_rule(t, b, threshold: float) -> tuple[float, float, float, str]:
    """The rule ssbench used before the stopping rule, by its reference implementation: the
    gain of the median (percent), its 95 % percentile-bootstrap interval (4000 resamples, seed
    20261122) and the verdict against +-threshold."""
    from scipy import stats

    t, b = np.asarray(t, dtype=float), np.asarray(b, dtype=float)
    res = stats.bootstrap((t, b), lambda x, y, axis=-1: np.median(x, axis=axis) / np.median(y, axis=axis),
                          vectorized=True, paired=False, method="percentile", n_resamples=4000,
                          confidence_level=0.95, rng=np.random.default_rng(20261122))
    lo, hi = 100 * (res.confidence_interval.low - 1), 100 * (res.confidence_interval.high - 1)
    return 100 * (np.median(t) / np.median(b) - 1), lo, hi, decide(lo, hi, threshold)


def bootstrap_rule(threshold: float, reps: int, model: str, spread: float, trials: int, seed: int) -> dict:
    """The former fixed rule's verdicts on ``trials`` no-effect comparisons."""
    rng = np.random.default_rng(seed)
    counts = {GAIN: 0, LOSS: 0, NO_DIFFERENCE: 0}
    for _ in range(trials):
        t = 1000 * NOISE_MODELS[model](rng, reps, spread)
        b = 1000 * NOISE_MODELS[model](rng, reps, spread)
        v = former_rule(t, b, threshold)[3]
        if v in counts:
            counts[v] += 1
    return {k: v / trials for k, v in counts.items()}


def pct(x: float) -> str:
    return f"{100 * x:.2f} %"


def table1(trials: int, out: dict) -> None:
    print("\n## 1. No effect, one comparison: false gain / false loss / no difference")
    for thr in (5.0, 10.0):
        print(f"\nthreshold {thr:g} %\n")
        print("| noise | bootstrap, 3 reps (before) | Welch, fixed 3 | auto 3-8 | peeking 3-8 (no spending) |")
        print("| --- | --- | --- | --- | --- |")
        for model, spread in MODELS:
            row = {"bootstrap3": bootstrap_rule(thr, 3, model, spread, min(trials, 1000), 7)}
            for name, rule in (("welch3", Rule(threshold_pct=thr)),
                               ("auto", Rule(threshold_pct=thr, min_reps=3, max_reps=8)),
                               ("peeking", Rule(threshold_pct=thr, min_reps=3, max_reps=8, alpha=0.30, rho=None))):
                t = simulate_comparisons(0.0, rule, model=model, spread=spread, trials=trials, seed=7)
                row[name] = {GAIN: t.rate(GAIN), LOSS: t.rate(LOSS), NO_DIFFERENCE: t.rate(NO_DIFFERENCE)}
            out.setdefault("no_effect", []).append({"threshold": thr, "model": model, "spread": spread, **row})
            cells = [" / ".join(pct(row[k][v]) for v in (GAIN, LOSS, NO_DIFFERENCE))
                     for k in ("bootstrap3", "welch3", "auto", "peeking")]
            print(f"| {model} {spread:g} | " + " | ".join(cells) + " |")


def table1b(trials: int, out: dict) -> None:
    print("\n## 1b. A truth just beyond the margin (5 %): false no difference (bound 5 %)\n")
    print("| truth | noise | Welch, fixed 3 | auto 3-8 | fixed 3, alpha 10 % |")
    print("| --- | --- | --- | --- | --- |")
    for effect in (5.05, -5.05):
        for spread in (0.01, 0.03):
            row = {}
            for name, rule in (("welch3", Rule(threshold_pct=5.0)), ("auto", Rule(threshold_pct=5.0, min_reps=3, max_reps=8)),
                               ("welch3_alpha10", Rule(threshold_pct=5.0, alpha=0.10))):
                row[name] = simulate_comparisons(effect, rule, spread=spread, trials=trials, seed=7).rate(NO_DIFFERENCE)
            out.setdefault("beyond_margin", []).append({"effect": effect, "spread": spread, **row})
            print(f"| {effect:+g} % | log-normal {spread:g} | " + " | ".join(pct(row[k]) for k in row) + " |")


def table2(trials: int, out: dict) -> None:
    print("\n## 2. A true +-20 % effect, auto 3-8: decided the right way / wrong / median repetitions\n")
    print("| threshold | noise | +20 % | -20 % |")
    print("| --- | --- | --- | --- |")
    for thr in (5.0, 10.0):
        for spread in (0.02, 0.03, 0.05, 0.10):
            cells = []
            for effect, right in ((20.0, GAIN), (-20.0, LOSS)):
                t = simulate_comparisons(effect, Rule(threshold_pct=thr, min_reps=3, max_reps=8), spread=spread,
                                         trials=trials, seed=5)
                cells.append(f"{pct(t.rate(right))}, wrong {t.wrong}, {t.median_reps:g} reps")
                out.setdefault("power", []).append({"threshold": thr, "spread": spread, "effect": effect,
                                                    "right": t.rate(right), "wrong": t.wrong,
                                                    "median_reps": t.median_reps})
            print(f"| {thr:g} % | log-normal {spread:g} | " + " | ".join(cells) + " |")


def table3(runs: int, out: dict) -> None:
    print("\n## 3. Families like make bench's (6 comparisons), through the auto loop\n")
    print("| truth | rule | noise | budget (reps) | decided | wrong verdicts | runs with a wrong verdict | "
          "median rounds |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    truth = {"trick150": -3.0, "shared": {1: 0.0, 8: -70.0, 32: -88.0}}
    cases = [("no effect", {"trick150": 0.0, "shared": 0.0}, 5.0, 8, "uniform", 0.25, None),
             ("no effect", {"trick150": 0.0, "shared": 0.0}, 5.0, 8, "lognormal", 0.15, None),
             ("no effect", {"trick150": 0.0, "shared": 0.0}, 10.0, 5, "lognormal", 0.05, None)]
    # the former bench.yaml: 3 to 4 repetitions, +-10 %, 8.5 minutes (about 31 repetitions at 16 s each);
    # bench.yaml now, windows per thread count: benchmarks/bench_design.py
    cases += [("PostgreSQL's", truth, 10.0, 4, "lognormal", s, b) for s in (0.02, 0.03, 0.05) for b in (31, 34, None)]
    for label, effects, thr, mx, model, spread, budget in cases:
        r = simulate_runs(effects, Rule(threshold_pct=thr, min_reps=3, max_reps=mx), model=model, spread=spread,
                          trials=runs, seed=9, budget=budget)
        c = r.comparisons
        out.setdefault("families", []).append({"truth": label, "threshold": thr, "max": mx, "model": model,
                                               "spread": spread, "budget_reps": budget,
                                               "decided": c.decided_rate, "wrong": c.wrong_rate,
                                               "runs_with_wrong": r.runs_with_wrong / r.runs,
                                               "median_rounds": float(np.median(r.rounds))})
        print(f"| {label} | +-{thr:g} %, 3-{mx} | {model} {spread:g} | {budget or '-'} | {pct(c.decided_rate)} | "
              f"{pct(c.wrong_rate)} | {pct(r.runs_with_wrong / r.runs)} | {np.median(r.rounds):g} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=2000, help="comparisons per cell of tables 1 and 2")
    ap.add_argument("--runs", type=int, default=300, help="runs per row of table 3")
    args = ap.parse_args()
    t0 = time.monotonic()
    out: dict = {}
    table1(args.trials, out)
    table1b(args.trials, out)
    table2(args.trials, out)
    table3(args.runs, out)
    print(f"\n{time.monotonic() - t0:.0f} s")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
