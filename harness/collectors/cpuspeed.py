"""The host's CPU speed of the moment, to see a virtual machine's vCPU slowed by its host.

Neither steal time nor other processes' CPU shows it (docs/findings/cpu-speed.md). A probe
(:mod:`._probe`) times :data:`WORK` iterations of an empty loop in its own thread's CPU time,
which waiting for a CPU or the GIL does not move. ``cpu_speed`` is the run's typical probe over
the window's (1.0: typical, 0.7: 30 % slower); below :data:`SLOW_CPU_SPEED` the window is
``slow_cpu`` and the repetition ``noisy_host``.
"""

from __future__ import annotations

import statistics
import time

from ._probe import ProbeCollector, ProbeThread, RunReferences

#: seconds between two probes, and during the idle reference: 75 probes in its first 1.5 s
#: (0.75 s at 10 ms was measured and not kept: docs/findings/run-cost.md)
PROBE_INTERVAL_S = 0.1
REFERENCE_INTERVAL_S = 0.02
REFERENCE_S = 1.5
#: iterations of the probe's loop: a fraction of a millisecond of CPU (docs/findings/cpu-speed.md)
WORK = 20_000
#: a window whose CPU ran below this share of the run's typical speed is slow_cpu (noisy_host)
SLOW_CPU_SPEED = 0.8


class CpuProbe(ProbeThread):
    """Times :data:`WORK` iterations of a loop in this thread's CPU time, every ``interval``."""

    what = "cpu probe"

    def __init__(self, interval: float = PROBE_INTERVAL_S, reference_interval: float = REFERENCE_INTERVAL_S,
                 reference_s: float = REFERENCE_S, work: int = WORK):
        super().__init__(interval, reference_interval, reference_s)
        self.work = work

    def measure(self) -> float:
        c0 = time.thread_time()
        for _ in range(self.work):
            pass
        return (time.thread_time() - c0) * 1000.0


def cpu_speed(probe_ms: float | None, reference_ms: float | None) -> float | None:
    """The window's CPU speed relative to the run's typical (reference over window)."""
    if not probe_ms or not reference_ms:
        return None
    return reference_ms / probe_ms


class CpuSpeedCollector(ProbeCollector):
    family = "cpu_speed"
    #: the idle references of the run this process measures (a run's repetitions share its process)
    references = RunReferences()

    def make_probe(self, ctx) -> CpuProbe:
        return CpuProbe(reference_s=CpuSpeedCollector.references.begin(ctx.run, REFERENCE_S))

    def sample(self, ctx, now):
        probes = self.probes(ctx, now)
        return [("probe_ms", "", statistics.median(probes))] if probes else []

    def summary_fields(self, ctx, window):
        ticks = window.series(self.family, "probe_ms")
        typical = CpuSpeedCollector.references.typical()
        if not ticks or typical is None:
            return {}
        probe = statistics.fmean(ticks)
        speed = cpu_speed(probe, typical)
        return {"cpu_probe_ms": round(probe, 4), "cpu_reference_ms": round(typical, 4),
                "cpu_speed": round(speed, 3), "slow_cpu": speed < SLOW_CPU_SPEED}
