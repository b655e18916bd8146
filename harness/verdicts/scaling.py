"""How far each thread sweep scales: the Universal Scalability Law per group of permutations.

A **sweep** is the permutations that differ only in their thread count (:data:`SWEEP_KEYS`);
with at least :data:`MIN_THREAD_COUNTS` counts its rates that count are fitted with :mod:`.usl`
(or said not to fit). A **shift** is a run comparison seen across thread counts: the change of
each coefficient with its MOVER interval. :mod:`.scaling_answer` turns them into the answer's
sections; docs/statistics.md ("How far it scales") has the method.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

import numpy as np

from ..results.fields import COMPARISON_KEYS
from . import usl
from .comparison_metrics import RECEIVE_RATE
from .pairs import OTHER_AXES, Pairing, run_comparisons, samples  # noqa: F401  (OTHER_AXES re-exported)

#: what a sweep's permutations share: every compared axis but the thread count (and the matrix
#: case, a name: scaling.yaml measures its few threads in a case of their own)
SWEEP_KEYS = tuple(k for k in COMPARISON_KEYS if k not in ("threads", "case"))
#: the law has three coefficients: four thread counts leave one to test its fit
MIN_THREAD_COUNTS = 4
LEVEL = 0.95
#: a sweep whose lack of fit is significant at this level is said not to fit
FIT_ALPHA = 0.01
#: the level of each coefficient's difference in a shift: 95 % for the three together
MOVE_LEVEL = 1 - 0.05 / 3
FITTED, NO_FIT, NO_MODEL = "fitted", "does not fit", "no model"
#: the quantities with an interval, by name in :func:`harness.verdicts.usl.interval`
QUANTITIES = ("log_lam", "sigma", "kappa", "peak", "log_peak_rate")
COEFFICIENTS = ("log_lam", "sigma", "kappa")


@dataclass(frozen=True, eq=False)
class Sweep:
    """One group of permutations that differ only in their thread count, and its model."""

    key: tuple
    rows: tuple[Mapping[str, Any], ...] = field(repr=False)
    threads: tuple[int, ...]            # the total thread counts with a rate that counts
    status: str
    reason: str = ""
    data: usl.SweepPoints | None = field(default=None, repr=False)
    fit: usl.Fit | None = None          # also of a sweep the law does not fit (its residuals are drawn)
    ci: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    lack: tuple[float, int, int, float] | None = None
    _intervals: dict = field(default_factory=dict, repr=False)

    @property
    def first(self) -> Mapping[str, Any]:
        return self.rows[0]

    @property
    def run_id(self) -> str:
        return self.first.get("run_id") or ""

    def interval(self, what: str, level: float) -> tuple[float, float]:
        """The profile interval of a quantity at ``level`` (computed once: a baseline sweep is
        in several comparisons)."""
        if (what, level) not in self._intervals:
            self._intervals[(what, level)] = usl.interval(self.data, self.fit, what, level)
        return self._intervals[(what, level)]

    def value(self, what: str) -> float:
        """The estimate of a quantity of :data:`QUANTITIES` (logs as logs)."""
        f = self.fit
        return {"log_lam": math.log(f.lam), "sigma": f.sigma, "kappa": f.kappa, "peak": f.peak_threads,
                "log_peak_rate": math.log(f.peak_rate) if f.peak_rate > 0 else -math.inf}[what]


def _threads(row: Mapping[str, Any]) -> int | None:
    n = row.get("total_threads") or ((row.get("initiators") or 0) * (row.get("threads") or 0))
    return int(n) if n else None


def groups(rows: Iterable[Mapping[str, Any]]) -> dict[tuple, list[Mapping[str, Any]]]:
    """The permutation rows by :data:`SWEEP_KEYS`, each group in thread order."""
    out: dict[tuple, list[Mapping[str, Any]]] = defaultdict(list)
    for r in rows:
        if _threads(r):
            out[tuple(r.get(k) for k in SWEEP_KEYS)].append(r)
    for members in out.values():
        members.sort(key=lambda r: _threads(r) or 0)
    return dict(out)


def points(rows: Iterable[Mapping[str, Any]]) -> list[tuple[int, list[float]]]:
    """``(total threads, [receive rates that count])`` of a sweep's rows."""
    by_n: dict[int, list[float]] = defaultdict(list)
    for r in rows:
        by_n[_threads(r) or 0].extend(v for _, v in samples(r, RECEIVE_RATE) if v > 0)
    return sorted((n, v) for n, v in by_n.items() if v)


def model(key: tuple, rows: list[Mapping[str, Any]], level: float = LEVEL) -> Sweep:
    """A sweep's model: fitted, said not to fit, or none and why."""
    pts = points(rows)
    threads = tuple(n for n, _ in pts)
    base = dict(key=key, rows=tuple(rows), threads=threads)
    if len(threads) < MIN_THREAD_COUNTS:
        return Sweep(**base, status=NO_MODEL, reason=_too_few(rows, threads))
    data = usl.sweep(pts)
    fit = usl.fit(data)
    lack = usl.lack_of_fit(data, fit)
    if lack is not None and lack[3] < FIT_ALPHA:
        return Sweep(**base, status=NO_FIT, data=data, fit=fit, lack=lack, reason=(
            f"the law does not fit: the thread counts' mean rates depart from its best curve by more than their "
            f"repetitions spread (lack of fit F = {lack[0]:.1f} on {lack[1]} and {lack[2]} degrees of freedom, "
            f"p = {lack[3]:.2g} < {FIT_ALPHA:g}), so no coefficient is given"))
    ci = {w: usl.interval(data, fit, w, level) for w in QUANTITIES}
    reason = "" if lack is not None else (
        "its fit is not tested: no thread count has two repetitions that count (the lack-of-fit test needs them)")
    return Sweep(**base, status=FITTED, reason=reason, data=data, fit=fit, ci=ci, lack=lack)


def _too_few(rows: list[Mapping[str, Any]], threads: tuple[int, ...]) -> str:
    measured = sorted({_threads(r) for r in rows if _threads(r)})
    missing = [n for n in measured if n not in threads]
    said = (f"{len(threads)} thread count{'s' if len(threads) != 1 else ''} "
            f"({', '.join(map(str, threads)) or 'none'}) with a rate that counts")
    if missing:
        said += f" (no repetition that counts at {', '.join(map(str, missing))})"
    return (f"{said}: the law has three coefficients, so it needs at least {MIN_THREAD_COUNTS} thread counts to be "
            "fitted with one left to test its fit")


def sweeps(rows: Iterable[Mapping[str, Any]], level: float = LEVEL) -> list[Sweep]:
    """Every sweep of ``rows`` with at least two thread counts, modelled (a group with one
    thread count is no sweep)."""
    out = []
    for key, members in groups(rows).items():
        if len({_threads(r) for r in members}) >= 2:
            out.append(model(key, members, level))
    return out


# --------------------------------------------------------------------------- shifts

@dataclass(frozen=True, eq=False)
class Shift:
    """A comparison across thread counts: the treatment sweep's coefficients against the
    baseline sweep's. ``moves``: per coefficient, (difference, low, high) at ``level``; for λ
    the log of the ratio."""

    family: str
    axis: str
    value: str
    baseline_value: str
    context: str
    treatment: Sweep
    baseline: Sweep
    moves: Mapping[str, tuple[float, float, float]]
    level: float = MOVE_LEVEL

    @property
    def label(self) -> str:
        return self.value if self.family == "strategy" else f"{self.axis}={self.value}"

    def moved(self) -> list[str]:
        """The coefficients whose difference's interval excludes no change."""
        return [k for k, (_, lo, hi) in self.moves.items() if lo > 0 or hi < 0]


def shifts(rows: Iterable[Mapping[str, Any]], modelled: Iterable[Sweep]) -> list[Shift]:
    """Every comparison of ``rows`` (:func:`harness.verdicts.pairs.run_comparisons`) whose
    treatment and baseline sweeps are both fitted, once per pair of sweeps."""
    rows = list(rows)
    by_key = {s.key: s for s in modelled}
    seen: dict[tuple, Pairing] = {}
    for p in run_comparisons(rows):
        tk, bk = (tuple(r.get(k) for k in SWEEP_KEYS) for r in (p.treatment, p.baseline))
        seen.setdefault((tk, bk), p)
    out = []
    for (tk, bk), p in seen.items():
        t, b = by_key.get(tk), by_key.get(bk)
        if t is None or b is None or t.status != FITTED or b.status != FITTED:
            continue
        out.append(Shift(p.family, p.axis, p.value, p.baseline_value, p.context, t, b, _moves(t, b)))
    return out


def _moves(t: Sweep, b: Sweep) -> dict[str, tuple[float, float, float]]:
    out = {}
    for k in COEFFICIENTS:
        out[k] = usl.difference(t.value(k), t.interval(k, MOVE_LEVEL), b.value(k), b.interval(k, MOVE_LEVEL))
    return out


def unfitted_pairs(rows: Iterable[Mapping[str, Any]], modelled: Iterable[Sweep]) -> list[tuple[Pairing, Sweep]]:
    """The comparisons across thread counts that have no shift: a pairing whose treatment and
    baseline are sweeps, one of them not fitted (with that sweep)."""
    by_key = {s.key: s for s in modelled}
    seen, out = set(), []
    for p in run_comparisons(list(rows)):
        keys = tuple(tuple(r.get(k) for k in SWEEP_KEYS) for r in (p.treatment, p.baseline))
        pair = [by_key.get(k) for k in keys]
        if keys in seen or None in pair or all(s.status == FITTED for s in pair):
            continue
        seen.add(keys)
        out.append((p, next(s for s in pair if s.status != FITTED)))
    return out


# --------------------------------------------------------------------------- curves and tables

def curve(s: Sweep, count: int = 40, level: float = LEVEL) -> list[dict[str, float]]:
    """The fitted rate and its pointwise ``level`` band (:func:`harness.verdicts.usl.band`, the
    delta method) from the fewest threads measured to 1.25 times the most, at ``count``
    log-spaced thread counts and every measured one; empty without a fit."""
    if s.status != FITTED:
        return []
    grid = np.geomspace(min(s.threads), max(s.threads) * 1.25, count).round(3)
    ns = sorted(set(grid.tolist()) | {float(n) for n in s.threads})
    low, high = usl.band(s.data, s.fit, ns, level)
    return [{"threads": n, "rate": float(usl.rate(n, s.fit.lam, s.fit.sigma, s.fit.kappa)), "low": float(lo),
             "high": float(hi)} for n, lo, hi in zip(ns, low, high)]


def table_rows(modelled: Iterable[Sweep]) -> list[dict[str, Any]]:
    """One row per sweep (the analysis' ``scaling`` table): its keys, thread counts, status
    and why, and the coefficients with their intervals (rates in messages per second)."""
    out = []
    for s in modelled:
        r: dict[str, Any] = {k: s.first.get(k) for k in SWEEP_KEYS}
        r.update(thread_counts=list(s.threads), repetitions=s.data.n if s.data else None, status=s.status,
                 reason=s.reason or None)
        r.update(lack_of_fit_f=s.lack[0] if s.lack else None, lack_of_fit_p=s.lack[3] if s.lack else None)
        r.update(coefficients(s))
        out.append(r)
    return out


def coefficients(s: Sweep) -> dict[str, float | None]:
    """The fitted coefficients, the peak and its rate with their intervals (rates in messages
    per second; null without a fit, or for an open end), and the residuals' s.d. in percent."""
    names = {"log_lam": "lambda", "sigma": "sigma", "kappa": "kappa", "peak": "peak_threads",
             "log_peak_rate": "peak_rate"}
    out: dict[str, float | None] = {}
    for w, name in names.items():
        if s.status != FITTED:
            out.update({name: None, f"{name}_ci_low": None, f"{name}_ci_high": None})
            continue
        v, (lo, hi) = s.value(w), s.ci.get(w, (None, None))
        if w.startswith("log_"):
            v, lo, hi = (math.exp(x) if x is not None else None for x in (v, lo, hi))
        out.update({name: _finite(v), f"{name}_ci_low": _finite(lo), f"{name}_ci_high": _finite(hi)})
    out["residual_sd_pct"] = 100 * math.sqrt(s.fit.s2) if s.status == FITTED and s.fit.df > 0 else None
    return out


def _finite(v: float | None) -> float | None:
    """JSON and CSV have no infinity: an open end (no peak, no ceiling) is null."""
    return None if v is None or not math.isfinite(v) else float(v)
