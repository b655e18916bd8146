"""harness.plan: which windows a run executes, which permutations share an alternated window,
which slice an instant is in, the checks of ``run.alternate``, and the pieces that split a
window by slice (the users' dialog slots, the recorded buckets, the pairing of the verdicts).
Fast: no server."""

from __future__ import annotations

import json
import textwrap

import pytest

from harness import plan as alternation
from harness.errors import UserError
from harness.load.spec import SwarmSpec
from harness.load.window import merge_workers
from harness.matrix import load_matrix
from harness.verdicts.pairs import shared_windows

MATRIX = """\
name: alt
axes:
  initiators: [1]
  threads: [1, 8]
  dialogs: [per_thread, trick150, shared]
  payload_bytes: [100]
  server: [durable]
run:
  warmup_seconds: 1
  measure_seconds: 2
  alternate: true
  slice_seconds: 0.5
"""


def write(tmp_path, text: str):
    p = tmp_path / "m.yaml"
    p.write_text(textwrap.dedent(text))
    return p


def test_the_permutations_that_differ_only_in_dialogs_share_a_window(tmp_path):
    m = load_matrix(write(tmp_path, MATRIX))
    perms = list(m.permutations())
    t8 = [p for p in perms if p.threads == 8]
    for p in t8:
        assert [q.id for q in alternation.members(perms, p)] == [q.id for q in t8]
    assert len({alternation.group_key(p) for p in perms}) == 2


@pytest.mark.parametrize("epoch,member", [(0.0, 0), (0.49, 0), (0.5, 1), (1.0, 2), (1.5, 0), (1000.25, 2)])
def test_the_slice_of_an_instant_is_the_wall_clocks(epoch, member):
    # 1000.25 s: slice 2000, 2000 % 3 == 2
    assert alternation.member_at(epoch, 0.5, 3) == member


@pytest.mark.parametrize("change,field,words", [
    ("  slice_seconds: 0.25\n", "run.slice_seconds", "multiple of 0.1"),
    ("  backlog_messages: 100\n", "run.backlog_messages", "backlog drain"),
])
def test_bad_alternation_settings_name_their_line_and_field(tmp_path, change, field, words):
    text = MATRIX.replace("  slice_seconds: 0.5\n", change if "slice" in change else "  slice_seconds: 0.5\n" + change)
    with pytest.raises(UserError) as ei:
        load_matrix(write(tmp_path, text))
    e = ei.value
    assert e.field == field and words in e.detail and e.line is not None, e.format()


def test_a_strategy_alone_has_nothing_to_alternate_with(tmp_path):
    with pytest.raises(UserError, match="no other dialog strategy") as ei:
        load_matrix(write(tmp_path, MATRIX.replace("[per_thread, trick150, shared]", "[per_thread]")))
    assert ei.value.field == "run.alternate" and ei.value.line == 11


def test_without_alternate_nothing_is_checked(tmp_path):
    m = load_matrix(write(tmp_path, MATRIX.replace("  alternate: true\n", "").replace("[per_thread, trick150, shared]",
                                                                                       "[per_thread]")))
    assert not m.run.alternate and len(m) == 2


def test_each_member_has_its_own_dialog_slots():
    # per_thread (8 usable), trick150 (8), shared (1), begun in that order on the initiator
    spec = SwarmSpec(sender_specs={}, alternation=[8, 8, 1], slice_seconds=0.5)
    assert spec.alternation_slots(0) == [1, 9, 17]
    assert spec.alternation_slots(7) == [8, 16, 17]
    assert spec.alternation_slots(8) == [1, 9, 17]   # wraps as one user per dialog does


def _worker_file(tmp_path, buckets: dict[int, int]):
    """A recording with ``n`` SENDs of 1 ms in each 0.1 s bucket ``b``."""
    f = tmp_path / "w.json"
    f.write_text(json.dumps({"bucket_seconds": 0.1, "initiator": 1, "buckets": {str(b): {"1000": n}
                                                                             for b, n in buckets.items()},
                             "errors": {}, "users": {"0": [0.0, 10.0, sum(buckets.values())]}}))
    return f


def test_a_window_splits_into_its_members_slices_and_nothing_is_counted_twice(tmp_path):
    # 3 s from t = 100 s, two members, 0.5 s slices: member 0 owns [100, 100.5), [101, 101.5), ...
    f = _worker_file(tmp_path, {b: b - 999 for b in range(1000, 1030)})
    whole = merge_workers([f], 100.0, 103.0)
    parts = [merge_workers([f], 100.0, 103.0, member=(0.5, 2, j)) for j in (0, 1)]
    assert [p.seconds for p in parts] == pytest.approx([1.5, 1.5])
    assert parts[0].count + parts[1].count == whole.count == sum(range(1, 31))
    assert parts[0].count == sum(n for n in range(1, 31) if ((n - 1) // 5) % 2 == 0)
    assert parts[0].start == whole.start and parts[0].end == whole.end


def test_verdicts_pair_the_repetitions_of_shared_windows():
    a = {"rep_numbers": [1, 2, 3], "rep_windows": [10.0, 20.0, 30.0]}
    assert shared_windows(a, {"rep_numbers": [1, 3], "rep_windows": [10.0, 30.0]})
    assert not shared_windows(a, {"rep_numbers": [1, 2], "rep_windows": [10.0, 21.0]})   # rep 2 ran apart
    assert not shared_windows(a, {"rep_numbers": [1, 2], "rep_windows": [None, None]})   # not alternated
    assert not shared_windows({"rep_numbers": [1]}, {"rep_numbers": [1]})
    assert not shared_windows(a, {"rep_numbers": [4], "rep_windows": [40.0]})            # nothing in common


def test_windows_group_each_repetitions_members_once_at_the_first_of_them(tmp_path):
    """group_windows: without run.alternate each (permutation, repetition) is its own window;
    with it, a group's members still to run share one window at the first of them, in the
    matrix's order, and a member already complete (not in todo) is not run again."""
    m = load_matrix(write(tmp_path, MATRIX))
    perms = list(m.permutations())
    todo = [(p, r) for r in (1, 2) for p in perms]
    alone = alternation.group_windows(todo, perms, alternate=False)
    assert [(w.rep, [q.id for q in w.members]) for w in alone] == [(r, [p.id]) for p, r in todo]
    shared = alternation.group_windows(todo, m.permutations(), alternate=True)     # an iterator too
    groups = {alternation.group_key(p) for p in perms}
    assert len(shared) == 2 * len(groups)
    assert sorted((q.id, w.rep) for w in shared for q in w.members) == sorted((p.id, r) for p, r in todo)
    for w in shared:
        assert [q.id for q in w.members] == [q.id for q in alternation.members(perms, w.members[0])]
    later = [pair for pair in todo if pair != (perms[0], 1)]      # perms[0] rep 1 complete
    first = alternation.group_windows(later, perms, alternate=True)[0]
    assert first.rep == 1 and perms[0] not in first.members and len(first.members) >= 1
