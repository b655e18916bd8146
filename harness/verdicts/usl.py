"""Gunther's Universal Scalability Law fitted to a thread sweep, with profile-likelihood intervals.

``X(N) = λ N / (1 + σ (N − 1) + κ N (N − 1))``, fitted by least squares on the log rates
(multiplicative noise, as :mod:`.rule` assumes) with σ, κ in [0, 1] and λ profiled out;
profile t intervals follow the likelihood's asymmetry, and :func:`lack_of_fit` tests whether the
law fits at all. docs/statistics.md ("How far it scales") has the method, sources and coverage.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import numpy as np
from scipy import optimize, stats

SIGMA_MAX = 1.0
KAPPA_MAX = 1.0
#: the grid the fit starts from: σ linear, κ 0 then log-spaced up to KAPPA_MAX
_SIGMA_GRID = np.linspace(0.0, SIGMA_MAX, 41)
_KAPPA_GRID = np.concatenate(([0.0], np.logspace(-8, math.log10(KAPPA_MAX), 49)))
#: zooms of the one-dimensional profiles' inner minimum
_ZOOMS = 4
#: 1 − σ on the profile of N*
_T_GRID = np.concatenate(([0.0], np.logspace(-12, 0, 61)))
#: where each zoom of :func:`_rows_min` puts its points between two of the last
_ZOOM_STEPS = np.linspace(0.0, 1.0, 15)


@dataclass(frozen=True)
class SweepPoints:
    """A thread sweep reduced to what the fit needs: per thread count ``n_threads``, its
    repetitions' count and the mean of ``log(rate) - log(N)``; the repetitions' squared
    deviations about their own thread count's mean (pure error)."""

    n_threads: np.ndarray
    counts: np.ndarray
    mean_z: np.ndarray
    pure_ss: float

    @functools.cached_property
    def n(self) -> int:
        return int(self.counts.sum())

    @property
    def k(self) -> int:
        return len(self.n_threads)


def sweep(points: Iterable[tuple[float, Sequence[float]]]) -> SweepPoints:
    """A :class:`SweepPoints` from ``(thread count, [rates of its repetitions])``; non-positive rates
    are left out (a log needs them above zero), and thread counts left with none."""
    by_n: dict[float, list[float]] = {}
    for n, rates in points:
        by_n.setdefault(float(n), []).extend(float(r) for r in rates if r is not None and r > 0)
    ns = sorted(n for n, rs in by_n.items() if rs)
    z = [np.log(np.asarray(by_n[n])) - math.log(n) for n in ns]
    return SweepPoints(np.asarray(ns, dtype=float), np.asarray([len(v) for v in z], dtype=float),
                 np.asarray([v.mean() for v in z]), float(sum(((v - v.mean()) ** 2).sum() for v in z)))


def log_d(n: np.ndarray | float, sigma, kappa):
    """``log(1 + σ (N − 1) + κ N (N − 1))``, broadcast over arrays of σ and κ."""
    return np.log1p(sigma * (n - 1.0) + kappa * n * (n - 1.0))


def rate(n, lam: float, sigma: float, kappa: float):
    """The law's rate at ``n`` threads."""
    n = np.asarray(n, dtype=float)
    return lam * n / (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0))


def _ss(s: SweepPoints, sigma, kappa, a=None):
    """The residual sum of squares at (σ, κ) (arrays broadcast against the thread counts on a
    last axis), with log λ = ``a`` or, when None, its best value for that σ and κ."""
    g = s.mean_z[..., :] + log_d(s.n_threads, np.asarray(sigma)[..., None], np.asarray(kappa)[..., None])
    if a is None:
        a = (g * s.counts).sum(axis=-1) / s.n
    dev = g - np.asarray(a)[..., None]
    return s.pure_ss + (s.counts * dev * dev).sum(axis=-1), a


@dataclass(frozen=True)
class Fit:
    """The least-squares fit of a sweep: λ, σ, κ, the residual sum of squares and its degrees
    of freedom (n − 3)."""

    lam: float
    sigma: float
    kappa: float
    rss: float
    df: int

    @property
    def s2(self) -> float:
        return self.rss / self.df if self.df > 0 else float("nan")

    @property
    def peak_threads(self) -> float:
        return peak_threads(self.sigma, self.kappa)

    @property
    def peak_rate(self) -> float:
        return peak_rate(self.lam, self.sigma, self.kappa)


def peak_threads(sigma: float, kappa: float) -> float:
    """``N* = sqrt((1 − σ)/κ)``, where the rate peaks (inf without coherency: it levels off)."""
    sigma, kappa = float(sigma), float(kappa)
    return math.sqrt(max(0.0, 1.0 - sigma) / kappa) if kappa > 1e-300 else math.inf


def peak_rate(lam: float, sigma: float, kappa: float) -> float:
    """The largest rate the law reaches from one thread on: X(N*), or λ/σ when it only levels
    off (inf for linear scaling)."""
    n = peak_threads(sigma, kappa)
    if math.isfinite(n):
        return float(rate(max(1.0, n), lam, sigma, kappa))
    return lam / sigma if sigma > 0 else math.inf


def _polish(s: SweepPoints, x0: Sequence[float]) -> tuple[np.ndarray, float]:
    """The least-squares (σ, κ) from ``x0`` within the bounds, log λ at its best value for
    each (its derivative through the mean included in the Jacobian)."""
    sq, n1 = np.sqrt(s.counts), s.n_threads - 1.0
    dn = np.stack([n1, s.n_threads * n1], axis=1)        # dD/dσ, dD/dκ

    def resid(x):
        g = s.mean_z + log_d(s.n_threads, x[0], x[1])
        return sq * (g - (g * s.counts).sum() / s.n)

    def jac(x):
        dg = dn / (1.0 + x[0] * n1 + x[1] * s.n_threads * n1)[:, None]
        return sq[:, None] * (dg - (dg * s.counts[:, None]).sum(axis=0) / s.n)

    r = optimize.least_squares(resid, np.clip(x0, 0.0, [SIGMA_MAX, KAPPA_MAX]), jac=jac,
                               bounds=([0, 0], [SIGMA_MAX, KAPPA_MAX]), x_scale=[0.1, max(1e-6, x0[1] or 1e-4)],
                               method="trf", xtol=1e-9, ftol=1e-11, gtol=1e-11, max_nfev=200)
    return r.x, s.pure_ss + float(r.fun @ r.fun)


def fit(s: SweepPoints) -> Fit:
    """The least-squares fit (``s`` needs at least 3 thread counts; a sweep is modelled from 4,
    so that one is left to test the fit: :func:`lack_of_fit`)."""
    if s.k < 3:
        raise ValueError("a fit needs at least 3 thread counts")
    ss, _ = _ss(s, _SIGMA_GRID[:, None], _KAPPA_GRID[None, :])
    i, j = np.unravel_index(np.argmin(ss), ss.shape)
    x, rss = _polish(s, [_SIGMA_GRID[i], _KAPPA_GRID[j]])
    if rss > ss[i, j]:      # the polish never loses what the grid found
        x, rss = np.array([_SIGMA_GRID[i], _KAPPA_GRID[j]]), float(ss[i, j])
    _, a = _ss(s, x[0], x[1])
    return Fit(float(math.exp(a)), float(x[0]), float(x[1]), float(rss), s.n - 3)


def lack_of_fit(s: SweepPoints, f: Fit) -> tuple[float, int, int, float] | None:
    """The lack-of-fit F test against pure error: (F, its two degrees of freedom, p value);
    None when it cannot be made (no repetition beyond one per thread count, or as many thread
    counts as coefficients)."""
    df_lof, df_pe = s.k - 3, s.n - s.k
    if df_lof < 1 or df_pe < 1 or s.pure_ss <= 0:
        return None
    fstat = ((f.rss - s.pure_ss) / df_lof) / (s.pure_ss / df_pe)
    return float(fstat), df_lof, df_pe, float(stats.f.sf(fstat, df_lof, df_pe))


# --------------------------------------------------------------------------- profiles

def _min_over(grid: np.ndarray, ss_of: Callable[[np.ndarray], np.ndarray], lo: float, hi: float) -> float:
    """The least of ``ss_of`` over [lo, hi]: its best grid point, then zoomed in between the
    points beside it (21 points at a time, each zoom a tenth as wide: every evaluation is one
    array operation), and a parabola through the best three."""
    g = grid[(grid >= lo) & (grid <= hi)]
    g = np.unique(np.concatenate(([lo, hi], g)))
    vals = ss_of(g)
    best = float(vals.min())
    for _ in range(_ZOOMS):
        j = int(np.argmin(vals))
        a, b = g[max(0, j - 1)], g[min(len(g) - 1, j + 1)]
        if not b > a:
            return best
        g = np.linspace(a, b, 21)
        vals = ss_of(g)
        best = min(best, float(vals.min()))
    j = int(np.argmin(vals))
    if 0 < j < len(g) - 1:
        y0, y1, y2 = vals[j - 1], vals[j], vals[j + 1]
        curve = y0 - 2 * y1 + y2
        if curve > 0:
            x = g[j] + (g[1] - g[0]) * 0.5 * (y0 - y2) / curve
            best = min(best, float(ss_of(np.asarray([x]))[0]))
    return best


def profile_ss(s: SweepPoints, f: Fit, what: str, c: float) -> float:
    """The least residual sum of squares with ``what`` held at ``c``: ``sigma``, ``kappa``,
    ``peak`` (N*), ``log_lam`` (log λ), ``log_peak_rate`` (log X(N*)) or ``log_rate@N`` (log X
    at N threads)."""
    if what == "sigma":
        return _min_over(_KAPPA_GRID, lambda k: _ss(s, c, k)[0], 0.0, KAPPA_MAX)
    if what == "kappa":
        return _min_over(_SIGMA_GRID, lambda sg: _ss(s, sg, c)[0], 0.0, SIGMA_MAX)
    if what == "peak":      # over t = 1 − σ (log-spaced: σ may be within 1e-9 of 1), κ = t/N*² within its bound
        return _min_over(_T_GRID, lambda t: _ss(s, 1.0 - t, t / (c * c))[0], 0.0, min(1.0, KAPPA_MAX * c * c))
    return _profile2(s, what, c)


def _profile2(s: SweepPoints, what: str, c: float) -> float:
    """:func:`profile_ss` of a quantity that involves λ: the least over (σ, κ), log λ given by
    the constraint. Over σ as :func:`_min_over` does, each σ's value the least over κ, found for
    every σ of a step at once (:func:`_rows_min`)."""
    a_of = _constraint(what, c)
    return _min_over(_SIGMA_GRID, lambda sg: _rows_min(s, sg, a_of), 0.0, SIGMA_MAX)


def _rows_min(s: SweepPoints, sigmas: np.ndarray, a_of: Callable) -> np.ndarray:
    """For each σ of ``sigmas`` the least residual sum of squares over κ, log λ = ``a_of(σ, κ)``:
    κ's grid, then each row zoomed in around its own best point (one array operation a zoom)."""
    sg = sigmas[:, None]
    k = np.broadcast_to(_KAPPA_GRID, (len(sigmas), len(_KAPPA_GRID)))
    rows = np.arange(len(sigmas))
    vals, _ = _ss(s, sg, k, a_of(sg, k))
    best = vals.min(axis=1)
    for _ in range(_ZOOMS - 1):
        j = np.argmin(vals, axis=1)
        lo, hi = k[rows, np.maximum(j - 1, 0)], k[rows, np.minimum(j + 1, k.shape[1] - 1)]
        k = lo[:, None] + (hi - lo)[:, None] * _ZOOM_STEPS[None, :]
        vals, _ = _ss(s, sg, k, a_of(sg, k))
        best = np.minimum(best, vals.min(axis=1))
    return best


def _constraint(what: str, c: float) -> Callable:
    """log λ as the function of (σ, κ) (numbers or arrays) that holds ``what`` at ``c``."""
    if what == "log_lam":
        return lambda sg, k: np.full(np.broadcast(sg, k).shape, c)
    if what == "log_peak_rate":
        return lambda sg, k: c - np.log(np.maximum(1e-300, _peak_rate_v(sg, k)))
    if what.startswith("log_rate@"):
        n = float(what.split("@", 1)[1])
        return lambda sg, k: c - math.log(n) + log_d(n, sg, k)
    raise ValueError(f"no profile of {what!r}")


def _peak_rate_v(sigma, kappa):
    """:func:`peak_rate` of λ = 1 over arrays of σ and κ."""
    sigma, kappa = np.broadcast_arrays(np.asarray(sigma, dtype=float), np.asarray(kappa, dtype=float))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        n = np.maximum(1.0, np.sqrt(np.maximum(0.0, 1.0 - sigma) / kappa))
        at_peak = n / (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0))
        level = np.where(sigma > 0, 1.0 / sigma, np.inf)
    return np.where((kappa > 1e-300) & np.isfinite(at_peak), at_peak, level)


def threshold(f: Fit, level: float) -> float:
    """How far above the least residual sum of squares a profile may rise inside the
    ``level`` interval: ``s² F(1, df; level)``."""
    return f.s2 * _f_quantile(level, f.df)


@functools.lru_cache(maxsize=256)
def _f_quantile(level: float, df: int) -> float:
    """F(1, df)'s ``level`` quantile (scipy's ppf costs about a millisecond; a simulation asks
    for a few levels and degrees of freedom thousands of times)."""
    return float(stats.f.ppf(level, 1, df))


def interval(s: SweepPoints, f: Fit, what: str, level: float = 0.95) -> tuple[float, float]:
    """The profile-likelihood interval of ``what`` (:func:`profile_ss`) at ``level``. σ and κ
    stop at their bounds; N* may be unbounded above (inf), and so may the peak rate."""
    if f.df < 1 or not f.s2 > 0:
        return (math.nan, math.nan)
    limit = f.rss + threshold(f, level)
    est, lo_bound, hi_bound, step, back = _scale(f, what)

    seen: dict[float, float] = {}       # Brent's method asks again for the bracket's ends

    def excess(u: float) -> float:
        if u not in seen:
            seen[u] = profile_ss(s, f, what, back(u)) - limit
        return seen[u]

    ends = []
    for side, bound in ((-1, lo_bound), (+1, hi_bound)):
        u = _end(excess, est, bound, side, step)
        open_end = side > 0 and u == bound and what in ("peak", "log_peak_rate")
        ends.append(math.inf if open_end else back(u))
    return ends[0], ends[1]


def _scale(f: Fit, what: str) -> tuple[float, float, float, float, Callable[[float], float]]:
    """Where the roots of ``what``'s profile are sought: its estimate and bounds on a scale
    where the steps out can be even (κ as its square root, N* and the rates as logs), the
    first step, and the way back to the quantity."""
    same = (lambda u: u)
    if what == "sigma":
        return f.sigma, 0.0, SIGMA_MAX, 0.01, same
    if what == "kappa":
        return math.sqrt(f.kappa), 0.0, math.sqrt(KAPPA_MAX), max(1e-4, 0.05 * math.sqrt(f.kappa)), lambda u: u * u
    if what == "peak":      # above 1e6 threads: unbounded; below one thread: the rate falls from the first
        return math.log(max(1e-3, min(f.peak_threads, 1e6))), math.log(1e-3), math.log(1e6), 0.05, math.exp
    if what == "log_peak_rate":
        est = math.log(min(f.peak_rate, f.lam * 1e6))
        return est, est - 50.0, math.log(f.lam * 1e6), 0.02, same
    est = math.log(f.lam) if what == "log_lam" else math.log(float(rate(float(what.split("@", 1)[1]), f.lam,
                                                                            f.sigma, f.kappa)))
    return est, est - 50.0, est + 50.0, 0.02, same


def _end(excess: Callable[[float], float], est: float, bound: float, side: int, step: float) -> float:
    """Where the profile crosses its limit on one ``side`` of the estimate: outward steps,
    doubling, to bracket the crossing, then Brent's root finder; the bound when it never
    crosses."""
    if excess(est) > 0:     # the profile misses the fit itself (a degenerate sweep): no end
        return math.nan
    prev = est
    for i in range(80):
        nxt = est + side * step * 2.0 ** i
        nxt = min(nxt, bound) if side > 0 else max(nxt, bound)
        if excess(nxt) > 0:
            return optimize.brentq(excess, min(prev, nxt), max(prev, nxt), xtol=1e-9, rtol=1e-5)
        if nxt == bound:
            break
        prev = nxt
    return bound


def covariance(s: SweepPoints, f: Fit) -> np.ndarray:
    """The covariance of (log λ, σ, κ) at the fit, ``s² (JᵀJ)⁻¹`` with J the Jacobian of the
    log rates (the Wald approximation: for the figure's band, not the coefficients' intervals)."""
    n = s.n_threads
    d = 1.0 + f.sigma * (n - 1.0) + f.kappa * n * (n - 1.0)
    jac = np.stack([np.ones_like(n), -(n - 1.0) / d, -n * (n - 1.0) / d], axis=1)
    return f.s2 * np.linalg.pinv((jac * s.counts[:, None]).T @ jac)


def band(s: SweepPoints, f: Fit, ns: Sequence[float], level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Pointwise ``level`` intervals of the rate X(N) at ``ns``: log X ± t · its standard error
    by the delta method (docs/statistics.md: within the sweep the law is nearly linear in its
    coefficients, where Wald and profile intervals cover alike)."""
    n = np.asarray(ns, dtype=float)
    d = 1.0 + f.sigma * (n - 1.0) + f.kappa * n * (n - 1.0)
    grad = np.stack([np.ones_like(n), -(n - 1.0) / d, -n * (n - 1.0) / d], axis=1)
    se = np.sqrt(np.maximum(0.0, np.einsum("ij,jk,ik->i", grad, covariance(s, f), grad)))
    x = np.log(rate(n, f.lam, f.sigma, f.kappa))
    t = float(stats.t.ppf(0.5 + level / 2, f.df)) if f.df > 0 else math.nan
    return np.exp(x - t * se), np.exp(x + t * se)


def difference(est_t: float, ci_t: tuple[float, float], est_b: float, ci_b: tuple[float, float]) -> tuple[float, float, float]:
    """The difference ``t − b`` of two independent estimates with its interval from theirs
    (MOVER: Zou and Donner, "Construction of confidence limits about effect measures: a general
    approach", Statistics in Medicine 27, 2008): each side's distance to its interval's end,
    combined in quadrature, so an asymmetric interval stays asymmetric."""
    d = est_t - est_b
    lo = d - math.hypot(est_t - ci_t[0], ci_b[1] - est_b)
    hi = d + math.hypot(ci_t[1] - est_t, est_b - ci_b[0])
    return d, lo, hi
