"""matrices/bench.yaml's design by simulation: how often a `make bench` run decides at least 5 of
its 6 comparisons, for windows per thread count, the repetitions' spread they give, the time a
repetition takes, and the time budget; through the real auto loop (plan_round, round_fits,
judge_all), as harness.verdicts.simulate does for one spread.

    PYTHONPATH=. python benchmarks/bench_design.py [--runs 400] [--overhead 4]

Spread: the log-normal s.d. per repetition measured on a quiet 2-core VM over 6 s windows (1
thread 4.8 %, 8 threads 3.5 %, 32 threads 2 %: docs/embedded.md, "Windows"), scaled by
1/sqrt(window) (the 1-thread experiment there: 5.6-6.4 % at 6 s, 2.1-2.3 % at 18 s). A
repetition costs its warm-up, its window and ``--overhead`` seconds (swarm start and end, drain,
prepare). Truth: PostgreSQL's (the 150 trick 0 / -2 / -4 %, one shared dialog 0 / -65 / -86 % at
1 / 8 / 32 threads)."""

from __future__ import annotations

import argparse
from collections import Counter

import numpy as np

from harness.verdicts.auto import plan_round, round_fits
from harness.verdicts.pairs import judge_all
from harness.verdicts.rule import Rule
from harness.verdicts.simulate import _row, _sample, wrong

TRUTH = {"trick150": {1: 0.0, 8: -2.0, 32: -4.0}, "shared": {1: 0.0, 8: -65.0, 32: -86.0}}
SD_AT_6S = {1: 0.048, 8: 0.035, 32: 0.02}
WARMUP_S = 2.0


def simulate(windows: dict[int, float], max_reps: int, budget_s: float, runs: int, overhead_s: float,
             seed: int = 3, threshold: float = 10.0) -> dict:
    rng = np.random.default_rng(seed)
    rule = Rule(threshold_pct=threshold, min_reps=3, max_reps=max_reps)
    sd = {t: SD_AT_6S[t] * (6.0 / w) ** 0.5 for t, w in windows.items()}
    cost = {t: WARMUP_S + w + overhead_s for t, w in windows.items()}
    decided, times, wrongs = Counter(), [], 0
    for _ in range(runs):
        rows = {f"t{t}-{s}": _row(t, s) for t in windows for s in ("per_thread", "trick150", "shared")}
        data = {pid: _sample(rng, "lognormal", sd[r["threads"]], TRUTH.get(r["dialogs"], {}).get(r["threads"], 0.0),
                             max_reps) for pid, r in rows.items()}
        rnd, spent, n = 1, 0.0, 0
        while True:
            plan = plan_round(rnd, list(rows), list(rows.values()), rule)
            if plan.stop or not plan.perm_ids or rnd > max_reps:
                break
            if rnd > rule.min_reps and not round_fits(spent, len(plan.perm_ids), spent / n, budget_s):
                break
            for pid in plan.perm_ids:
                r, v = data[pid][rnd - 1]
                rows[pid]["rep_numbers"].append(r)
                rows[pid]["rep_statuses"].append("ok")
                rows[pid]["receive_rate_values"].append(v)
                spent, n = spent + cost[rows[pid]["threads"]], n + 1
            rnd += 1
        judged = judge_all(list(rows.values()), default=rule)
        decided[sum(j.outcome.verdict != "inconclusive" for j in judged)] += 1
        wrongs += sum(wrong(j.outcome.verdict, TRUTH[j.pairing.value][j.pairing.treatment["threads"]], threshold)
                      for j in judged)
        times.append(spent)
    p5 = sum(v for k, v in decided.items() if k >= 5) / runs
    return {"sd": sd, "p5": p5, "p5_three_runs": p5 ** 3, "mean_decided": sum(k * v for k, v in decided.items()) / runs,
            "median_s": float(np.median(times)), "p90_s": float(np.percentile(times, 90)), "max_s": max(times),
            "wrong": wrongs / (6 * runs)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=400)
    ap.add_argument("--overhead", type=float, default=4.0, help="seconds a repetition costs beyond its windows")
    a = ap.parse_args()
    print("| windows s (1/8/32 threads) | max reps | budget | s.d. (1/8/32) | >= 5 of 6 | three runs in a row "
          "| decided (mean) | repetitions' time median / p90 / max | wrong |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for w1, w8, w32, mx, budget in [(6, 6, 6, 4, 510), (6, 6, 6, 5, 540), (16, 6, 6, 4, 540), (16, 6, 6, 5, 540),
                                    (14, 8, 6, 4, 540), (20, 10, 6, 4, 540), (10, 10, 10, 5, 540)]:
        r = simulate({1: w1, 8: w8, 32: w32}, mx, budget, a.runs, a.overhead)
        sd = "/".join(f"{100 * r['sd'][t]:.1f} %" for t in (1, 8, 32))
        print(f"| {w1}/{w8}/{w32} | {mx} | {budget / 60:g} min | {sd} | {100 * r['p5']:.0f} % | "
              f"{100 * r['p5_three_runs']:.0f} % | {r['mean_decided']:.1f} | {r['median_s']:.0f} / {r['p90_s']:.0f} / "
              f"{r['max_s']:.0f} s | {100 * r['wrong']:.1f} % |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
