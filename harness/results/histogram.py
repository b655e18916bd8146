"""Exact, mergeable latency data (latency.json).

Locust rounds response times into buckets (2 significant digits above 100 ms); ssbench keeps
every latency as an integer number of microseconds with its count. Histograms merge by adding
counts, so per-worker and per-repetition data combine exactly.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Iterable, Mapping


class Histogram:
    """Sparse histogram of integer microseconds. Percentiles use the nearest-rank method."""

    __slots__ = ("counts",)

    def __init__(self, counts: Mapping[int, int] | None = None):
        self.counts: Counter[int] = Counter()
        if counts:
            for k, v in counts.items():
                self.counts[int(k)] += int(v)

    def add(self, us: int, n: int = 1) -> None:
        self.counts[int(us)] += n

    def extend_us(self, values: Iterable[int]) -> "Histogram":
        self.counts.update(int(v) for v in values)
        return self

    def merge(self, other: "Histogram") -> "Histogram":
        self.counts.update(other.counts)
        return self

    @property
    def count(self) -> int:
        return sum(self.counts.values())

    def mean_us(self) -> float:
        n = self.count
        return sum(k * v for k, v in self.counts.items()) / n if n else math.nan

    def percentiles_us(self, qs) -> list[float]:
        """Nearest-rank percentiles of ``qs`` (ascending, in 0..100: the smallest value with at
        least q% of the observations at or below it), in one pass over the sorted values."""
        n = self.count
        if n == 0:
            return [math.nan] * len(qs)
        ranks = [max(1, math.ceil(q / 100.0 * n)) for q in qs]
        out, seen, i = [], 0, 0
        for value in sorted(self.counts):
            seen += self.counts[value]
            while i < len(ranks) and seen >= ranks[i]:
                out.append(float(value))
                i += 1
            if i == len(ranks):
                break
        return out + [float(max(self.counts))] * (len(ranks) - len(out))

    def summary_ms(self) -> dict:
        """count, mean, p50, p95, p99, max in milliseconds (None when empty)."""
        n = self.count
        if n == 0:
            return {"count": 0, "mean": None, "p50": None, "p95": None, "p99": None, "max": None}
        p50, p95, p99 = self.percentiles_us((50, 95, 99))
        return {"count": n, "mean": round(self.mean_us() / 1000.0, 4),
                "p50": p50 / 1000.0, "p95": p95 / 1000.0, "p99": p99 / 1000.0, "max": max(self.counts) / 1000.0}

    def to_json(self) -> dict[str, int]:
        return {str(k): v for k, v in sorted(self.counts.items())}
