#!/usr/bin/env python3
"""What ``ssbench analyze`` costs, side by side: this checkout against another (``--before``: a
checkout of the baseline revision with its own .venv), and this checkout with other settings
(``--variant "no CDS:SSBENCH_SPARK_CDS=0"``: the Spark tuning of harness/analysis/spark.py, one
switch at a time). Not a test.

Each round runs every variant as a fresh process on every run, in alternating order, and
measures the wall time and the CPU seconds of everything the command started (the JVM included)
in a cgroup of its own (as root; else the children's rusage). It prints each variant's median
and range and the ratio of the medians to this checkout's, and checks that every variant's key
table (answer.json) is the same.

Runs: the given run directories, and ``--paper``: a synthetic run of the paper's 528
permutations x 3 repetitions with samples (tests/support/synth.py). A summary written by this
checkout is read by the baseline only if it understands its schema: each run is analysed by
``--before`` as written by the baseline's own results model (``--before-runs``: the same runs in
its format, e.g. synthesized by its own synth.py).

    .venv/bin/python benchmarks/analysis_time.py --paper --rounds 3 --before /tmp/base --before-runs /tmp/base-runs
    .venv/bin/python benchmarks/analysis_time.py --rounds 3 --variant "no CDS:SSBENCH_SPARK_CDS=0" \
        --variant "codegen:SSBENCH_SPARK_CODEGEN=1" results/20261128-071725-bench
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]    # tests/support: test data and helpers, not the package

from support import synth  # noqa: E402
from support.cpu_accounting import CpuGroup  # noqa: E402

#: the paper's matrix (Table 1: 528 permutations), 3 repetitions of 20 measured seconds
PAPER = synth.SynthSpec(name="paper", repetitions=3, warmup_seconds=2, measure_seconds=20, drain_seconds=2)


def run_once(python: str, cwd: Path, run: Path, out: Path, env: dict[str, str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one fresh ``ssbench analyze``."""
    cmd = [python, "-m", "harness.cli", "analyze", "-q", str(run), "--out", str(out)]
    group = CpuGroup.create(f"analysis-time-{os.getpid()}")
    t0 = time.monotonic()
    if group is None:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(cmd, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, time.monotonic() - t0
    join = f"echo $$ > {group.path / 'cgroup.procs'} && exec \"$@\""
    subprocess.run(["sh", "-c", join, "sh", *cmd], cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL)
    wall = time.monotonic() - t0
    deadline = time.monotonic() + 60
    while not group.empty() and time.monotonic() < deadline:   # a JVM or plot helper still going
        time.sleep(0.1)
    cpu = group.seconds()
    group.remove()
    return cpu, wall


def key_table(out: Path) -> list[dict]:
    doc = json.loads((out / "answer.json").read_text())
    return [{k: r.get(k) for k in ("comparison", "baseline", "perm_id", "gain_pct", "verdict")}
            for s in doc.get("sections", []) for r in s.get("rows", [])]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="*", type=Path)
    ap.add_argument("--paper", action="store_true", help="add a synthetic paper-sized run (528 x 3)")
    ap.add_argument("--before", type=Path, help="a checkout of the baseline revision, with its .venv")
    ap.add_argument("--before-runs", type=Path, nargs="*", default=None,
                    help="the runs as the baseline reads them, in the order of the runs (and the paper run last)")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME:VAR=VALUE[,VAR=VALUE]",
                    help="this checkout with these environment variables set")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", type=Path, help="write the figures here too")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ssbench-analysis-time-"))
    runs = list(args.runs)
    if args.paper:
        t0 = time.monotonic()
        runs.append(synth.synthesize(work / "results", PAPER, run_id="20261128-000000-paper"))
        print(f"paper-sized run synthesized in {time.monotonic() - t0:.0f} s", flush=True)
    variants = {"this": (sys.executable, REPO, {}, runs)}
    for spec in args.variant:
        name, _, assignments = spec.partition(":")
        variants[name] = (sys.executable, REPO, dict(a.split("=", 1) for a in assignments.split(",") if a), runs)
    if args.before:
        variants["before"] = (str(args.before / ".venv" / "bin" / "python"), args.before, {},
                              args.before_runs or runs)
    figures: dict[str, dict] = {}
    for i, run in enumerate(runs):
        got: dict[str, list[tuple[float, float]]] = {v: [] for v in variants}
        answers = {}
        for r in range(args.rounds):
            order = list(variants) if r % 2 == 0 else list(reversed(variants))
            for v in order:
                python, cwd, env, vruns = variants[v]
                out = work / f"report-{i}-{v.replace(' ', '_').replace(',', '')}"
                cpu, wall = run_once(python, cwd, vruns[i], out, {**os.environ, **env})
                got[v].append((cpu, wall))
                answers[v] = key_table(out)
                print(f"{run.name} round {r + 1} {v:14s} cpu {cpu:6.1f} s  wall {wall:6.1f} s  "
                      f"load {os.getloadavg()[0]:.2f}", flush=True)
        med = {v: (statistics.median(c for c, _ in got[v]), statistics.median(w for _, w in got[v])) for v in got}
        figures[run.name] = {v: {"cpu_median_s": round(med[v][0], 1), "wall_median_s": round(med[v][1], 1),
                                 "cpu_range_s": [round(min(c for c, _ in got[v]), 1), round(max(c for c, _ in got[v]), 1)],
                                 "wall_range_s": [round(min(w for _, w in got[v]), 1), round(max(w for _, w in got[v]), 1)],
                                 "cpu_ratio_to_this": round(med[v][0] / med["this"][0], 3),
                                 "wall_ratio_to_this": round(med[v][1] / med["this"][1], 3)} for v in got}
        figures[run.name]["same_key_table"] = all(a == answers["this"] for a in answers.values())
        print(json.dumps({run.name: figures[run.name]}, indent=1), flush=True)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1) + "\n")
    return 0 if all(f["same_key_table"] for f in figures.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
