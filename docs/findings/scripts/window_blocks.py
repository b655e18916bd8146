#!/usr/bin/env python
"""Does a window keep its level, or does the rate move inside one continuous window? (issue 24; not a test)

Cuts every measured window of the runs given into blocks of ``--block`` seconds (default 6:
bench.yaml's windows) from its per-second samples (``samples.jsonl``: the receive rate, the
server's commit latency, the fsync probe beside the data, the CPU probe, the cross-CPU round
trip) and prints, per window, the blocks' rates and their max/min, then, pooled over the
windows (each centred on its own mean), the s.d. of the blocks' log rate, its correlation with
each figure's log, and the s.d. left after the fsync probe's regression. The last line is one
JSON object.

Run it on long windows with nothing else changing: a matrix of one permutation with
``measure_seconds: 90`` (docs/findings/long-windows.md), e.g.
bench.yaml's 8-thread ``per_thread`` with ``run: {measure_seconds: 90, repetitions: 3}``:

    .venv/bin/ssbench run long.yaml --out /tmp/long && .venv/bin/python docs/findings/scripts/window_blocks.py /tmp/long
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

#: (family, metric) of samples.jsonl, and the name printed
FIGURES = {("storage", "commit_latency_ms"): "commit_ms", ("storage", "probe_ms"): "fsync_probe_ms",
           ("cpu_speed", "probe_ms"): "cpu_probe_ms", ("cross_cpu", "round_trip_ns"): "cross_cpu_ns"}
RATE = ("throughput", "received_per_s")


def blocks(samples: Path, block: int) -> dict[str, list[float]]:
    """The window's per-block means of the rate and of each figure (measured phase only)."""
    series: dict[tuple[str, str], list[float]] = {}
    with samples.open() as f:
        for line in f:
            r = json.loads(line)
            key = (r["family"], r["metric"])
            if r.get("phase") == "measure" and (key in FIGURES or key == RATE):
                series.setdefault(key, []).append(float(r["value"]))
    out = {}
    for key, name in [(RATE, "rate"), *FIGURES.items()]:
        v = series.get(key, [])
        out[name] = [statistics.fmean(v[i:i + block]) for i in range(0, len(v) - block + 1, block)]
    n = len(out["rate"])
    return {k: v for k, v in out.items() if len(v) == n}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path, help="results run directories")
    ap.add_argument("--block", type=int, default=6, help="seconds per block (default 6)")
    a = ap.parse_args(argv)
    pooled: dict[str, list[float]] = {}
    spreads = []
    for run in a.runs:
        for samples in sorted(run.glob("*/rep-*/samples.jsonl")):
            b = blocks(samples, a.block)
            if len(b.get("rate", [])) < 2 or min(b["rate"]) <= 0:
                continue
            rates = b["rate"]
            spreads.append(max(rates) / min(rates))
            print(f"{samples.parent.parent.name} {samples.parent.name}: mean {statistics.fmean(rates):,.0f} msg/s; "
                  f"{a.block} s blocks {' '.join(f'{r:,.0f}' for r in rates)}; max/min {spreads[-1]:.3f}")
            for name, v in b.items():
                if min(v) > 0:
                    logs = [math.log(x) for x in v]
                    m = statistics.fmean(logs)
                    pooled.setdefault(name, []).extend(x - m for x in logs)
    rate = pooled.pop("rate", [])
    if len(rate) < 3:
        print("fewer than 3 blocks: nothing to pool", file=sys.stderr)
        return 1
    res = {"blocks": len(rate), "windows": len(spreads), "block_spread_min": round(min(spreads), 3),
           "block_spread_max": round(max(spreads), 3), "sd_log_rate_pct": round(100 * statistics.stdev(rate), 1)}
    print(f"{len(rate)} blocks of {len(spreads)} windows: max/min inside a window {min(spreads):.3f} to "
          f"{max(spreads):.3f}; s.d. of the log rate {res['sd_log_rate_pct']} %")
    for name, x in pooled.items():
        if len(x) == len(rate) and statistics.pstdev(x) > 0:
            res[f"corr_{name}"] = round(statistics.correlation(x, rate), 2)
            print(f"  correlation with {name}: {res[f'corr_{name}']:+.2f}")
    probe = pooled.get("fsync_probe_ms")
    if probe and len(probe) == len(rate) and statistics.pstdev(probe) > 0:
        slope = statistics.linear_regression(probe, rate).slope
        left = [r - slope * p for r, p in zip(rate, probe)]
        res["sd_after_fsync_probe_pct"] = round(100 * statistics.stdev(left), 1)
        print(f"  without the fsync probe (slope {slope:+.2f}): s.d. {res['sd_after_fsync_probe_pct']} %")
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
