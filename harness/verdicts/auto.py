"""``run.repetitions: auto``: which permutations each round runs, and when the rounds stop.

Rounds 1 to ``min`` run every permutation; later rounds only both sides of comparisons still
undecided, until all are settled, ``max``, or the time budget (:func:`fit_round`).
:func:`plan_round` is a pure function of the repetitions on disk, so a resumed run continues
exactly where it was.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
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
            if k in ("rep_statuses", "rep_windows") or (k.endswith("_values") and isinstance(v, list)):
                new[k] = [v[i] for i in keep if i < len(v)]
        out.append(new)
    return out


@dataclass
class RoundPlan:
    number: int
    perm_ids: list[str]            # to run this round, in the matrix's order
    judged: list[Judged]           # the comparisons as of the rounds before
    stop: str | None = None        # why no round is run (STOP_*), None: run it
    #: undecided comparisons the round leaves out because they do not fit in the budget
    left_out: list[Judged] = field(default_factory=list)

    @property
    def undecided(self) -> list[Judged]:
        """The comparisons more rounds could still decide: neither decided nor not exercised
        (:attr:`harness.verdicts.rule.Outcome.settled`)."""
        return [j for j in self.judged if not j.outcome.settled]

    @property
    def not_exercised(self) -> list[Judged]:
        return [j for j in self.judged if j.outcome.settled and not j.outcome.decided]


def plan_round(rnd: int, perm_ids: Sequence[str], rows: Sequence[Mapping[str, Any]], rule: Rule,
               explain: bool = True) -> RoundPlan:
    """What round ``rnd`` runs, given every permutation's id (matrix order) and the rows of
    the repetitions so far (:func:`harness.verdicts.pairs.rows_from_summaries`; repetitions of
    round ``rnd`` and later are ignored). ``explain`` False: the comparisons' verdicts without
    the reasons of the undecided ones (a simulation's)."""
    max_reps = rule.max_reps or rule.min_reps
    judged = judge_all(through(rows, rnd - 1), default=rule, explain=explain)
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


#: more groups than this: chosen greedily instead of over every subset
EXHAUSTIVE_GROUPS = 10


def _groups(plan: RoundPlan) -> list[tuple[list[str], list[Judged]]]:
    """The round's undecided comparisons, grouped by the permutations they share (a baseline
    and every undecided comparison against it), each group with its permutations in the
    round's order; groups in the order of their first permutation."""
    groups: list[tuple[set[str], list[Judged]]] = []       # pairwise disjoint
    for j in plan.undecided:
        ids, comps, rest = set(j.pairing.perm_ids), [j], []
        for g_ids, g_comps in groups:
            if g_ids & ids:
                ids, comps = ids | g_ids, g_comps + comps
            else:
                rest.append((g_ids, g_comps))
        groups = rest + [(ids, comps)]
    order = {p: i for i, p in enumerate(plan.perm_ids)}
    out = [([p for p in plan.perm_ids if p in ids], comps) for ids, comps in groups]
    return sorted(out, key=lambda g: order[g[0][0]])


def fit_round(plan: RoundPlan, spent_s: float, cost: Mapping[str, float] | None,
              budget_s: float | None) -> RoundPlan:
    """Round ``plan`` fitted in what is left of the budget (``budget_s - spent_s``).

    ``cost``: the seconds each permutation still to run in this round is expected to take (a
    permutation absent from it costs nothing: already run in this round, before an
    interruption); None (nothing timed yet), or no budget: the round runs whole. When the
    whole round does not fit, it runs the most undecided comparisons that fit, whole: the
    groups of :func:`_groups` (comparisons sharing a baseline go together), the most
    comparisons first, then the cheapest, then the earliest in the matrix. The comparisons
    left out are ``left_out``; when no group fits, the rounds stop (:data:`STOP_BUDGET`)."""
    if plan.stop or budget_s is None or cost is None:
        return plan

    def price(ids: Sequence[str]) -> float:
        return sum(cost.get(p, 0.0) for p in ids)

    room = budget_s - spent_s
    if price(plan.perm_ids) <= room:
        return plan
    groups = _groups(plan)
    if len(groups) <= EXHAUSTIVE_GROUPS:
        subsets = (c for k in range(len(groups), 0, -1) for c in combinations(range(len(groups)), k))
        fitting = [c for c in subsets if price([p for g in c for p in groups[g][0]]) <= room]
        best = min(fitting, key=lambda c: (-sum(len(groups[g][1]) for g in c),
                                          price([p for g in c for p in groups[g][0]]), c), default=())
    else:
        best, left = (), room
        for g in sorted(range(len(groups)), key=lambda g: price(groups[g][0]) / len(groups[g][1])):
            if price(groups[g][0]) <= left:
                best, left = best + (g,), left - price(groups[g][0])
    chosen = {p for g in best for p in groups[g][0]}
    plan.left_out = [j for g in range(len(groups)) if g not in best for j in groups[g][1]]
    plan.perm_ids = [p for p in plan.perm_ids if p in chosen]
    if not plan.perm_ids:
        plan.stop = STOP_BUDGET
    return plan
