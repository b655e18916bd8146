"""The plan: which measured windows a run executes, in what order, and who shares each.

A run is rounds x windows x members. A round is one repetition of the permutations it runs
(``run.order`` lays the fixed ones out; auto rounds choose theirs, harness.verdicts.auto). A
window is one measured stretch of load; its members share it: one permutation, or the dialog
strategies of an alternated group (``run.alternate``: :func:`members`), each SEND taking the
member of its wall-clock slice (:func:`member_at`), so the window's level cancels in the paired
rule (docs/statistics.md; docs/findings/alternating-slices.md). :func:`side_orders` orders the
two revision sides of the gate's interleaved rounds. :class:`harness.runner.Runner` executes the
windows; :class:`harness.repetition.Repetition` runs each, alternated or not.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from .errors import UserError
from .results.fields import axis_names
from .runsettings import BUCKET_SECONDS

#: the permutation values an alternated group's members may differ in
DIALOG_KEYS = axis_names("identity", "strategy")


def member_at(epoch: float, slice_seconds: float, members: int) -> int:
    """The member whose slice the instant ``epoch`` (seconds) lies in: slices of
    ``slice_seconds`` on the wall clock, taken in turn."""
    return int(epoch / slice_seconds + 1e-9) % members


def group_key(perm) -> str:
    """What the members of ``perm``'s group share: every value but the dialog strategy."""
    return json.dumps({k: v for k, v in perm.values().items() if k not in DIALOG_KEYS}, sort_keys=True)


def members(perms: Iterable, perm) -> list:
    """The permutations of ``perm``'s group (``perm`` included), in the matrix's order."""
    key = group_key(perm)
    return [q for q in perms if group_key(q) == key]


def check(run, perms: list, lines: Mapping[str, int], path: Path | str) -> None:
    """``run.alternate`` needs a closed loop on dialogs that live the whole window, activation
    on, slices of whole buckets and a group of two or more strategies for every permutation;
    UserError (file, line, field) otherwise."""
    if not run.alternate:
        return

    def refuse(why: str, fld: str = "run.alternate") -> None:
        raise UserError(why, file=str(path), line=lines.get(fld) or lines.get("run.alternate"), field=fld)

    if run.backlog_messages:
        refuse("a backlog drain cannot alternate strategies (run.alternate)", "run.backlog_messages")
    steps = run.slice_seconds / BUCKET_SECONDS
    if abs(steps - round(steps)) > 1e-6:
        refuse(f"must be a multiple of {BUCKET_SECONDS:g} s (the recorder's buckets), got {run.slice_seconds:g}",
               "run.slice_seconds")
    keys = [group_key(p) for p in perms]
    size = Counter(keys)
    for p, key in zip(perms, keys):
        if p.rate:
            refuse(f"{p.id}: an open loop (rate) cannot alternate strategies: its schedule is one")
        if p.messages_per_dialog or p.fire_and_forget:
            refuse(f"{p.id}: a finite dialog lifetime cannot alternate strategies")
        if size[key] < 2:
            refuse(f"{p.id}: no other dialog strategy to alternate with (give axes.dialogs two or more)")


@dataclass(frozen=True)
class PlannedWindow:
    """One measured window: repetition (round) ``rep`` of its ``members``: permutations (the
    first leads; more than one: alternated), or one revision side of the gate."""

    rep: int
    members: tuple


def group_windows(todo: Iterable[tuple[Any, int]], perms: Iterable, alternate: bool) -> list[PlannedWindow]:
    """The windows that run ``todo`` ((permutation, repetition) pairs, in the run's order):
    each pair alone; with ``alternate``, at the first pair of a group, one window for its
    members (matrix order) that ``todo`` has for that repetition."""
    todo, perms = list(todo), list(perms)
    wanted = {(p.id, rep) for p, rep in todo}
    placed: set[tuple[str, int]] = set()
    out = []
    for perm, rep in todo:
        if (perm.id, rep) in placed:
            continue
        group = [q for q in members(perms, perm) if (q.id, rep) in wanted] if alternate else [perm]
        placed.update((q.id, rep) for q in group)
        out.append(PlannedWindow(rep, tuple(group)))
    return out


#: the two sides of an interleaved gate
SIDES = ("baseline", "candidate")


def side_orders(rng, rounds: int, balanced: bool = True) -> list[tuple[str, str]]:
    """The order of the two sides in each of ``rounds`` rounds, drawn from ``rng`` (anything
    with ``shuffle``: the gate's ``random.Random``, a simulation's numpy Generator).
    ``balanced``: counterbalanced in pairs of rounds, one A B and one B A (which comes first
    drawn at random), the last of an odd number random, so each side runs
    first in half the rounds (one more at most) and a position effect (a round's second run
    slower, or faster) cannot favour one side; without it each round is drawn on its own,
    and 5 rounds put the same side first every time once in 16 gates. Simulated in
    :func:`harness.verdicts.simulate.simulate_gate` (``position_effect``; docs/gate.md)."""
    orders: list[tuple[str, str]] = []
    while len(orders) < rounds:
        first = list(SIDES)
        rng.shuffle(first)
        pair = [(first[0], first[1]), (first[1], first[0])] if balanced else [(first[0], first[1])]
        orders.extend(pair[: rounds - len(orders)])
    return orders


def side_windows(orders: Sequence[Sequence[str]], first_round: int = 1) -> list[PlannedWindow]:
    """The gate's interleaved rounds (``orders``: :func:`side_orders`) as windows: each side of
    each round alone, in the round's order."""
    return [PlannedWindow(i, (side,)) for i, order in enumerate(orders, first_round) for side in order]
