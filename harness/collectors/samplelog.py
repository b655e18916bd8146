"""The collectors' samples of a repetition, kept on disk as they come: a long window's samples
would otherwise grow the controller's memory by about 1.3 MB a minute (docs/findings/
memory-soak.md). The summary and samples.jsonl read them back, in order, as often as needed."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from functools import partial
from typing import NamedTuple

from ..spill import Spill


class Sample(NamedTuple):
    """One value of one metric at one tick (a tuple: read back from disk quickly)."""

    ts: float          # epoch seconds
    family: str
    metric: str
    key: str
    value: float


#: a (ts, family, metric, key, value) tuple as a Sample, without a Python call per sample
_as_sample = partial(tuple.__new__, Sample)


class SampleLog:
    """Samples in the order they were added, in a :class:`~harness.spill.Spill` in ``dir`` (a
    repetition's: on the results' disk, whose filling up stops the run); iterating reads
    them back as :class:`Sample` objects, as often as needed. A series (family, metric, key) is
    written as its number: the names are kept once, as many as there are series."""

    def __init__(self, dir: str | os.PathLike[str] | None = None) -> None:
        self._spill = Spill("ssbench-samples-", dir)
        self._count = 0
        self._number: dict[tuple[str, str, str], int] = {}
        self._names: tuple[list[str], list[str], list[str]] = ([], [], [])
        #: whether every sample's time is at or after the one added before it (samples.jsonl is
        #: then written in time order without sorting them in memory)
        self.in_time_order = True
        self._last_ts = float("-inf")

    def extend(self, samples: Iterable[Sample]) -> None:
        ts, series, values = [], [], []
        for s in samples:
            ts.append(s.ts)
            series.append(self._series(s.family, s.metric, s.key))
            values.append(s.value)
        if not ts:
            return
        self._spill.append((ts, series, values))
        self._count += len(ts)
        if self.in_time_order and (ts[0] < self._last_ts or any(b < a for a, b in zip(ts, ts[1:]))):
            self.in_time_order = False
        self._last_ts = ts[-1]

    def _series(self, family: str, metric: str, key: str) -> int:
        n = self._number.get((family, metric, key))
        if n is None:
            n = self._number[(family, metric, key)] = len(self._number)
            for names, name in zip(self._names, (family, metric, key)):
                names.append(name)
        return n

    def __iter__(self) -> Iterator[Sample]:
        families, metrics, keys = (names.__getitem__ for names in self._names)
        for ts, series, values in self._spill:
            yield from map(_as_sample, zip(ts, map(families, series), map(metrics, series), map(keys, series),
                                           values))

    def __len__(self) -> int:
        return self._count

    def close(self) -> None:
        self._spill.close()
