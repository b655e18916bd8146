"""Simulated comparisons: how often the gate fails on noise alone, and how often it catches a
real change (used by tests/gate and ``benchmarks/gate_rates.py``; figures in docs/gate.md).

A trial draws a baseline and a candidate for ``perms`` permutations, every metric of every
permutation with independent relative noise per repetition, the candidate's rates lowered by
``rate_drop`` (raised when negative) and its latencies raised by ``latency_rise``, and the
side that ran second in a round (:func:`~harness.gate.method.side_orders`, counterbalanced or
drawn per round) slower by ``position_effect`` (rates lowered, latencies raised); it runs
:func:`~harness.gate.verdict.compare_samples` and takes the gate's overall verdict the way
:class:`~harness.gate.report.GateReport` does, and whether any row was called ``improved``.
Seeded, so every figure is reproducible.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from .method import FAILING, IMPROVED, INCONCLUSIVE, PASS, REGRESSION, SIDES, WARNING, GateSettings, side_orders, worst
from .verdict import compare_samples

#: typical values of the five metrics (a receive rate of 3000 msg/s and the latencies in ms)
BASE = {"receive_rate": 3000.0, "send_rate": 3000.0, "send_p50_ms": 2.0, "send_p99_ms": 8.0, "e2e_p99_ms": 30.0}
NOISE_KINDS = ("normal", "lognormal", "outliers")


def noise(rng: random.Random, cv: float, kind: str) -> float:
    """A multiplicative noise factor with relative spread ``cv``."""
    if kind == "normal":
        return 1 + rng.gauss(0, cv)
    if kind == "lognormal":
        return math.exp(rng.gauss(0, cv))
    if kind == "outliers":          # one repetition in ten is four times as noisy
        return 1 + rng.gauss(0, cv * (4 if rng.random() < 0.1 else 1))
    raise ValueError(f"unknown noise kind {kind!r} (expected one of {', '.join(NOISE_KINDS)})")


def side(rng: random.Random, reps: int, perms: int, cv: float, kind: str = "normal",
         rate_drop: float = 0.0, latency_rise: float = 0.0,
         second: list[bool] | None = None, position_effect: float = 0.0) -> dict[str, dict[str, list[float]]]:
    """One side's samples, ``{permutation: {metric: [value per repetition]}}``; ``second[i]``:
    this side ran second in round i, slower by ``position_effect``."""
    out = {}
    for p in range(perms):
        out[f"perm{p}"] = {
            m: [v * ((1 - rate_drop) if m.endswith("rate") else (1 + latency_rise)) * noise(rng, cv, kind)
                * _slower(m, position_effect if second and second[i] else 0.0)
                for i in range(reps)]
            for m, v in BASE.items()}
    return out


def _slower(metric: str, by: float) -> float:
    return (1 - by) if metric.endswith("rate") else (1 + by)


@dataclass
class Rates:
    """Outcomes of ``trials`` simulated comparisons, as fractions of the trials."""

    trials: int
    counts: dict[str, int] = field(default_factory=dict)   # overall verdict -> trials
    improved_trials: int = 0                                # trials with a row called improved

    def rate(self, *verdicts: str) -> float:
        return sum(self.counts.get(v, 0) for v in verdicts) / self.trials

    @property
    def failed(self) -> float:
        """The gate exits 1 (a regression; integrity does not vary in these simulations)."""
        return self.rate(*FAILING)

    @property
    def passed(self) -> float:
        """The gate exits 0 (pass, warning or inconclusive)."""
        return 1.0 - self.failed

    @property
    def improved(self) -> float:
        """A row is called ``improved`` (a false claim when there is only noise)."""
        return self.improved_trials / self.trials


def simulate(seed: int, reps: int, perms: int, cv: float, kind: str = "normal", rate_drop: float = 0.0,
             latency_rise: float = 0.0, trials: int = 400, settings: GateSettings = GateSettings(),
             position_effect: float = 0.0, balanced: bool = True) -> Rates:
    """Run ``trials`` seeded comparisons of ``reps`` repetitions a side and count the verdicts;
    each trial draws its rounds' orders (``balanced``: counterbalanced, as the gate does)."""
    rng = random.Random(seed)
    out = Rates(trials=trials)
    for _ in range(trials):
        orders = side_orders(rng, reps, balanced)
        base, cand = ([o[1] == s for o in orders] for s in SIDES)
        rows = compare_samples(side(rng, reps, perms, cv, kind, second=base, position_effect=position_effect),
                               side(rng, reps, perms, cv, kind, rate_drop, latency_rise, cand, position_effect),
                               settings)
        v = PASS
        for r in rows:
            v = worst(v, r.verdict)
        v = v if v in (REGRESSION, WARNING, INCONCLUSIVE) else PASS
        out.counts[v] = out.counts.get(v, 0) + 1
        out.improved_trials += any(r.verdict == IMPROVED for r in rows)
    return out
