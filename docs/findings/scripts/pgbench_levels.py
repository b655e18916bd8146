#!/usr/bin/env python
"""How steady is PostgreSQL's own benchmark on this machine? (issue 24; not a test)

Issue 24 asks each ``make bench`` permutation's repetitions to spread by at most 1.10
(max/min of their receive rates). This measures what the same server does under pgbench, the
benchmark shipped with PostgreSQL, with none of ssbench's code in the way: on the embedded
target's server (``$SSBENCH_PGDATA`` picks it), in a database of its own (``--scale``, dropped
at the end), for each client count of ``--clients``, it runs

* ``tpcb``: pgbench's default TPC-B-like transaction (updates and an insert, a durable commit
  each: the WAL flush path the emulation's SEND takes), and
* ``select``: ``-S``, one primary-key lookup per transaction (no commit to flush: CPU and
  memory only),

for ``--seconds`` with a progress line every ``--window`` seconds (bench.yaml's windows are
6 s). The first window is dropped (connections, caches). Per run it prints the windows' rates,
the s.d. of their logs, and the max/min of every ``--reps`` consecutive windows (median, 90th
percentile, largest): the spread a permutation's repetitions would show if its rate moved as
pgbench's does. The windows here follow each other; bench's repetitions of a permutation are
a minute or more apart, which only adds what changes between them. The last line is JSON.

    .venv/bin/python docs/findings/scripts/pgbench_levels.py --clients 1,8,32 --seconds 126
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from disk_levels import summarize  # noqa: E402
from harness.targets.embedded.server import SUPERUSER, EmbeddedServer, bin_dir  # noqa: E402

DB = "ssbench_pgbench_levels"
MODES = {"tpcb": [], "select": ["-S"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", default="1,8,32", help="comma-separated client counts")
    ap.add_argument("--seconds", type=int, default=126, help="per pgbench run")
    ap.add_argument("--window", type=int, default=6, help="seconds per window (bench.yaml: 6)")
    ap.add_argument("--reps", type=int, default=5, help="windows per spread (bench.yaml: 3 to 8)")
    ap.add_argument("--scale", type=int, default=10, help="pgbench -i scale")
    ap.add_argument("--modes", default="tpcb,select", help=f"comma-separated, of {sorted(MODES)}")
    args = ap.parse_args()
    clients = [int(c) for c in args.clients.split(",")]
    modes = args.modes.split(",")
    if any(m not in MODES for m in modes) or args.seconds < args.window * (args.reps + 2):
        ap.error(f"--modes of {sorted(MODES)}; --seconds at least --window x (--reps + 2)")

    server = EmbeddedServer()
    info, pgbench = server.start(), str(server.pgbench_path())
    conn = ["-h", str(info.socket_dir), "-p", str(info.port), "-U", SUPERUSER]
    psql = [str(bin_dir() / "psql"), *conn, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", "postgres"]
    subprocess.run([*psql, "-c", f"DROP DATABASE IF EXISTS {DB}", "-c", f"CREATE DATABASE {DB}"], check=True)
    results = []
    try:
        subprocess.run([pgbench, *conn, "-q", "-i", "-s", str(args.scale), DB],
                       check=True, capture_output=True)
        for n in clients:
            for mode in modes:
                subprocess.run([*psql, "-c", "CHECKPOINT"], check=True)
                out = subprocess.run([pgbench, *conn, "-n", "-M", "prepared", *MODES[mode],
                                      "-c", str(n), "-j", str(min(n, 2)), "-T", str(args.seconds),
                                      "-P", str(args.window), DB], capture_output=True, text=True, check=True)
                rates = [float(m.group(1)) for m in re.finditer(r"progress: [\d.]+ s, ([\d.]+) tps", out.stderr)][1:]
                # one tick per window: the windows' log s.d. and max/min of disk_levels.py
                lv = summarize(rates, args.window, args.window, args.reps)
                row = {"clients": n, "mode": mode, "windows": len(rates), "mean_tps": round(statistics.fmean(rates)),
                       "sd_pct": lv["window_sd_pct"], f"max_min_of_{args.reps}": lv[f"max_min_of_{args.reps}"]}
                results.append(row)
                mm = row[f"max_min_of_{args.reps}"]
                print(f"{mode:6s} {n:3d} clients: {row['mean_tps']:8,} tps, {len(rates)} windows of {args.window} s, "
                      f"s.d. {row['sd_pct']} %; max/min of {args.reps}: median {mm['median']}, "
                      f"p90 {mm['p90']}, max {mm['max']}")
                print("    windows: " + ", ".join(f"{r:,.0f}" for r in rates), flush=True)
    finally:
        subprocess.run([*psql, "-c", f"DROP DATABASE IF EXISTS {DB}"], check=False)
    print(json.dumps({"window": args.window, "reps": args.reps, "scale": args.scale, "runs": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
