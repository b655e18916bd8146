"""matrices/bench.yaml's design by simulation: how often a `make bench` run decides at least 5 of
its 6 comparisons, for windows per thread count, the repetitions' spread they give, the time a
repetition takes, and the time budget; through the real auto loop
(harness.verdicts.simulate.simulate_runs: plan_round, fit_round, judge_all).

    PYTHONPATH=. python docs/findings/scripts/bench_design.py [--runs 400] [--overhead 2] [--spread quiet|measured|recent]

Spread: the log-normal s.d. per repetition measured on a quiet 2-core VM over 6 s windows (1
thread 4.8 %, 8 threads 3.5 %, 32 threads 2 %: docs/findings/window-length.md), scaled by
1/sqrt(window) (the 1-thread experiment there: 5.6-6.4 % at 6 s, 2.1-2.3 % at 18 s). A
repetition costs its warm-up, its window and ``--overhead`` seconds (swarm start and end, drain,
prepare: about 4 s before the swarm's end and the next start overlapped, 1.6 to 2 s since). ``--spread
measured`` takes the spreads of three `make bench` runs instead (1 / 8 / 32 threads: 3.4 % over
16 s, 3.7 % and 2.7 % over 6 s; docs/findings/bench-design.md); ``--spread recent`` those of six later runs
(4.8 % over 16 s, 4.4 % and 3.7 % over 6 s). Truth: PostgreSQL's (the 150 trick 0 / -2 / -4 %, one shared dialog 0 / -65 / -86 % at
1 / 8 / 32 threads)."""

from __future__ import annotations

import argparse

import numpy as np

from harness.verdicts.rule import Rule
from harness.verdicts.simulate import simulate_runs

TRUTH = {"trick150": {1: 0.0, 8: -2.0, 32: -4.0}, "shared": {1: 0.0, 8: -65.0, 32: -86.0}}
SD_AT_6S = {1: 0.048, 8: 0.035, 32: 0.02}
#: the spreads three make bench runs measured (2026-11-24), as s.d. over 6 s windows
SD_MEASURED_AT_6S = {1: 0.034 * (16 / 6) ** 0.5, 8: 0.037, 32: 0.027}
#: pooled over six consecutive make bench runs (2026-11-25; 1 thread over 16 s, 4.8 %; 8 and 32
#: threads over 6 s), each permutation's repetitions about its own mean
SD_RECENT_AT_6S = {1: 0.048 * (16 / 6) ** 0.5, 8: 0.044, 32: 0.037}
SPREADS = {"quiet": SD_AT_6S, "measured": SD_MEASURED_AT_6S, "recent": SD_RECENT_AT_6S}
WARMUP_S = 2.0


def simulate(windows: dict[int, float], max_reps: int, budget_s: float, runs: int, overhead_s: float,
             seed: int = 3, threshold: float = 10.0, sd_at_6s: dict[int, float] | None = None) -> dict:
    """``runs`` make bench runs with these windows (seconds per thread count) through
    harness.verdicts.simulate.simulate_runs, the spread scaled from ``sd_at_6s`` (default
    :data:`SD_AT_6S`)."""
    sd = {t: (sd_at_6s or SD_AT_6S)[t] * (6.0 / w) ** 0.5 for t, w in windows.items()}
    cost = {t: WARMUP_S + w + overhead_s for t, w in windows.items()}
    r = simulate_runs(TRUTH, Rule(threshold_pct=threshold, min_reps=3, max_reps=max_reps), spread=sd,
                      trials=runs, seed=seed, threads=tuple(windows), budget=budget_s, rep_cost=cost)
    p5 = r.runs_deciding(5)
    return {"sd": sd, "p5": p5, "p5_three_runs": p5 ** 3, "mean_decided": float(np.mean(r.decided)),
            "median_s": float(np.median(r.spent)), "p90_s": float(np.percentile(r.spent, 90)),
            "max_s": max(r.spent), "wrong": r.comparisons.wrong_rate}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=400)
    ap.add_argument("--overhead", type=float, default=2.0, help="seconds a repetition costs beyond its windows")
    ap.add_argument("--spread", choices=tuple(SPREADS), default="quiet",
                    help="the spreads assumed: the quiet-VM experiments', three make bench runs' (2026-11-24) "
                         "or six more recent ones' (2026-11-25)")
    a = ap.parse_args()
    sd_at_6s = SPREADS[a.spread]
    print("| windows s (1/8/32 threads) | max reps | budget | s.d. (1/8/32) | >= 5 of 6 | three runs in a row "
          "| decided (mean) | repetitions' time median / p90 / max | wrong |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for w1, w8, w32, mx, budget in [(6, 6, 6, 4, 540), (6, 6, 6, 5, 540), (16, 6, 6, 4, 540), (16, 6, 6, 5, 540),
                                    (16, 6, 6, 6, 540), (16, 8, 6, 5, 540), (20, 8, 6, 5, 540), (10, 10, 10, 5, 540)]:
        r = simulate({1: w1, 8: w8, 32: w32}, mx, budget, a.runs, a.overhead, sd_at_6s=sd_at_6s)
        sd = "/".join(f"{100 * r['sd'][t]:.1f} %" for t in (1, 8, 32))
        print(f"| {w1}/{w8}/{w32} | {mx} | {budget / 60:g} min | {sd} | {100 * r['p5']:.0f} % | "
              f"{100 * r['p5_three_runs']:.0f} % | {r['mean_decided']:.1f} | {r['median_s']:.0f} / {r['p90_s']:.0f} / "
              f"{r['max_s']:.0f} s | {100 * r['wrong']:.1f} % |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
