"""The gate's vocabulary: the metrics it compares, its settings and its verdicts.

docs/gate.md has the method in full; :mod:`.verdict` applies it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import UserError
#: the metrics compared, where each is in rep-NN/summary.json and which way is better (the
#: catalog the analysis' comparisons use too)
from ..verdicts.pairs import METRIC_BY_NAME, METRICS, Metric  # noqa: F401
from . import stats

GATE_SCHEMA = "ssbench.gate/1"
CORRECTION = "benjamini-hochberg"

# verdicts of a row (permutation x metric), of a permutation and of the whole comparison
PASS, IMPROVED, NO_DATA = "pass", "improved", "no-data"
INCONCLUSIVE = "inconclusive"   # too few repetitions for the test to ever reach significance
WARNING = "warning"             # an effect without significance, or significance without effect
REGRESSION = "regression"       # effect beyond the threshold AND significant
FAIL = "fail"                   # integrity: messages lost, errors rose, queue disabled
SEVERITY = {NO_DATA: 0, PASS: 0, IMPROVED: 0, INCONCLUSIVE: 1, WARNING: 2, REGRESSION: 3, FAIL: 4}
#: the verdicts that exit 1
FAILING = (FAIL, REGRESSION)

#: the two sides of an interleaved gate
SIDES = ("baseline", "candidate")


def side_orders(rng, rounds: int, balanced: bool = True) -> list[tuple[str, str]]:
    """The order of the two sides in each of ``rounds`` rounds, drawn from ``rng`` (a
    ``random.Random``). ``balanced``: counterbalanced in pairs of rounds, one A B and one B A
    (which comes first drawn at random), the last of an odd number random, so each side runs
    first in half the rounds (one more at most) and a position effect (a round's second run
    slower, or faster) cannot favour one side; without it each round is drawn on its own,
    and 5 rounds put the same side first every time once in 16 gates. Simulated in
    :func:`harness.gate.simulate.simulate` (``position_effect``; docs/gate.md)."""
    orders: list[tuple[str, str]] = []
    while len(orders) < rounds:
        first = list(SIDES)
        rng.shuffle(first)
        pair = [(first[0], first[1]), (first[1], first[0])] if balanced else [(first[0], first[1])]
        orders.extend(pair[: rounds - len(orders)])
    return orders



@dataclass(frozen=True)
class GateSettings:
    """The gate's knobs; the defaults are documented in docs/gate.md."""

    k: float = 2.0                # threshold = min(max_effect, max(min_effect, k x relative baseline spread))
    min_effect: float = 0.05      # never call anything under 5 % a regression
    #: a rate halved (a latency doubled) is beyond the threshold however wide the baseline's
    #: spread: without a ceiling a spread over 50 % put the threshold past 100 %, which no drop
    #: of a rate can pass (a 7x slower candidate read "within threshold 110.7 %")
    max_effect: float = 0.5
    min_reps: int = 4             # repetitions a side needed to judge significance
    alpha: float = 0.05           # false discovery rate for Benjamini-Hochberg
    spread: str = "mad"           # mad (MAD x 1.4826) or iqr (IQR / 1.349)
    metrics: tuple[str, ...] = tuple(m.name for m in METRICS)

    def validate(self) -> "GateSettings":
        if not (self.k >= 0 and math.isfinite(self.k)):
            raise UserError(f"--k must be a finite number >= 0, got {self.k}")
        if not 0 <= self.min_effect < 1:
            raise UserError(f"--min-effect must be a fraction in [0, 1), got {self.min_effect}")
        if not self.min_effect <= self.max_effect < 1:
            raise UserError(f"--max-effect must be a fraction in [min-effect, 1), got {self.max_effect}")
        if self.min_reps < 2:
            raise UserError(f"--min-reps must be at least 2, got {self.min_reps}")
        if not 0 < self.alpha < 1:
            raise UserError(f"--alpha must be in (0, 1), got {self.alpha}")
        if self.spread not in stats.SPREAD_METHODS:
            raise UserError(f"--spread must be one of {', '.join(stats.SPREAD_METHODS)}, got {self.spread!r}")
        unknown = [m for m in self.metrics if m not in METRIC_BY_NAME]
        if unknown or not self.metrics:
            raise UserError(f"unknown metric(s) {', '.join(unknown) or '(none given)'} "
                            f"(expected some of {', '.join(METRIC_BY_NAME)})")
        return self

    def can_judge(self, n_baseline: int, n_candidate: int) -> bool:
        """Whether significance can be judged with these repetition counts: at least
        ``min_reps`` a side, and enough that the exact test's smallest possible p-value
        (``1 / C(n + m, n)``, also the smallest possible Benjamini-Hochberg q-value) reaches
        ``alpha``. Otherwise a row can never be a regression: its verdict is inconclusive."""
        if n_baseline < self.min_reps or n_candidate < self.min_reps:
            return False
        return stats.min_p_value(n_baseline, n_candidate) <= self.alpha

    def describe(self) -> str:
        spread = "MAD x 1.4826" if self.spread == "mad" else "IQR / 1.349"
        return (f"threshold = max({self.min_effect:.0%}, k={self.k:g} x baseline spread ({spread}) / median), "
                f"at most {self.max_effect:.0%}; "
                f"significance = one-sided exact Mann-Whitney U (>= {self.min_reps} reps a side), "
                f"Benjamini-Hochberg over all permutation x metric tests at FDR {self.alpha:g}; "
                f"regression = beyond the threshold AND significant; fewer reps: inconclusive")


def worst(a: str, b: str) -> str:
    return a if SEVERITY[a] >= SEVERITY[b] else b
