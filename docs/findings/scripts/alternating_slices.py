#!/usr/bin/env python
"""Would alternating two dialog strategies inside one window narrow a comparison? (issue 24;
not a test)

`make bench` compares strategies window against window: each repetition of a permutation is
its own window, 10 to 40 s from the other strategy's. On the 2-vCPU VM a window keeps a level
of its own (s.d. about 10 % of the rate, docs/findings/scripts/spread_covariates.py) that the next window
has lost, so the comparison's interval is as wide as that level allows.

This measures the other design side by side with it, on the embedded target, round by round:

* ``windows``: strategy A alone for W s, then (prepared again) B alone for W s, the way a run
  measures two permutations;
* ``slices``: one window of 2W s in which all client threads switch between A's and B's dialogs
  every S s (both sets of dialogs are begun in every window, so the two designs differ only in
  the timing).

Each round gives each design one estimate of log(rate B / rate A), from the same measured time.
The s.d. of those estimates across rounds is each design's precision; with A = B it is the
noise alone (an A/A comparison). Client: the harness's EmbeddedSender, one Python thread per
client thread, each SEND its own transaction, the broker running (activation receives).

These are PostgreSQL numbers from an emulation, never SQL Server's. Example:

    .venv/bin/python docs/findings/scripts/alternating_slices.py --a per_thread --b trick150 --threads 8 \\
        --window 8 --slice 1 --rounds 8
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from harness.dialogstrategy import DialogStrategy  # noqa: E402
from harness.matrix import BrokerSettings  # noqa: E402
from harness.targets.embedded.sender import EmbeddedSender  # noqa: E402
from harness.targets.embedded.server import EmbeddedServer  # noqa: E402
from harness.targets.embedded.target import EmbeddedTarget  # noqa: E402

STRATEGIES = ("per_thread", "trick150", "shared")
BROKER = BrokerSettings(max_queue_readers=4, receive_top=10000, waitfor_timeout_ms=1000, monitor_interval_seconds=1.0)


def prepared(target: EmbeddedTarget, threads: int, strategies: dict[str, DialogStrategy],
             profile: str) -> dict[str, list[int]]:
    """A clean window with every strategy's dialogs begun (label -> strategy, in that order):
    the usable slots each label's threads send on. Then the warm-up, settle and the broker, as
    a run."""
    target.prepare(1, profile, BROKER)
    slots: dict[str, list[int]] = {}
    base = 0
    for name, strategy in strategies.items():
        usable = strategy.usable_dialogs(threads)
        target.create_dialogs(1, usable, strategy.every_n)
        slots[name] = [base + 1] * threads if strategy.shared else [base + k + 1 for k in range(threads)]
        base += usable
    target.warm_up(1)
    target.settle()
    target.start()
    return slots


def drive(target: EmbeddedTarget, threads: int, schedule, seconds: float, warmup: float,
          payload: int) -> dict[str, float]:
    """Closed-loop SENDs from ``threads`` threads for ``warmup + seconds``; ``schedule(t)`` names
    the strategy's slots to use at time t into the measured part. Returns SENDs/s per strategy
    over the time each was scheduled (a SEND counts for the strategy whose dialog it used)."""
    spec = target.sender_spec(1)
    senders = [EmbeddedSender(spec["conninfo"], 1) for _ in range(threads)]
    body = b"x" * payload
    counts: list[dict[str, int]] = [{} for _ in range(threads)]
    active: dict[str, float] = {}
    stop = threading.Event()
    barrier = threading.Barrier(threads + 1)
    t0 = [0.0]

    def work(k: int) -> None:
        s = senders[k]
        handles: dict[int, str] = {}
        barrier.wait()
        while not stop.is_set():
            now = time.perf_counter() - t0[0]
            name, slots = schedule(max(now, 0.0))
            slot = slots[k]
            h = handles.get(slot) or handles.setdefault(slot, s.dialog(slot))
            s.send(h, body)
            if now >= 0:
                counts[k][name] = counts[k].get(name, 0) + 1

    ths = [threading.Thread(target=work, args=(k,), daemon=True) for k in range(threads)]
    for t in ths:
        t.start()
    t0[0] = time.perf_counter() + warmup
    barrier.wait()
    time.sleep(warmup + seconds)
    stop.set()
    for t in ths:
        t.join()
    for s in senders:
        s.close()
    step = 0.01
    for i in range(int(seconds / step)):
        name = schedule(i * step + step / 2)[0]
        active[name] = active.get(name, 0.0) + step
    total: dict[str, int] = {}
    for c in counts:
        for name, n in c.items():
            total[name] = total.get(name, 0) + n
    return {name: total.get(name, 0) / active[name] for name in active}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", help="embedded server data directory (default: $SSBENCH_PGDATA or the cache)")
    p.add_argument("--prefix", default="ssbslice", help="database prefix (default ssbslice)")
    p.add_argument("--a", default="per_thread", choices=STRATEGIES)
    p.add_argument("--b", default="trick150", choices=STRATEGIES)
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--window", type=float, default=8, help="W: one strategy's window, s (a slices window is 2W)")
    p.add_argument("--slice", type=float, default=1, help="S: the slices' length, s")
    p.add_argument("--warmup", type=float, default=2)
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--payload", type=int, default=100)
    p.add_argument("--profile", default="durable", choices=["durable", "delayed"])
    p.add_argument("--json", help="write the results here too")
    a = p.parse_args()
    # A/A: the same strategy on both sides, under two labels (and two sets of dialogs)
    la, lb = (a.a, a.b) if a.a != a.b else (a.a, a.b + "'")
    strategies = {la: DialogStrategy.parse(a.a), lb: DialogStrategy.parse(a.b)}
    server = EmbeddedServer(Path(a.data_dir) if a.data_dir else None)
    target = EmbeddedTarget(server, prefix=a.prefix)
    target.provision(1)
    rows = []
    try:
        for r in range(a.rounds):
            est = {}
            order = ("windows", "slices") if r % 2 == 0 else ("slices", "windows")
            for design in order:
                if design == "windows":
                    rates = {}
                    for name in ((la, lb) if r % 2 == 0 else (lb, la)):
                        slots = prepared(target, a.threads, strategies, a.profile)
                        try:
                            rates.update(drive(target, a.threads, lambda t, n=name: (n, slots[n]), a.window,
                                               a.warmup, a.payload))
                        finally:
                            target.stop()
                else:
                    slots = prepared(target, a.threads, strategies, a.profile)
                    first, second = (la, lb) if r % 2 == 0 else (lb, la)

                    def sched(t, first=first, second=second, slots=slots):
                        name = first if int(t // a.slice) % 2 == 0 else second
                        return name, slots[name]
                    try:
                        rates = drive(target, a.threads, sched, 2 * a.window, a.warmup, a.payload)
                    finally:
                        target.stop()
                est[design] = math.log(rates[lb] / rates[la])
                est[design + "_rates"] = {k: round(v, 1) for k, v in rates.items()}
            rows.append(est)
            print(f"round {r + 1}: windows {100 * est['windows']:+6.1f} %  slices {100 * est['slices']:+6.1f} %  "
                  f"({est['windows_rates']} / {est['slices_rates']}; load {os.getloadavg()[0]:.1f})", flush=True)
    finally:
        target.close()
    out = {"what": f"log(rate {lb} / rate {la}) per round, two designs, same measured time "
                   "(PostgreSQL emulation, not SQL Server)",
           "threads": a.threads, "window_s": a.window, "slice_s": a.slice, "rounds": a.rounds,
           "profile": a.profile, "postgresql": target.version}
    for design in ("windows", "slices"):
        xs = [row[design] for row in rows]
        out[design] = {"mean_pct": round(100 * statistics.mean(xs), 2),
                       "sd_pct": round(100 * statistics.stdev(xs), 2) if len(xs) > 1 else None}
    if len(rows) > 1 and out["slices"]["sd_pct"]:
        out["sd_ratio_windows_to_slices"] = round(out["windows"]["sd_pct"] / out["slices"]["sd_pct"], 2)
    out["rounds_detail"] = rows
    print(json.dumps({k: v for k, v in out.items() if k != "rounds_detail"}))
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
