#!/usr/bin/env python
"""What a run's repetition-to-repetition spread follows (not a test): for each window figure
(the fsync probe beside the data, the CPU probe, the server's own commit latency), the
regression of the log receive rate on the log figure *within* each permutation (both centred
on the permutation's mean), pooled over the permutations of the runs given. Prints, per figure,
the pooled slope and correlation and the within-permutation s.d. of the log rate before and
after taking the figure out; the last line is one JSON object.

A figure the strategy itself moves (the commit latency: a window's rate and its commits'
latency are two sides of one queue) cannot correct a comparison between strategies; a large
correlation with it says where the spread is, not how to remove it. A figure from outside the
target (the probes) could, if it explained much.

It also splits the spread by time scale: the s.d. of the log rate between a permutation's
windows, against what each window's own per-second rates leave uncertain in its mean (their
s.d. over the square root of their number). What the first has beyond the second is a level a
window keeps for its whole length, which a longer window would not average away.

    .venv/bin/python docs/findings/scripts/spread_covariates.py results/20261126-115635-bench results/20261126-132513-bench
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))

FIGURES = ("storage_probe_ms", "cpu_speed", "commit_latency_ms")


def centred(run_dirs: list[Path], figure: str) -> tuple[list[float], list[float], int]:
    """(log figure, log rate) pairs centred per permutation, and the number of permutations."""
    xs: list[float] = []
    ys: list[float] = []
    groups = 0
    for run in run_dirs:
        for perm in sorted(p for p in run.iterdir() if p.is_dir() and not p.name.startswith(".")):
            pts = []
            for f in sorted(perm.glob("rep-*/summary.json")):
                s = json.loads(f.read_text())
                x, y = s.get(figure), s.get("receive_rate")
                if x and y and x > 0 and y > 0:
                    pts.append((math.log(x), math.log(y)))
            if len(pts) < 3:
                continue
            groups += 1
            mx = sum(p[0] for p in pts) / len(pts)
            my = sum(p[1] for p in pts) / len(pts)
            xs += [p[0] - mx for p in pts]
            ys += [p[1] - my for p in pts]
    return xs, ys, groups


def fit(xs: list[float], ys: list[float], groups: int) -> dict[str, float] | None:
    n = len(xs)
    sxx = sum(x * x for x in xs)
    syy = sum(y * y for y in ys)
    if n - groups < 3 or sxx == 0 or syy == 0:
        return None
    sxy = sum(x * y for x, y in zip(xs, ys))
    slope = sxy / sxx
    rss = sum((y - slope * x) ** 2 for x, y in zip(xs, ys))
    return {"n": n, "permutations": groups, "slope": round(slope, 3), "r": round(sxy / math.sqrt(sxx * syy), 3),
            "sd_pct": round(100 * math.sqrt(syy / (n - groups)), 2),
            "residual_sd_pct": round(100 * math.sqrt(rss / (n - groups - 1)), 2)}


def time_scales(run_dirs: list[Path]) -> dict[str, float] | None:
    """Pooled over permutations (3+ repetitions): the s.d. of the log rate between windows, the
    standard error of a window's mean from its per-second rates, and the level component."""
    between: list[float] = []
    within: list[float] = []
    for run in run_dirs:
        for perm in sorted(p for p in run.iterdir() if p.is_dir() and not p.name.startswith(".")):
            logs, errs = [], []
            for rep in sorted(perm.glob("rep-*")):
                s = json.loads((rep / "summary.json").read_text())
                ticks = [math.log(d["value"]) for d in map(json.loads, (rep / "samples.jsonl").open())
                         if d["phase"] == "measure" and d["family"] == "throughput"
                         and d["metric"] == "received_per_s" and d["value"] > 0]
                if s.get("receive_rate") and len(ticks) >= 3:
                    logs.append(math.log(s["receive_rate"]))
                    errs.append(statistics.stdev(ticks) ** 2 / len(ticks))
            if len(logs) >= 3:
                between.append(statistics.variance(logs))
                within.append(statistics.mean(errs))
    if not between:
        return None
    b, w = statistics.mean(between), statistics.mean(within)
    return {"permutations": len(between), "between_windows_sd_pct": round(100 * math.sqrt(b), 2),
            "window_mean_se_pct": round(100 * math.sqrt(w), 2),
            "level_sd_pct": round(100 * math.sqrt(max(b - w, 0.0)), 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="run directories (results/<run-id>)")
    args = ap.parse_args()
    out = {}
    for figure in FIGURES:
        res = fit(*centred(args.runs, figure))
        out[figure] = res
        if res is None:
            print(f"{figure:18s} too few repetitions with this figure")
            continue
        print(f"{figure:18s} {res['n']} repetitions of {res['permutations']} permutations: slope {res['slope']:+.2f}, "
              f"r {res['r']:+.2f}; within-permutation s.d. {res['sd_pct']:.1f} % -> {res['residual_sd_pct']:.1f} % "
              "without it")
    scales = time_scales(args.runs)
    if scales:
        print(f"time scales, {scales['permutations']} permutations: between windows {scales['between_windows_sd_pct']:.1f} %, "
              f"a window's mean from its per-second rates {scales['window_mean_se_pct']:.1f} %, "
              f"level kept for a whole window {scales['level_sd_pct']:.1f} %")
    print(json.dumps({"runs": [str(r) for r in args.runs], "figures": out, "time_scales": scales}))


if __name__ == "__main__":
    main()
