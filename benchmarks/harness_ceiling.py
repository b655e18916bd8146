#!/usr/bin/env python
"""How many SENDs per second can one ssbench process drive, and at what client CPU per SEND?

Side by side in one run, on the same embedded PostgreSQL server with the same clients, in
alternating rounds (the order rotates each round, so drifts of a shared machine hit every
variant alike), for a null SEND (``SELECT pg_sleep(0)``: the client's cost, not the broker's)
and the real SEND (``ssb.send``):

* ``hub``: one Locust worker, each user's connection driven by gevent's hub (a socket callback
  finishes a SEND and begins the next: harness.load.hubloop; the embedded target's default);
* ``green``: one worker, libpq non-blocking from each user's greenlet, one hub wait per SEND
  (SSBENCH_SEND_MODE=green; the embedded path of finite dialog lifetimes);
* ``thread``: one worker, each user's SENDs on its own OS thread (SSBENCH_SEND_MODE=thread:
  the path of blocking drivers, pyodbc for SQL Server);
* ``offload``: one worker, every SEND a hop to gevent's hub threadpool (the former thread path);
* ``two``: two Locust worker processes for one initiator, each with half the users on its
  own half of the initiator's dialogs (the default path, as ``hub``), started by this benchmark;
* ``pgbench``: pgbench (C) with the same clients, ``-M prepared``;
* ``odbc_thread`` and ``odbc_offload`` (when psqlODBC is installed): the SQL Server sender's
  driver layer (pyodbc through harness.targets.mssql.driver) on the thread loop and on the
  former per-SEND offload, against the same server (benchmarks/ceiling_sender.py);
* ``thread@S`` (any S): the thread loop with its greenlet taking results every S seconds
  (SSBENCH_THREAD_BATCH_S; default 0.05), to compare batch sizes.

Client CPU per SEND is the worker processes' CPU time over the measured window (/proc) divided
by the SENDs in it; pgbench's is its own CPU time over its run. Medians and the spread
(min-max) over the rounds are printed; the last line is one JSON object. These are PostgreSQL
numbers from an emulation, never SQL Server's.

    .venv/bin/python benchmarks/harness_ceiling.py --clients 50 --seconds 10 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ceiling_sender  # noqa: E402
import loadbench  # noqa: E402

VARIANTS = ("hub", "green", "thread", "offload", "two", "pgbench", "odbc_thread", "odbc_offload")
DEFAULT_VARIANTS = VARIANTS[:6]
SENDS = ("null", "real")


def run_variant(target, variant: str, send: str, args, work: Path) -> loadbench.Measured:
    null = send == "null"
    if variant == "pgbench":
        return loadbench.pgbench(target, args.clients, args.payload, args.seconds, work,
                                 sql=ceiling_sender.PGBENCH_NULL_SQL if null else None)
    base = target.sender_spec(1)
    if variant == "two":
        half = args.clients // 2
        # worker "2" sends to initiator 1 too, on dialogs half+1 .. 2*half
        specs = {"1": ceiling_sender.spec(base, null=null),
                 "2": ceiling_sender.spec(base, null=null, slot_offset=half)}
        return loadbench.ssbench(target, specs, half, args.payload, args.seconds, args.warmup, work, "auto")
    odbc = None
    if variant.startswith("odbc_"):
        info = target.info
        odbc = {"host": str(info.socket_dir), "port": info.port, "database": target.initiator_db(1),
                "user": "postgres"}
    if variant.startswith("thread@"):
        return loadbench.ssbench(target, {"1": ceiling_sender.spec(base, null=null)}, args.clients,
                                 args.payload, args.seconds, args.warmup, work, "thread",
                                 env={"SSBENCH_THREAD_BATCH_S": variant.split("@", 1)[1]})
    mode = {"hub": "auto", "green": "green", "thread": "thread", "offload": "offload",
            "odbc_thread": "auto", "odbc_offload": "offload"}[variant]
    return loadbench.ssbench(target, {"1": ceiling_sender.spec(base, null=null, odbc=odbc)}, args.clients,
                             args.payload, args.seconds, args.warmup, work, mode)


def _batch_variant(v: str) -> bool:
    head, _, tail = v.partition("@")
    try:
        return head == "thread" and float(tail) > 0
    except ValueError:
        return False


def _stat(values):
    values = [v for v in values if v is not None]
    if not values:
        return None, None, None
    return statistics.median(values), min(values), max(values)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--payload", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--warmup", type=float, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--variants", default=",".join(DEFAULT_VARIANTS),
                    help=f"comma-separated subset of {', '.join(VARIANTS)}")
    ap.add_argument("--sends", default=",".join(SENDS), help="null, real or both")
    args = ap.parse_args()
    variants = [v for v in args.variants.split(",") if v]
    sends = [s for s in args.sends.split(",") if s]
    bad = [v for v in variants if v not in VARIANTS and not _batch_variant(v)] + \
        [s for s in sends if s not in SENDS]
    if bad or args.clients < 2 or args.rounds < 1:
        ap.error(f"bad --variants/--sends/--clients/--rounds: {bad or (args.clients, args.rounds)}")
    if any(v.startswith("odbc_") for v in variants) and not ceiling_sender.odbc_available():
        ap.error(f"the odbc variants need pyodbc and the {ceiling_sender.ODBC_DRIVER!r} ODBC driver (psqlODBC)")
    if "two" in variants and args.clients % 2:
        ap.error("--clients must be even for 'two' (two processes, half the users each)")

    results: dict[tuple[str, str], list[loadbench.Measured]] = {}
    with loadbench.embedded_target(args.clients) as target, \
            tempfile.TemporaryDirectory(prefix="ssbench-ceiling-") as tmp:
        runs = [(v, s) for s in sends for v in variants]
        for r in range(args.rounds):
            k = r % len(runs)
            for i, (v, s) in enumerate(runs[k:] + runs[:k]):       # rotate the order each round
                m = run_variant(target, v, s, args, Path(tmp) / f"r{r}-{v}-{s}")
                target.drain(120)
                results.setdefault((v, s), []).append(m)
                cpu = f"{m.cpu_us_per_send:7.1f} us/SEND" if m.cpu_us_per_send is not None else "   n/a"
                print(f"round {r + 1}: {s:4} {v:8} {m.rate:10,.0f} SEND/s  client CPU {cpu}"
                      f"  ({m.cpu_cores or 0:.2f} cores)", flush=True)
        label = target.label

    print(f"\n{label}; {args.clients} clients, {args.payload} B payload, {args.seconds:g} s windows, "
          f"{args.rounds} rounds, median [min-max]; a shared machine: noisy")
    print(f"{'send':5} {'variant':8} {'SEND/s':>28} {'client CPU us/SEND':>26}")
    summary: dict[str, float | None] = {}
    for s in sends:
        for v in variants:
            ms = results[(v, s)]
            rate = _stat([m.rate for m in ms])
            cpu = _stat([m.cpu_us_per_send for m in ms])
            cpu_txt = f"{cpu[0]:8.1f} [{cpu[1]:.1f}-{cpu[2]:.1f}]" if cpu[0] is not None else "n/a"
            print(f"{s:5} {v:8} {rate[0]:10,.0f} [{rate[1]:,.0f}-{rate[2]:,.0f}] {cpu_txt:>26}")
            prefix = "" if s == "null" else "real_"
            summary[f"{prefix}{v}_send_per_s"] = round(rate[0], 1)
            summary[f"{prefix}{v}_cpu_us_per_send"] = None if cpu[0] is None else round(cpu[0], 2)
        if "two" in variants and "hub" in variants:
            ratios = [b.rate / a.rate for a, b in zip(results[("hub", s)], results[("two", s)])]
            key = "two_process_ratio" if s == "null" else "real_two_process_ratio"
            summary[key] = round(statistics.median(ratios), 3)
            print(f"{s:5} two processes / one (default path, per round): " + ", ".join(f"{x:.2f}" for x in ratios))
        for v in ("hub", "green"):
            if "pgbench" in variants and v in variants:
                ratios = [a.rate / b.rate for a, b in zip(results[(v, s)], results[("pgbench", s)])]
                summary[("" if s == "null" else "real_") + f"{v}_vs_pgbench"] = round(statistics.median(ratios), 3)
    summary.update(clients=args.clients, rounds=args.rounds, seconds=args.seconds)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
