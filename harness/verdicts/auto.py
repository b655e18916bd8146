"""``run.repetitions: auto``: which permutations each round runs, and when the rounds stop.

Round ``r`` runs repetition ``r``. Rounds 1 to ``min`` run every permutation (interleaved, in
the matrix's order); after that a round runs only the permutations of comparisons still
undecided (treatment and baseline alike, so the round stays interleaved), judged on the
repetitions of rounds up to ``r - 1`` (:func:`plan_round`). A technique comparison whose
mechanism never engaged ("not exercised", harness.verdicts.techniques) is settled: no round is
added for it, since more repetitions at the same settings would not engage it. The rounds stop
when every comparison is decided (or not exercised), at ``max``, or when the next round would not fit in the time budget
(the runner's call: :func:`round_fits`). A matrix without comparisons runs ``min`` rounds.

Everything here is a pure function of the repetitions on disk, so an interrupted run resumes
exactly where it was: the same rounds, the same permutations, the same looks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from .pairs import Judged, judge_all
from .rule import Rule

STOP_DECIDED, STOP_MAX, STOP_BUDGET, STOP_NONE = "decided", "max", "budget", "no comparisons"


def through(rows: Sequence[Mapping[str, Any]], rnd: int) -> list[dict[str, Any]]:
    """The rows with only the repetitions of rounds ``<= rnd``."""
    out = []
    for row in rows:
        reps = list(row.get("rep_numbers") or [])
        keep = [i for i, r in enumerate(reps) if r <= rnd]
        new = dict(row)
        new["rep_numbers"] = [reps[i] for i in keep]
        for k, v in row.items():
            if k == "rep_statuses" or (k.endswith("_values") and isinstance(v, list)):
                new[k] = [v[i] for i in keep if i < len(v)]
        out.append(new)
    return out


@dataclass
class RoundPlan:
    number: int
    perm_ids: list[str]            # to run this round, in the matrix's order
    judged: list[Judged]           # the comparisons as of the rounds before
    stop: str | None = None        # why no round is run (STOP_*), None: run it

    @property
    def undecided(self) -> list[Judged]:
        """The comparisons more rounds could still decide: neither decided nor not exercised
        (:attr:`harness.verdicts.rule.Outcome.settled`)."""
        return [j for j in self.judged if not j.outcome.settled]

    @property
    def not_exercised(self) -> list[Judged]:
        return [j for j in self.judged if j.outcome.settled and not j.outcome.decided]


def plan_round(rnd: int, perm_ids: Sequence[str], rows: Sequence[Mapping[str, Any]], rule: Rule) -> RoundPlan:
    """What round ``rnd`` runs, given every permutation's id (matrix order) and the rows of
    the repetitions so far (:func:`harness.verdicts.pairs.rows_from_summaries`; repetitions of
    round ``rnd`` and later are ignored)."""
    max_reps = rule.max_reps or rule.min_reps
    judged = judge_all(through(rows, rnd - 1), default=rule)
    plan = RoundPlan(rnd, list(perm_ids), judged)
    if rnd <= rule.min_reps:
        return plan
    if not judged:
        plan.stop, plan.perm_ids = STOP_NONE, []
    elif not plan.undecided:
        plan.stop, plan.perm_ids = STOP_DECIDED, []
    elif rnd > max_reps:
        plan.stop, plan.perm_ids = STOP_MAX, []
    else:
        need = {pid for j in plan.undecided for pid in j.pairing.perm_ids}
        plan.perm_ids = [p for p in perm_ids if p in need]
    return plan


def round_fits(spent_s: float, reps: int, seconds_per_rep: float | None, budget_s: float | None) -> bool:
    """Whether a round of ``reps`` repetitions fits in what is left of the budget, at the mean
    repetition time so far (no budget, or no repetition timed yet: it fits)."""
    if budget_s is None or seconds_per_rep is None:
        return True
    return spent_s + reps * seconds_per_rep <= budget_s
