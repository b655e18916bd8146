"""The host's cross-CPU latency of the moment: how long a cache line takes to go from one of
this machine's CPUs to another and back. A VM's host may place its vCPUs on cores sharing a
cache or far apart, and move them; PostgreSQL's backends hand locks, buffer headers and the
WAL's insert position from CPU to CPU on every commit, so a window's rate can follow that level
while the CPU speed probe and the steal time do not move (measured: docs/findings/cross-cpu.md).

* **Probe** (``round_trip_ns``): a process of this collector (harness/collectors/crosscpu_probe.py,
  a script of the standard library alone: :func:`probe_cmd`), one per repetition, pinned to
  the first CPU this process may use, with a partner pinned to the last, bounces a counter in
  shared memory: every :data:`PROBE_INTERVAL_S`, :data:`BURSTS` bursts of
  :data:`ROUNDS` round trips, the fastest burst's nanoseconds per round trip (so a burst in
  which the load preempted either side does not count). A tick's figure is the median of its
  probes. It includes the interpreter's own work (the same in every probe): 190 ns on that VM
  where the C loop took 80, 380 where it took 360.
* **Window** (``cross_cpu_ns``): the mean over the window's ticks. Recorded, not judged: what
  level counts as disturbed is not calibrated yet (docs/embedded.md, "Cross-CPU latency").

It probes the machine ssbench runs on: the embedded target's too, not a remote SQL Server's.
Linux only, and only where this process may use at least two CPUs; elsewhere it records nothing.
"""

from __future__ import annotations

import errno
import os
import statistics
import subprocess
import sys
from pathlib import Path

from ._probe import ProbeCollector, ProbeThread

#: seconds between two probes
PROBE_INTERVAL_S = 0.2
#: round trips per burst, and bursts per probe (the fastest counts)
ROUNDS = 100
BURSTS = 5
#: the probe process's program (probe_cmd)
PROBE_SCRIPT = Path(__file__).with_name("crosscpu_probe.py")


def probe_cmd(a: int, b: int, rounds: int = ROUNDS, bursts: int = BURSTS) -> list[str]:
    """The probe process's command line: its file as a script of the standard library alone
    (``-I -S``: no site-packages, no ssbench package to import), since every repetition starts
    one (its cost: docs/findings/test-suite-slow-machine.md)."""
    return [sys.executable, "-I", "-S", str(PROBE_SCRIPT), *(str(int(x)) for x in (a, b, rounds, bursts))]


def probe_cpus() -> tuple[int, int] | None:
    """The two CPUs to probe between: the first and the last this process may use."""
    if not hasattr(os, "sched_getaffinity") or not hasattr(os, "fork"):
        return None
    cpus = sorted(os.sched_getaffinity(0))
    return (cpus[0], cpus[-1]) if len(cpus) >= 2 else None


class CrossCpuProbe(ProbeThread):
    """Asks the probe process for one figure every ``interval`` seconds."""

    what = "cross-CPU probe"

    def __init__(self, cpus: tuple[int, int], interval: float = PROBE_INTERVAL_S, rounds: int = ROUNDS,
                 bursts: int = BURSTS):
        super().__init__(interval, interval, 0.0)
        self.cpus, self.rounds, self.bursts = cpus, rounds, bursts
        self.proc: subprocess.Popen | None = None

    def prepare(self) -> None:
        self.proc = subprocess.Popen(probe_cmd(*self.cpus, self.rounds, self.bursts), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)

    def measure(self) -> float:
        try:
            self.proc.stdin.write("\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            raise OSError(errno.EPIPE, "the probe process ended") from None
        line = self.proc.stdout.readline()
        if not line:
            raise OSError(errno.EPIPE, "the probe process ended")
        return float(line)

    def cleanup(self) -> None:
        if self.proc is None:
            return
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


class CrossCpuCollector(ProbeCollector):
    family = "cross_cpu"

    def make_probe(self, ctx) -> CrossCpuProbe | None:
        cpus = probe_cpus()
        return None if cpus is None else CrossCpuProbe(cpus)

    def sample(self, ctx, now):
        probes = [x for x in self.probes(ctx, now) if x == x]   # nan: no answer
        return [("round_trip_ns", "", statistics.median(probes))] if probes else []

    def summary_fields(self, ctx, window):
        ticks = window.series(self.family, "round_trip_ns")
        return {"cross_cpu_ns": round(statistics.fmean(ticks), 1)} if ticks else {}
