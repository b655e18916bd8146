#!/usr/bin/env python
"""Does ssbench's load generator keep up with the server? Side by side, in one run.

On the same embedded PostgreSQL server, with the same dialogs, the same SEND function
(``ssb.send``), the same payload and the same number of clients, this measures alternately:

* A: ssbench's real Locust swarm (master + one worker, one user per client; the embedded
  target's default path: libpq in non-blocking mode, each user's connection driven by gevent's
  hub, harness.load.sendloop.HubLoop), send rate over the measured window;
* A': the same swarm with each user's SENDs on its own OS thread (send mode ``thread``, the
  path any blocking driver such as pyodbc takes), for comparison;
* B: pgbench (shipped with the PostgreSQL server) running ``SELECT ssb.send(...)`` with
  ``-M prepared`` and the same client count;

and prints A/B per round and the median ratio. Goal: at least 0.85 at 50 clients. The broker
(transport + activation) runs during both, as in a real run. Not a timed test: run it by hand.

    .venv/bin/python benchmarks/send_vs_pgbench.py --clients 50 --seconds 10 --rounds 2
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import loadbench  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--payload", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--warmup", type=float, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--profile", default="durable", choices=["durable", "delayed"])
    args = ap.parse_args()

    with loadbench.embedded_target(args.clients, args.profile) as target:
        specs = {"1": target.sender_spec(1)}

        def ssbench_rate(work, mode="auto"):
            return loadbench.ssbench(target, specs, args.clients, args.payload, args.seconds,
                                     args.warmup, work, mode).rate

        rows = []
        with tempfile.TemporaryDirectory(prefix="ssbench-pgbench-") as tmp:
            for r in range(1, args.rounds + 1):
                a = ssbench_rate(Path(tmp) / f"swarm-{r}")
                target.drain(120)
                b = loadbench.pgbench(target, args.clients, args.payload, args.seconds, Path(tmp)).rate
                target.drain(120)
                t = ssbench_rate(Path(tmp) / f"swarm-thread-{r}", mode="thread")
                target.drain(120)
                rows.append((a, b, t))
                print(f"round {r}: ssbench {a:,.0f} SEND/s   pgbench {b:,.0f} SEND/s   ratio {a / b:.3f}   "
                      f"(every SEND from a user's own OS thread: {t:,.0f} SEND/s, ratio {t / b:.3f})", flush=True)
        ratio = statistics.median(a / b for a, b, _ in rows)
        ratio_thread = statistics.median(t / b for _, b, t in rows)
        print(f"\n{target.label}, {args.clients} clients, {args.payload} B payload, profile {args.profile}, "
              f"{args.seconds:g}s windows, {args.rounds} rounds")
        print(f"median ratio ssbench / pgbench = {ratio:.3f} (goal >= 0.85); "
              f"with every SEND from a user's own OS thread (the blocking-driver path): {ratio_thread:.3f}")
        return 0 if ratio >= 0.85 else 1


if __name__ == "__main__":
    sys.exit(main())
