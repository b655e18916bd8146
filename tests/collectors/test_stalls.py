"""The progress detectors (harness.collectors.stalls, harness.results.summary.progress_flags):
a frozen target and a receive stall, on constructed series and in seeded simulations of their
error rates (the thresholds: FREEZE_S, RECEIVE_STALL_S, RECEIVE_BEHIND_RATIO)."""

from __future__ import annotations

import bisect
import random

import pytest

from harness.collectors.base import Sample, WindowView
from harness.collectors.stalls import StallCollector, longest_freeze, longest_receive_stall
from harness.results.summary import FREEZE_S, RECEIVE_BEHIND_RATIO, RECEIVE_STALL_S, progress_flags


def ticks(start=0.0, n=20, interval=1.0, jitter=0.0, rng=None):
    rng = rng or random.Random(0)
    return [start + i * interval + (rng.uniform(0, jitter) if jitter else 0.0) for i in range(n)]


# --------------------------------------------------------------------------- freeze

def test_a_hole_in_every_series_is_a_freeze_of_its_length():
    t = ticks(n=10) + [49.0 + i for i in range(5)]          # ticks stop after 9 s, resume at 49 s
    assert longest_freeze(t, 2.0, 22.0) == pytest.approx(39.0)
    assert progress_flags(freeze_seconds=39.0, receive_stall_seconds=0, receive_rate=1, send_rate=1,
                          queue_growth=0)["server_frozen"]


def test_regular_ticks_are_no_freeze_and_a_hole_outside_the_window_is_not_counted():
    t = ticks(n=30, jitter=0.05)
    assert longest_freeze(t, 5.0, 20.0) < 0.1
    t = ticks(n=10) + [40.0 + i for i in range(5)]
    assert longest_freeze(t, 0.0, 8.0) < 0.1                # the hole starts after the window's end


@pytest.mark.simulation
def test_freeze_false_alarm_rate_with_the_measured_tick_jitter():
    """Ticks under load 10 to 30 on the 2-vCPU VM (73 repetitions, 1,136 intervals): median
    1.000 s, p99 1.014 s, max 1.047 s. Simulated with a generous jitter (up to 0.5 s late, 5x
    the worst seen): 2,000 windows, no freeze flagged."""
    rng = random.Random(26)
    flagged = sum(longest_freeze(ticks(n=20, jitter=0.5, rng=rng), 4.0, 14.0) >= FREEZE_S for _ in range(2000))
    assert flagged == 0


# --------------------------------------------------------------------------- receive stall

def simulate(rng: random.Random, batches_per_s: float, stall: tuple[float, float] | None,
             start=4.0, end=10.0, horizon=14.0):
    """processed_total sampled every second (with jitter) for a target committing RECEIVE
    batches as a Poisson process; nothing commits inside ``stall``. SENDs and readers on."""
    commits, t = [], 0.0
    while t < horizon:
        t += rng.expovariate(batches_per_s)
        if stall is None or not stall[0] <= t < stall[1]:
            commits.append(t)
    sample_ts = [i + rng.uniform(0, 0.02) for i in range(int(horizon) + 1)]
    processed = [(ts, float(bisect.bisect_right(commits, ts))) for ts in sample_ts]   # commits: ascending
    sending = [(ts, 1000.0) for ts in sample_ts]
    readers = [(ts, 2.0) for ts in sample_ts]
    return longest_receive_stall(processed, sending, readers, start, end)[0]


@pytest.mark.simulation
@pytest.mark.parametrize("rate, max_false", [(20.0, 0.0), (5.0, 0.001), (2.0, 0.10)])
def test_receive_stall_false_alarm_rate(rate, max_false):
    """A target committing RECEIVE batches at random (Poisson) times. Real permutations commit
    tens to hundreds of batches per second (one per reader poll): at 20 per second no 6-second
    window of 2,000 is flagged, at 5 per second at most 0.1 % (the chance of no batch in two
    seconds, e^-10, over the window's ticks), at 2 per second (slower than any real one) under
    10 %."""
    rng = random.Random(30)
    flagged = sum(simulate(rng, rate, None) >= RECEIVE_STALL_S for _ in range(2000)) / 2000
    assert flagged <= max_false, flagged


@pytest.mark.simulation
@pytest.mark.parametrize("length, detected_min, detected_max", [(2.0, 0.0, 0.05), (3.0, 0.995, 1.0),
                                                                 (4.0, 1.0, 1.0), (8.0, 1.0, 1.0)])
def test_receive_stalls_of_three_seconds_or_more_are_detected(length, detected_min, detected_max):
    """Ticks every second: a stall is seen for certain from the first tick inside it to the
    last, so one of three seconds spans three ticks (about 2 s certain, over RECEIVE_STALL_S)
    unless the ticks' jitter puts one just outside (0.1 % here), one of four or more always
    does, one of two seconds almost never (only when three jittered ticks fit in it)."""
    rng = random.Random(int(length))
    detected = 0
    for _ in range(1000):
        at = rng.uniform(4.0, 10.0 - min(length, 5.9))
        detected += simulate(rng, 200.0, (at, at + length)) >= RECEIVE_STALL_S
    assert detected_min <= detected / 1000 <= detected_max, detected


def test_no_stall_without_sends_or_without_readers():
    processed = [(float(i), 100.0) for i in range(10)]           # nothing received at all
    idle = [(float(i), 0.0) for i in range(10)]
    busy = [(float(i), 500.0) for i in range(10)]
    assert longest_receive_stall(processed, idle, None, 0, 10)[0] == 0.0      # nobody sent
    assert longest_receive_stall(processed, busy, idle, 0, 10)[0] == 0.0      # no reader ran: activation
    assert longest_receive_stall(processed, busy, busy, 0, 10)[0] == pytest.approx(9.0)


def test_falling_behind_is_a_receive_stall_in_closed_loop_only_and_not_in_a_backlog_fill():
    flags = progress_flags(freeze_seconds=0, receive_stall_seconds=0.0, receive_rate=233.0, send_rate=4346.0,
                           queue_growth=12_467)
    assert flags["receive_stalled"] and flags["receive_send_ratio"] == pytest.approx(0.0536, abs=1e-3)
    assert not progress_flags(freeze_seconds=0, receive_stall_seconds=0.0, receive_rate=233.0, send_rate=4346.0,
                              queue_growth=12_467, offered_rate=5000.0)["receive_stalled"]
    assert not progress_flags(freeze_seconds=0, receive_stall_seconds=0.0, receive_rate=0.0, send_rate=4346.0,
                              queue_growth=26_000, receiving=False)["receive_stalled"]   # a backlog fill
    ok = progress_flags(freeze_seconds=0, receive_stall_seconds=1.0, receive_rate=4300.0, send_rate=4346.0,
                        queue_growth=300)
    assert not ok["receive_stalled"] and not ok["server_frozen"] and RECEIVE_BEHIND_RATIO == 0.5


def test_the_issue_30_stall_from_its_samples():
    """issue 30's repetition: processed_total at 15,620 from second 4 to 11 with 2 readers
    running and SENDs going on, window 2..8 s: a stall of the window's 4 seconds, the queue
    growing; the collector finds both."""
    samples = []
    for sec in range(0, 14):
        processed = 15_620.0 if 4 <= sec <= 11 else (sec * 3_900.0 if sec < 4 else 48_377.0)
        samples += [Sample(sec, "throughput", "processed_total", "", processed),
                    Sample(sec, "broker", "sql_sends_per_s", "Broker Statistics", 4_300.0 if sec < 9 else 0.0),
                    Sample(sec, "activation", "tasks_running", "", 2.0),
                    Sample(sec, "queues", "depth", "queue", 20_290.0 + max(0, sec - 4) * 1_780.0),
                    Sample(sec, "queues", "xmitq_total", "", 0.0),
                    Sample(sec, "locks", "blocked_s", "ssbench-reader [active] [xact > 1 s]", 0.9)]
    out = StallCollector().summary_fields(None, WindowView(4.0, 10.0, tuple(samples)))
    assert out["receive_stall_seconds"] == pytest.approx(6.0)
    assert progress_flags(freeze_seconds=out["freeze_seconds"], receive_stall_seconds=6.0, receive_rate=233.0,
                          send_rate=4346.0, queue_growth=out["queue_growth"])["receive_stalled"]
    assert out["queue_growth"] == pytest.approx(5 * 1_780.0)
    assert out["freeze_seconds"] == pytest.approx(0.0)
    assert out["stall_chains"] == ["ssbench-reader [active] [xact > 1 s] (7.2 s)"]


def test_a_window_without_a_stall_says_so_with_no_chains():
    """stall_chains is measured whenever the receive stall is: [] when nothing stalled, so a
    summary's fields are the same whether or not a stall happened (absent: not measured)."""
    samples = [s for sec in range(0, 10) for s in (
        Sample(sec, "throughput", "processed_total", "", sec * 1_000.0),
        Sample(sec, "broker", "sql_sends_per_s", "Broker Statistics", 1_000.0),
        Sample(sec, "activation", "tasks_running", "", 2.0))]
    out = StallCollector().summary_fields(None, WindowView(2.0, 8.0, tuple(samples)))
    assert out["receive_stall_seconds"] == 0.0 and out["stall_chains"] == []
