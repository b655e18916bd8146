"""Alternated windows (``run.alternate``): dialog strategies that share each window.

The permutations that differ only in ``dialogs`` (:func:`members`) run in one window, each SEND
taking the dialog of the wall-clock slice (:func:`member_at`), so the window's level cancels in
the paired rule (docs/statistics.md; docs/findings/alternating-slices.md). This module is the
arithmetic and checks; :class:`harness.repetition.AlternatedRepetition` runs the window.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Mapping

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


def record(member_ids: list[str], slice_seconds: float, member: int) -> dict[str, Any]:
    """A member's summary's ``alternation`` record."""
    return {"members": list(member_ids), "slice_seconds": slice_seconds, "member": member}
