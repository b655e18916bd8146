#!/usr/bin/env python
"""Does ssbench's load generator keep up with the server? Side by side, in one run.

On the same embedded PostgreSQL server, with the same dialogs, the same SEND function
(``ssb.send``), the same payload and the same number of clients, this measures alternately:

* A: ssbench's real Locust swarm (master + one worker, one user per client; SEND through
  libpq's non-blocking mode waiting on gevent), send rate over the measured window;
* A': the same swarm with every SEND offloaded to a real thread (SSBENCH_SEND_MODE=thread, the
  path any blocking driver such as pyodbc takes), for comparison;
* B: pgbench (shipped with the PostgreSQL server) running ``SELECT ssb.send(...)`` with
  ``-M prepared`` and the same client count;

and prints A/B per round and the median ratio. Goal: at least 0.85 at 50 clients. The broker
(transport + activation) runs during both, as in a real run. Not a timed test: run it by hand.

    .venv/bin/python benchmarks/send_vs_pgbench.py --clients 50 --seconds 10 --rounds 2
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.load.spec import SwarmSpec  # noqa: E402
from harness.load.swarm import Swarm  # noqa: E402
from harness.load.window import merge_workers  # noqa: E402
from harness.matrix import BrokerSettings  # noqa: E402
from harness.targets.embedded.server import bin_dir  # noqa: E402
from harness.targets.embedded.target import EmbeddedTarget  # noqa: E402


def ssbench_rate(target, clients, payload, seconds, warmup, work, mode="auto") -> float:
    os.environ["SSBENCH_SEND_MODE"] = mode
    spec = SwarmSpec(sender_specs={"1": target.sender_spec(1)}, payload_bytes=payload,
                     usable={"1": clients}, warmup_seconds=warmup, measure_seconds=seconds,
                     out_dir=str(work))
    swarm = Swarm(spec, work, initiators=1, threads=clients, spawn_rate=1000).start()
    res = swarm.wait(timeout=warmup + seconds + 120)
    if not res.spawn_complete or not res.worker_files:
        raise SystemExit("the Locust swarm did not run:\n" + swarm.log_tail())
    start = res.spawn_complete + warmup
    wd = merge_workers(res.worker_files, start, start + seconds)
    if wd.errors_total:
        raise SystemExit(f"SEND errors in the swarm: {wd.error_samples[:3]}")
    if wd.users_active != clients:
        raise SystemExit(f"only {wd.users_active} of {clients} Locust users were sending through the window")
    return wd.rate


def pgbench_rate(target, clients, payload, seconds, work) -> float:
    info = target.info
    body = ("ssbench-payload-" * (payload // 16 + 1))[:payload].encode().hex()
    script = Path(work) / "send.sql"
    script.write_text("\\set k :client_id + 1\n"
                      f"SELECT ssb.send((SELECT handle FROM ssb.dialogs WHERE k = :k), '\\x{body}'::bytea);\n")
    script.chmod(0o644)
    Path(work).chmod(0o755)
    cmd = [str(bin_dir() / "pgbench"), "-n", "-M", "prepared", "-c", str(clients), "-j", "2",
           "-T", str(int(seconds)), "-f", str(script), "-h", str(info.socket_dir), "-p", str(info.port),
           "-U", "postgres", target.initiator_db(1)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 120)
    if out.returncode != 0:
        raise SystemExit(f"pgbench failed: {out.stderr.strip()}")
    m = re.search(r"tps = ([\d.]+) \(without initial connection time\)", out.stdout)
    if not m:
        raise SystemExit(f"cannot read pgbench's tps:\n{out.stdout}")
    return float(m.group(1))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--payload", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--warmup", type=float, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--profile", default="durable", choices=["durable", "delayed"])
    args = ap.parse_args()

    target = EmbeddedTarget.default()
    target.provision(1)
    target.prepare(1, args.profile, BrokerSettings(max_queue_readers=2, waitfor_timeout_ms=1000,
                                                   monitor_interval_seconds=1))
    target.start()
    try:
        target.create_dialogs(1, args.clients, 1)
        target.warm_up(1)
        target.drain(60)
        rows = []
        with tempfile.TemporaryDirectory(prefix="ssbench-pgbench-") as tmp:
            for r in range(1, args.rounds + 1):
                a = ssbench_rate(target, args.clients, args.payload, args.seconds, args.warmup,
                                 Path(tmp) / f"swarm-{r}")
                target.drain(120)
                b = pgbench_rate(target, args.clients, args.payload, args.seconds, tmp)
                target.drain(120)
                t = ssbench_rate(target, args.clients, args.payload, args.seconds, args.warmup,
                                 Path(tmp) / f"swarm-thread-{r}", mode="thread")
                target.drain(120)
                rows.append((a, b, t))
                print(f"round {r}: ssbench {a:,.0f} SEND/s   pgbench {b:,.0f} SEND/s   ratio {a / b:.3f}   "
                      f"(thread offload for every SEND: {t:,.0f} SEND/s, ratio {t / b:.3f})", flush=True)
        ratio = statistics.median(a / b for a, b, _ in rows)
        ratio_thread = statistics.median(t / b for _, b, t in rows)
        print(f"\n{target.label}, {args.clients} clients, {args.payload} B payload, profile {args.profile}, "
              f"{args.seconds:g}s windows, {args.rounds} rounds")
        print(f"median ratio ssbench / pgbench = {ratio:.3f} (goal >= 0.85); "
              f"with every SEND offloaded to a thread: {ratio_thread:.3f}")
        return 0 if ratio >= 0.85 else 1
    finally:
        target.stop()
        target.close()


if __name__ == "__main__":
    sys.exit(main())
