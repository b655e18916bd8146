#!/usr/bin/env python
"""Calibration of the noisy_storage detector (harness.collectors.storage): how often does it
flag a window whose disk nobody disturbed, and how often one beside an fsync-heavy writer?

Alternating rounds on the file system of a directory (default: the embedded server's data
directory's parent): each round measures one idle window and one window per disturbance level
(``--mib``: real writer processes, ``--writers`` of them, each writing that many MiB and fsyncing
it in a loop, tests/support/fsync_writer.py). Each window is what a repetition's storage collector sees: the
idle reference (the probe's first ``REFERENCE_S``), then ``--seconds`` of probes, whose figure
is the mean over 1 s ticks of each tick's median probe; the window is flagged when that is far
above the run's typical (the median of the references so far), exactly as
harness.collectors.storage.noisy_storage decides. Prints the medians and the
flag rate per condition, the load average, and a last line of JSON.

    .venv/bin/python docs/findings/scripts/storage_noise.py --rounds 10 --seconds 6 --mib 8,32 --writers 4
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))

from harness.collectors.storage import REFERENCE_S, FsyncProbe, noisy_storage  # noqa: E402


def window(directory: Path, seconds: float, mib: float | None, writers: int) -> tuple[float, float]:
    """(idle reference median, window figure) in ms, as a repetition's storage collector has
    them (the figure: the mean over 1 s ticks of each tick's median probe); the writers run
    during the window only."""
    probe = FsyncProbe(directory)
    probe.start()
    try:
        time.sleep(REFERENCE_S)
        ref = statistics.median(ms for _, ms in probe.samples)
        procs = [subprocess.Popen([sys.executable, str(REPO / "tests/support/fsync_writer.py"),
                                   str(directory / f".ssbench-noise-{os.getpid()}-{i}"), str(seconds + 5), str(mib)],
                                  stdout=subprocess.DEVNULL) for i in range(writers if mib else 0)]
        t0 = time.time()
        ticks = []
        for k in range(int(seconds)):
            time.sleep(max(0.0, t0 + k + 1 - time.time()))
            inside = probe.between(t0 + k, t0 + k + 1)
            if inside:
                ticks.append(statistics.median(inside))
        for w in procs:
            w.terminate()
            w.wait(30)
    finally:
        probe.stop()
    return ref, statistics.fmean(ticks)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, default=None, help="directory on the file system to probe "
                    "(default: the embedded server's data directory's parent)")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=6.0, help="seconds per window (default 6: make bench's)")
    ap.add_argument("--mib", default="8,32", help="disturbance levels: MiB per fsync of each writer")
    ap.add_argument("--writers", type=int, default=4, help="writer processes per disturbed window (default 4)")
    a = ap.parse_args()
    directory = a.dir
    if directory is None:
        from harness.targets.embedded.server import default_data_dir

        directory = default_data_dir().parent
    directory.mkdir(parents=True, exist_ok=True)
    levels = [None] + [float(x) for x in a.mib.split(",") if x]
    refs: list[float] = []
    rows: dict[str, list[tuple[float, float, bool]]] = {}
    for r in range(a.rounds):
        order = levels[r % len(levels):] + levels[:r % len(levels)]
        for mib in order:
            ref, med = window(directory, a.seconds, mib, a.writers)
            refs.append(ref)
            typical = statistics.median(refs)
            name = "idle" if mib is None else f"{a.writers} x {mib:g} MiB"
            rows.setdefault(name, []).append((ref, med, noisy_storage(med, typical)))
            print(f"round {r + 1} {name:>16}: reference {ref:6.2f} ms, window {med:6.2f} ms, "
                  f"typical {typical:6.2f} ms, flagged {noisy_storage(med, typical)}", flush=True)
    load = os.getloadavg()
    print(f"\n{directory} ({a.rounds} rounds x {a.seconds:g} s), load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    out = {}
    for name, vals in rows.items():
        meds = sorted(v[1] for v in vals)
        rate = sum(v[2] for v in vals) / len(vals)
        out[name] = {"window_median_ms": statistics.median(meds), "min": meds[0], "max": meds[-1], "flag_rate": rate,
                     "n": len(vals)}
        print(f"{name:>16}: window {statistics.median(meds):6.2f} ms [{meds[0]:.2f}-{meds[-1]:.2f}], "
              f"flagged {sum(v[2] for v in vals)} of {len(vals)}")
    print(json.dumps({"dir": str(directory), "rounds": a.rounds, "seconds": a.seconds, "load": load,
                      "typical_ms": statistics.median(refs), "conditions": out}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
