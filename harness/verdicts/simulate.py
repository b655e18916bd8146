"""Simulated runs with a known truth: the error rates and power of the stopping rule and gate.

Every value is a typical one times a noise factor of :data:`NOISE_MODELS` (one numpy Generator
per simulation, drawn an array at a time): the stopping rule's rates ``1000 x (1 + effect) x
noise`` (:func:`simulate_comparisons`, :func:`simulate_runs` through the real auto loop), the
gate's five metrics (:func:`simulate_gate`). The tests assert the documented levels, and
benchmarks/ prints the tables of docs/statistics.md and docs/gate.md.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from ..plan import SIDES, side_orders
from .auto import fit_round, plan_round
from .pairs import judge_all
from .regression import FAILING, IMPROVED, GateSettings, compare_samples, overall
from .rule import GAIN, INCONCLUSIVE, LOSS, NO_DIFFERENCE, Rule, judge


def _lognormal(rng: np.random.Generator, size, s) -> np.ndarray:
    return np.exp(rng.normal(0.0, s, size))


def _normal(rng: np.random.Generator, size, s) -> np.ndarray:
    return 1.0 + rng.normal(0.0, s, size)


def _uniform(rng: np.random.Generator, size, s) -> np.ndarray:
    return 1.0 + rng.uniform(-s, s, size)


def _outliers(rng: np.random.Generator, size, s) -> np.ndarray:
    """Log-normal, and one repetition in ten disturbed (40 % slower)."""
    return _lognormal(rng, size, s) * np.where(rng.random(size) < 0.1, 0.6, 1.0)


def _wide(rng: np.random.Generator, size, s) -> np.ndarray:
    """Normal, and one repetition in ten four times as noisy."""
    return 1.0 + rng.normal(0.0, s, size) * np.where(rng.random(size) < 0.1, 4.0, 1.0)


def _drift(rng: np.random.Generator, size, s) -> np.ndarray:
    """Log-normal, and the first round 20 % slower on every permutation (a cold first pass)."""
    x = _lognormal(rng, size, s)
    x[..., :1] *= 0.8
    return x


#: the noise factors of every simulation: ``model(rng, size, s)``, an array of ``size`` (the
#: rounds on the last axis) with relative spread ``s`` (a number, or an array broadcast to ``size``)
NOISE_MODELS: dict[str, Callable[[np.random.Generator, Any, Any], np.ndarray]] = {
    "lognormal": _lognormal, "normal": _normal, "uniform": _uniform, "outliers": _outliers, "wide": _wide,
    "drift": _drift,
}


def wrong(verdict: str, effect_pct: float, threshold_pct: float) -> bool:
    """A verdict the truth contradicts (an inconclusive one never is)."""
    if verdict == GAIN:
        return effect_pct <= threshold_pct
    if verdict == LOSS:
        return effect_pct >= -threshold_pct
    if verdict == NO_DIFFERENCE:
        return abs(effect_pct) > threshold_pct
    return False


@dataclass
class Tally:
    """Verdicts of simulated comparisons (or runs), wrong ones and repetitions used."""

    trials: int = 0
    verdicts: Counter = field(default_factory=Counter)
    wrong: int = 0
    reps: list[int] = field(default_factory=list)

    def rate(self, verdict: str) -> float:
        return self.verdicts[verdict] / self.trials if self.trials else 0.0

    @property
    def wrong_rate(self) -> float:
        return self.wrong / self.trials if self.trials else 0.0

    @property
    def decided_rate(self) -> float:
        return 1.0 - self.rate(INCONCLUSIVE)

    @property
    def median_reps(self) -> float:
        return float(np.median(self.reps)) if self.reps else 0.0


def _sample(rng: np.random.Generator, model: str, spread: float, effect_pct: float, n: int) -> list[tuple[int, float]]:
    values = 1000.0 * (1.0 + effect_pct / 100.0) * NOISE_MODELS[model](rng, n, spread)
    return list(enumerate(values.tolist(), start=1))


def _levels(rng: np.random.Generator, n: int, level: float) -> np.ndarray:
    """Each window's own level (log-normal, s.d. ``level``): what the machine gave that window
    (docs/embedded.md, "Alternated windows")."""
    return np.exp(rng.normal(0.0, level, n)) if level > 0 else np.ones(n)


def simulate_comparisons(effect_pct: float, rule: Rule, *, model: str = "lognormal", spread: float = 0.05,
                         trials: int = 1000, seed: int = 1, level: float = 0.0,
                         paired: bool = False) -> Tally:
    """``trials`` independent comparisons with a true gain of ``effect_pct``, each replayed to
    the rule's maximum (a fixed rule: its ``min_reps`` repetitions, one look). Each value is
    also multiplied by its window's level (s.d. ``level``): ``paired``, both sides' repetition
    ``r`` share window ``r`` and its level, and are judged on their ratios (an alternated run);
    otherwise each repetition has a window of its own (the present design)."""
    rng = np.random.default_rng(seed)
    n = rule.max_reps or rule.min_reps
    tally = Tally()
    for _ in range(trials):
        lt = _levels(rng, n, level)
        lb = lt if paired else _levels(rng, n, level)
        t = [(r, v * w) for (r, v), w in zip(_sample(rng, model, spread, effect_pct, n), lt)]
        b = [(r, v * w) for (r, v), w in zip(_sample(rng, model, spread, 0.0, n), lb)]
        o = judge(t, b, rule, paired=paired, explain=False)
        tally.trials += 1
        tally.verdicts[o.verdict] += 1
        tally.wrong += wrong(o.verdict, effect_pct, rule.threshold_pct)
        tally.reps.append(max(o.n_treatment, o.n_baseline))
    return tally


BENCH_THREADS = (1, 8, 32)


def _row(threads: int, strategy: str) -> dict:
    return {"run_id": "sim", "perm_id": f"t{threads}-{strategy}", "initiators": 1, "threads": threads,
            "total_threads": threads, "dialogs": strategy, "payload_bytes": 100, "server": "durable",
            "rep_numbers": [], "rep_statuses": [], "receive_rate_values": []}


@dataclass
class RunTally:
    comparisons: Tally = field(default_factory=Tally)   # every comparison of every run
    runs: int = 0
    runs_with_wrong: int = 0                              # runs with at least one wrong verdict
    runs_with_false_effect: int = 0                       # ... a gain or loss the truth contradicts
    rounds: list[int] = field(default_factory=list)
    decided: list[int] = field(default_factory=list)      # per run: its comparisons decided
    spent: list[float] = field(default_factory=list)      # per run: its repetitions' cost

    def runs_deciding(self, at_least: int) -> float:
        """The share of runs that decided at least ``at_least`` comparisons."""
        return sum(d >= at_least for d in self.decided) / self.runs if self.runs else 0.0


Effects = dict[str, "float | dict[int, float]"]


def _effect(effects: Effects, strategy: str, threads: int) -> float:
    e = effects.get(strategy, 0.0)
    return float(e.get(threads, 0.0)) if isinstance(e, dict) else float(e)


def simulate_runs(effects: Effects, rule: Rule, *, model: str = "lognormal",
                  spread: float | Mapping[int, float] = 0.05, trials: int = 200, seed: int = 1,
                  threads: tuple[int, ...] = BENCH_THREADS, budget: float | None = None,
                  rep_cost: Mapping[int, float] | None = None) -> RunTally:
    """``trials`` runs of a bench-like family (per thread count: one dialog per thread and the
    strategies of ``effects``, whose true gain in percent over it is given, per strategy or per
    strategy and thread count), each through the auto loop to its end. ``spread`` is one for
    all or one per thread count; ``rep_cost`` what a repetition costs per thread count (none:
    1 each); ``budget`` the time budget in those units: a round is fitted in it as the runner
    fits it (:func:`harness.verdicts.auto.fit_round`: the whole round, else the undecided
    comparisons that fit), with each repetition's cost known exactly where the runner
    estimates it (its windows and the mean time beyond them so far)."""
    rng = np.random.default_rng(seed)
    out = RunTally()
    n_max = rule.max_reps or rule.min_reps
    for _ in range(trials):
        rows = {f"t{t}-{s}": _row(t, s) for t in threads for s in ("per_thread", *effects)}
        cost = {pid: float(rep_cost[r["threads"]]) if rep_cost else 1.0 for pid, r in rows.items()}
        data = {pid: _sample(rng, model, spread[r["threads"]] if isinstance(spread, Mapping) else spread,
                             _effect(effects, r["dialogs"], r["threads"]), n_max)
                for pid, r in rows.items()}
        rnd, spent = 1, 0.0
        while True:
            plan = plan_round(rnd, list(rows), list(rows.values()), rule, explain=False)
            if rnd > rule.min_reps:
                plan = fit_round(plan, spent, cost, budget)
            if plan.stop or not plan.perm_ids or rnd > n_max:
                break
            for pid in plan.perm_ids:
                r, v = data[pid][rnd - 1]
                rows[pid]["rep_numbers"].append(r)
                rows[pid]["rep_statuses"].append("ok")
                rows[pid]["receive_rate_values"].append(v)
                spent += cost[pid]
            rnd += 1
        out.spent.append(spent)
        out.runs += 1
        out.rounds.append(rnd - 1)
        any_wrong = any_false = False
        judged = judge_all(list(rows.values()), default=rule, explain=False)
        out.decided.append(sum(j.outcome.verdict != INCONCLUSIVE for j in judged))
        for j in judged:
            effect = _effect(effects, j.pairing.value, j.pairing.treatment["threads"])
            bad = wrong(j.outcome.verdict, effect, rule.threshold_pct)
            out.comparisons.trials += 1
            out.comparisons.verdicts[j.outcome.verdict] += 1
            out.comparisons.wrong += bad
            out.comparisons.reps.append(max(j.outcome.n_treatment, j.outcome.n_baseline))
            any_wrong |= bad
            any_false |= bad and j.outcome.verdict in (GAIN, LOSS)
        out.runs_with_wrong += any_wrong
        out.runs_with_false_effect += any_false
    return out


# --------------------------------------------------------------------------- the regression gate

#: typical values of the five metrics (a receive rate of 3000 msg/s and the latencies in ms)
BASE = {"receive_rate": 3000.0, "send_rate": 3000.0, "send_p50_ms": 2.0, "send_p99_ms": 8.0, "e2e_p99_ms": 30.0}
_RATE = np.array([m.endswith("rate") for m in BASE])[:, None]       # (metric, 1)
_VALUES = np.array(list(BASE.values()))[:, None]


def _sides(rng: np.random.Generator, trials: int, reps: int, perms: int, cv: float, kind: str,
           shared: float, perm_noise: tuple[float, ...], latency_noise: float) -> np.ndarray:
    """Both sides' noise factors of ``trials`` gates, ``(trials, side, permutation, metric,
    round)``: relative spread ``cv`` (times ``perm_noise`` per permutation, cycled, and
    ``latency_noise`` for the latencies), a share ``shared`` of its variance a level each round
    of a permutation shares with both sides and all its metrics, the rest each value's own."""
    per_perm = np.array([perm_noise[p % len(perm_noise)] for p in range(perms)])[:, None, None]
    scale = cv * per_perm * np.where(_RATE, 1.0, latency_noise)               # (perm, metric, 1)
    x = NOISE_MODELS[kind](rng, (trials, 2, perms, len(BASE), reps), scale * math.sqrt(1.0 - shared))
    if shared > 0:
        x = x * _lognormal(rng, (trials, 1, perms, 1, reps), cv * per_perm * math.sqrt(shared))
    return x


def _gate_samples(x: np.ndarray, second: np.ndarray, rate_drop: float, latency_rise: float,
                  position_effect: float, rates_together: bool) -> list[dict[str, dict[str, list[float]]]]:
    """One gate's two sides, ``{permutation: {metric: [value per round]}}``, from its noise
    ``x`` (side, permutation, metric, round): the candidate's rates ``rate_drop`` lower and its
    latencies ``latency_rise`` higher; ``second[s, i]``: side s ran second in round i, slower by
    ``position_effect``; ``rates_together``: the send rate is the receive rate, round by round
    (as in a steady run), not on noise of its own."""
    change = np.stack([np.ones_like(_VALUES), np.where(_RATE, 1 - rate_drop, 1 + latency_rise)])
    slower = np.where(_RATE, 1 - position_effect, 1 + position_effect)                  # (metric, 1)
    v = _VALUES * change[:, None] * x * np.where(second[:, None, None, :], slower, 1.0)
    if rates_together:
        v[:, :, 1] = v[:, :, 0] * BASE["send_rate"] / BASE["receive_rate"]
    names = list(BASE)
    return [{f"perm{p}": dict(zip(names, side[p].tolist())) for p in range(side.shape[0])} for side in v]


@dataclass
class GateRates:
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


def simulate_gate(seed: int, reps: int, perms: int, cv: float, kind: str = "normal", rate_drop: float = 0.0,
                  latency_rise: float = 0.0, trials: int = 400, settings: GateSettings = GateSettings(),
                  position_effect: float = 0.0, balanced: bool = True, shared: float = 0.0,
                  paired: bool = True, perm_noise: tuple[float, ...] = (1.0,),
                  latency_noise: float = 1.0, rates_together: bool = False) -> GateRates:
    """Run ``trials`` seeded gates of ``reps`` rounds and count the verdicts. Every metric of
    every permutation: its typical value (:data:`BASE`) times a noise of :data:`NOISE_MODELS`
    (``kind``) with relative spread ``cv``, split: a share ``shared`` of its variance is the
    round's level, common to both sides (what interleaving is for: the machine's speed in those
    minutes), the rest independent per run. Each trial draws its rounds' orders (``balanced``:
    counterbalanced, as the gate does) and judges paired by round (``paired``, the interleaved
    gate) or not (stored runs). ``perm_noise`` multiplies the noise per permutation (cycled:
    ``(1, 2)``, every second one twice as noisy), ``latency_noise`` the latencies' own;
    ``rates_together``: the send rate is the receive rate's twin (:func:`_gate_samples`)."""
    rng = np.random.default_rng(seed)
    out = GateRates(trials=trials)
    x = _sides(rng, trials, reps, perms, cv, kind, shared, perm_noise, latency_noise)
    for t in range(trials):
        orders = side_orders(rng, reps, balanced)
        second = np.array([[o[1] == s for o in orders] for s in SIDES])
        base, cand = _gate_samples(x[t], second, rate_drop, latency_rise, position_effect, rates_together)
        rows = compare_samples(base, cand, settings, paired)
        v = overall(r.verdict for r in rows)
        out.counts[v] = out.counts.get(v, 0) + 1
        out.improved_trials += any(r.verdict == IMPROVED for r in rows)
    return out
