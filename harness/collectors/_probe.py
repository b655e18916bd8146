"""A host probe: a thread that times one small, fixed piece of work again and again.

It runs from the collectors' start: densely during its first :attr:`ProbeThread.reference_s`
(the idle reference, which the swarm's first SEND waits for), then every
:attr:`ProbeThread.interval`. The run's typical is the median of its repetitions' references
(:class:`RunReferences`), the figure a window is judged against. A run takes references in its
first repetitions and then in every tenth: the others need no idle time before their swarm.
"""

from __future__ import annotations

import statistics
import threading
import time
from array import array
from collections.abc import Iterable, Iterator
from typing import ClassVar

from .base import Collector


class ProbeSamples:
    """A probe's (epoch s at the start, milliseconds) in the order taken, as two arrays of
    doubles: 16 bytes a probe instead of a tuple's hundred (ten probes a second, for as long as
    the window lasts: docs/findings/memory-soak.md)."""

    def __init__(self, pairs: Iterable[tuple[float, float]] = ()):
        self.ts, self.ms = array("d"), array("d")
        for pair in pairs:
            self.append(pair)

    def append(self, pair: tuple[float, float]) -> None:
        self.ts.append(pair[0])
        self.ms.append(pair[1])

    def __len__(self) -> int:
        return len(self.ts)

    def __getitem__(self, i: int) -> tuple[float, float]:
        return self.ts[i], self.ms[i]

    def __iter__(self) -> Iterator[tuple[float, float]]:
        return zip(self.ts, self.ms)


class ProbeThread(threading.Thread):
    """Times :meth:`measure` (milliseconds) every ``interval`` seconds; :meth:`prepare` and
    :meth:`cleanup` around the loop. An OSError ends the probe with :attr:`error` set."""

    what = "probe"

    def __init__(self, interval: float, reference_interval: float, reference_s: float):
        super().__init__(name=f"ssbench-{self.what.replace(' ', '-')}", daemon=True)
        self.interval = interval
        #: faster during the first reference_s (the idle reference: more probes, a steadier median)
        self.reference_interval, self.reference_s = reference_interval, reference_s
        self.samples = ProbeSamples()
        self.error: str | None = None
        self._halt = threading.Event()
        self._lock = threading.Lock()

    def prepare(self) -> None:
        """Before the first probe (may raise OSError)."""

    def measure(self) -> float:
        """One probe: its figure in milliseconds."""
        raise NotImplementedError

    def cleanup(self) -> None:
        """After the last probe, whatever happened (a failed :meth:`prepare` included)."""

    def run(self) -> None:
        try:
            self.prepare()
            begun = time.perf_counter()
            while not self._halt.is_set():
                t0, c0 = time.time(), time.perf_counter()
                ms = self.measure()
                with self._lock:
                    self.samples.append((t0, ms))
                every = self.reference_interval if c0 - begun < self.reference_s else self.interval
                self._halt.wait(max(0.0, every - (time.perf_counter() - c0)))
        except OSError as e:
            self.error = f"{self.what}: {e.strerror or e}"
        finally:
            self.cleanup()

    def between(self, start: float, end: float) -> list[float]:
        with self._lock:
            return [ms for ts, ms in self.samples if start <= ts < end]

    def reference_taken(self) -> bool:
        """Are the idle reference's probes all in (or did the probe end: it takes no more)?"""
        if self.reference_s <= 0 or self.error is not None or (self.ident is not None and not self.is_alive()):
            return True
        with self._lock:
            t0 = self.samples[0][0] if self.samples else None
        return t0 is not None and time.time() - t0 >= self.reference_s

    def idle_reference(self, now: float) -> float | None:
        """The median of the probes of the first ``reference_s`` once they are all in (None
        before, or without probes)."""
        with self._lock:
            if not self.samples or self.reference_s <= 0:
                return None
            t0 = self.samples[0][0]
        if now - t0 < self.reference_s:
            return None
        idle = self.between(t0, t0 + self.reference_s)
        return statistics.median(idle) if idle else None

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=10)


class RunReferences:
    """The idle references of the run whose repetitions this process measures; the run's
    typical is the median of the last :attr:`keep`. A run takes one in each of its repetitions
    until it has :attr:`initial`, then in every :attr:`every`-th (a long run's machine may
    drift): the others start their swarm without the probes' idle seconds."""

    def __init__(self, initial: int = 3, every: int = 10, keep: int = 50):
        self.initial, self.every, self.keep = initial, every, keep
        self.run: str | None = None
        self.values: list[float] = []
        self._since = 0     # repetitions since the last one that took a reference

    def begin(self, run: str, full: float) -> float:
        """Counts a repetition of ``run`` starting its probe, and returns its idle reference's
        seconds: ``full`` when it takes one, else 0. A new run starts with no references."""
        if run != self.run:
            self.run, self.values, self._since = run, [], 0
        if len(self.values) < self.initial or self._since + 1 >= self.every:
            self._since = 0
            return full
        self._since += 1
        return 0.0

    def add(self, value: float) -> None:
        self.values.append(value)
        del self.values[:-self.keep]

    def typical(self) -> float | None:
        return statistics.median(self.values) if self.values else None

    def take(self, probe: ProbeThread, now: float, taken: float | None) -> float | None:
        """A repetition's idle reference: ``taken`` once it has one; else the probe's
        (:meth:`ProbeThread.idle_reference`), added to the run's the first time it comes in."""
        if taken is not None:
            return taken
        ref = probe.idle_reference(now)
        if ref is not None:
            self.add(ref)
        return ref


class ProbeCollector(Collector):
    """A collector whose probe (:meth:`make_probe`) starts at its first tick; each tick reads the
    probes since the last (:meth:`probes`), and a probe that ended on an error fails the tick."""

    #: the run's idle references, for a probe that takes one (None: it takes none)
    references: ClassVar[RunReferences | None] = None

    def __init__(self):
        self.started = False
        self.probe: ProbeThread | None = None
        self.last_probe_ts = 0.0
        self.reference_ms: float | None = None

    def make_probe(self, ctx) -> ProbeThread | None:
        """The probe of this repetition (None: nothing to probe here)."""
        raise NotImplementedError

    def probes(self, ctx, now: float) -> list[float]:
        """The probes taken since the last tick; the idle reference once it is in."""
        if not self.started:
            self.started = True
            self.probe = self.make_probe(ctx)
            if self.probe is not None:
                self.probe.start()
        if self.probe is None:
            return []
        if self.probe.error:
            raise RuntimeError(self.probe.error)
        out = self.probe.between(self.last_probe_ts, now)
        self.last_probe_ts = now
        if self.references is not None:
            self.reference_ms = self.references.take(self.probe, now, self.reference_ms)
        return out

    def reference_pending(self) -> bool:
        return not self.started or (self.probe is not None and not self.probe.reference_taken())

    def close(self) -> None:
        if self.probe is not None:
            self.probe.stop()
