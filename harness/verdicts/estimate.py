"""The one estimate of a difference that every judgement of ssbench rests on.

``d``, the log ratio of two samples' geometric means (``d > 0`` is better), with an
``unpaired`` (Welch) or ``paired`` (same windows or rounds) standard error. An :class:`Estimate`
gives t intervals and one-sided p-values (:func:`benjamini_hochberg` for the gate);
:func:`relative_spread` scales the gate's threshold.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Hashable, Iterable, Sequence

if TYPE_CHECKING:
    import numpy as np

_ORDERS = (2.0, 3.0)    # the zeta orders of trigamma and its derivative

MAD_TO_SIGMA = 1.4826    # 1 / Phi^-1(3/4): MAD x 1.4826 estimates sigma for normal data
IQR_TO_SIGMA = 1.349     # IQR / 1.349 estimates sigma for normal data
SPREAD_METHODS = ("mad", "iqr")


@functools.cache
def _special():
    # scipy.special is imported at the first use: about 0.3 CPU-s that every ssbench process
    # importing the runner would pay without judging anything (once: a simulation asks often)
    import scipy.special

    return scipy.special


def _t_quantile(df: float, q: float) -> float:
    return float(_special().stdtrit(df, q))


@dataclass(frozen=True)
class Estimate:
    """``d`` (log scale, positive = the treatment better) with what its standard error is made
    of: per side the variance and count of log values (paired: of the units' log ratios, with
    ``var_b`` 0)."""

    d: float
    var_t: float
    n_t: int
    var_b: float
    n_b: int
    paired: bool = False
    #: degrees of freedom a moderated variance borrows from its prior (:func:`moderate`)
    prior_df: float = 0.0

    @property
    def se(self) -> float:
        return math.sqrt(self.var_t / self.n_t + self.var_b / self.n_b)

    @property
    def df(self) -> float:
        if self.paired:
            return self.n_t - 1 + self.prior_df
        vt, vb = self.var_t / self.n_t, self.var_b / self.n_b
        den = vt * vt / (self.n_t - 1) + vb * vb / (self.n_b - 1)
        return (vt + vb) ** 2 / den if den > 0 else self.n_t + self.n_b - 2

    def half_width(self, confidence: float) -> float:
        se = self.se
        return 0.0 if se <= 0.0 else _t_quantile(self.df, 0.5 + confidence / 2.0) * se

    def interval(self, confidence: float) -> tuple[float, float]:
        """The two-sided t interval of ``d`` at ``confidence`` (log scale)."""
        h = self.half_width(confidence)
        return self.d - h, self.d + h


def p_values(estimates: Sequence[Estimate]) -> tuple[list[float], list[float]]:
    """Each estimate's one-sided p-values, of "the treatment is not worse" (small when ``d`` is
    well below 0) and of "not better", in one call of the t distribution a side (a gate has a
    pair per row)."""
    import numpy as np

    d = np.array([e.d for e in estimates], dtype=float)
    se = np.array([e.se for e in estimates], dtype=float)
    df = np.array([e.df for e in estimates], dtype=float)
    zero = se <= 0.0
    t = d / np.where(zero, 1.0, se)
    worse = np.where(zero, np.where(d < 0, 0.0, 1.0), _special().stdtr(df, t))
    better = np.where(zero, np.where(d > 0, 0.0, 1.0), _special().stdtr(df, -t))
    return worse.tolist(), better.tolist()


def _mean_var(logs: Sequence[float]) -> tuple[float, float, int]:
    """The mean, variance and count of log values (of a side, or of the units' log ratios)."""
    n = len(logs)
    mean = math.fsum(logs) / n
    var = math.fsum((x - mean) ** 2 for x in logs) / (n - 1) if n > 1 else 0.0
    return mean, var, n


def estimate(treatment: Sequence[float], baseline: Sequence[float], higher_is_better: bool = True,
             paired: bool = False) -> Estimate:
    """The estimate of two samples of positive values, at least two a side; ``paired``:
    ``treatment[i]`` and ``baseline[i]`` were measured in the same unit (window or round)."""
    sign = 1.0 if higher_is_better else -1.0
    if paired:
        mean, var, n = _mean_var([math.log(x) - math.log(y) for x, y in zip(treatment, baseline)])
        return Estimate(sign * mean, var, n, 0.0, n, paired=True)
    mt, vt, nt = _mean_var([math.log(v) for v in treatment])
    mb, vb, nb = _mean_var([math.log(v) for v in baseline])
    return Estimate(sign * (mt - mb), vt, nt, vb, nb)


def _trigamma_inverse(x: float) -> float:
    """``y`` with trigamma(y) = x (Smyth 2004's Newton iteration, as limma's trigammaInverse).
    trigamma(y) is ``zeta(2, y)`` and its derivative ``-2 zeta(3, y)``: scipy's polygamma, in
    one call of the ufunc a step."""
    from scipy.special import zeta

    if x > 1e7:
        return 1.0 / math.sqrt(x)
    if x < 1e-6:
        return 1.0 / x
    y = 0.5 + 1.0 / x
    for _ in range(50):
        tri, z3 = zeta(_ORDERS, y).tolist()
        step = tri * (1.0 - tri / x) / (-2.0 * z3)
        y += step
        if -step / y < 1e-8:
            break
    return y


def moderate(estimates: Sequence[Estimate], labels: Sequence[tuple[Hashable, ...]] = ()) -> list[Estimate]:
    """Paired estimates with moderated variances (empirical Bayes: Smyth 2004, limma's
    squeezeVar): each becomes ``(d0 s0^2 + d s^2) / (d0 + d)`` and its t test gains ``d0``
    degrees of freedom. The log variances are additive in the factors of ``labels`` (the gate:
    permutation and family; none: one level). A row's prior ``s0^2`` is predicted from the
    OTHER cells (a cell: the rows of one label, counted as one row, since a permutation's two
    rates may be twins), so it is independent of the row's own variance; ``d0`` matches the log
    variance of that prediction plus the rows' spread beyond the fit (Smyth's excess). A cell
    the others cannot predict (one permutation), an unpaired estimate, a zero variance or too
    few rows: unchanged."""
    import numpy as np
    from scipy.special import digamma, zeta

    if len(estimates) < 3 or any(not e.paired or e.n_t < 2 or e.var_t <= 0.0 for e in estimates):
        return list(estimates)
    factors = tuple(labels) or ((),) * len(estimates)
    x = _design(factors)
    n, k = x.shape
    if n - k < 2:
        return list(estimates)
    dfs = np.array([e.n_t - 1.0 for e in estimates])
    z = np.log([e.var_t for e in estimates]) - digamma(dfs / 2.0) + np.log(dfs / 2.0)
    tri = zeta(2.0, dfs / 2.0)                             # each z's sampling variance
    excess = max(0.0, float(np.sum((z - x @ (np.linalg.pinv(x) @ z)) ** 2) / (n - k) - np.mean(tri)))
    ids = {f: i for i, f in enumerate(dict.fromkeys(factors))}
    cell = np.array([ids[f] for f in factors]) if labels else np.arange(n)   # each row its own cell without labels
    count = np.bincount(cell)
    level, level_var = np.bincount(cell, weights=z) / count, np.bincount(cell, weights=tri) / count
    others = _others(tuple(ids) if labels else factors)
    out = []
    for e, d, a in zip(estimates, dfs.tolist(), (others[c] for c in cell.tolist())):
        if a is None:
            out.append(e)
            continue
        d0 = 2.0 * _trigamma_inverse(float(a ** 2 @ level_var) + excess)
        s0 = math.exp(float(a @ level) + float(digamma(d0 / 2.0)) - math.log(d0 / 2.0))
        out.append(Estimate(d=e.d, var_t=(d0 * s0 + d * e.var_t) / (d0 + d), n_t=e.n_t, var_b=e.var_b,
                            n_b=e.n_b, paired=e.paired, prior_df=d0))   # not replace(): several times the cost
    return out


@functools.lru_cache(maxsize=64)
def _others(cells: tuple[tuple[Hashable, ...], ...]) -> tuple["np.ndarray | None", ...]:
    """Per cell, the weights over the cells' levels that predict it by least squares from the
    other cells (its own weight 0: the leave-one-out prediction, from the hat matrix ``h``:
    ``(h[i] - h[i, i] e_i) / (1 - h[i, i])``); None where they cannot (``h[i, i]`` 1: a
    factor level it alone has). Cached: a run's labels, and a simulation's, repeat."""
    import numpy as np

    x = _design(cells)
    h = x @ np.linalg.pinv(x)
    out: list[np.ndarray | None] = []
    for i in range(len(cells)):
        if h[i, i] > 1.0 - 1e-9:
            out.append(None)
            continue
        a = h[i].copy()
        a[i] = 0.0
        out.append(a / (1.0 - h[i, i]))
    return tuple(out)


@functools.lru_cache(maxsize=64)
def _design(labels: tuple[tuple[Hashable, ...], ...]) -> "np.ndarray":
    """An intercept and, per factor, an indicator of each level but the first (the factors
    with one level add nothing). Cached, read-only."""
    import numpy as np

    cols = [np.ones(len(labels))]
    for j in range(len(labels[0])):
        levels = list(dict.fromkeys(lab[j] for lab in labels))
        cols += [np.array([lab[j] == lv for lab in labels], dtype=float) for lv in levels[1:]]
    out = np.column_stack(cols)
    out.flags.writeable = False
    return out


def mean_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float] | None:
    """The t interval of one sample's geometric mean (positive values, at least two; the
    throughput plots' points): ``exp(mean(log) +- t * s / sqrt(n))``."""
    v = [x for x in values if x is not None and x > 0 and math.isfinite(x)]
    if len(v) < 2:
        return None
    mean, var, n = _mean_var([math.log(x) for x in v])
    h = _t_quantile(n - 1, 0.5 + confidence / 2.0) * math.sqrt(var / n)
    return math.exp(mean - h), math.exp(mean + h)


def benjamini_hochberg(pvalues: Sequence[float | None]) -> list[float | None]:
    """Benjamini-Hochberg adjusted p-values (q-values), in the input order: a comparison is a
    discovery at false discovery rate ``alpha`` when its q-value <= alpha. ``None`` entries
    (comparisons not tested) stay ``None`` and do not count in the family."""
    idx = [i for i, p in enumerate(pvalues) if p is not None]
    out: list[float | None] = [None] * len(pvalues)
    m = len(idx)
    for i in idx:
        if not 0.0 <= pvalues[i] <= 1.0:  # type: ignore[operator]
            raise ValueError(f"p-value out of [0, 1]: {pvalues[i]!r}")
    running = 1.0
    for rank, i in sorted(enumerate(sorted(idx, key=lambda i: pvalues[i]), start=1), reverse=True):  # type: ignore
        running = min(running, pvalues[i] * m / rank)  # type: ignore[operator]
        out[i] = min(1.0, running)
    return out


def _quantile(v: list[float], q: float) -> float:
    pos = q * (len(v) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def relative_spread(values: Iterable[float], method: str = "mad") -> float:
    """A robust spread of one sample relative to its median (0.03 is 3 %): ``MAD x 1.4826`` or
    ``IQR / 1.349``, both consistent for the standard deviation of normal data and insensitive
    to one outlier. 0 for one value or when every value is 0; infinity when the median is 0 but
    the values differ; NaN for none."""
    if method not in SPREAD_METHODS:
        raise ValueError(f"unknown spread method {method!r} (expected one of {', '.join(SPREAD_METHODS)})")
    v = sorted(float(x) for x in values if x is not None and not math.isnan(float(x)))
    if not v:
        return math.nan
    med = _quantile(v, 0.5)
    if method == "mad":
        s = _quantile(sorted(abs(x - med) for x in v), 0.5) * MAD_TO_SIGMA
    else:
        s = (_quantile(v, 0.75) - _quantile(v, 0.25)) / IQR_TO_SIGMA
    if med == 0.0:
        return 0.0 if s == 0.0 else math.inf
    return s / abs(med)
