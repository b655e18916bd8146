"""Uncertainty of the analysis' comparisons: confidence intervals and verdicts.

Pure Python and numpy, run on the driver (the values per permutation are its few repetitions).
The method and its limits are described in ``docs/statistics.md``:

* a point is the median over repetitions (:func:`harness.results.median`, the one median of
  ssbench's Python code);
* its interval is a **percentile bootstrap** (Efron): :data:`RESAMPLES` resamples drawn with
  numpy's PCG64 from the fixed :data:`SEED`, the :data:`CONFIDENCE` interval taken with linear
  interpolation between order statistics. For two permutations (a dialog strategy against one
  dialog per thread) each side is resampled independently and the statistic is the ratio of
  the medians. This is exactly what ``scipy.stats.bootstrap(..., method="percentile",
  vectorized=True, rng=numpy.random.default_rng(SEED))`` computes with the same data, order
  and number of resamples (tests/analysis/test_uncertainty.py checks it), without scipy's
  per-call overhead;
* a verdict (:func:`verdict`) reads the interval against a threshold: ``gain`` only when the
  whole interval is above it, ``loss`` only when it is wholly below its negative, ``no
  difference`` when it lies within +-threshold, else ``inconclusive``; with fewer than
  :data:`MIN_REPS` repetitions on either side no interval is given and the verdict is always
  ``inconclusive``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..results import median

CONFIDENCE = 0.95
RESAMPLES = 4000
SEED = 20261122
#: fewer repetitions than this on either side: no interval, verdict inconclusive
MIN_REPS = 3

GAIN, LOSS, NO_DIFFERENCE, INCONCLUSIVE = "gain", "loss", "no difference", "inconclusive"
VERDICTS = (GAIN, LOSS, NO_DIFFERENCE, INCONCLUSIVE)


def _values(xs: Sequence[float | None]) -> np.ndarray:
    return np.asarray([float(x) for x in xs if x is not None], dtype=float)


def _medians(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """The median of each resample (row of ``x[idx]``): what numpy's median gives, by a sort
    (several times faster than np.median on many short rows)."""
    s = np.sort(x[idx], axis=-1)
    n = s.shape[-1]
    return s[:, n // 2] if n % 2 else (s[:, n // 2 - 1] + s[:, n // 2]) / 2.0


def _interval(dist: np.ndarray, confidence: float) -> tuple[float, float] | None:
    if not np.all(np.isfinite(dist)):
        return None
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(dist, [alpha, 1.0 - alpha])   # linear interpolation, as scipy.stats.quantile
    return float(lo), float(hi)


def bootstrap_median(values: Sequence[float | None], *, confidence: float = CONFIDENCE,
                     resamples: int = RESAMPLES, seed: int = SEED) -> tuple[float, float] | None:
    """Percentile-bootstrap interval of the median of ``values`` (None values ignored); None
    with fewer than :data:`MIN_REPS` values."""
    x = _values(values)
    if len(x) < MIN_REPS:
        return None
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(x), (resamples, len(x)))
    return _interval(_medians(x, idx), confidence)


def bootstrap_ratio(treatment: Sequence[float | None], baseline: Sequence[float | None], *,
                    confidence: float = CONFIDENCE, resamples: int = RESAMPLES,
                    seed: int = SEED) -> tuple[float, float] | None:
    """Percentile-bootstrap interval of median(treatment) / median(baseline), the two samples
    resampled independently (treatment first, then baseline, from one generator). None with
    fewer than :data:`MIN_REPS` values on either side or a resample whose baseline median is 0."""
    t, b = _values(treatment), _values(baseline)
    if len(t) < MIN_REPS or len(b) < MIN_REPS:
        return None
    rng = np.random.default_rng(seed)
    it = rng.integers(0, len(t), (resamples, len(t)))
    ib = rng.integers(0, len(b), (resamples, len(b)))
    with np.errstate(divide="ignore", invalid="ignore"):
        dist = _medians(t, it) / _medians(b, ib)
    return _interval(dist, confidence)


def verdict(ci_low_pct: float | None, ci_high_pct: float | None, threshold_pct: float,
            n_treatment: int, n_baseline: int) -> str:
    """``gain`` when the whole interval is above +threshold, ``loss`` when wholly below
    -threshold, ``no difference`` when it lies within +-threshold, else ``inconclusive``
    (always with fewer than :data:`MIN_REPS` repetitions on either side or no interval)."""
    if n_treatment < MIN_REPS or n_baseline < MIN_REPS or ci_low_pct is None or ci_high_pct is None:
        return INCONCLUSIVE
    if ci_low_pct > threshold_pct:
        return GAIN
    if ci_high_pct < -threshold_pct:
        return LOSS
    if ci_low_pct >= -threshold_pct and ci_high_pct <= threshold_pct:
        return NO_DIFFERENCE
    return INCONCLUSIVE


@dataclass(frozen=True)
class Comparison:
    """A strategy's gain over a baseline, in percent, with its interval and verdict."""

    gain_pct: float | None          # 100 * (median(treatment) / median(baseline) - 1)
    ci_low_pct: float | None
    ci_high_pct: float | None
    verdict: str
    n_treatment: int
    n_baseline: int


def compare(treatment: Sequence[float | None], baseline: Sequence[float | None], threshold_pct: float, *,
            confidence: float = CONFIDENCE, resamples: int = RESAMPLES, seed: int = SEED,
            lower_is_better: bool = False) -> Comparison:
    """The gain of ``treatment`` over ``baseline`` (rates per repetition) with its interval
    and verdict. ``lower_is_better`` (a latency): the change and its interval are still those of
    the metric (+ is a rise), and the verdict reads them mirrored: a rise beyond the threshold
    is a ``loss``, a fall a ``gain``."""
    t, b = _values(treatment), _values(baseline)
    mt, mb = median(t.tolist()), median(b.tolist())
    gain = 100.0 * (mt / mb - 1.0) if mt is not None and mb else None
    ci = bootstrap_ratio(t, b, confidence=confidence, resamples=resamples, seed=seed) if gain is not None else None
    lo, hi = (100.0 * (ci[0] - 1.0), 100.0 * (ci[1] - 1.0)) if ci else (None, None)
    if lower_is_better and ci:
        v = verdict(-hi, -lo, threshold_pct, len(t), len(b))
    else:
        v = verdict(lo, hi, threshold_pct, len(t), len(b))
    return Comparison(gain, lo, hi, v, len(t), len(b))
