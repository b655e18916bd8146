#!/usr/bin/env python
"""Does the disk (or the vCPU, or its memory) itself keep a level for seconds at a time? (issue 24; not a test)

The embedded target's rates spread from one window to the next by a level each window keeps
for its whole length (docs/findings/spread-covariates.md), and they follow the
server's WAL flush time (slope about -1). This asks whether that level is already in the disk,
with no PostgreSQL at all: one thread appends ``--block`` bytes to a 16 MiB file written
beforehand (like a recycled WAL segment: no allocation, no size change) and ``fdatasync``s
it, as fast as it can, for ``--seconds``. The mean flush time of every ``--tick`` seconds is
kept (``--what cpu``: an empty loop timed by its thread's CPU time; ``--what memory``: random
reads and a copy far larger than the caches, timed by the wall clock), and the script prints

* the s.d. of the ticks' log means and their autocorrelation at a few lags: a disk without
  memory has none beyond lag 0;
* the s.d. of the log means of consecutive windows of ``--window`` seconds, beside what the
  ticks would give if they were independent (their s.d. over the square root of the ticks a
  window holds): a disk that keeps a level for seconds gives more;
* the max/min of the window means over every run of ``--reps`` consecutive windows (median and
  90th percentile): the spread a permutation's repetitions would show if its rate followed
  the disk's flush time one for one, with nothing else moving.

It writes to the file system of ``--dir`` (default: where the embedded server keeps its data,
/var/tmp). Example, and the last line is JSON:

    python docs/findings/scripts/disk_levels.py --seconds 150 --block 8192
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import tempfile
import time

SEGMENT = 16 << 20


def tick_means(seconds: float, tick: float, once) -> list[float]:
    """Call ``once()`` (it returns the seconds it measured) for ``seconds``; the mean of each
    ``tick`` seconds, in milliseconds."""
    ticks, cur = [], []
    start = time.perf_counter()
    next_tick = start + tick
    while time.perf_counter() - start < seconds:
        cur.append(once())
        if time.perf_counter() >= next_tick:
            ticks.append(1000 * statistics.fmean(cur))
            cur, next_tick = [], next_tick + tick
    return ticks


def flush_ticks(directory: str, seconds: float, block: int, tick: float) -> list[float]:
    """Mean milliseconds per fdatasync over each tick of a loop of append + fdatasync."""
    fd, path = tempfile.mkstemp(prefix="ssbench-disk-levels-", dir=directory)
    try:
        for _ in range(SEGMENT >> 20):
            os.write(fd, b"\0" * (1 << 20))
        os.fsync(fd)
        os.lseek(fd, 0, os.SEEK_SET)
        data, offset = b"x" * block, 0

        def once() -> float:
            nonlocal offset
            if offset + block > SEGMENT:
                offset = 0
                os.lseek(fd, 0, os.SEEK_SET)
            os.write(fd, data)
            offset += block
            t = time.perf_counter()
            os.fdatasync(fd)
            return time.perf_counter() - t

        return tick_means(seconds, tick, once)
    finally:
        os.close(fd)
        os.unlink(path)


def cpu_ticks(seconds: float, tick: float, loop: int = 20000) -> list[float]:
    """Mean milliseconds of this thread's CPU time per run of an empty loop of ``loop``
    iterations, over each tick (the CPU probe of harness.collectors.cpuspeed, run without a
    pause): how fast the vCPU runs right now."""

    def once() -> float:
        t = time.thread_time()
        for _ in range(loop):
            pass
        return time.thread_time() - t

    return tick_means(seconds, tick, once)


def memory_ticks(seconds: float, tick: float) -> list[float]:
    """Mean milliseconds (wall) per round of memory-bound work, over each tick: 1 Mi random
    reads from a 256 MiB array and a 64 MiB copy (numpy; about 14 ms on the test VM). Unlike
    the empty loop, which stays in the L1 cache, it needs the host's caches and memory
    bandwidth, which the VM shares with its neighbours."""
    import numpy as np

    rng = np.random.default_rng(1)
    a = rng.integers(0, 1 << 30, size=32 << 20, dtype=np.int64)
    idx = rng.integers(0, a.size, size=1 << 20)
    dst, src = np.empty(8 << 20, dtype=np.int64), a[: 8 << 20]

    def once() -> float:
        t = time.perf_counter()
        a[idx].sum()
        np.copyto(dst, src)
        return time.perf_counter() - t

    return tick_means(seconds, tick, once)


def autocorrelation(x: list[float], lag: int) -> float:
    m, var = statistics.fmean(x), statistics.pvariance(x)
    return sum((x[i] - m) * (x[i + lag] - m) for i in range(len(x) - lag)) / len(x) / var


def summarize(ticks: list[float], tick: float, window: float, reps: int) -> dict:
    logs = [math.log(v) for v in ticks]
    per = max(1, round(window / tick))
    windows = [statistics.fmean(logs[i:i + per]) for i in range(0, len(logs) - per + 1, per)]
    spreads = sorted(math.exp(max(windows[i:i + reps]) - min(windows[i:i + reps]))
                     for i in range(len(windows) - reps + 1))
    sd_tick = statistics.stdev(logs)
    lags = [lag for lag in (1, 2, 4, 8, 16, 32) if lag < len(logs) // 2]
    return {
        "ticks": len(ticks), "mean_ms": round(statistics.fmean(ticks), 4),
        "tick_sd_pct": round(100 * sd_tick, 1),
        "acf": {f"{lag * tick:g}s": round(autocorrelation(logs, lag), 2) for lag in lags},
        "windows": len(windows), "window_sd_pct": round(100 * statistics.stdev(windows), 1),
        "window_sd_if_independent_pct": round(100 * sd_tick / math.sqrt(per), 1),
        f"max_min_of_{reps}": {"median": round(statistics.median(spreads), 3),
                               "p90": round(spreads[int(0.9 * (len(spreads) - 1))], 3),
                               "max": round(spreads[-1], 3)},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--what", choices=("disk", "cpu", "memory"), default="disk",
                    help="disk: append + fdatasync; cpu: an empty loop timed by its thread's CPU time; "
                         "memory: random reads and a copy far larger than the caches (numpy)")
    ap.add_argument("--dir", default="/var/tmp", help="a directory on the file system to measure")
    ap.add_argument("--seconds", type=float, default=150)
    ap.add_argument("--block", type=int, default=8192, help="bytes appended before each fdatasync")
    ap.add_argument("--tick", type=float, default=0.5, help="seconds per tick")
    ap.add_argument("--window", type=float, default=6, help="seconds per window (bench.yaml: 6)")
    ap.add_argument("--reps", type=int, default=5, help="windows per spread (bench.yaml: up to 5)")
    a = ap.parse_args()
    if a.what == "disk":
        ticks = flush_ticks(a.dir, a.seconds, a.block, a.tick)
        what = f"fdatasync of {a.block} B"
    elif a.what == "cpu":
        ticks = cpu_ticks(a.seconds, a.tick)
        what = "an empty loop of 20,000 iterations (thread CPU time)"
    else:
        ticks = memory_ticks(a.seconds, a.tick)
        what = "1 Mi random reads from 256 MiB and a 64 MiB copy (wall time)"
    out = {"what": a.what, "dir": a.dir, "block": a.block, "seconds": a.seconds, "tick": a.tick, "window": a.window,
           "loadavg": [round(x, 2) for x in os.getloadavg()], **summarize(ticks, a.tick, a.window, a.reps)}
    print(f"{what}: {out['mean_ms']} ms mean over {out['ticks']} ticks of {a.tick} s; "
          f"tick s.d. {out['tick_sd_pct']} %, autocorrelation {out['acf']}")
    print(f"{a.window} s windows: s.d. {out['window_sd_pct']} % (independent ticks would give "
          f"{out['window_sd_if_independent_pct']} %); max/min of {a.reps} consecutive windows: "
          f"median {out[f'max_min_of_{a.reps}']['median']}, p90 {out[f'max_min_of_{a.reps}']['p90']}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
