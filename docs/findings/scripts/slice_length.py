#!/usr/bin/env python
"""How long should an alternated window's slices be? (issue 24; not a test)

`run.alternate` judges two dialog strategies by the ratio of their rates inside one window, the
strategies taking turns of `slice_seconds`. With one client thread the rate moves from one
tenth of a second to the next (docs/statistics.md, "Both sides in the same windows"), and that
noise, not the window's level, bounds the 1-thread comparisons of `make bench`.

This measures, on the same recording, what the slice length does to that noise: one client
thread sends on one dialog (the harness's EmbeddedSender, durable commits, the broker running)
for ``--seconds``; every SEND's completion time is kept. The recording is then cut into windows
of ``--members`` x ``--window`` seconds, and each window's SENDs are dealt to ``--members``
virtual strategies by slices of S seconds, exactly as `harness.plan.member_at` deals
them. With one strategy on every side the true ratio is 1 (an A/A comparison), so the s.d. of
the windows' log ratio (member 1 against member 0) is the noise a paired comparison of that
window length would see, for every S side by side on the same SENDs.

These are PostgreSQL numbers from an emulation, never SQL Server's. Example:

    .venv/bin/python docs/findings/scripts/slice_length.py --seconds 300 --window 12 --members 3
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from alternating_slices import prepared  # noqa: E402
from harness.plan import member_at  # noqa: E402
from harness.dialogstrategy import DialogStrategy  # noqa: E402
from harness.targets.embedded.sender import EmbeddedSender  # noqa: E402
from harness.targets.embedded.server import EmbeddedServer  # noqa: E402
from harness.targets.embedded.target import EmbeddedTarget  # noqa: E402

SLICES = (0.1, 0.2, 0.3, 0.5, 1.0)


def record(target: EmbeddedTarget, seconds: float, warmup: float, payload: int,
           strategy: str) -> tuple[list[float], float]:
    """One client thread's SEND completion times (wall clock, s) over ``seconds`` after ``warmup``,
    and when that began."""
    slots = prepared(target, 1, {strategy: DialogStrategy.parse(strategy)}, "durable")
    sender = EmbeddedSender(target.sender_spec(1)["conninfo"], 1)
    body = b"x" * payload
    handle = sender.dialog(slots[strategy][0])
    done: list[float] = []
    try:
        start = time.time() + warmup
        end = start + seconds
        while (now := time.time()) < end:
            sender.send(handle, body)
            if now >= start:
                done.append(time.time())
    finally:
        sender.close()
        target.stop()
    return [t for t in done if t < end], start


def noise(done: list[float], start: float, seconds: float, window: float, members: int,
          slice_s: float) -> list[float]:
    """Each whole window's log(rate of member 1 / rate of member 0), the SENDs (``done``, in
    order) dealt by slices."""
    span = window * members
    out = []
    for w in range(int(seconds // span)):
        lo = start + w * span
        hi = lo + span
        counts = [0] * members
        for t in done[bisect.bisect_left(done, lo):bisect.bisect_left(done, hi)]:
            counts[member_at(t, slice_s, members)] += 1
        # each member's time in the window: the slices it owns (whole windows of whole slices
        # give each the same time only when span is a multiple of members x slice)
        owned = [0.0] * members
        step = 0.001
        for i in range(int(span / step)):
            owned[member_at(lo + (i + 0.5) * step, slice_s, members)] += step
        out.append(math.log((counts[1] / owned[1]) / (counts[0] / owned[0])))
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", help="embedded server data directory (default: $SSBENCH_PGDATA or the cache)")
    p.add_argument("--prefix", default="ssbslicelen", help="database prefix")
    p.add_argument("--seconds", type=float, default=300)
    p.add_argument("--window", type=float, default=12, help="one member's measured time in a window, s")
    p.add_argument("--members", type=int, default=3)
    p.add_argument("--warmup", type=float, default=2)
    p.add_argument("--payload", type=int, default=100)
    p.add_argument("--strategy", default="per_thread")
    p.add_argument("--json", help="write the results here too")
    a = p.parse_args()
    server = EmbeddedServer(Path(a.data_dir) if a.data_dir else None)
    target = EmbeddedTarget(server, prefix=a.prefix)
    target.provision(1)
    try:
        done, start = record(target, a.seconds, a.warmup, a.payload, a.strategy)
    finally:
        target.close()
    out = {"what": "s.d. of an A/A window's log ratio by slice length, one recording (PostgreSQL emulation, "
                   "not SQL Server)", "sends": len(done), "seconds": a.seconds, "window_s": a.window,
           "members": a.members, "postgresql": target.version, "by_slice": {}}
    width = 0.1
    buckets = [0] * int(a.seconds / width)
    for t in done:
        buckets[min(int((t - start) / width), len(buckets) - 1)] += 1
    m = statistics.mean(buckets)
    dev = [b - m for b in buckets]
    lag1 = sum(x * y for x, y in zip(dev, dev[1:])) / sum(x * x for x in dev)
    out["buckets_0_1s"] = {"mean": round(m, 1), "sd_pct": round(100 * statistics.pstdev(buckets) / m, 1),
                           "lag1_autocorr": round(lag1, 3)}
    print(f"{len(done)} SENDs; per 0.1 s: mean {m:.1f}, s.d. {100 * statistics.pstdev(buckets) / m:.1f} %, "
          f"lag-1 autocorrelation {lag1:.2f}", flush=True)
    for s in SLICES:
        xs = noise(done, start, a.seconds, a.window, a.members, s)
        out["by_slice"][f"{s:g}"] = {"windows": len(xs), "mean_pct": round(100 * statistics.mean(xs), 2),
                                     "sd_pct": round(100 * statistics.stdev(xs), 2)}
        print(f"slices of {s:g} s: {len(xs)} windows, log ratio mean {100 * statistics.mean(xs):+.2f} %, "
              f"s.d. {100 * statistics.stdev(xs):.2f} %", flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
