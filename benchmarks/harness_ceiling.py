#!/usr/bin/env python
"""How many SENDs per second can one ssbench process drive, and at what client CPU per SEND?

Side by side in one run, on the same embedded PostgreSQL server with the same clients, in
alternating rounds (the order rotates each round, so drifts of a shared machine hit every
variant alike), for a null SEND (``SELECT pg_sleep(0)``: the client's cost, not the broker's)
and the real SEND (``ssb.send``):

* ``hub``: one Locust worker, each user's connection driven by gevent's hub (a socket callback
  finishes a SEND and begins the next: harness.load.sendloop.HubLoop; the embedded target's
  default);
* ``thread``: one worker, each user's SENDs on its own OS thread (send mode ``thread``: the
  path of blocking drivers, pyodbc for SQL Server, and of finite dialog lifetimes);
* ``two``: two Locust worker processes for one initiator (``workers_per_initiator`` 2), each
  with half the users (the default path, as ``hub``);
* ``pgbench``: pgbench (C) with the same clients, ``-M prepared``;
* ``odbc_thread`` (when psqlODBC is installed): the SQL Server sender's driver layer (pyodbc
  through harness.targets.mssql.driver) on the thread loop, against the same server
  (benchmarks/ceiling_sender.py);
* ``hub@S`` / ``thread@S`` (any S): that loop with each user's greenlet taking its finished
  SENDs every S seconds (the spec's ``report_interval_seconds``; default 0.2), to compare;
* with ``--metrics``, each ssbench variant V above also runs as ``V+metrics``, alternating
  with it: the live metrics endpoint on (each worker sends its recorder's delta every
  ``--metrics-interval`` seconds, else every second; the master keeps the live figures of its
  merge and posts them with its heartbeat, this process keeps the live state and serves it to a
  scraper every second). The cost printed is V+metrics's client CPU per
  SEND over V's, per round (median and spread); the Locust master's and this controller
  process's CPU per SEND are printed too (the endpoint's other costs).

Client CPU per SEND is the worker processes' CPU time over the measured window (/proc) divided
by the SENDs in it; pgbench's is its own CPU time over its run. Medians and the spread
(min-max) over the rounds are printed; the last line is one JSON object. These are PostgreSQL
numbers from an emulation, never SQL Server's.

    .venv/bin/python benchmarks/harness_ceiling.py --clients 50 --seconds 10 --rounds 3
    .venv/bin/python benchmarks/harness_ceiling.py --variants hub,thread --metrics --rounds 5
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

VARIANTS = ("hub", "thread", "two", "pgbench", "odbc_thread")
DEFAULT_VARIANTS = VARIANTS[:4]
SENDS = ("null", "real")


METRICS_SUFFIX = "+metrics"


def run_variant(target, variant: str, send: str, args, work: Path) -> loadbench.Measured:
    null = send == "null"
    variant, on, _ = variant.partition(METRICS_SUFFIX)
    metrics = args.metrics_interval if on else 0.0
    if variant == "pgbench":
        return loadbench.pgbench(target, args.clients, args.payload, args.seconds, work,
                                 sql=ceiling_sender.PGBENCH_NULL_SQL if null else None)
    base = target.sender_spec(1)
    if variant == "two":
        return loadbench.ssbench(target, {"1": ceiling_sender.spec(base, null=null)}, args.clients, args.payload,
                                 args.seconds, args.warmup, work, "auto", workers_per_initiator=2, metrics=metrics)
    odbc = None
    if variant.startswith("odbc_"):
        info = target.info
        odbc = {"host": str(info.socket_dir), "port": info.port, "database": target.initiator_db(1),
                "user": "postgres"}
    head, _, every = variant.partition("@")
    mode = {"hub": "auto", "thread": "thread", "odbc_thread": "auto"}[head]
    return loadbench.ssbench(target, {"1": ceiling_sender.spec(base, null=null, odbc=odbc)}, args.clients,
                             args.payload, args.seconds, args.warmup, work, mode,
                             report_interval=float(every) if every else None, metrics=metrics)


def _batch_variant(v: str) -> bool:
    head, _, tail = v.partition("@")
    try:
        return head in ("hub", "thread") and float(tail) > 0
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
    ap.add_argument("--metrics", action="store_true",
                    help="run each ssbench variant with the live metrics endpoint on too (V+metrics), alternating")
    ap.add_argument("--metrics-interval", type=float, default=1.0,
                    help="with --metrics: each worker's delta interval, seconds (a run's sample interval; default 1)")
    args = ap.parse_args()
    variants = [v for v in args.variants.split(",") if v]
    if args.metrics:
        variants = [x for v in variants for x in ((v, v + METRICS_SUFFIX) if v != "pgbench" else (v,))]
    sends = [s for s in args.sends.split(",") if s]
    bad = [v for v in variants if v.removesuffix(METRICS_SUFFIX) not in VARIANTS
           and not _batch_variant(v.removesuffix(METRICS_SUFFIX))] + \
        [s for s in sends if s not in SENDS]
    if bad or args.clients < 2 or args.rounds < 1:
        ap.error(f"bad --variants/--sends/--clients/--rounds: {bad or (args.clients, args.rounds)}")
    if any(v.startswith("odbc_") for v in variants) and not ceiling_sender.odbc_available():
        ap.error(f"the odbc variants need pyodbc and the {ceiling_sender.ODBC_DRIVER!r} ODBC driver (psqlODBC)")

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
                more = (f"; master {m.master_us_per_send:.1f}, controller {m.controller_us_per_send:.1f} us/SEND"
                        if m.master_us_per_send is not None else "")
                print(f"round {r + 1}: {s:4} {v:16} {m.rate:10,.0f} SEND/s  client CPU {cpu}"
                      f"  ({m.cpu_cores or 0:.2f} cores{more})", flush=True)
        label = target.label

    print(f"\n{label}; {args.clients} clients, {args.payload} B payload, {args.seconds:g} s windows, "
          f"{args.rounds} rounds, median [min-max]; a shared machine: noisy")
    print(f"{'send':5} {'variant':16} {'SEND/s':>28} {'client CPU us/SEND':>26}")
    summary: dict[str, float | None] = {}
    for s in sends:
        for v in variants:
            ms = results[(v, s)]
            rate = _stat([m.rate for m in ms])
            cpu = _stat([m.cpu_us_per_send for m in ms])
            cpu_txt = f"{cpu[0]:8.1f} [{cpu[1]:.1f}-{cpu[2]:.1f}]" if cpu[0] is not None else "n/a"
            print(f"{s:5} {v:16} {rate[0]:10,.0f} [{rate[1]:,.0f}-{rate[2]:,.0f}] {cpu_txt:>26}")
            prefix = "" if s == "null" else "real_"
            summary[f"{prefix}{v}_send_per_s"] = round(rate[0], 1)
            summary[f"{prefix}{v}_cpu_us_per_send"] = None if cpu[0] is None else round(cpu[0], 2)
        for v in variants:
            if v.endswith(METRICS_SUFFIX):
                _metrics_cost(s, v.removesuffix(METRICS_SUFFIX), results, summary)
        if "two" in variants and "hub" in variants:
            ratios = [b.rate / a.rate for a, b in zip(results[("hub", s)], results[("two", s)])]
            key = "two_process_ratio" if s == "null" else "real_two_process_ratio"
            summary[key] = round(statistics.median(ratios), 3)
            print(f"{s:5} two processes / one (default path, per round): " + ", ".join(f"{x:.2f}" for x in ratios))
        for v in ("hub", "thread"):
            if "pgbench" in variants and v in variants:
                ratios = [a.rate / b.rate for a, b in zip(results[(v, s)], results[("pgbench", s)])]
                summary[("" if s == "null" else "real_") + f"{v}_vs_pgbench"] = round(statistics.median(ratios), 3)
    summary.update(clients=args.clients, rounds=args.rounds, seconds=args.seconds)
    print(json.dumps(summary))
    return 0


def _metrics_cost(send: str, v: str, results, summary: dict) -> None:
    """The live metrics endpoint's cost for variant ``v``: per round, V+metrics's client CPU per
    SEND over V's (the two ran side by side in that round), and the master's and controller's
    CPU per SEND with and without it."""
    off, on = results[(v, send)], results[(v + METRICS_SUFFIX, send)]
    ratios = [b.cpu_us_per_send / a.cpu_us_per_send for a, b in zip(off, on)
              if a.cpu_us_per_send and b.cpu_us_per_send]
    if not ratios:
        return
    med, lo, hi = _stat(ratios)
    prefix = "" if send == "null" else "real_"
    summary[f"{prefix}{v}_metrics_cpu_ratio"] = round(med, 4)
    summary[f"{prefix}{v}_metrics_cpu_ratio_range"] = [round(lo, 4), round(hi, 4)]
    print(f"{send:5} {v}: client CPU per SEND with the metrics endpoint / without, per round: "
          + ", ".join(f"{x:.3f}" for x in ratios) + f"; median {med:.3f} [{lo:.3f}-{hi:.3f}]")
    for who in ("master", "controller"):
        a = _stat([getattr(m, f"{who}_us_per_send") for m in off])[0]
        b = _stat([getattr(m, f"{who}_us_per_send") for m in on])[0]
        if a is not None and b is not None:
            summary[f"{prefix}{v}_{who}_us_per_send"] = [round(a, 2), round(b, 2)]
            print(f"{send:5} {v}: {who} CPU per SEND (median) without / with: {a:.2f} / {b:.2f} us")


if __name__ == "__main__":
    sys.exit(main())
