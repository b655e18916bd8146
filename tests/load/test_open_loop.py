"""Open loop (a ``rate`` axis): the schedule, the matrix axis, and real paced runs on the
embedded target (real PostgreSQL, real Locust master and workers)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.errors import UserError
from harness.load.pacing import Schedule
from harness.matrix import load_matrix
from support import machine
from support.summaries import read as read_summary

REPO = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------- the schedule

def test_open_loop_users_take_every_nth_slot_of_the_schedule():
    s = Schedule(rate=100.0, users=4, t0=1000.0)
    pacers = [s.pacer(u, now=1000.0) for u in range(4)]
    slots = sorted(p.next_slot() for p in pacers for _ in range(5))
    # 20 slots, 10 ms apart, each exactly once, from t0
    assert slots == pytest.approx([1000.0 + k / 100.0 for k in range(20)])
    assert pacers[1].intended(0) == pytest.approx(1000.01) and pacers[1].intended(1) == pytest.approx(1000.05)


def test_open_loop_a_late_joiner_owes_nothing_for_the_past_and_never_skips():
    s = Schedule(rate=10.0, users=2, t0=0.0)
    p = s.pacer(1, now=1.05)          # user 1's slots: 0.1, 0.3, ..., 0.9, 1.1, 1.3
    assert p.next_slot() == pytest.approx(1.1) and p.next_slot() == pytest.approx(1.3)
    # slots are consecutive even when the user is late: a late SEND goes at once, and its
    # latency counts from the intended time
    import time
    s2 = Schedule(rate=1000.0, users=1, t0=time.perf_counter() - 1.0)
    q = s2.pacer(0, now=s2.t0)
    first = q.wait(lambda _s: None)
    assert first == pytest.approx(s2.t0) and q.late == 1 and q.next_slot() == pytest.approx(s2.t0 + 0.001)


@pytest.mark.untimed("a lower bound: no SEND starts before its slot")
def test_a_sleep_that_ends_early_never_starts_a_send_before_its_slot():
    """gevent's sleep can end before its time (libev measures from the loop's cached time): the
    pacer sleeps again until the slot is due, and such a wait is not counted late."""
    import time

    calls = []

    def early_sleep(seconds):          # sleeps only half of what it was asked
        calls.append(seconds)
        time.sleep(seconds / 2)

    pacer = Schedule(rate=20.0, users=1).pacer(0)
    for _ in range(3):
        slot = pacer.wait(early_sleep)
        assert time.perf_counter() >= slot
    assert pacer.late == 0 and len(calls) > 3


def test_open_loop_rate_axis_in_matrices(tmp_path):
    base = ("axes:\n  initiators: [2]\n  threads: [2]\n  dialogs: [per_thread]\n  payload_bytes: [100]\n"
            "  server: [durable]\n")
    f = tmp_path / "m.yaml"
    f.write_text(base + "  rate: [50, 12.5]\nrun: {rate_tolerance: 0.1}\n")
    m = load_matrix(f)
    perms = list(m.permutations())
    assert [p.id for p in perms] == ["i2-t2-per_thread-p100-durable-rate50", "i2-t2-per_thread-p100-durable-rate12.5"]
    assert perms[0].values()["rate"] == 50.0 and perms[0].values()["offered_rate"] == 100.0
    assert m.run.rate_tolerance == 0.1
    closed = tmp_path / "c.yaml"
    closed.write_text(base)
    p = next(load_matrix(closed).permutations())
    assert p.rate is None and "rate" not in p.values() and p.id == "i2-t2-per_thread-p100-durable"
    for bad, msg in (("[0]", "must be above 0"), ("[fast]", "must be a number"), ("[true]", "must be a number")):
        f.write_text(base + f"  rate: {bad}\n")
        with pytest.raises(UserError, match=msg) as e:
            load_matrix(f)
        assert e.value.field == "axes.rate[0]" and e.value.line == 7


# --------------------------------------------------------------------------- real paced runs

MATRIX = """name: openloop
axes:
  initiators: [1]
  threads: [2]
  dialogs: [per_thread]
  payload_bytes: [100]
  server: [durable]
  rate: [40, 400]
run:
  warmup_seconds: 1
  measure_seconds: 2
  drain_timeout_seconds: 30
  sample_interval_seconds: 0.25
  order: sequential
broker:
  max_queue_readers: 2
  waitfor_timeout_ms: 300
  monitor_interval_seconds: 0.2
"""


@pytest.mark.slow
@pytest.mark.swarm
@pytest.mark.timing   # achieved rate within 5 % of the offered one, latency within 15 ms of the service time
def test_open_loop_runs_hit_the_offered_rate_and_are_flagged_behind(pg_server, tmp_path):
    """Every SEND takes 20 ms (the embedded target's send-delay knob), so 2 users can do about
    100 SENDs/s: 40/s is sustained, 400/s is not."""
    m = tmp_path / "openloop.yaml"
    m.write_text(MATRIX)
    out = tmp_path / "run"
    env = dict(os.environ, SSBENCH_EMBEDDED_SEND_DELAY_MS="20")
    r = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(m), "--out", str(out)], cwd=REPO,
                       env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    s = {p.parent.parent.name: read_summary(p) for p in out.glob("*/rep-*/summary.json")}
    ok = s["i1-t2-per_thread-p100-durable-rate40"]
    # not behind: the flag itself, since a disturbance (noisy_storage, a shared disk's stall)
    # outranks it in the status
    assert ok["offered_rate"] == 40.0 and ok["behind"] is False and ok["status"] != "behind", ok
    assert abs(ok["achieved_rate"] - 40.0) <= 40.0 * 0.05, ok
    # kept up: the corrected latency is close to the service time (>= 20 ms each)
    svc, cor = ok["send_latency_ms"], ok["send_latency_corrected_ms"]
    assert svc["p50"] >= 20 and cor["count"] == svc["count"] and cor["p50"] < svc["p50"] + machine.allowance(15), ok
    slow = s["i1-t2-per_thread-p100-durable-rate400"]
    assert slow["offered_rate"] == 400.0 and slow["behind"] is True, slow
    assert 40 < slow["achieved_rate"] < 200, slow
    # behind: the SENDs queue behind their schedule, seconds late by the window's end; the
    # service time does not show it
    assert slow["send_latency_corrected_ms"]["p99"] > 1000 > slow["send_latency_ms"]["p99"] * 10, slow
    assert slow["messages_lost"] == 0 and ok["messages_lost"] == 0
    lat = json.loads((out / "i1-t2-per_thread-p100-durable-rate400" / "rep-01" / "latency.json").read_text())
    assert sum(lat["send_corrected"].values()) == slow["send_latency_corrected_ms"]["count"]
