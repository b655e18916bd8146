"""What the entry-point registry (harness/targets/registry.py) costs a process: its first lookup
(importlib.metadata reads every distribution's entry points on sys.path) and a cached one, each
in a fresh interpreter. Every Locust worker and the runner pay the first once per process; the
SEND path pays nothing.

    .venv/bin/python docs/findings/scripts/registry_lookup.py [--samples 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

CODE = ("import time; from harness.targets import registry as r; t = time.perf_counter(); "
        "r.entry_points(r.SENDERS); a = time.perf_counter(); r.entry_points(r.SENDERS); "
        "b = time.perf_counter(); print((a - t) * 1e3, (b - a) * 1e3)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=15)
    args = ap.parse_args()
    first, again = [], []
    for _ in range(args.samples):
        out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, check=True).stdout.split()
        first.append(float(out[0]))
        again.append(float(out[1]))
    print(f"load average {os.getloadavg()[0]:.1f}")
    for name, v in (("first lookup", first), ("cached lookup", again)):
        print(f"{name}: median {statistics.median(v):.2f} ms, min {min(v):.2f}, max {max(v):.2f}, n {len(v)}")


if __name__ == "__main__":
    main()
