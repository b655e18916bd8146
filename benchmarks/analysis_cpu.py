#!/usr/bin/env python3
"""What a local ``ssbench analyze`` of a small run costs in CPU, with Spark's code generation
(SSBENCH_SPARK_CODEGEN=1) and without it (the default for small inputs: interpreted
expressions, harness.analysis.spark.SMALL_INPUT_SQL). Not a test.

Each round runs both variants as fresh processes, in alternating order, and measures the CPU
seconds of everything the command started (the JVM included) in a cgroup of its own (cgroup v1
``cpuacct`` or v2, as root); without a writable cgroup, the children's rusage (a JVM its
command did not wait for is then missed, and the script says so). It prints each variant's
median, range and wall time, the ratio of the medians, and checks that both variants' CSV
tables are the same, cell for cell.

    .venv/bin/python benchmarks/analysis_cpu.py --rounds 4
    .venv/bin/python benchmarks/analysis_cpu.py --rounds 3 results/20261126-160815-bench
"""

from __future__ import annotations

import argparse
import csv
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
sys.path[:0] = [str(REPO), str(REPO / "tests")]    # tests/support/synth.py: test data, not the package

from support import synth  # noqa: E402
from support.cpu_accounting import CpuGroup  # noqa: E402

VARIANTS = {"codegen": {"SSBENCH_SPARK_CODEGEN": "1"}, "interpreted": {"SSBENCH_SPARK_CODEGEN": "0"}}


def run_once(run: Path, out: Path, env: dict[str, str]) -> tuple[float, float, bool]:
    """(CPU seconds, wall seconds, whether a cgroup counted them) of one fresh analysis."""
    cmd = [sys.executable, "-m", "harness.cli", "analyze", "-q", str(run), "--out", str(out)]
    group = CpuGroup.create(f"analysis-cpu-{os.getpid()}")
    t0 = time.monotonic()
    if group is None:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(cmd, cwd=REPO, env=env, check=True, stdout=subprocess.DEVNULL)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime,
                time.monotonic() - t0, False)
    # the child joins the cgroup before it starts anything, so all it starts is counted
    join = f"echo $$ > {group.path / 'cgroup.procs'} && exec \"$@\""
    subprocess.run(["sh", "-c", join, "sh", *cmd], cwd=REPO, env=env, check=True, stdout=subprocess.DEVNULL)
    wall = time.monotonic() - t0
    # what the command left behind (a plot helper, a JVM) still counts, until it is gone
    deadline = time.monotonic() + 60
    while not group.empty() and time.monotonic() < deadline:
        time.sleep(0.1)
    left = time.monotonic() - t0 - wall
    if left > 0.5:
        print(f"  (its processes outlived the command by {left:.1f} s)", flush=True)
    cpu = group.seconds()
    group.remove()
    return cpu, wall, True


def tables(report: Path) -> dict[str, list[list[str]]]:
    out = {}
    for p in sorted((report / "tables").glob("*.csv")):
        with p.open(newline="") as f:
            out[p.name] = list(csv.reader(f))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="*", type=Path, help="run directories (default: a synthesized 12-repetition run)")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--json", type=Path, help="write the figures here too")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ssbench-analysis-cpu-"))
    runs = args.runs or [synth.synthesize(work / "results", synth.small_spec(name="cpu", repetitions=3),
                                          run_id="20261126-000000-cpu")]
    figures = {}
    for run in runs:
        got: dict[str, list[tuple[float, float]]] = {v: [] for v in VARIANTS}
        counted = True
        for r in range(args.rounds):
            order = list(VARIANTS) if r % 2 == 0 else list(reversed(VARIANTS))
            for v in order:
                cpu, wall, counted_here = run_once(run, work / f"report-{v}", {**os.environ, **VARIANTS[v]})
                counted &= counted_here
                got[v].append((cpu, wall))
                print(f"{run.name} round {r + 1} {v:12s} cpu {cpu:6.1f} s  wall {wall:5.1f} s  "
                      f"load {os.getloadavg()[0]:.2f}", flush=True)
        same = tables(work / "report-codegen") == tables(work / "report-interpreted")
        med = {v: statistics.median(c for c, _ in got[v]) for v in VARIANTS}
        figures[run.name] = {
            v: {"cpu_median_s": round(med[v], 2), "cpu_min_s": round(min(c for c, _ in got[v]), 2),
                "cpu_max_s": round(max(c for c, _ in got[v]), 2),
                "wall_median_s": round(statistics.median(w for _, w in got[v]), 2)} for v in VARIANTS}
        figures[run.name]["cpu_ratio_interpreted_to_codegen"] = round(med["interpreted"] / med["codegen"], 3)
        figures[run.name]["tables_identical"] = same
        figures[run.name]["cpu_counted_by"] = "cgroup" if counted else "rusage of waited-for children"
        print(json.dumps({run.name: figures[run.name]}, indent=1))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1) + "\n")
    return 0 if all(f["tables_identical"] for f in figures.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
