#!/usr/bin/env python3
"""Benchmark of ``ssbench analyze`` (not a test): Spark start-up included.

Synthesizes the paper-sized result set (528 permutations x 3 repetitions, 1 s samples over a
60 s measured window plus 10 s warm-up and 5 s drain: about 45 sample rows per tick -- a
dozen wait types with their waiting-task rates, queue depths, activation, broker, throughput
and host metrics -- so ~5.3 M rows, ~0.75 GB of samples.jsonl) and the same with 10 times the
repetitions (10x the data and the files), then times ``ssbench analyze RUN --master local[2]``
on each as a fresh process, through benchmarks/analysis_time.py (the CPU of everything it
started, the JVM included; each report in DATA_DIR/report-xSCALE).

Goal: <= 60 s for the paper-sized set on 2 cores; <= 5x that for 10x the data; and at most
about 60 lines printed before the key table (the diagnosis grouped by limit at that scale).

    .venv/bin/python benchmarks/analyze_bench.py                 # both sizes, data in /var/tmp
    .venv/bin/python benchmarks/analyze_bench.py --scales 1 --keep --json bench.json
    .venv/bin/python benchmarks/analyze_bench.py --scales 1 --measure-seconds 10 --interval 5   # quick

The machine's load average is printed with each timing: other processes on the same cores
make the wall time meaningless, so run it at a quiet moment.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# tests/support/synth.py: test data, not the package; benchmarks/analysis_time.py: the timing
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "benchmarks")]

from support import synth  # noqa: E402

import analysis_time  # noqa: E402

GOAL_PAPER_S = 60.0
GOAL_FACTOR_10X = 5.0
#: lines ssbench analyze of the paper-sized set prints before its key table
GOAL_LINES = 60


def _dir_stats(run: Path) -> tuple[int, int, int]:
    """(samples files, samples bytes, sample rows) of a synthesized run."""
    files = nbytes = rows = 0
    for perm in run.iterdir():
        if not perm.is_dir() or perm.name == "report":
            continue
        reps = sorted(perm.glob("rep-*/samples.jsonl"))
        if not reps:
            continue
        with reps[0].open("rb") as f:
            per_file = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
        files += len(reps)
        rows += per_file * len(reps)
        nbytes += sum(r.stat().st_size for r in reps)
    return files, nbytes, rows


def make_data(root: Path, scale: int, workers: int, reuse: bool, measure_seconds: int = 60,
              interval: float = 1.0) -> Path:
    run_id = f"bench-paper-x{scale}"
    run = root / run_id
    # what the data was synthesized with: --reuse takes it only when this run asks for the same
    made_with = {"measure_seconds": measure_seconds, "interval": interval, "repetitions": 3 * scale}
    stamp = root / f"{run_id}.json"
    if reuse and (run / "run.json").is_file():
        before = json.loads(stamp.read_text()) if stamp.is_file() else None
        if before == made_with:
            print(f"reusing {run}", flush=True)
            return run
        print(f"not reusing {run}: synthesized with {before or 'unknown settings'}, asked for {made_with}", flush=True)
    if run.exists():
        shutil.rmtree(run)
    stamp.unlink(missing_ok=True)
    spec = synth.paper_spec(name=f"paper-x{scale}", repetitions=3 * scale, warmup_seconds=10,
                            measure_seconds=measure_seconds, drain_seconds=5, interval=interval)
    t = time.monotonic()
    print(f"synthesizing {spec.permutations} permutations x {spec.repetitions} repetitions into {run} ...",
          flush=True)
    synth.synthesize(root, spec, run_id=run_id, workers=workers)
    stamp.write_text(json.dumps(made_with))
    print(f"  done in {time.monotonic() - t:.0f} s", flush=True)
    return run


def time_analyze(run: Path, master: str, out: Path, repeat: int) -> list[dict]:
    """``repeat`` fresh ``ssbench analyze RUN --master MASTER``, timed by analysis_time.py (the
    CPU of everything each started, the JVM included), each round's report in ``out``."""
    figures = out / "analysis-time.json"
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    if analysis_time.main(["--rounds", str(repeat), "--loud", "--master", master, "--out", str(out),
                           "--json", str(figures), str(run)]) != 0:
        raise SystemExit("ssbench analyze gave different key tables from one round to the next")
    (timed,) = json.loads(figures.read_text()).values()
    return timed["this"]["rounds"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", default="/var/tmp/ssbench-analyze-bench",
                    help="where the synthetic runs go (~0.8 GB for x1, ~8 GB for x10)")
    ap.add_argument("--scales", default="1,10", help="comma-separated multiples of the paper-sized set")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--workers", type=int, default=2, help="processes synthesizing data")
    ap.add_argument("--repeat", type=int, default=1, help="timed runs per scale (the best is kept too)")
    ap.add_argument("--reuse", action="store_true", help="reuse data synthesized by a previous run")
    ap.add_argument("--keep", action="store_true", help="keep the data afterwards")
    ap.add_argument("--json", help="also write the results to this file")
    ap.add_argument("--measure-seconds", type=int, default=60,
                    help="each repetition's measured window (60: the paper's; less for a quick check)")
    ap.add_argument("--interval", type=float, default=1.0,
                    help="seconds between synthesized samples (1: ssbench's; coarser writes fewer sample rows "
                         "per file, the same permutations and files, for a quick check of the report's layout)")
    args = ap.parse_args(argv)

    root = Path(args.data_dir)
    root.mkdir(parents=True, exist_ok=True)
    results = []
    for scale in [int(s) for s in args.scales.split(",") if s.strip()]:
        run = make_data(root, scale, args.workers, args.reuse, args.measure_seconds, args.interval)
        files, nbytes, rows = _dir_stats(run)
        print(f"x{scale}: {files} samples files, {nbytes / 1e9:.2f} GB, {rows / 1e6:.1f} M sample rows", flush=True)
        timings = time_analyze(run, args.master, root / f"report-x{scale}", args.repeat)
        for k, r in enumerate(timings):
            print(f"  run {k + 1}: {r['wall_s']} s wall, {r['cpu_s']} s CPU (load before "
                  f"{r['load_before']}); {r['lines_before_key_table']} lines before the key table "
                  f"(goal: about {GOAL_LINES})", flush=True)
            for s in r["steps"]:
                print(f"    {s}")
        results.append({"scale": scale, "samples_files": files, "samples_bytes": nbytes, "sample_rows": rows,
                        "runs": timings, "best_wall_s": min(t["wall_s"] for t in timings)})
        if not args.keep:
            shutil.rmtree(run)

    print("\nscale  files    GB   M rows  best wall (s)  goal")
    base = None
    for r in results:
        if r["scale"] == 1:
            base = r["best_wall_s"]
            goal = f"<= {GOAL_PAPER_S:.0f} s: {'met' if base <= GOAL_PAPER_S else 'MISSED'}"
        elif base:
            lim = GOAL_FACTOR_10X * base * r["scale"] / 10
            goal = f"<= {lim:.0f} s ({GOAL_FACTOR_10X:g}x paper-sized): {'met' if r['best_wall_s'] <= lim else 'MISSED'}"
        else:
            goal = ""
        print(f"x{r['scale']:<4} {r['samples_files']:>6} {r['samples_bytes'] / 1e9:>5.2f} {r['sample_rows'] / 1e6:>7.1f}"
              f"  {r['best_wall_s']:>12.1f}  {goal}")
    if args.json:
        Path(args.json).write_text(json.dumps({"master": args.master, "cpu_count": os.cpu_count(),
                                               "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
