"""Recorder.take_delta and the master's SlotRecording: the deltas, however and whenever they are
taken, merge into exactly the recording of every SEND, and each SEND travels once."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.load.merge import SlotRecording, SwarmMerge
from harness.load.protocol import SwarmPlan
from harness.load.recorder import MAX_ERROR_KINDS, OTHER_ERRORS, Recorder
from harness.load.spec import SwarmSpec
from support.recording import delta

T0 = 1_700_000_000.0
BS = 0.1


@settings(max_examples=80, deadline=None)
@given(batches=st.lists(st.lists(st.tuples(st.floats(0, 5), st.integers(0, 2 * 10**6), st.booleans(),
                                           st.one_of(st.none(), st.floats(0, 1))), max_size=30), max_size=8),
       take_after=st.dictionaries(st.integers(0, 8), st.floats(0, 7)))
def test_deltas_merge_into_exactly_the_recording(batches, take_after):
    """``take_after``: after which batch a delta is taken, and its clock (seconds after T0)."""
    rec = Recorder(1, bucket_seconds=BS)
    user, _slot = rec.add_user(4)
    want_b, want_e, want_c, want_slow, sent = {}, Counter(), {}, [], 0
    merged, seq = SlotRecording(1, 1), 0
    for i, batch in enumerate(batches):
        results = [(T0 + t, us / 1e6, RuntimeError("no") if err else None,
                    None if late is None else T0 + t - late) for t, us, err, late in sorted(batch, key=lambda x: x[0])]
        rec.record_many(results, user)
        for end, elapsed, exc, intended in results:        # the recording, SEND by SEND
            b = int(end / BS)
            if exc is not None:
                want_e[b] += 1
                continue
            us = round(elapsed * 1e6)
            want_b.setdefault(b, Counter())[us] += 1
            if intended is not None:
                want_c.setdefault(b, Counter())[max(0, round((end - intended) * 1e6))] += 1
            if elapsed >= 1.0:
                want_slow.append([round(end - elapsed, 6), us])
        if i in take_after:
            seq += 1
            d = delta(rec, seq, now=T0 + take_after[i])
            assert all(b < int((T0 + take_after[i] - 1.0) / BS) for b in d.buckets)   # only ended buckets
            sent += sum(sum(c.values()) for c in d.buckets.values())
            merged.add(d)
    seq += 1
    last = delta(rec, seq, final=True)
    merged.add(last)
    sent += sum(sum(c.values()) for c in last.buckets.values())
    got = merged.to_json("s")
    assert {b: dict(c) for b, c in got["buckets"].items()} == {b: dict(c) for b, c in want_b.items()}
    assert sent == sum(sum(c.values()) for c in want_b.values())       # each SEND travelled once
    assert dict(got["errors"]) == dict(want_e)
    assert {b: dict(c) for b, c in got.get("corrected", {}).items()} == {b: dict(c) for b, c in want_c.items()}
    assert got.get("slow", []) == want_slow
    ends = [T0 + t for b in batches if b for t in (sorted(x[0] for x in b)[0], sorted(x[0] for x in b)[-1])]
    first, last_end, n = got["users"][user]
    assert n == sum(len(b) for b in batches) and (first, last_end) == ((ends[0], ends[-1]) if ends else (None, None))
    assert got["error_samples"] == (["RuntimeError: no"] if want_e else [])
    assert rec.take_delta(final=True)["buckets"] == {}


def test_error_texts_are_bounded():
    rec = Recorder(1)
    for k in range(MAX_ERROR_KINDS + 5):
        rec.record_many([(T0, 0.001, RuntimeError(f"e{k}"), None)])
    kinds = rec.take_delta(final=True)["error_kinds"]
    assert len(kinds) == MAX_ERROR_KINDS + 1 and kinds[OTHER_ERRORS] == 5


def test_a_missing_delta_or_one_after_the_last_fails_the_merge():
    plan = SwarmPlan(spec=SwarmSpec(sender_specs={"1": {}}), users={"1": 1})
    merge = SwarmMerge(plan)
    rec = Recorder(1)
    assert merge.add(delta(rec, 1)) is None
    assert "deltas 2..2 never came" in merge.add(delta(rec, 3))
    merge = SwarmMerge(plan)
    assert merge.add(delta(rec, 1, final=True)) is None and merge.slots["i1.w1"].final
    assert "after its last one" in merge.add(delta(rec, 2))


def test_the_masters_recording_stays_the_same_size_however_long_the_window():
    """A long window's deltas (here 50 s: 500 buckets of 40 latencies each) leave the master's
    memory as it was: the recording is on disk until it is sent, and comes back whole."""
    import tracemalloc

    from harness.load.protocol import Delta

    merged = SlotRecording(1, 1)

    def feed(first: int, n: int) -> None:
        for k in range(first, first + n):
            merged.add(Delta(swarm_id="s", initiator=1, worker=1, seq=k + 1, buckets={
                b: {us: 1 + us % 3 for us in range(1000, 1040)} for b in range(10 * k, 10 * k + 10)},
                errors={10 * k: 1}, samples=[[T0 + k, 1.0, 2.0, 3.0, 4.0]]))

    feed(0, 5)                          # the first deltas: what a window of any length has
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        feed(5, 50)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 20_000, f"the master's recording grew {grown} bytes in 50 s of deltas"
    got = merged.to_json("s")
    assert sorted(got["buckets"]) == list(range(550)) and len(got["samples"]) == 55
    assert all(got["buckets"][b] == {us: 1 + us % 3 for us in range(1000, 1040)} for b in got["buckets"])
    assert dict(got["errors"]) == {10 * k: 1 for k in range(55)}


def test_a_slot_opens_its_spill_file_once_not_with_every_delta(monkeypatch):
    """The master merges a delta per worker slot every second: the slot's spill file is opened
    with its first delta only (one temporary file per slot, not one per delta)."""
    import harness.spill as spill_mod

    opened = []
    real = spill_mod.tempfile.TemporaryFile
    monkeypatch.setattr(spill_mod.tempfile, "TemporaryFile", lambda *a, **k: opened.append(1) or real(*a, **k))
    merge = SwarmMerge(SwarmPlan(spec=SwarmSpec(sender_specs={"1": {}}), users={"1": 1}))
    rec = Recorder(1)
    for seq in range(1, 6):
        assert merge.add(delta(rec, seq)) is None
    assert len(opened) == 1
