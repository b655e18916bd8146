"""The host's CPU speed of the moment: a probe that times a fixed piece of work in the CPU time
of its own thread, to see a virtual machine's vCPU slowed down by its host (issue 24).

Neither the other processes' CPU nor the steal time shows it: on the 2-vCPU test VM a loop of
fixed work took from 5.6 to 10.4 ms of its own thread's CPU time from one second to the next on
an idle machine, in two clusters (about 6 and about 9 ms, each lasting seconds), with steal at 0
and the wall time equal to the CPU time (the thread was not waiting for a CPU: the CPU it had
was slower). The rate of a CPU-bound window follows it (docs/embedded.md, "CPU speed").

* **Probe** (``probe_ms``): a thread of this collector runs :data:`WORK` iterations of an
  empty Python loop every :data:`PROBE_INTERVAL_S` and times them with
  ``time.thread_time()``, the CPU time of its own thread: time spent waiting for a CPU or for
  the GIL is not counted, so the machine's load does not move it, only the speed of the CPU
  the thread runs on. A tick's figure is the median of its probes.
* **Window**: ``cpu_probe_ms`` is the mean over the window's ticks; ``cpu_reference_ms`` the
  run's typical (the median of its repetitions' idle references: the probes of the first
  :data:`REFERENCE_S` of the collectors, which the swarm's first SEND waits for); ``cpu_speed`` their
  ratio (1.0: the typical speed; 0.7: the host ran the window 30 % slower). A window below
  :data:`SLOW_CPU_SPEED` is ``slow_cpu``: the repetition is ``noisy_host``, with the figure.
"""

from __future__ import annotations

import statistics
import time

from ._probe import ProbeThread, RunReferences
from .base import Collector

#: seconds between two probes, and during the idle reference
PROBE_INTERVAL_S = 0.1
REFERENCE_INTERVAL_S = 0.02
REFERENCE_S = 1.5
#: iterations of the probe's loop (0.3 to 0.55 ms of CPU on the 2-vCPU test VM, idle)
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


class CpuSpeedCollector(Collector):
    family = "cpu_speed"

    #: the idle references of this process's repetitions (a run's repetitions share its process)
    references = RunReferences()

    def __init__(self):
        self.probe: CpuProbe | None = None
        self.last_probe_ts = 0.0
        self.reference_ms: float | None = None

    def sample(self, ctx, now):
        if self.probe is None:
            self.probe = CpuProbe()
            self.probe.start()
        probes = self.probe.between(self.last_probe_ts, now)
        self.last_probe_ts = now
        self.reference_ms = CpuSpeedCollector.references.take(self.probe, now, self.reference_ms)
        return [("probe_ms", "", statistics.median(probes))] if probes else []

    def reference_pending(self) -> bool:
        return self.probe is None or not self.probe.reference_taken()

    def summary_fields(self, ctx, window):
        ticks = window.series(self.family, "probe_ms")
        typical = CpuSpeedCollector.references.typical()
        if not ticks or typical is None:
            return {}
        probe = statistics.fmean(ticks)
        speed = cpu_speed(probe, typical)
        return {"cpu_probe_ms": round(probe, 4), "cpu_reference_ms": round(typical, 4),
                "cpu_speed": round(speed, 3), "slow_cpu": speed < SLOW_CPU_SPEED}

    def close(self) -> None:
        if self.probe is not None:
            self.probe.stop()
