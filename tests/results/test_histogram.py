"""Exact latency histograms (harness.results.histogram) and window cutting (harness.load.window)."""

from __future__ import annotations

import json
import random
import statistics

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.load.recorder import Recorder
from support.recording import write_recording
from harness.load.window import merge_workers
from harness.results.histogram import Histogram


def test_percentiles_match_sorted_data():
    rng = random.Random(7)
    values = [rng.randint(100, 50_000) for _ in range(5001)]
    h = Histogram()
    h.extend_us(values)
    s = sorted(values)
    assert h.count == 5001
    # nearest rank: ceil(0.5 * 5001) = 2501st, ceil(0.99 * 5001) = 4951st
    assert h.percentiles_us([50, 99, 100]) == [s[2500], s[4950], s[-1]]
    assert abs(h.mean_us() - statistics.fmean(values)) < 1e-6


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.integers(0, 10**6), min_size=1, max_size=300),
       qs=st.lists(st.floats(0, 100), min_size=1, max_size=5))
def test_percentiles_in_one_pass_are_the_nearest_ranks(values, qs):
    """percentiles_us (one sort, for the summaries and the live metrics) is the nearest rank:
    the ceil(q% x n)-th smallest observation (at least the first)."""
    import math

    h = Histogram()
    h.extend_us(values)
    s = sorted(values)
    qs = sorted(qs)
    assert h.percentiles_us(qs) == [float(s[max(1, math.ceil(q / 100 * len(s))) - 1]) for q in qs]


def test_merge_is_exact_and_roundtrips():
    a, b = Histogram({10: 2, 20: 1}), Histogram({20: 3, 30: 1})
    m = Histogram().merge(a).merge(b)
    assert m.counts == {10: 2, 20: 4, 30: 1}
    assert Histogram(json.loads(json.dumps(m.to_json()))).counts == m.counts
    assert Histogram().summary_ms()["p99"] is None


def test_window_keeps_only_whole_buckets_inside(tmp_path):
    rec = Recorder(initiator=2, bucket_seconds=0.1)
    for i in range(100):             # one SEND every 0.05 s from t=1000.0 to 1004.95
        rec.record_many([(1000.0 + i * 0.05, 0.002, None, None)])
    rec.record_many([(1002.0, 0.5, RuntimeError("boom"), None)])
    f = write_recording(rec, tmp_path)
    wd = merge_workers([f], 1001.0, 1003.0)
    assert (wd.start, wd.end) == (1001.0, 1003.0)
    assert wd.count == 40 and wd.rate == 20.0
    assert wd.sends_total == 100 and wd.errors_total == 1
    # the window's SENDs and errors as the summary's workers read them
    assert [(w["initiator"], w["sends"], w["errors"]) for w in wd.workers] == [(2, 40, 1)]
    assert wd.latency.percentiles_us([50]) == [2000]
    assert "boom" in wd.error_samples[0]


def test_window_counts_users_that_were_sending(tmp_path):
    rec = Recorder(initiator=1, bucket_seconds=0.1)
    users = [rec.add_user(usable=2) for _ in range(4)]
    assert [slot for _u, slot in users] == [1, 2, 1, 2]   # user k on dialog slot k, wrapping
    (u0, _), (u1, _), (u2, _), (u3, _) = users
    for i in range(40):                                   # u0, u1: sending throughout
        rec.record_many([(1000.0 + i * 0.1, 0.001, None, None)], u0)
        rec.record_many([(1000.0 + i * 0.1, 0.001, None, None)], u1)
    rec.record_many([(1000.5, 0.001, None, None)], u2)    # u2: stopped before the window
    # u3: registered, never completed a SEND (stuck connecting)
    wd = merge_workers([write_recording(rec, tmp_path)], 1001.0, 1003.0)
    assert wd.users_spawned == 4
    assert wd.users_active == 2
