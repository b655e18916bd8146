"""The machine the suite runs on: its CPUs, any CPU quota over this process (cgroup v2
``cpu.max``, v1 ``cpu.cfs_quota_us``: tools/slow-machine sets one), and its CPU speed probe, a
fixed loop timed in its own thread's CPU time (as harness.collectors.cpuspeed does per window).
The probe's figure grows on a slower CPU and does not move with load or a quota (its time is
the thread's own CPU); the CPUs and the quota say how much of that CPU the run may have.

Only the standard library: ``python3 tests/support/machine.py`` prints the machine's line before
the venv exists (.ci/run prints it beside each step's time); ``--workers``, make test's xdist
workers for this machine."""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

try:
    from harness import cgroups
except ImportError:     # run as a script before the venv: the repository's own (standard library only)
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from harness import cgroups

#: iterations of the probe's empty loop (about 2.5 ms of CPU on the 2-vCPU test VM)
WORK = 200_000


def probe_ms(work: int = WORK) -> float:
    """One probe: the loop's CPU time in milliseconds."""
    c0 = time.thread_time()
    for _ in range(work):
        pass
    return (time.thread_time() - c0) * 1000.0


def probe(n: int = 25, every: float = 0.02) -> list[float]:
    """``n`` probes ``every`` seconds apart, sorted."""
    out = []
    for i in range(n):
        out.append(probe_ms())
        if i + 1 < n:
            time.sleep(every)
    return sorted(out)


def quantile(sorted_ms: list[float], f: float) -> float:
    return sorted_ms[min(len(sorted_ms) - 1, int(f * len(sorted_ms)))]


def cpus() -> int:
    """The CPUs this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def effective_cpus() -> float:
    """The CPUs' worth of time this process may have: its CPUs, or its quota when smaller."""
    q = cgroups.cpu_quota()
    return min(cpus(), q) if q is not None else float(cpus())


#: the probe's median and the CPUs of the machine the suite's time bounds were set on (the
#: 2-vCPU test VM, 2026-11-28: 2.45 to 2.8 ms, no quota)
REFERENCE_MS, REFERENCE_CPUS = 2.5, 2
_SLOWNESS: list[float] = []


def slowness() -> float:
    """How many times longer than on the reference machine CPU-bound work may take here, at
    least 1: the probe's median against the reference's, times the reference's CPUs against
    this process's share of CPUs (a quota of 1 CPU on 2 cores: 2). Probed once per process."""
    if not _SLOWNESS:
        ms = statistics.median(probe(15, 0.01))
        _SLOWNESS.append(max(1.0, ms / REFERENCE_MS) * max(1.0, REFERENCE_CPUS / effective_cpus()))
    return _SLOWNESS[0]


def allowance(seconds: float) -> float:
    """A time bound set on the reference machine, stretched to this one (:func:`slowness`)."""
    return seconds * slowness()


def describe(sorted_ms: list[float]) -> str:
    """The machine's line: the probe's median and spread, the CPUs and the quota."""
    q = cgroups.cpu_quota()
    share = f"a quota of {q:g} CPU" if q is not None and q < cpus() else "no CPU quota"
    spread = (f"median of {len(sorted_ms)}; p10 {quantile(sorted_ms, 0.1):.2f}, p90 {quantile(sorted_ms, 0.9):.2f}"
              if sorted_ms else "no probe")
    med = f"{statistics.median(sorted_ms):.2f} ms" if sorted_ms else "?"
    return (f"a fixed loop took {med} of CPU ({spread}): the larger, the slower this machine ran; "
            f"{cpus()} CPUs, {share}")


def test_workers() -> int:
    """make test's xdist workers: one and a half per CPU's worth of time this process may have,
    at least 3 (on 2 cores, against 4 the same tests took 12 % fewer CPU-s, the time contention
    costs; under a quota of 1 CPU, against 2 the parallel part ended 56 to 65 s sooner, its
    waits overlapped: docs/findings/test-suite-slow-machine.md)."""
    return max(3, round(1.5 * effective_cpus()))


if __name__ == "__main__":
    if sys.argv[1:] == ["--workers"]:
        print(test_workers())
    else:
        print(f"machine: {describe(probe())}; load average {os.getloadavg()[0]:.1f}", file=sys.stdout)
