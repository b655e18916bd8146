"""Alternated windows (``run.alternate``): the permutations that differ only in their dialog
strategy share each window, and their comparisons are judged window by window. This module is
the concept's arithmetic (which permutations share a window, which slice an instant is in) and
its checks; :class:`harness.repetition.AlternatedRepetition` runs such a window.

Why: on a shared 2-vCPU machine each window has a level of its own (the vCPU's speed and the
disk's flush time of those seconds: docs/embedded.md, "Alternated windows"),
as wide as the effects a run asks about. Strategies measured in the same window share it, and
their ratio loses it (the paired rule, docs/statistics.md, "Both sides in the same windows").

How (docs/matrices.md, ``run.alternate``):

* the permutations whose values differ only in ``dialogs`` form a group (:func:`members`);
  running a member's repetition ``r`` runs one window for every member the caller wants whose
  repetition ``r`` is not complete yet;
* the target is prepared once and every member's dialogs are begun, member after member on
  each initiator, so member ``j``'s dialog slots follow the earlier members'
  (:meth:`harness.load.spec.SwarmSpec.alternation_slots`);
* the window lasts ``measure_seconds`` per member; every client thread looks up one dialog per
  member and each SEND takes the dialog of the slice the wall clock is in (:func:`member_at`:
  the same clock on every worker and host);
* each member's summary counts the SENDs completed in its slices
  (:func:`harness.load.window.merge_workers` with ``member``) and the messages sent in its
  slices and received in the window (:meth:`Telemetry.e2e_sent_latencies_us`), over the time
  of its slices. The window's own figures (CPU, storage, waits, flags) are the window's, in
  every member's summary; its ``alternation`` record names the group.
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
