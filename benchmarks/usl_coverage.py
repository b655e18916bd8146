"""The scalability model's intervals, by simulation: how often they cover the truth.

    PYTHONPATH=. python benchmarks/usl_coverage.py [--trials 400] [--workers 2] [--quick] [--tables 1b23]

Sweeps of scaling.yaml's thread counts (1, 2, 4, 8, 16, 32, 48) are drawn from the Universal
Scalability Law with a known λ, σ and κ, each repetition's rate times a noise drawn from
:data:`harness.verdicts.simulate.NOISE_MODELS` (log-normal of s.d. ``spread``; with outliers; with
a slow first round), or with more noise at 1 and 2 threads than above (``hetero``: a spread of
2.5 times ``spread`` there, as one client thread's rate moves more than many threads',
docs/embedded.md). Every sweep is fitted (:mod:`harness.verdicts.usl`) and its intervals checked
against the truth. Tables, quoted by docs/statistics.md ("How far it scales"):

1. coverage of the 95 % intervals of σ, κ, N* (the peak), λ and the peak rate, at 3 and 5
   repetitions per thread count: the profile-likelihood interval ssbench uses, the Wald interval
   (estimate ± t · standard error: the R package usl's and lmfit's) and a bootstrap over the
   repetitions (percentile, resampled within each thread count: the R package's former
   method), on the same sweeps;
1b. the figure's band (the delta method) against the profile interval of the rate at 16 threads
   and at 60, beyond the sweep;
2. the difference of two sweeps' coefficients (a technique against its baseline, MOVER from
   the two profile intervals): coverage, independent and with each window's level shared by
   both sweeps (alternated strategies); and how often a coefficient is said to move when
   none does (the three intervals at 1 − 5 %/3 each, Bonferroni);
3. the lack-of-fit test at 1 %: how often a sweep the law describes is said not to fit, and
   how often sweeps it does not describe are caught.

tests/verdicts/test_usl.py runs a few hundred trials of the same functions and asserts the
documented rates with slack.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import zlib
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.verdicts import usl  # noqa: E402
from harness.verdicts.scaling import FIT_ALPHA, MOVE_LEVEL  # noqa: E402
from harness.verdicts.simulate import NOISE_MODELS  # noqa: E402

THREADS = (1, 2, 4, 8, 16, 32, 48)
#: truths shaped like the embedded target's strategies (docs/findings/scalability.md): one dialog
#: per thread (contention, a peak far beyond the sweep), one shared dialog (much contention and a
#: peak at a few threads) and a peak inside the sweep
TRUTHS = {"per_thread-like": (2400.0, 0.2, 2e-4), "shared-like": (2400.0, 0.6, 0.03),
          "peak at 44": (2400.0, 0.05, 5e-4)}
NOISES = [("lognormal", 0.03), ("lognormal", 0.05), ("lognormal", 0.10), ("hetero", 0.03), ("outliers", 0.05),
          ("drift", 0.05)]
WHATS = ("sigma", "kappa", "peak", "log_lam", "log_peak_rate")


def draw(rng: np.random.Generator, truth, reps: int, noise: str, spread: float, threads=THREADS,
         levels: np.ndarray | None = None) -> list[tuple[int, list[float]]]:
    """One sweep: ``reps`` rates per thread count, the law's rate (``truth``: λ, σ, κ, or a
    function of the thread count) times the noise; ``levels`` (per thread count and repetition)
    multiplies in a window's level shared with another sweep."""
    out = []
    for i, n in enumerate(threads):
        f = noise_of(rng, n, reps, noise, spread)
        if levels is not None:
            f = f * levels[i]
        out.append((n, list((truth(n) if callable(truth) else float(usl.rate(n, *truth))) * f)))
    return out


def noise_of(rng: np.random.Generator, n: int, reps: int, noise: str, spread: float) -> np.ndarray:
    """``reps`` noise factors at ``n`` threads: a model of NOISE_MODELS, or ``hetero``."""
    if noise == "hetero":
        return np.exp(rng.normal(0.0, spread * (2.5 if n <= 2 else 1.0), reps))
    return NOISE_MODELS[noise](rng, reps, spread)


def true_values(truth) -> dict[str, float]:
    lam, sigma, kappa = truth
    return {"sigma": sigma, "kappa": kappa, "peak": usl.peak_threads(sigma, kappa), "log_lam": math.log(lam),
            "log_peak_rate": math.log(usl.peak_rate(lam, sigma, kappa))}


def wald(sw: usl.SweepPoints, f: usl.Fit, level: float = 0.95) -> dict[str, tuple[float, float]]:
    """Estimate ± t · standard error, the standard errors from the Jacobian at the fit (log
    scale: log λ, σ, κ; N* and the peak rate by the delta method)."""
    cov = usl.covariance(sw, f)
    t = stats.t.ppf(0.5 + level / 2, f.df)
    est = {"log_lam": math.log(f.lam), "sigma": f.sigma, "kappa": f.kappa}
    grads = {"log_lam": [1, 0, 0], "sigma": [0, 1, 0], "kappa": [0, 0, 1]}
    if f.kappa > 0:
        p = f.peak_threads
        est["peak"], grads["peak"] = p, [0, -1 / (2 * f.kappa * p), -p / (2 * f.kappa)]
        h, e = 1e-7, np.array([math.log(f.lam), f.sigma, f.kappa])
        fun = lambda x: math.log(usl.peak_rate(math.exp(x[0]), x[1], x[2]))  # noqa: E731
        est["log_peak_rate"] = fun(e)
        grads["log_peak_rate"] = [(fun(e + h * np.eye(3)[k]) - fun(e - h * np.eye(3)[k])) / (2 * h) for k in range(3)]
    out = {}
    for k, v in est.items():
        g = np.asarray(grads[k], dtype=float)
        with np.errstate(invalid="ignore", over="ignore"):
            se = math.sqrt(max(0.0, float(g @ cov @ g)))
        out[k] = (v - t * se, v + t * se)
    return out


def bootstrap(points, rng: np.random.Generator, resamples: int = 100, level: float = 0.95) -> dict[str, tuple]:
    """Percentile intervals from refits of the repetitions resampled within each thread count."""
    vals: dict[str, list[float]] = {k: [] for k in WHATS}
    for _ in range(resamples):
        f = usl.fit(usl.sweep([(n, list(rng.choice(r, len(r)))) for n, r in points]))
        for k, v in (("sigma", f.sigma), ("kappa", f.kappa), ("peak", f.peak_threads),
                     ("log_lam", math.log(f.lam)), ("log_peak_rate", math.log(f.peak_rate))):
            vals[k].append(v)
    q = (50 - 50 * level, 50 + 50 * level)
    return {k: tuple(np.percentile(v, q)) for k, v in vals.items()}


def _covers(ci, true: float) -> bool:
    return ci is not None and ci[0] <= true <= ci[1]


def coverage_task(args) -> dict:
    """One cell of table 1: ``trials`` sweeps, coverage per method and quantity."""
    truth, reps, noise, spread, trials, seed, methods, whats = args
    rng = np.random.default_rng(seed)
    tv = true_values(truth)
    hits = {m: {w: 0 for w in whats} for m in methods}
    for _ in range(trials):
        pts = draw(rng, truth, reps, noise, spread)
        sw = usl.sweep(pts)
        f = usl.fit(sw)
        got = {}
        if "profile" in methods:
            got["profile"] = {w: usl.interval(sw, f, w) for w in whats}
        if "wald" in methods:
            got["wald"] = wald(sw, f)
        if "bootstrap" in methods:
            got["bootstrap"] = bootstrap(pts, rng)
        for m in methods:
            for w in whats:
                hits[m][w] += _covers(got[m].get(w), tv[w])
    return {"hits": hits, "trials": trials}


def band_task(args) -> dict:
    """Table 1b: the figure's band at ``ns`` (the delta method, :func:`harness.verdicts.usl.band`)
    against the profile interval of X(N), coverage of the true rate."""
    truth, reps, spread, trials, seed, ns = args
    rng = np.random.default_rng(seed)
    hits = {(m, n): 0 for m in ("band", "profile") for n in ns}
    for _ in range(trials):
        sw = usl.sweep(draw(rng, truth, reps, "lognormal", spread))
        f = usl.fit(sw)
        lows, highs = usl.band(sw, f, ns)
        for n, lo, hi in zip(ns, lows, highs):
            true = float(usl.rate(n, *truth))
            hits[("band", n)] += lo <= true <= hi
            plo, phi = usl.interval(sw, f, f"log_rate@{n:g}")
            hits[("profile", n)] += plo <= math.log(true) <= phi
    return {"hits": hits, "trials": trials}


def difference_task(args) -> dict:
    """Table 2: a treatment sweep against a baseline sweep, each window's level (log-normal
    ``shared``) common to both when ``shared`` > 0; coverage of the differences' intervals at
    95 % and whether any coefficient is said to move (intervals at MOVE_LEVEL). Two optional
    last items restrict the work: the coverage's coefficients (none: no coverage) and whether
    to judge the moves (each profile interval costs; a caller reading one figure skips the rest)."""
    t_truth, b_truth, reps, spread, shared, trials, seed, *only = args
    keys = ("log_lam", "sigma", "kappa")
    covered, judge_moves = (tuple(only[0]), bool(only[1])) if only else (keys, True)
    rng = np.random.default_rng(seed)
    tv_t, tv_b = true_values(t_truth), true_values(b_truth)
    cover = {k: 0 for k in keys}
    moved = 0
    for _ in range(trials):
        levels = np.exp(rng.normal(0.0, shared, (len(THREADS), reps))) if shared else None
        sws = [usl.sweep(draw(rng, tr, reps, "lognormal", spread, levels=levels)) for tr in (t_truth, b_truth)]
        fits = [usl.fit(s) for s in sws]
        est = [{"log_lam": math.log(f.lam), "sigma": f.sigma, "kappa": f.kappa} for f in fits]
        any_move = False
        for k in keys:
            for level in (0.95,) * (k in covered) + (MOVE_LEVEL,) * judge_moves:
                ci = [usl.interval(s, f, k, level) for s, f in zip(sws, fits)]
                d, lo, hi = usl.difference(est[0][k], ci[0], est[1][k], ci[1])
                if level == 0.95:
                    cover[k] += lo <= tv_t[k] - tv_b[k] <= hi
                else:
                    any_move |= lo > 0 or hi < 0
        moved += any_move
    return {"cover": cover, "moved": moved, "trials": trials}


def misfit(n: float) -> float:
    """Not the law: linear to 8 threads, flat beyond (a hard ceiling), falling by a third at 48."""
    return 2400.0 * min(n, 8.0) * (0.67 if n >= 48 else 1.0)


def fit_task(args) -> dict:
    """Table 3: how often the lack-of-fit test (at FIT_ALPHA) says a sweep does not fit."""
    shape, reps, noise, spread, trials, seed = args
    rng = np.random.default_rng(seed)
    bad = untested = 0
    for _ in range(trials):
        pts = draw(rng, misfit if shape == "misfit" else TRUTHS[shape], reps, noise, spread)
        sw = usl.sweep(pts)
        lof = usl.lack_of_fit(sw, usl.fit(sw))
        untested += lof is None
        bad += lof is not None and lof[3] < FIT_ALPHA
    return {"bad": bad, "untested": untested, "trials": trials}


def _seed(cell) -> int:
    return zlib.crc32(repr(cell).encode())


def _pool(workers: int):
    return ProcessPoolExecutor(max_workers=workers) if workers > 1 else None


def _map(pool, fn, tasks):
    return list(pool.map(fn, tasks)) if pool else [fn(t) for t in tasks]


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def table_coverage(pool, trials: int, boot_trials: int, quick: bool) -> None:
    """Table 1. σ, κ and N* in every cell; λ and the peak rate (two-dimensional profiles, slower)
    and the comparison with the bootstrap at log-normal 5 % only."""
    print("\n1. coverage of the 95 % intervals (profile / Wald / bootstrap)\n")
    names = {"sigma": "σ", "kappa": "κ", "peak": "N*", "log_lam": "λ", "log_peak_rate": "peak rate"}
    print("| truth | noise | reps | " + " | ".join(names[w] for w in WHATS) + " | sweeps |")
    print("| --- | --- | --- | " + " | ".join("---" for _ in WHATS) + " | --- |")
    cells, tasks = [], []
    for tname, truth in TRUTHS.items():
        for noise, spread in (NOISES[1:2] if quick else NOISES):
            for reps in (3, 5):
                main = noise == "lognormal" and spread == 0.05
                cells.append((tname, noise, spread, reps))
                tasks.append((truth, reps, noise, spread, trials, _seed(cells[-1]), ("profile", "wald"),
                              WHATS if main else WHATS[:3]))
                if main and boot_trials > 0:
                    cells.append((tname, noise, spread, reps, "bootstrap"))
                    tasks.append((truth, reps, noise, spread, boot_trials, _seed(cells[-1]), ("bootstrap",), WHATS))
    for cell, res in zip(cells, _map(pool, coverage_task, tasks)):
        tname, noise, spread, reps = cell[:4]
        cols = []
        for w in WHATS:
            got = [res["hits"][m][w] / res["trials"] for m in res["hits"] if w in res["hits"][m]]
            cols.append(" / ".join(_pct(x) for x in got) if got else "")
        how = " (bootstrap)" if len(cell) > 4 else ""
        print(f"| {tname}{how} | {noise} {spread:g} | {reps} | " + " | ".join(cols) + f" | {res['trials']} |")


def table_band(pool, trials: int) -> None:
    print("\n1b. the figure's band: coverage of the rate at 16 threads and at 60 (beyond the sweep), "
          "log-normal 5 % (delta method / profile)\n")
    print("| truth | reps | X(16) | X(60) |")
    print("| --- | --- | --- | --- |")
    cells = [(t, reps) for t in TRUTHS for reps in (3, 5)]
    tasks = [(TRUTHS[t], reps, 0.05, trials, _seed(("band", t, reps)), (16.0, 60.0)) for t, reps in cells]
    for (t, reps), res in zip(cells, _map(pool, band_task, tasks)):
        n = res["trials"]
        print(f"| {t} | {reps} | " + " | ".join(f"{_pct(res['hits'][('band', x)] / n)} / "
                                                f"{_pct(res['hits'][('profile', x)] / n)}" for x in (16.0, 60.0)) + " |")


def table_difference(pool, trials: int) -> None:
    print("\n2. a technique against its baseline: coverage of the differences (95 %) and a false 'moves'\n")
    print("| treatment vs baseline | reps | shared window level | λ | σ | κ | any coefficient said to move |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    pairs = [("shared-like", "per_thread-like"), ("per_thread-like", "per_thread-like")]
    cells, tasks = [], []
    for t, b in pairs:
        for reps in (3, 5):
            for shared in (0.0, 0.08):
                cells.append((t, b, reps, shared))
                tasks.append((TRUTHS[t], TRUTHS[b], reps, 0.03, shared, trials, _seed(cells[-1])))
    for (t, b, reps, shared), res in zip(cells, _map(pool, difference_task, tasks)):
        n = res["trials"]
        print(f"| {t} vs {b} | {reps} | {shared:g} | " + " | ".join(_pct(res["cover"][k] / n)
                                                                     for k in ("log_lam", "sigma", "kappa"))
              + f" | {_pct(res['moved'] / n)} |")


def table_fit(pool, trials: int) -> None:
    print(f"\n3. said not to fit (lack of fit at {FIT_ALPHA:g})\n")
    print("| sweep | noise | reps | said not to fit |")
    print("| --- | --- | --- | --- |")
    cells = [(shape, noise, spread, reps) for shape in ("per_thread-like", "shared-like", "misfit")
             for noise, spread in (("lognormal", 0.03), ("lognormal", 0.10), ("hetero", 0.03), ("outliers", 0.05))
             for reps in (3, 5)]
    tasks = [(shape, reps, noise, spread, trials, _seed(c)) for c in cells for shape, noise, spread, reps in [c]]
    for (shape, noise, spread, reps), res in zip(cells, _map(pool, fit_task, tasks)):
        print(f"| {shape} | {noise} {spread:g} | {reps} | {_pct(res['bad'] / res['trials'])} |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=400)
    ap.add_argument("--boot-trials", type=int, default=100, help="sweeps of the bootstrap cells (100 refits each)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="log-normal 0.05 only in table 1")
    ap.add_argument("--tables", default="1b23", help="which tables: 1, b (the band), 2, 3")
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    pool = _pool(args.workers)
    try:
        if "1" in args.tables:
            table_coverage(pool, args.trials, args.boot_trials, args.quick)
        if "b" in args.tables:
            table_band(pool, args.trials)
        if "2" in args.tables:
            table_difference(pool, args.trials // 2)
        if "3" in args.tables:
            table_fit(pool, args.trials)
    finally:
        if pool:
            pool.shutdown()
    print(f"\n({time.monotonic() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
