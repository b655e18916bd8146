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
its format, e.g. synthesized by its own synth.py). ``--loud`` runs it without ``-q`` and counts
the lines printed before the key table too (benchmarks/analyze_bench.py's timing).

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


def run_once(python: str, cwd: Path, run: Path, out: Path, env: dict[str, str],
             options: tuple[str, ...] = ("-q",)) -> dict:
    """One fresh ``ssbench analyze RUN --out OUT OPTIONS``: its CPU seconds (everything it
    started, the JVM included: a cgroup as root, else the children's rusage, which misses a JVM
    not waited for), wall seconds, stdout and stderr (in files: a JVM left running would hold a
    pipe open)."""
    cmd = [python, "-m", "harness.cli", "analyze", *options, str(run), "--out", str(out)]
    group = CpuGroup.create(f"analysis-time-{os.getpid()}")
    with tempfile.TemporaryFile("w+") as so, tempfile.TemporaryFile("w+") as se:
        t0 = time.monotonic()
        if group is None:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            rc = subprocess.run(cmd, cwd=cwd, env=env, stdout=so, stderr=se).returncode
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu, wall = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, time.monotonic() - t0
        else:
            join = f"echo $$ > {group.path / 'cgroup.procs'} && exec \"$@\""
            rc = subprocess.run(["sh", "-c", join, "sh", *cmd], cwd=cwd, env=env, stdout=so, stderr=se).returncode
            wall = time.monotonic() - t0
            deadline = time.monotonic() + 60
            while not group.empty() and time.monotonic() < deadline:   # a JVM or plot helper still going
                time.sleep(0.1)
            cpu = group.seconds()
            group.remove()
        so.seek(0)
        se.seek(0)
        stdout, stderr = so.read(), se.read()
    if rc != 0:
        sys.stderr.write(stderr[-4000:])
        raise SystemExit(f"ssbench analyze {run} failed ({rc})")
    return {"cpu_s": round(cpu, 1), "wall_s": round(wall, 1), "stdout": stdout, "stderr": stderr}


def lines_before_key_table(timed: dict) -> int:
    """What a person reads before the answer: the log, Spark's, the diagnosis (stderr), the
    report's path (stdout up to the key table)."""
    out = timed["stdout"].splitlines()
    return len(timed["stderr"].splitlines()) + next((i for i, ln in enumerate(out) if ln.startswith("Key results")),
                                                     len(out))


def timed_round(python: str, cwd: Path, run: Path, out: Path, env: dict[str, str], options: tuple[str, ...],
                loud: bool) -> dict:
    """One round of one variant: its CPU and wall seconds, the load before it, its report; when
    ``loud`` (no -q), what it printed, the lines before the key table and its steps' times."""
    load = round(os.getloadavg()[0], 2)
    timed = run_once(python, cwd, run, out, env, options)
    got = {"cpu_s": timed["cpu_s"], "wall_s": timed["wall_s"], "load_before": load, "report": str(out / "index.html")}
    if loud:
        got.update(stdout=timed["stdout"], lines_before_key_table=lines_before_key_table(timed),
                   steps=[ln.split("ssbench analyze: ", 1)[1] for ln in timed["stderr"].splitlines()
                          if "ssbench analyze: " in ln])
    return got


def key_table(out: Path) -> list[dict]:
    doc = json.loads((out / "answer.json").read_text())
    return [{k: r.get(k) for k in ("comparison", "baseline", "perm_id", "gain_pct", "verdict")}
            for s in doc.get("sections", []) for r in s.get("rows", [])]


def main(argv: list[str] | None = None) -> int:
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
    ap.add_argument("--out", type=Path, help="where the reports go (report-RUN-VARIANT; default: a new temporary dir)")
    ap.add_argument("--master", help="ssbench analyze --master (default: its own)")
    ap.add_argument("--loud", action="store_true",
                    help="without -q: also count the lines printed before the key table (the log, the diagnosis)")
    args = ap.parse_args(argv)
    work = args.out or Path(tempfile.mkdtemp(prefix="ssbench-analysis-time-"))
    options = (() if args.loud else ("-q",)) + (("--master", args.master) if args.master else ())
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
        answers, rounds = {}, {v: [] for v in variants}
        for r in range(args.rounds):
            order = list(variants) if r % 2 == 0 else list(reversed(variants))
            for v in order:
                python, cwd, env, vruns = variants[v]
                out = work / f"report-{i}-{v.replace(' ', '_').replace(',', '')}"
                timed = timed_round(python, cwd, vruns[i], out, {**os.environ, **env}, options, args.loud)
                got[v].append((timed["cpu_s"], timed["wall_s"]))
                answers[v] = key_table(out)
                rounds[v].append(timed)
                print(f"{run.name} round {r + 1} {v:14s} cpu {timed['cpu_s']:6.1f} s  wall {timed['wall_s']:6.1f} s  "
                      f"load {os.getloadavg()[0]:.2f}" + (f"  {timed['lines_before_key_table']} lines before "
                                                          "the key table" if args.loud else ""), flush=True)
        med = {v: (statistics.median(c for c, _ in got[v]), statistics.median(w for _, w in got[v])) for v in got}
        figures[run.name] = {v: {"cpu_median_s": round(med[v][0], 1), "wall_median_s": round(med[v][1], 1),
                                 "cpu_range_s": [round(min(c for c, _ in got[v]), 1), round(max(c for c, _ in got[v]), 1)],
                                 "wall_range_s": [round(min(w for _, w in got[v]), 1), round(max(w for _, w in got[v]), 1)],
                                 "cpu_ratio_to_this": round(med[v][0] / med["this"][0], 3),
                                 "wall_ratio_to_this": round(med[v][1] / med["this"][1], 3),
                                 "rounds": rounds[v]} for v in got}
        figures[run.name]["same_key_table"] = all(a == answers["this"] for a in answers.values())
        brief = {v: {k: x for k, x in f.items() if k != "rounds"} if isinstance(f, dict) else f
                 for v, f in figures[run.name].items()}
        print(json.dumps({run.name: brief}, indent=1), flush=True)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1) + "\n")
    return 0 if all(f["same_key_table"] for f in figures.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
