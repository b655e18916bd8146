"""Storage: the server's commit latency and an fsync probe beside its data, to flag a noisy disk.

``commit_latency_ms`` is the target's own log flush time (reported, not judged: it follows the
load). The probe (:mod:`._probe`) ``fdatasync``s one 4 KiB block beside the server's data every
:data:`PROBE_INTERVAL_S`; :class:`OtherWriters` counts what the machine's other processes wrote. A
window is ``noisy_storage`` when its probe is at least :data:`NOISY_STORAGE_RATIO` times the run's
typical and :data:`NOISY_STORAGE_MIN_MS` above it while other processes wrote at least
:data:`OTHER_WRITES_MIN_MIB_S`: the server's own writes slow the probe too, and are no disturbance
(calibration and error rates: docs/findings/storage-noise.md). ``log_events`` reports log growth
and backups.
"""

from __future__ import annotations

import contextlib
import logging
import os
import statistics
import time
from pathlib import Path

from ._probe import ProbeCollector, ProbeThread, RunReferences

log = logging.getLogger(__name__)

#: seconds between two probes
PROBE_INTERVAL_S = 0.1
#: bytes written per probe (one file-system block)
PROBE_BYTES = 4096
#: the idle reference: the probes of the first seconds of the collectors, taken every
#: REFERENCE_INTERVAL_S; the swarm's first SEND waits for it (Sampler.wait_for_references: a
#: swarm kept from the last repetition sent its first SEND 0.7 s after the collectors started)
REFERENCE_S = 1.5
REFERENCE_INTERVAL_S = 0.02
#: the probe's file in the directory the target names: this prefix, then the process and probe
PROBE_FILE_PREFIX = ".ssbench-fsync-probe-"
#: a window's probe median at least this many times the reference ...
NOISY_STORAGE_RATIO = 3.0
#: ... and at least this many milliseconds above it ...
NOISY_STORAGE_MIN_MS = 2.0
#: ... while processes other than the server's and ssbench's wrote at least this much is flagged
#: noisy_storage
OTHER_WRITES_MIN_MIB_S = 1.0


class FsyncProbe(ProbeThread):
    """Times a 4 KiB overwrite + fdatasync of one file in ``directory`` every ``interval``."""

    what = "fsync probe"

    def __init__(self, directory: Path, interval: float = PROBE_INTERVAL_S,
                 reference_interval: float = REFERENCE_INTERVAL_S, reference_s: float = REFERENCE_S):
        super().__init__(interval, reference_interval, reference_s)
        self.path = Path(directory) / f"{PROBE_FILE_PREFIX}{os.getpid()}-{id(self):x}"
        self._block = os.urandom(PROBE_BYTES)
        self._fd: int | None = None

    def prepare(self) -> None:
        try:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600)
        except OSError as e:
            raise OSError(e.errno, f"cannot create {self.path}: {e.strerror}") from None

    def measure(self) -> float:
        c0 = time.perf_counter()
        os.pwrite(self._fd, self._block, 0)
        os.fdatasync(self._fd)
        return (time.perf_counter() - c0) * 1000.0

    def cleanup(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
        with contextlib.suppress(OSError):
            self.path.unlink()


class OtherWriters:
    """Bytes written by the processes outside ``ours`` since the last :meth:`take`, from each
    process's ``write_bytes`` (/proc/PID/io: what it sent, or dirtied, for storage). A process
    ssbench may not read (another user's, unless ssbench runs as root) is not seen."""

    def __init__(self, proc: Path = Path("/proc")):
        self.proc = proc
        self._last: dict[int, int] | None = None

    def _scan(self) -> dict[int, int]:
        out = {}
        for entry in os.scandir(self.proc):
            if entry.name.isdigit():
                try:
                    with open(os.path.join(entry.path, "io"), "rb") as f:
                        text = f.read()
                except OSError:
                    continue
                at = text.find(b"\nwrite_bytes:")
                if at >= 0:
                    out[int(entry.name)] = int(text[at + 14:text.index(b"\n", at + 1)])
        return out

    def take(self, ours: set[int]) -> int | None:
        """Bytes the others wrote since the last call (None at the first, or without /proc)."""
        try:
            now = self._scan()
        except OSError:
            return None
        last, self._last = self._last, now
        if last is None:
            return None
        grew = 0
        for pid, written in now.items():
            if pid not in ours:     # a process new since the last scan (or a reused pid) from zero
                before = last.get(pid, 0)
                grew += written - before if before <= written else written
        return grew


def noisy_storage(probe_ms: float | None, reference_ms: float | None, other_mib_s: float | None = None) -> bool:
    """Was the window's disk far slower than its reference (both medians, milliseconds) while
    other processes wrote (MiB/s; None: unknown, the probe decides alone)?"""
    if probe_ms is None or reference_ms is None:
        return False
    slow = probe_ms >= NOISY_STORAGE_RATIO * reference_ms and probe_ms - reference_ms >= NOISY_STORAGE_MIN_MS
    return slow and (other_mib_s is None or other_mib_s >= OTHER_WRITES_MIN_MIB_S)


class StorageCollector(ProbeCollector):
    family = "storage"
    #: the idle references of the run this process measures (a run's repetitions share its process)
    references = RunReferences()

    def __init__(self):
        super().__init__()
        self.prev: tuple[float, tuple[float, float]] | None = None
        self.others = OtherWriters()
        self.others_at: float | None = None

    def make_probe(self, ctx) -> FsyncProbe | None:
        d = ctx.call(ctx.telemetry.storage_probe_dir)
        return None if d is None else FsyncProbe(Path(d), reference_s=StorageCollector.references.begin(ctx.run,
                                                                                                        REFERENCE_S))

    def sample(self, ctx, now):
        probes = self.probes(ctx, now)
        out = []
        stats = ctx.call(ctx.telemetry.log_flush_stats)
        if stats is not None:
            if self.prev is not None:
                flushes, ms = stats[0] - self.prev[1][0], stats[1] - self.prev[1][1]
                if flushes > 0:
                    out.append(("commit_latency_ms", "", ms / flushes))
                out.append(("log_flushes_per_s", "", max(0.0, flushes) / max(now - self.prev[0], 1e-6)))
            self.prev = (now, stats)
        out += [("log_size_mb", name, mb) for name, mb in sorted(ctx.call(ctx.telemetry.log_sizes_mb).items())]
        if probes:
            out.append(("probe_ms", "", statistics.median(probes)))
            out.append(("probe_max_ms", "", max(probes)))
        if self.probe is not None:      # a local server: whose writes are the others'
            other, last = self.others.take(ctx.processes(now).ours), self.others_at
            self.others_at = now
            if other is not None and last is not None and now > last:
                out.append(("other_write_mib_s", "", other / 1048576 / (now - last)))
        return out

    def summary_fields(self, ctx, window):
        out = {}
        commit = window.series(self.family, "commit_latency_ms")
        if commit:
            out["commit_latency_ms"] = round(statistics.median(commit), 3)
        if self.probe is not None:
            # time-weighted: the mean over the window's ticks of each tick's median probe (a slow
            # disk yields fewer probes, so a median over the probes themselves would hide it)
            ticks = window.series(self.family, "probe_ms")
            typical = StorageCollector.references.typical()
            if ticks:
                out["storage_probe_ms"] = round(statistics.fmean(ticks), 3)
            if typical is not None:
                out["storage_reference_ms"] = round(typical, 3)
            other = window.series(self.family, "other_write_mib_s")
            if other:
                out["other_write_mib_s"] = round(statistics.fmean(other), 3)
            out["noisy_storage"] = noisy_storage(out.get("storage_probe_ms"), typical, out.get("other_write_mib_s"))
        events = self.log_growth(window) + ctx.call(ctx.telemetry.log_events, window.start, window.end)
        for line in events:
            log.warning("%s", line)
        if events:
            out["log_events"] = events
        return out

    def log_growth(self, window) -> list[str]:
        """A log whose size grew between the window's first and last tick (autogrowth)."""
        out = []
        for name in sorted({s.key for s in window.samples if s.family == self.family and s.metric == "log_size_mb"}):
            sizes = window.series(self.family, "log_size_mb", name)
            if len(sizes) >= 2 and sizes[-1] > sizes[0]:
                out.append(f"{name}: its log grew from {sizes[0]:,.0f} MB to {sizes[-1]:,.0f} MB inside the measured "
                           "window (autogrowth: the load waited on it, as WRITELOG; size the log beforehand)")
        return out
