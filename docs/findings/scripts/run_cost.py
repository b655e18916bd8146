#!/usr/bin/env python
"""The fixed cost of ``ssbench run`` on the embedded target, per run and per repetition.

Times tests/data/tiny.yaml on 1 initiator, 2 threads, one strategy, open loop at 300 SENDs/s
(1 s warm-up, 1 s window) run with 1 and with 3 repetitions, for one checkout or several side by side (the
order alternates round by round, so a shared machine's drift falls on each). For each run it
reports the wall time, the wall beyond the repetitions' windows (wall - reps x (warm-up +
window)), the CPU seconds of ssbench's whole process tree (every descendant it waited for:
Locust master and workers, the broker process, collectors) and of the PostgreSQL server (the
postmaster's own and reaped children's CPU plus its live backends', before and after). The
per-repetition cost is the 3-repetition run's minus the 1-repetition run's, halved.

Each checkout runs with its own venv (``<checkout>/.venv``) and its own server
(``$SSBENCH_PGDATA`` = ``<pgdata-root>/<checkout's name>``), started before the timing.

    python docs/findings/scripts/run_cost.py --rounds 5 . ../main
    python docs/findings/scripts/run_cost.py --rounds 1 --reps 1 .      # one run, a smoke
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

#: the end-to-end tests' tiny matrix, on 1 initiator and one strategy, open loop
TINY = Path(__file__).resolve().parents[3] / "tests" / "data" / "tiny.yaml"
EDITS = (("initiators: [2]", "initiators: [1]"), ("dialogs: [per_thread, trick150]", "dialogs: [per_thread]"),
         ("  server: [durable]\n", "  server: [durable]\n  rate: [300]\n"))


def matrix_text(warmup: float, measure: float, reps: int) -> str:
    text = TINY.read_text()
    for old, new in EDITS + (("warmup_seconds: 1\n", f"warmup_seconds: {warmup:g}\n"),
                             ("measure_seconds: 2\n", f"measure_seconds: {measure:g}\n"),
                             ("repetitions: 1\n", f"repetitions: {reps}\n")):
        if old not in text:
            sys.exit(f"{TINY}: no {old.strip()!r} to edit")
        text = text.replace(old, new)
    return text
TICK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid: int, children: bool) -> float:
    """utime + stime (and with ``children``, the reaped children's) of ``pid``, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12]) + ((int(fields[13]) + int(fields[14])) if children else 0)
    return ticks / TICK


def server_cpu(pgdata: Path) -> float:
    """Every CPU second the server has spent: the postmaster's, its reaped backends', its live ones'."""
    pid = int((pgdata / "postmaster.pid").read_text().split()[0])
    total = proc_cpu(pid, children=True)
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        try:
            total += proc_cpu(int(child), children=True)
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total


def run_once(checkout: Path, pgdata: Path, reps: int, warmup: float, measure: float) -> dict:
    env = {**os.environ, "SSBENCH_PGDATA": str(pgdata)}
    ssbench = str(checkout / ".venv" / "bin" / "ssbench")
    with tempfile.TemporaryDirectory(prefix="runcost-") as tmp:
        matrix = Path(tmp) / "m.yaml"
        matrix.write_text(matrix_text(warmup, measure, reps))
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        pg0, t0 = server_cpu(pgdata), time.monotonic()
        proc = subprocess.run([ssbench, "run", str(matrix), "--results", str(Path(tmp) / "results")],
                              cwd=checkout, env=env, capture_output=True, text=True)
        wall = time.monotonic() - t0
        pg = server_cpu(pgdata) - pg0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"{checkout}: ssbench run exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall": wall, "beyond": wall - reps * (warmup + measure), "cpu": cpu + pg, "client_cpu": cpu, "pg_cpu": pg}


def median_spread(xs: list[float]) -> str:
    return f"{statistics.median(xs):6.2f} [{min(xs):.2f}-{max(xs):.2f}]"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkouts", nargs="+", type=Path)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, nargs="+", default=[1, 3])
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--measure", type=float, default=1.0)
    ap.add_argument("--pgdata-root", type=Path, default=Path("/var/tmp/ssbench-runcost"))
    a = ap.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs", flush=True)
    dirs = {c: a.pgdata_root / (c.resolve().name or "root") for c in a.checkouts}
    for c, d in dirs.items():
        subprocess.run([str(c / ".venv" / "bin" / "ssbench"), "server", "start"], cwd=c, check=True,
                       env={**os.environ, "SSBENCH_PGDATA": str(d)}, capture_output=True)
        run_once(c, d, 1, a.warmup, a.measure)    # the databases provisioned, caches warm: not timed
    got: dict[tuple[str, int], list[dict]] = {}
    for rnd in range(a.rounds):
        order = a.checkouts if rnd % 2 == 0 else a.checkouts[::-1]
        for c in order:
            for reps in a.reps:
                r = run_once(c, dirs[c], reps, a.warmup, a.measure)
                got.setdefault((str(c), reps), []).append(r)
                print(f"round {rnd + 1} {c} reps={reps}: " + ", ".join(f"{k} {v:.2f}" for k, v in r.items()),
                      flush=True)
    print(f"\nmedian [min-max] over {a.rounds} round(s); seconds")
    print(f"{'checkout':30} reps  {'wall':>18} {'wall beyond windows':>20} {'CPU-s total':>18} {'CPU-s PostgreSQL':>18}")
    out = []
    for (c, reps), rs in got.items():
        cols = [median_spread([r[k] for r in rs]) for k in ("wall", "beyond", "cpu", "pg_cpu")]
        print(f"{c:30} {reps:4}  {cols[0]:>18} {cols[1]:>20} {cols[2]:>18} {cols[3]:>18}")
        out.append({"checkout": c, "reps": reps, "runs": rs})
    if set(a.reps) >= {1, 3}:
        print("\nper extra repetition ((3 reps - 1 rep) / 2, medians of paired rounds)")
        for c in a.checkouts:
            one, three = got[(str(c), 1)], got[(str(c), 3)]
            for k in ("beyond", "cpu", "pg_cpu"):
                d = [(t[k] - o[k]) / 2 for o, t in zip(one, three)]
                print(f"  {str(c):30} {k:8} {median_spread(d)}")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
