"""Storage: the server's commit latency and an fsync probe beside its data, to flag a window
whose disk was disturbed (issue 24: storage noise is host noise).

* **Commit latency** (``commit_latency_ms``): the target's own log flushes over each tick, mean
  milliseconds per flush (:meth:`Target.log_flush_stats`: PostgreSQL's WAL fsyncs from
  ``pg_stat_io``; None where the target cannot tell). It depends on the load (a flush carries
  more commits at higher rates), so it is reported, not judged.
* **Probe** (``probe_ms``): a thread of this collector overwrites one 4 KiB block of a file in
  the directory the target names (:meth:`Target.storage_probe_dir`: the embedded server's data
  directory's parent, the same file system) and ``fdatasync``s it every
  :data:`PROBE_INTERVAL_S`, timing each: what one small durable write costs on that disk right
  now. Its mean over the window's ticks of each tick's median (``storage_probe_ms``: weighted
  by time, since a slow disk yields fewer probes) is compared with the run's
  typical (``storage_reference_ms``): the median of the idle references of the run's
  repetitions so far (each the median probe of the first :data:`REFERENCE_S` of its collectors:
  the warm-up has drained and the swarm's first SEND is seconds away). A window whose figure
  is at least :data:`NOISY_STORAGE_RATIO` times the typical and
  :data:`NOISY_STORAGE_MIN_MS` above it is flagged ``noisy_storage``: something else was
  writing to the same disk (calibrated with benchmarks/storage_noise.py, error rates in
  tests/collectors/test_storage.py and docs/embedded.md, "Storage noise").
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from pathlib import Path

from .base import Collector

#: seconds between two probes
PROBE_INTERVAL_S = 0.1
#: bytes written per probe (one file-system block)
PROBE_BYTES = 4096
#: the idle reference: the probes of the first seconds of the collectors, before the first SEND
#: (measured: the swarm's first SEND comes 2.9 to 6.3 s after the collectors start), taken
#: every REFERENCE_INTERVAL_S
REFERENCE_S = 1.5
REFERENCE_INTERVAL_S = 0.02
#: a window's probe median at least this many times the reference ...
NOISY_STORAGE_RATIO = 3.0
#: ... and at least this many milliseconds above it is flagged noisy_storage
NOISY_STORAGE_MIN_MS = 2.0


class FsyncProbe(threading.Thread):
    """Times a 4 KiB overwrite + fdatasync of one file in ``directory`` every ``interval``."""

    def __init__(self, directory: Path, interval: float = PROBE_INTERVAL_S,
                 reference_interval: float = REFERENCE_INTERVAL_S, reference_s: float = REFERENCE_S):
        super().__init__(name="ssbench-fsync-probe", daemon=True)
        self.path = Path(directory) / f".ssbench-fsync-probe-{os.getpid()}-{id(self):x}"
        self.interval = interval
        #: faster during the first reference_s (the idle reference: more probes, a steadier median)
        self.reference_interval, self.reference_s = reference_interval, reference_s
        self.samples: list[tuple[float, float]] = []    # (epoch s at the start, milliseconds)
        self.error: str | None = None
        self._halt = threading.Event()
        self._lock = threading.Lock()

    def run(self) -> None:
        block = os.urandom(PROBE_BYTES)
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600)
        except OSError as e:
            self.error = f"fsync probe: cannot create {self.path}: {e.strerror}"
            return
        begun = time.perf_counter()
        try:
            while not self._halt.is_set():
                t0, c0 = time.time(), time.perf_counter()
                os.pwrite(fd, block, 0)
                os.fdatasync(fd)
                ms = (time.perf_counter() - c0) * 1000.0
                with self._lock:
                    self.samples.append((t0, ms))
                every = self.reference_interval if c0 - begun < self.reference_s else self.interval
                self._halt.wait(max(0.0, every - ms / 1000.0))
        except OSError as e:
            self.error = f"fsync probe: {e.strerror}"
        finally:
            os.close(fd)
            try:
                self.path.unlink()
            except OSError:
                pass

    def between(self, start: float, end: float) -> list[float]:
        with self._lock:
            return [ms for ts, ms in self.samples if start <= ts < end]

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=10)


def noisy_storage(probe_ms: float | None, reference_ms: float | None) -> bool:
    """Was the window's disk far slower than its reference (both medians, milliseconds)?"""
    if probe_ms is None or reference_ms is None:
        return False
    return probe_ms >= NOISY_STORAGE_RATIO * reference_ms and probe_ms - reference_ms >= NOISY_STORAGE_MIN_MS


class StorageCollector(Collector):
    family = "storage"

    #: the references of this process's earlier repetitions (a run's repetitions share its
    #: process): the run's typical is their median (the last RUN_REFERENCES of them)
    run_references: list[float] = []
    RUN_REFERENCES = 50

    def __init__(self):
        self.probe: FsyncProbe | None = None
        self.started = False
        self.prev: tuple[float, tuple[float, float]] | None = None
        self.last_probe_ts = 0.0
        self.reference_ms: float | None = None

    def _start_probe(self, ctx) -> None:
        self.started = True
        d = ctx.call(ctx.telemetry.storage_probe_dir)
        if d is not None:
            self.probe = FsyncProbe(Path(d))
            self.probe.start()

    def sample(self, ctx, now):
        if not self.started:
            self._start_probe(ctx)
        out = []
        stats = ctx.call(ctx.telemetry.log_flush_stats)
        if stats is not None:
            if self.prev is not None:
                flushes, ms = stats[0] - self.prev[1][0], stats[1] - self.prev[1][1]
                if flushes > 0:
                    out.append(("commit_latency_ms", "", ms / flushes))
                out.append(("log_flushes_per_s", "", max(0.0, flushes) / max(now - self.prev[0], 1e-6)))
            self.prev = (now, stats)
        if self.probe is not None:
            if self.probe.error:
                raise RuntimeError(self.probe.error)
            probes = self.probe.between(self.last_probe_ts, now)
            self.last_probe_ts = now
            if probes:
                out.append(("probe_ms", "", statistics.median(probes)))
                out.append(("probe_max_ms", "", max(probes)))
            self._take_reference(now)
        return out

    def _take_reference(self, now: float) -> None:
        """The idle reference: the probes of the first REFERENCE_S after the probe started (the
        collectors start once the warm-up drained, seconds before the swarm's first SEND)."""
        if self.reference_ms is not None or not self.probe.samples:
            return
        t0 = self.probe.samples[0][0]
        if now - t0 < REFERENCE_S:
            return
        idle = self.probe.between(t0, t0 + REFERENCE_S)
        if idle:
            self.reference_ms = statistics.median(idle)
            refs = StorageCollector.run_references
            refs.append(self.reference_ms)
            del refs[:-self.RUN_REFERENCES]

    def typical_ms(self) -> float | None:
        """The run's typical fsync probe: the median of this process's idle references."""
        refs = StorageCollector.run_references
        return statistics.median(refs) if refs else None

    def summary_fields(self, ctx, window):
        out = {}
        commit = window.series(self.family, "commit_latency_ms")
        if commit:
            out["commit_latency_ms"] = round(statistics.median(commit), 3)
        if self.probe is not None:
            # time-weighted: the mean over the window's ticks of each tick's median probe (a slow
            # disk yields fewer probes, so a median over the probes themselves would hide it)
            ticks = window.series(self.family, "probe_ms")
            typical = self.typical_ms()
            if ticks:
                out["storage_probe_ms"] = round(statistics.fmean(ticks), 3)
            if typical is not None:
                out["storage_reference_ms"] = round(typical, 3)
            out["noisy_storage"] = noisy_storage(out.get("storage_probe_ms"), typical)
        return out

    def close(self) -> None:
        if self.probe is not None:
            self.probe.stop()
