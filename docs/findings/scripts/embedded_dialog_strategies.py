"""Does the paper's "150 trick" (or a shared dialog) change the SEND rate on the embedded target?

Runs ``SELECT ssb.send(handle, payload)`` -- the embedded target's SEND, one transaction per
message -- from N concurrent clients for a fixed time, for each dialog strategy:

* ``per_thread``: one dialog per client, the usable dialogs begun one after another (adjacent
  sysdesend rows, so they share heap pages);
* ``trick150``: 150 dialogs begun per usable dialog, every 150th kept (each usable row on its own
  heap page, the paper's technique);
* ``shared``: every client on one dialog (one hot row).

Clients are pgbench (C, so the server is the bottleneck; default) or Python threads using the
harness's own EmbeddedSender. Repetitions are interleaved across strategies so slow drifts of a
shared machine hit every strategy alike; the median is reported. With ``--broker on`` the
broker process runs during the measurement (transport and readers compete with SEND, as in a
real run); ``off`` measures the SEND path alone.

These are PostgreSQL numbers from an emulation, never SQL Server's. Example:

    .venv/bin/python docs/findings/scripts/embedded_dialog_strategies.py --threads 16,32 --seconds 10 --reps 3
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from harness.matrix import BrokerSettings  # noqa: E402
from harness.targets.embedded.sender import EmbeddedSender  # noqa: E402
from harness.targets.embedded.server import EmbeddedServer  # noqa: E402
from harness.targets.embedded.target import EmbeddedTarget  # noqa: E402

STRATEGIES = {"per_thread": (1, False), "trick150": (150, False), "shared": (1, True)}


def run_pgbench(server: EmbeddedServer, conninfo_db: str, info, threads: int, shared: bool,
                seconds: float, payload: int) -> float:
    script = (f"\\set k {'1' if shared else ':client_id + 1'}\n"
              f"SELECT ssb.send((SELECT handle FROM ssb.dialogs WHERE k = :k), "
              f"decode(repeat('78', {payload}), 'hex'));\n")
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write(script)
        path = f.name
    try:
        out = subprocess.run([str(server.pgbench_path()), "-n", "-M", "prepared", "-c", str(threads),
                              "-j", str(min(threads, os.cpu_count() or 2)), "-T", str(int(seconds)),
                              "-f", path, "-h", str(info.socket_dir), "-p", str(info.port), "-U", "postgres",
                              conninfo_db], capture_output=True, text=True, timeout=seconds + 120)
    finally:
        os.unlink(path)
    if out.returncode != 0:
        raise RuntimeError(f"pgbench failed: {out.stderr.strip()}")
    m = re.search(r"tps = ([0-9.]+) \(without initial connection time\)", out.stdout)
    return float(m.group(1))


def run_python(target: EmbeddedTarget, threads: int, shared: bool, seconds: float, payload: int) -> float:
    spec = target.sender_spec(1)
    senders = [EmbeddedSender(spec["conninfo"], 1) for _ in range(threads)]
    handles = [s.dialog(1 if shared else k + 1) for k, s in enumerate(senders)]
    body = b"x" * payload
    counts = [0] * threads
    stop = threading.Event()
    start = threading.Barrier(threads + 1)

    def work(k: int) -> None:
        s, h = senders[k], handles[k]
        start.wait()
        n = 0
        while not stop.is_set():
            s.send(h, body)
            n += 1
        counts[k] = n

    ths = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for t in ths:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for t in ths:
        t.join()
    elapsed = time.perf_counter() - t0
    for s in senders:
        s.close()
    return sum(counts) / elapsed


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", help="embedded server data directory (default: $SSBENCH_PGDATA or the cache)")
    p.add_argument("--prefix", default="ssbbench", help="database prefix (default ssbbench)")
    p.add_argument("--threads", default="16,32")
    p.add_argument("--strategies", default="per_thread,trick150,shared")
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--payload", type=int, default=100)
    p.add_argument("--profile", default="durable", choices=["durable", "delayed"])
    p.add_argument("--client", default="pgbench", choices=["pgbench", "python"])
    p.add_argument("--broker", default="off", choices=["on", "off"])
    p.add_argument("--json", help="write the results here too")
    a = p.parse_args()
    threads = [int(x) for x in a.threads.split(",")]
    strategies = a.strategies.split(",")
    server = EmbeddedServer(Path(a.data_dir) if a.data_dir else None)
    target = EmbeddedTarget(server, prefix=a.prefix)
    target.provision(1)
    info = server.info()
    db = target.initiator_db(1)
    results: dict[str, dict[int, list[float]]] = {s: {t: [] for t in threads} for s in strategies}
    try:
        for rep in range(a.reps):
            for t in threads:
                for strat in strategies:
                    every_n, shared = STRATEGIES[strat]
                    target.prepare(1, a.profile, BrokerSettings(max_queue_readers=4, waitfor_timeout_ms=1000,
                                                                monitor_interval_seconds=1.0))
                    target.create_dialogs(1, 1 if shared else t, every_n)
                    target.warm_up(1)
                    if a.broker == "on":
                        target.start()
                    try:
                        if a.client == "pgbench":
                            rate = run_pgbench(server, db, info, t, shared, a.seconds, a.payload)
                        else:
                            rate = run_python(target, t, shared, a.seconds, a.payload)
                    finally:
                        target.stop()
                    results[strat][t].append(rate)
                    print(f"rep {rep + 1} threads {t:3d} {strat:10s} {rate:9.0f} SEND/s "
                          f"(load {os.getloadavg()[0]:.1f})", flush=True)
    finally:
        target.close()
    summary = {
        "what": "SEND rate (messages/s) on the embedded target: PostgreSQL, not SQL Server",
        "client": a.client, "broker": a.broker, "profile": a.profile, "payload_bytes": a.payload,
        "seconds": a.seconds, "reps": a.reps, "postgresql": target.version,
        "host": {"platform": platform.platform(), "cpus": os.cpu_count(),
                 "cpu_model": _cpu_model()},
        "median": {s: {str(t): statistics.median(v) for t, v in d.items()} for s, d in results.items()},
        "runs": {s: {str(t): v for t, v in d.items()} for s, d in results.items()},
    }
    # paired comparisons: each repetition ran the strategies back to back, so per-repetition
    # ratios cancel most of a shared machine's drift
    if "per_thread" in results:
        summary["ratio_to_per_thread"] = {}
        for strat in strategies:
            if strat == "per_thread":
                continue
            summary["ratio_to_per_thread"][strat] = {}
            for t in threads:
                ratios = sorted(x / y for x, y in zip(results[strat][t], results["per_thread"][t]) if y)
                summary["ratio_to_per_thread"][strat][str(t)] = {
                    "median": statistics.median(ratios), "min": ratios[0], "max": ratios[-1]}
    summary["loadavg_end"] = os.getloadavg()
    print(json.dumps({k: summary[k] for k in ("median", "ratio_to_per_thread", "loadavg_end") if k in summary},
                     indent=1))
    if a.json:
        Path(a.json).write_text(json.dumps(summary, indent=1))
    return 0


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


if __name__ == "__main__":
    sys.exit(main())
