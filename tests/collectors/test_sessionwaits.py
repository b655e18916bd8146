"""The session-waits collector (harness.collectors.sessionwaits): sampled sessions waiting by
role and wait type, and an alternated window's members told apart by their slices. Against a
telemetry whose waiters follow the wall clock's slices; the real target's sampling is in
tests/targets/embedded/test_embedded_broker.py and the whole chain in
tests/analysis/test_bottlenecks.py."""

from __future__ import annotations

import os
import threading
import time

import pytest

from harness.plan import member_at
from harness.collectors.base import SampleContext, Sampler, WindowView
from harness.collectors.sessionwaits import INTERVAL_S, SessionWaitCollector, mean_waits

SLICE_S = 0.2
#: what waits in each member's slices: member 0 a shared dialog's lock queue, member 1 the log
BY_MEMBER = ([("sender", "LCK_M_X", 8)], [("reader", "WRITELOG", 1), ("sender", "WRITELOG", 3)])


class SlicedTelemetry:
    def __init__(self, rows=None, fail=False):
        self.rows, self.fail, self.calls = rows, fail, 0

    def session_waits(self):
        self.calls += 1
        if self.fail:
            raise ConnectionError("server gone")
        if self.rows == "unsupported":
            return None
        return list(BY_MEMBER[member_at(time.time(), SLICE_S, 2)])


class FakeTarget:
    def __init__(self, telemetry):
        self.telemetry = telemetry


def run_for(telemetry, seconds: float) -> tuple[SessionWaitCollector, float, float]:
    c = SessionWaitCollector()
    ctx = SampleContext(FakeTarget(telemetry), threading.Lock())
    start = time.time()
    c.sample(ctx, start)
    time.sleep(seconds)
    end = time.time()
    c.close()
    return c, start, end


def test_mean_sessions_waiting_per_role_a_sample_without_waits_counting_none():
    samples = [(0.0, [("sender", "WRITELOG", 4), ("reader", "WRITELOG", 1)]), (0.1, [("sender", "WRITELOG", 2)]),
               (0.2, [])]
    assert mean_waits(samples) == ({"reader": {"WRITELOG": 0.333}, "sender": {"WRITELOG": 2.0}}, 3)


def test_the_samples_spill_into_the_contexts_directory(tmp_path):
    """The repetition's directory (on the results disk, whose filling is exit 5), not the
    system's temporary directory."""
    from harness.collectors.sessionwaits import SessionWaitThread

    t = SessionWaitThread(SampleContext(FakeTarget(SlicedTelemetry()), threading.Lock(), spill_dir=str(tmp_path)))
    assert os.readlink(f"/proc/self/fd/{t.samples._file.fileno()}").startswith(f"{tmp_path}/")


def test_each_member_gets_the_samples_of_its_own_slices():
    c, start, end = run_for(SlicedTelemetry(), 2.0)
    whole = c.summary_fields(None, WindowView(start, end, ()))
    per = [c.summary_fields(None, WindowView(start, end, (), (SLICE_S, 2, j))) for j in (0, 1)]
    n = whole["session_wait_samples"]
    assert n >= 0.6 * 2.0 / INTERVAL_S, n
    assert per[0]["session_wait_samples"] + per[1]["session_wait_samples"] == n
    # the window mixes both; each member sees its own (a sample taken a few microseconds before
    # a slice edge may land on the other side of it: a small share)
    assert 2.0 < whole["session_waits"]["sender"]["LCK_M_X"] < 6.0
    zero = per[0]["session_waits"]
    assert zero["sender"]["LCK_M_X"] >= 7.0 and zero["sender"].get("WRITELOG", 0.0) <= 0.5
    assert zero.get("reader", {}).get("WRITELOG", 0.0) <= 0.2
    one = per[1]["session_waits"]
    assert one["sender"]["WRITELOG"] >= 2.6 and one["sender"].get("LCK_M_X", 0.0) <= 1.0
    assert one["reader"]["WRITELOG"] >= 0.85


def test_a_target_that_cannot_tell_gives_no_fields_and_a_failure_is_reported():
    c, start, end = run_for(SlicedTelemetry("unsupported"), 0.3)
    assert c.thread.supported is False and c.summary_fields(None, WindowView(start, end, ())) == {}
    bad = SlicedTelemetry(fail=True)
    c = SessionWaitCollector()
    ctx = SampleContext(FakeTarget(bad), threading.Lock())
    try:
        c.sample(ctx, time.time())      # starts the thread (which may have failed already)
    except RuntimeError:
        pass
    until(lambda: c.thread.error is not None)       # the thread's next failed call
    with pytest.raises(RuntimeError, match="ConnectionError: server gone"):
        c.sample(ctx, time.time())
    # it keeps asking (a restarted server is sampled again), and a recovered target is sampled
    calls = bad.calls
    bad.fail = False
    until(lambda: bad.calls > calls + 1 and c.thread.samples)
    c.thread.error = None      # a call that failed before the recovery: reported above already
    c.sample(ctx, time.time())
    assert bad.calls > calls and c.thread.samples
    c.close()


def until(condition, seconds: float = 60.0) -> None:
    """Wait for the sampling thread (a loaded host runs it late), bounded as a hang."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the sampling thread did not get there"
        time.sleep(0.02)


def test_each_tick_records_the_mean_of_its_own_samples():
    c = SessionWaitCollector()
    ctx = SampleContext(FakeTarget(SlicedTelemetry()), threading.Lock())
    assert c.sample(ctx, time.time()) == []           # starts the thread: nothing sampled yet
    time.sleep(1.0)
    got = dict((key, v) for metric, key, v in c.sample(ctx, time.time()) if metric == "waiting")
    c.close()
    # a second of samples spans both members' slices: some of each
    assert 1.0 < got["sender/LCK_M_X"] < 7.0 and 0.3 < got["sender/WRITELOG"] < 2.7, got
    assert 0.1 < got["reader/WRITELOG"] < 0.9, got


def test_the_sampler_hands_the_member_to_the_collectors():
    c = SessionWaitCollector()
    s = Sampler(SampleContext(FakeTarget(SlicedTelemetry()), threading.Lock()), [c], interval=0.2).start()
    t0 = time.time()
    time.sleep(1.0)
    s.stop()
    f = s.summary_fields(t0, time.time(), (SLICE_S, 2, 1))
    assert f["session_waits"]["sender"]["WRITELOG"] >= 2.6 and not s.errors


def test_memory_stays_the_same_however_long_the_window_and_the_summary_is_the_ticks():
    """Samples as fast as they come, a tick taking them every 10 ms: what the thread keeps in
    memory once it stopped is the same after 6,600 samples as after 600 (on the code before
    it, every sample stayed: about 0.5 MB a minute at ten a second with a real target's rows,
    docs/findings/memory-soak.md); the window's figures, read back from disk, are those of the
    samples the ticks saw."""
    import gc
    import tracemalloc

    from harness.collectors.sessionwaits import SessionWaitThread

    def kept_after(n: int, seen: list | None = None) -> tuple[int, SessionWaitThread]:
        tracemalloc.start()
        try:
            t = SessionWaitThread(SampleContext(FakeTarget(SlicedTelemetry()), threading.Lock()), interval=0.0)
            t.start()
            try:
                while len(t.samples) < n:
                    time.sleep(0.01)
                    got = t.take(time.time())
                    if seen is not None:
                        seen.extend(got)
            finally:
                t.stop()
            got = t.take(float("inf"))
            if seen is not None:
                seen.extend(got)
            del got
            gc.collect()
            return tracemalloc.get_traced_memory()[0], t
        finally:
            tracemalloc.stop()

    short, _ = kept_after(600)
    long, _ = kept_after(6_600)
    assert long - short < 16_000, f"{long - short:,} bytes more kept after 6,000 more samples"
    seen: list = []
    _, t = kept_after(300, seen)
    everything = list(t.between(0.0, float("inf")))
    assert [(ts, [tuple(r) for r in rows]) for ts, rows in everything] == seen and len(seen) == len(t.samples)
    assert mean_waits(everything) == mean_waits(seen) and mean_waits(seen)[1] == len(seen)
