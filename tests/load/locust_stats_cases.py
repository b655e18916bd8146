"""harness.load.locust_stats.log_delta against Locust's own per-request path: the master's
statistics fed from a worker's deltas hold what ``RequestStats.log_request`` leaves when every
successful SEND is logged one by one at its completion (counted in the second its recording
bucket is in), and the failures by error text.

Run in a pytest of its own by test_locust_stats_batch.py: importing locust monkey-patches the
whole process with gevent (threads become greenlets), which the other tests must not inherit."""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import given, settings, strategies as st
from locust.stats import RequestStats

from harness.load.locust_stats import log_delta
from harness.load.recorder import Recorder
from support.recording import delta

FIELDS = ("num_requests", "num_failures", "max_response_time", "min_response_time", "total_content_length",
          "response_times", "num_reqs_per_sec", "num_fail_per_sec")
BS = 0.1
T0 = 1_700_000_000.0


def _state(stats: RequestStats) -> dict:
    out = {}
    for key, entry in [("total", stats.total)] + sorted(stats.entries.items()):
        out[str(key)] = {f: (dict(v) if isinstance(v := getattr(entry, f), dict) else v) for f in FIELDS}
        # added per delta rather than per request: equal up to float rounding
        out[str(key)]["total_response_time"] = pytest.approx(entry.total_response_time, rel=1e-9)
    return out


# completion times (s after T0) in order, response times from sub-millisecond to seconds (every
# bucketing range of Locust), some failed
_sends = st.lists(st.tuples(st.floats(0.0, 0.4), st.integers(10, 20_000_000), st.booleans()), min_size=1, max_size=60)


@settings(max_examples=200, deadline=None)
@given(_sends, st.lists(st.floats(0.0, 30.0), max_size=5), st.integers(0, 500))
def test_deltas_equal_locusts_one_by_one(steps, cuts, size):
    t, done = T0, []
    for gap, us, failed in steps:
        t += gap
        done.append((t, us, failed))
    reference = RequestStats()
    for end, us, failed in done:
        second = int((int(end / BS) + 0.5) * BS)          # its recording bucket's second
        with mock.patch("locust.stats.time.time", return_value=second + 0.5):
            if failed:
                reference.log_error("SSB", "SEND", "RuntimeError: no")
                for e in (reference.total, reference.entries[("SEND", "SSB")]):
                    e.num_requests += 1
                    e.num_reqs_per_sec[second] += 1
                    e.total_content_length += size
            else:
                reference.log_request("SSB", "SEND", us / 1000.0, size)
    rec, merged = Recorder(1, bucket_seconds=BS), RequestStats()
    for end, us, failed in done:
        rec.record_many([(end, us / 1e6, RuntimeError("no") if failed else None, None)])
    seq = 0
    for cut in sorted(cuts) + [None]:                  # the deltas cut the SENDs anywhere
        seq += 1
        log_delta(merged, delta(rec, seq, now=None if cut is None else T0 + cut, final=cut is None), size)
    assert _state(merged) == _state(reference)
    errors = {e.error: e.occurrences for e in merged.errors.values()}
    assert errors == ({"RuntimeError: no": sum(f for *_, f in done)} if any(f for *_, f in done) else {})
    last = max(end for end, *_ in done)
    assert merged.total.last_request_timestamp == pytest.approx((int(last / BS) + 1) * BS)


def test_an_empty_delta_logs_nothing():
    stats = RequestStats()
    log_delta(stats, delta(Recorder(1), 1, final=True), 100)
    assert stats.total.num_requests == 0 and not stats.entries
