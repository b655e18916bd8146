#!/usr/bin/env python3
"""Measure matrices/techniques.yaml (not a test): ``ssbench bench`` on it, N times in a row, and
the figures its header and docs/matrices.md quote (issue 29).

Per run: the wall time of ``ssbench bench`` (run + analysis) and the load average before and
after; per permutation, the median and range over its repetitions of the receive rate, the
end-to-end p50/p99, the activation tasks started per second and started/ended inside the window,
and the dialogs ended inside the window; then the run's key table, as the terminal prints it
(technique rows included, "not exercised" ones with how to exercise them). Each run gets its own directory under --out; the embedded server is the one of
SSBENCH_PGDATA (give every engineer's run its own).

    SSBENCH_PGDATA=/var/tmp/ssbench-$USER/pg .venv/bin/python docs/findings/scripts/techniques_matrix.py --runs 3 \\
        --out /var/tmp/ssbench-$USER/techniques
    .venv/bin/python docs/findings/scripts/techniques_matrix.py --summarize RUN_DIR [RUN_DIR ...]   # no new run
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))

FIGURES = (("receive msg/s", lambda s: s["receive_rate"]), ("e2e p50 ms", lambda s: s["e2e_latency_ms"]["p50"]),
           ("e2e p99 ms", lambda s: s["e2e_latency_ms"]["p99"]),
           ("tasks started/s", lambda s: s.get("activation_tasks_started_per_s")),
           ("tasks started in window", lambda s: s.get("activation_tasks_started_in_window")),
           ("tasks ended in window", lambda s: s.get("activation_tasks_ended_in_window")),
           ("dialogs ended in window", lambda s: s.get("dialogs_ended_in_window")))


def spread(values: list[float]) -> str:
    vals = [v for v in values if v is not None]
    if not vals:
        return "–"
    fmt = (lambda v: f"{v:.3g}") if max(abs(v) for v in vals) < 100 else (lambda v: f"{v:,.0f}")
    return f"{fmt(statistics.median(vals))} [{fmt(min(vals))}–{fmt(max(vals))}]"


def summarize(run: Path) -> None:
    from harness.verdicts import read_answer

    perms: dict[str, list[dict]] = {}
    for p in sorted(run.glob("*/rep-*/summary.json")):
        perms.setdefault(p.parent.parent.name, []).append(json.loads(p.read_text()))
    print(f"\n== {run}: per permutation, median [min–max] over repetitions")
    for perm, reps in perms.items():
        statuses = ",".join(sorted({s["status"] for s in reps}))
        print(f"{perm} (n={len(reps)}, {statuses})")
        print("   " + "; ".join(f"{name} {spread([f(s) for s in reps])}" for name, f in FIGURES))
    answer = read_answer(run / "report")
    if answer is not None:
        answer.render(sys.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--out", type=Path, default=Path("/var/tmp/ssbench-techniques"))
    ap.add_argument("--matrix", default=str(REPO / "matrices" / "techniques.yaml"))
    ap.add_argument("--summarize", nargs="+", type=Path, metavar="RUN_DIR")
    args = ap.parse_args()
    if args.summarize:
        for run in args.summarize:
            summarize(run)
        return 0
    walls = []
    for k in range(1, args.runs + 1):
        out = args.out / f"run{k}-{time.strftime('%Y%m%dT%H%M%S')}"
        before = os.getloadavg()
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, "-m", "harness.cli", "bench", "--matrix", args.matrix, "--out", str(out)],
                           cwd=REPO, capture_output=True, text=True)
        walls.append(time.monotonic() - t0)
        after = os.getloadavg()
        print(f"run {k}: exit {r.returncode}, {walls[-1] / 60:.1f} min, load average {before[0]:.1f} before, "
              f"{after[0]:.1f} after ({after[2]:.1f} over 15 min)", flush=True)
        if r.returncode != 0:
            print(r.stderr[-3000:], file=sys.stderr)
            return r.returncode
        summarize(out)
    if len(walls) > 1:
        print(f"wall time of ssbench bench: median {statistics.median(walls) / 60:.1f} min "
              f"[{min(walls) / 60:.1f}–{max(walls) / 60:.1f}] over {len(walls)} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
