"""The sampling loop and the collector interface.

Collectors are registered by name in the entry-point group ``ssbench.collectors``
(harness.targets.registry; ssbench's own in pyproject.toml): every repetition samples a fresh
instance of each one whose ``reads`` the target's telemetry implements."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Iterable

import psutil

from ..targets.base import Telemetry
from ..targets.registry import COLLECTORS, load_all
from .samplelog import Sample, SampleLog

log = logging.getLogger(__name__)


class Collector:
    """One metric family. ``sample`` returns (metric, key, value) tuples for one tick; rates
    are computed from cumulative counters' deltas over the elapsed time since the last tick.
    It reads ``ctx.telemetry``, which implements :attr:`reads` (a collector needing more than
    :class:`~harness.targets.telemetry.Telemetry` names an interface derived from it, and runs
    only against targets whose telemetry implements that)."""

    family: str = ""
    reads: ClassVar[type] = Telemetry

    def sample(self, ctx: "SampleContext", now: float) -> Iterable[tuple[str, str, float]]:
        """This tick's (metric, key, value) tuples; none by default (the stall collector's)."""
        return []

    def summary_fields(self, ctx: "SampleContext", window: "WindowView") -> dict[str, Any]:
        """This family's fields of the repetition summary (harness.results.model), computed
        over the measured window. Most families contribute none."""
        return {}

    def reference_pending(self) -> bool:
        """True while this collector still takes an idle reference that no load may touch (a
        probe's first seconds): the repetition holds the swarm's first SEND back until no
        collector's is pending (:meth:`Sampler.wait_for_references`)."""
        return False

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class WindowView:
    """The measured window and every sample taken, for :meth:`Collector.summary_fields`
    (``samples``: a sequence or a :class:`SampleLog`, iterated as often as needed)."""

    start: float
    end: float
    samples: Iterable[Sample]
    #: an alternated window's member (slice_seconds, members, this one's index), whose figures
    #: a collector that can split them by slice gives over its own slices; None: the whole window
    member: tuple[float, int, int] | None = None

    def series(self, family: str, metric: str, key: str | None = None, **kw) -> list[float]:
        """Values of one metric inside [start, end) (:meth:`points`)."""
        return [v for _, v in self.points(family, metric, key, **kw)]

    def points(self, family: str, metric: str, key: str | None = None, *, whole: bool = False,
               metric_prefix: str | None = None) -> list[tuple[float, float]]:
        """(ts, value) of one metric (or of every metric starting with ``metric_prefix``) inside
        [start, end) (``whole``: before and after it too), in time order."""
        return [(s.ts, s.value) for s in self.samples
                if s.family == family and (s.metric == metric if metric_prefix is None
                                           else s.metric.startswith(metric_prefix))
                and (key is None or s.key == key)
                and (whole or self.start <= s.ts < self.end)]

    def mean(self, family: str, metric: str, key: str | None = None, *,
             metric_prefix: str | None = None) -> float | None:
        """Mean of one metric (or of every metric starting with ``metric_prefix``) inside the
        window; None without samples."""
        vals = self.series(family, metric, key, metric_prefix=metric_prefix)
        return sum(vals) / len(vals) if vals else None


@dataclass(frozen=True)
class Processes:
    """One tick's processes on this host: the database server's (a local one's), the client's
    (this process and its descendants but the server's) and the load generators' by name."""

    server: set[int]
    client: set[int]
    workers: dict[str, int]

    @property
    def ours(self) -> set[int]:
        """Every one of them: what the machine's other processes are not."""
        return self.server | self.client | set(self.workers.values())


@dataclass
class SampleContext:
    target: object                     # harness.targets.base.Target
    lock: threading.Lock               # serializes calls to the target with the runner's
    client_pids: Callable[[], dict[str, int]] = lambda: {}   # name -> pid (load generators)
    run: str = ""                      # the run's directory: the probes' idle references are per run
    spill_dir: str | None = None       # where collectors spill what they keep (the repetition's directory)
    _processes: tuple[float, Processes] | None = field(default=None, init=False, repr=False)

    def processes(self, now: float) -> Processes:
        """The :class:`Processes` of the tick at ``now``, looked up once for every collector of
        the tick that asks (each lookup walks /proc)."""
        if self._processes is None or self._processes[0] != now:
            server, me = set(self.call(self.telemetry.server_pids)), psutil.Process()
            family = {me.pid}
            with contextlib.suppress(psutil.Error):
                family |= {c.pid for c in me.children(recursive=True)}
            self._processes = (now, Processes(server, family - server, self.client_pids()))
        return self._processes[1]

    @property
    def telemetry(self) -> Telemetry:
        """What the collectors read (the target's :attr:`~harness.targets.base.Target.telemetry`)."""
        return self.target.telemetry

    def call(self, fn, *args, **kwargs):
        with self.lock:
            return fn(*args, **kwargs)


class Sampler:
    """Samples every collector every ``interval`` seconds on a background thread; the samples go
    to a file in the context's ``spill_dir`` (:class:`SampleLog`), whose write error :meth:`stop`
    raises."""

    def __init__(self, ctx: SampleContext, collectors: list[Collector], interval: float = 1.0,
                 on_tick: Callable[[list[Sample]], None] | None = None):
        self.ctx = ctx
        self.collectors = collectors
        self.interval = interval
        self.on_tick = on_tick
        self.samples = SampleLog(ctx.spill_dir)     # on disk: memory stays the same however long the window
        self._lost: OSError | None = None
        self.errors: list[str] = []
        self._warned: dict[str, tuple[float | None, int]] = {}
        self.started = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def tick(self) -> list[Sample]:
        now = time.time()
        out: list[Sample] = []
        failed: list[tuple[str, Exception]] = []
        for c in self.collectors:
            try:
                for metric, key, value in c.sample(self.ctx, now):
                    out.append(Sample(now, c.family, metric, key, float(value)))
            except Exception as e:  # a failing collector must not stop the run; it is recorded
                if len(self.errors) < 50:
                    self.errors.append(f"{c.family}: {type(e).__name__}: {e}")
                failed.append((c.family, e))
        self._warn(failed)
        try:
            self.samples.extend(out)
        except OSError as e:      # a full disk: the samples cannot be kept, the run must stop
            self._lost = self._lost or e
        if self.on_tick:
            self.on_tick(out)
        return out

    WARN_EVERY_S = 30.0

    def _warn(self, failed: list[tuple[str, Exception]]) -> None:
        """One warning per failing collector, then one every WARN_EVERY_S while it keeps
        failing (a dead server must not flood the terminal); the collectors of one tick that
        fail alike (the same exception type: a target that went away) share one line."""
        now = time.monotonic()
        due: dict[str, list[tuple[str, Exception, int]]] = {}
        for family, e in failed:
            last, n = self._warned.get(family, (None, 0))
            if last is None or now - last >= self.WARN_EVERY_S:
                due.setdefault(type(e).__name__, []).append((family, e, n))
                self._warned[family] = (now, 0)
            else:
                self._warned[family] = (last, n + 1)
        for kind, group in due.items():
            more = sum(n for _, _, n in group)
            names = ", ".join(f for f, _, _ in group)
            log.warning("collector%s %s: %s: %s%s", "s" if len(group) > 1 else "", names, kind, group[0][1],
                        f" (and {more} more failures since)" if more else "")

    def summary_fields(self, start: float, end: float,
                       member: tuple[float, int, int] | None = None) -> dict[str, Any]:
        """Every collector's summary fields over [start, end) (``member``: an alternated
        window's member, :attr:`WindowView.member`); a failing collector is recorded in
        ``errors`` and contributes nothing."""
        view = WindowView(start, end, self.samples, member)
        out: dict[str, Any] = {}
        for c in self.collectors:
            try:
                out.update(c.summary_fields(self.ctx, view))
            except Exception as e:  # telemetry must not fail the run
                self.errors.append(f"{c.family} summary: {type(e).__name__}: {e}")
        return out

    def _loop(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            self.tick()
            next_at += self.interval
            delay = next_at - time.monotonic()
            if delay < 0:  # fell behind (slow target): skip missed ticks instead of bursting
                next_at = time.monotonic()
                delay = 0
            self._stop.wait(delay)

    def start(self) -> "Sampler":
        self.started = time.time()
        self._thread = threading.Thread(target=self._loop, name="ssbench-sampler", daemon=True)
        self._thread.start()
        return self

    #: the longest wait for the collectors' idle references (a probe that cannot start ends its
    #: own wait: it reports an error and is no longer pending)
    REFERENCE_WAIT_S = 10.0

    def wait_for_references(self, stop: threading.Event | None = None, timeout: float = REFERENCE_WAIT_S) -> float:
        """Block until no collector takes an idle reference any more (or ``stop`` is set, or
        ``timeout``): the swarm's first SEND comes after it. Returns the seconds waited."""
        t0 = time.monotonic()
        stop = stop or threading.Event()
        while time.monotonic() - t0 < timeout and not stop.is_set():
            if not any(c.reference_pending() for c in self.collectors):
                break
            stop.wait(0.01)
        return time.monotonic() - t0

    def stop(self, check: bool = True) -> None:
        """Stop sampling after a final tick (once: a second call only checks), and with
        ``check`` raise the error that lost samples (a full results disk)."""
        if not self._stop.is_set():
            self._stop.set()
            if self._thread:
                self._thread.join(timeout=30)
            self.tick()  # a final sample at the end
            for c in self.collectors:
                c.close()
        if check and self._lost is not None:
            raise self._lost


def default_collectors(telemetry: Telemetry | None = None) -> list[Collector]:
    """A fresh instance of every registered collector, by name; with ``telemetry``, only those
    whose :attr:`Collector.reads` it implements."""
    out = []
    for name, cls in load_all(COLLECTORS):
        if not (isinstance(cls, type) and issubclass(cls, Collector)):
            raise TypeError(f"the collector registered as {name!r} is not a Collector subclass: {cls!r}")
        if telemetry is None or isinstance(telemetry, cls.reads):
            out.append(cls())
    return out
