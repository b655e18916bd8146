#!/usr/bin/env python
"""The load generator's ceiling of two checkouts side by side: ``benchmarks/harness_ceiling.py``
of checkout A and of checkout B, one round each, alternating (A B, then B A, ...), on the same
embedded PostgreSQL server ($SSBENCH_PGDATA), so a drift of a shared machine hits both alike.
Prints each round, then the medians [min-max] per variant and side, and B/A per variant; the
last line is JSON. Each checkout runs with its own venv (``<checkout>/.venv``).

    .venv/bin/python benchmarks/ab_ceiling.py --a /path/to/old --b . --rounds 3 --clients 50 --seconds 8

Variants are the ones both checkouts have (``--variants``, default hub,thread,pgbench).
These are PostgreSQL numbers from an emulation, never SQL Server's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path


def one_round(checkout: Path, args) -> dict:
    py = checkout / ".venv" / "bin" / "python"
    cmd = [str(py), str(checkout / "benchmarks" / "harness_ceiling.py"), "--clients", str(args.clients),
           "--seconds", str(args.seconds), "--warmup", str(args.warmup), "--rounds", "1",
           "--variants", args.variants, "--sends", args.sends]
    env = dict(os.environ, PYTHONPATH=str(checkout))
    out = subprocess.run(cmd, cwd=checkout, env=env, capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        raise SystemExit(f"{checkout}: harness_ceiling.py failed:\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--a", type=Path, required=True, help="checkout A (e.g. the old code)")
    ap.add_argument("--b", type=Path, required=True, help="checkout B (e.g. this one)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--warmup", type=float, default=2)
    ap.add_argument("--variants", default="hub,thread,pgbench")
    ap.add_argument("--sends", default="null,real")
    args = ap.parse_args()
    sides = {"A": args.a.resolve(), "B": args.b.resolve()}
    got: dict[str, list[dict]] = {"A": [], "B": []}
    for r in range(args.rounds):
        for side in (("A", "B") if r % 2 == 0 else ("B", "A")):
            res = one_round(sides[side], args)
            got[side].append(res)
            print(f"round {r + 1} {side}: " + ", ".join(f"{k}={v}" for k, v in sorted(res.items())
                                                          if k.endswith(("_cpu_us_per_send", "_send_per_s"))),
                  flush=True)
    keys = sorted(k for k in got["A"][0] if k.endswith(("_cpu_us_per_send", "_send_per_s"))
                  and k in got["B"][0] and got["A"][0][k] is not None)
    summary = {"rounds": args.rounds, "clients": args.clients, "seconds": args.seconds,
               "a": str(sides["A"]), "b": str(sides["B"])}
    print(f"\n{'metric':34} {'A median [min-max]':>28} {'B median [min-max]':>28} {'B/A':>6}")
    for k in keys:
        a = [x[k] for x in got["A"] if x.get(k) is not None]
        b = [x[k] for x in got["B"] if x.get(k) is not None]
        ma, mb = statistics.median(a), statistics.median(b)
        print(f"{k:34} {ma:12.1f} [{min(a):.1f}-{max(a):.1f}] {mb:12.1f} [{min(b):.1f}-{max(b):.1f}] "
              f"{mb / ma if ma else float('nan'):6.3f}")
        summary[k] = {"a": ma, "b": mb, "a_range": [min(a), max(a)], "b_range": [min(b), max(b)]}
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
