"""Uncertainty of the throughput points: the bootstrap interval of a permutation's median.

Pure Python and numpy, run on the driver (the values per permutation are its few repetitions).
The comparisons' gains, intervals and verdicts are the stopping rule's
(:mod:`harness.verdicts.rule`); this module gives the points of the throughput plots and the
permutations table their intervals (docs/statistics.md):

* a point is the median over repetitions (:func:`harness.results.median`, the one median of
  ssbench's Python code);
* its interval is a **percentile bootstrap** (Efron): :data:`RESAMPLES` resamples drawn with
  numpy's PCG64 from the fixed :data:`SEED`, the :data:`CONFIDENCE` interval taken with linear
  interpolation between order statistics. This is exactly what ``scipy.stats.bootstrap(...,
  method="percentile", vectorized=True, rng=numpy.random.default_rng(SEED))`` computes with the
  same data and number of resamples (tests/analysis/test_uncertainty.py checks it), without
  scipy's per-call overhead; with fewer than :data:`MIN_REPS` values no interval is given.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..verdicts import MIN_REPS

CONFIDENCE = 0.95
RESAMPLES = 4000
SEED = 20261122

__all__ = ["CONFIDENCE", "MIN_REPS", "RESAMPLES", "SEED", "bootstrap_median"]


def _values(xs: Sequence[float | None]) -> np.ndarray:
    return np.asarray([float(x) for x in xs if x is not None], dtype=float)


def _medians(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """The median of each resample (row of ``x[idx]``): what numpy's median gives, by a sort
    (several times faster than np.median on many short rows)."""
    s = np.sort(x[idx], axis=-1)
    n = s.shape[-1]
    return s[:, n // 2] if n % 2 else (s[:, n // 2 - 1] + s[:, n // 2]) / 2.0


def bootstrap_median(values: Sequence[float | None], *, confidence: float = CONFIDENCE,
                     resamples: int = RESAMPLES, seed: int = SEED) -> tuple[float, float] | None:
    """Percentile-bootstrap interval of the median of ``values`` (None values ignored); None
    with fewer than :data:`MIN_REPS` values."""
    x = _values(values)
    if len(x) < MIN_REPS:
        return None
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(x), (resamples, len(x)))
    dist = _medians(x, idx)
    if not np.all(np.isfinite(dist)):
        return None
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(dist, [alpha, 1.0 - alpha])   # linear interpolation, as scipy.stats.quantile
    return float(lo), float(hi)
