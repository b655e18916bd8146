"""Recorder.take_progress: the live deltas (the swarm protocol's Progress) add up to exactly the
recording, however they are cut, and cost nothing when not asked for."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.load.recorder import Recorder

T0 = 1_700_000_000.0


def add(into: dict, part: dict) -> None:
    for b, counts in part.items():
        c = into.setdefault(b, Counter())
        c.update({str(us): n for us, n in zip(*counts)} if isinstance(counts, list) else {"n": counts})


@settings(max_examples=80, deadline=None)
@given(batches=st.lists(st.lists(st.tuples(st.floats(0, 5), st.integers(0, 2 * 10**6), st.booleans(),
                                           st.one_of(st.none(), st.floats(0, 1))), max_size=30), max_size=8),
       take_after=st.dictionaries(st.integers(0, 8), st.floats(0, 7)))
def test_progress_deltas_add_up_to_the_recording(batches, take_after):
    """``take_after``: after which batch a Progress is taken, and its clock (seconds after T0):
    buckets go whole once old enough, late SENDs into them on their own."""
    rec = Recorder(1, bucket_seconds=0.1)
    rec.track_progress()
    got_b, got_e, got_c, got_s = {}, {}, {}, []
    for i, batch in enumerate(batches):
        results = [(T0 + t, us / 1e6, RuntimeError("no") if err else None,
                    None if late is None else T0 + t - late) for t, us, err, late in sorted(batch, key=lambda x: x[0])]
        rec.record_many(results)
        if i in take_after:
            p = rec.take_progress(now=T0 + take_after[i])
            add(got_b, p["buckets"]), add(got_e, p["errors"]), add(got_c, p["corrected"]), got_s.extend(p["slow"])
    p = rec.take_progress(final=True)
    add(got_b, p["buckets"]), add(got_e, p["errors"]), add(got_c, p["corrected"]), got_s.extend(p["slow"])
    whole = rec.to_json()
    assert {b: dict(c) for b, c in got_b.items()} == {b: c for b, c in whole["buckets"].items() if c}
    assert {b: c["n"] for b, c in got_e.items()} == whole["errors"]
    assert {b: dict(c) for b, c in got_c.items()} == whole.get("corrected", {})
    assert got_s == whole.get("slow", [])          # the slow SENDs (1 s or more) with their starts
    assert rec.take_progress() == {"buckets": {}, "errors": {}, "corrected": {}, "slow": []}


def test_nothing_is_kept_apart_unless_asked():
    rec = Recorder(1)
    rec.record(T0, 0.001, None)
    assert rec.shipped_below is None
    assert rec.take_progress() == {"buckets": {}, "errors": {}, "corrected": {}, "slow": []}
    assert rec.late == {} and rec.shipped_below is None
    assert sum(sum(c.values()) for c in rec.buckets.values()) == 1
