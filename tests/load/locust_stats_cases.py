"""harness.load.locust_stats.log_batch against Locust's own per-request path: a batch of SENDs
logged at once leaves every StatsEntry field (and the per-second response-time snapshots of
the web UI) as ``RequestStats.log_request`` leaves them one request at a time.

Run in a pytest of its own by test_locust_stats_batch.py: importing locust monkey-patches the
whole process with gevent (threads become greenlets), which the other tests must not inherit."""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import given, settings, strategies as st
from locust.stats import RequestStats

from harness.load.locust_stats import log_batch

FIELDS = ("num_requests", "num_none_requests", "num_failures", "total_response_time", "max_response_time",
          "min_response_time", "total_content_length", "response_times", "num_reqs_per_sec",
          "last_request_timestamp")


def _state(stats: RequestStats) -> dict:
    out = {}
    for key, entry in [("total", stats.total)] + sorted(stats.entries.items()):
        out[str(key)] = {f: (dict(v) if isinstance(v := getattr(entry, f), dict) else v) for f in FIELDS}
        # added per second rather than per request: equal up to float rounding
        out[str(key)]["total_response_time"] = pytest.approx(entry.total_response_time, rel=1e-12)
        out[str(key)]["cache"] = {t: (dict(c.response_times), c.num_requests)
                                  for t, c in (entry.response_times_cache or {}).items()}
    return out


def _fresh(epoch: float) -> RequestStats:
    with mock.patch("locust.stats.time.time", return_value=epoch):    # its first snapshot's second
        return RequestStats(use_response_times_cache=True)


def _one_by_one(done, size) -> RequestStats:
    stats = _fresh(done[0][0])
    for epoch, rt in done:
        with mock.patch("locust.stats.time.time", return_value=epoch):
            stats.log_request("SSB", "SEND", rt, size)
    return stats


# completion times in order, a few seconds apart at most (second boundaries inside batches),
# response times from sub-millisecond to seconds (every bucketing range of Locust)
_times = st.lists(st.tuples(st.floats(0.0, 0.4), st.floats(0.01, 20_000.0)), min_size=1, max_size=60)


@settings(max_examples=200, deadline=None)
@given(_times, st.lists(st.integers(1, 20), min_size=1, max_size=6), st.integers(0, 500))
def test_a_batch_equals_locusts_one_by_one(steps, cuts, size):
    t, done = 1_700_000_000.3, []
    for gap, rt in steps:
        t += gap
        done.append((t, rt))
    reference = _one_by_one(done, size)
    batched = _fresh(done[0][0])
    i = 0
    with mock.patch("locust.stats.time.time", return_value=done[0][0]):
        for n in cuts * 100:                      # the same requests, cut into batches
            if i >= len(done):
                break
            log_batch(batched, "SSB", "SEND", done[i:i + n], size)
            i += n
    assert _state(batched) == _state(reference)


def test_an_empty_batch_logs_nothing():
    stats = RequestStats()
    log_batch(stats, "SSB", "SEND", [], 100)
    assert stats.total.num_requests == 0 and not stats.entries


def test_overlapping_batches_keep_the_latest_completion_and_count_each_second():
    stats = RequestStats()
    log_batch(stats, "SSB", "SEND", [(100.2, 1.0), (101.5, 2.0)], 10)
    log_batch(stats, "SSB", "SEND", [(100.9, 3.0)], 10)     # another user's earlier SEND, reported later
    e = stats.entries[("SEND", "SSB")]
    assert e.last_request_timestamp == 101.5 and dict(e.num_reqs_per_sec) == {100: 2, 101: 1}
    assert (e.num_requests, e.min_response_time, e.max_response_time, e.total_content_length) == (3, 1.0, 3.0, 30)
