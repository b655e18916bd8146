"""The SEND path of blocking drivers (send mode ``thread``: each user's SEND loop on its own
OS thread, results reported in batches), on a real Locust swarm (master + worker processes)
against the embedded target (real PostgreSQL, real broker): every user sends through the
window, every SEND the recorder counts is a row the target received (none lost, none counted
twice), refused SENDs are counted exactly, and users stop promptly when the window ends."""

from __future__ import annotations

import json

import pytest

from harness.load.window import merge_workers
from support import flaky_sender
from support.embedded import provisioned, settings
from support.swarm import run_swarm

pytestmark = pytest.mark.slow

USERS, WARMUP, MEASURE = 8, 1.0, 3.0
EVERY = 50          # the flaky sender refuses every 50th SEND of each connection


@pytest.fixture(scope="module")
def target(pg_server):
    with provisioned(pg_server, "ssbloop", 1) as t:
        yield t


def _prepare(target):
    target.prepare(1, "durable", settings())
    target.create_dialogs(1, USERS, 1)


def _swarm(target, tmp_path, monkeypatch, sender_spec, rate: float = 0.0):
    res, ended = run_swarm({"1": sender_spec}, tmp_path, USERS, warmup=WARMUP, measure=MEASURE, rate=rate,
                           send_mode="thread")
    assert res.spawn_complete and res.worker_files
    start = res.spawn_complete + WARMUP
    wd = merge_workers(res.worker_files, start, start + MEASURE)
    users = json.loads(res.worker_files[0].read_text())["users"]
    return wd, users, res.stop_requested, ended


@pytest.mark.swarm
@pytest.mark.untimed("counts")
def test_thread_loop_every_user_sends_and_nothing_is_lost_or_counted_twice(target, tmp_path, monkeypatch):
    _prepare(target)
    target.start()
    try:
        wd, users, stop_requested, ended = _swarm(
            target, tmp_path, monkeypatch, flaky_sender.spec(target.sender_spec(1), EVERY))
        counts = target.drain(60)
    finally:
        target.stop()
    assert (wd.users_spawned, wd.users_active) == (USERS, USERS)
    assert wd.count > 100 * USERS, wd.count        # the loop really ran (hundreds per user)
    # every SEND the recorder counted is a row the target received, and no other
    assert counts.settled and counts.sent == counts.received == wd.sends_total, (counts, wd.sends_total)
    # refused SENDs: exactly every EVERY-th call of each user, each counted once
    calls = [n for _first, _last, n in users.values()]
    assert wd.errors_total == sum(n // EVERY for n in calls) > 0, (wd.errors_total, calls)
    assert len(wd.error_samples) > 0 and "flaky sender" in wd.error_samples[0]
    # users sent right up to the stop and the swarm ended promptly after it
    assert all(last >= stop_requested - 0.5 for _f, last, _n in users.values()), (users, stop_requested)
    assert all(last <= stop_requested + 2.0 for _f, last, _n in users.values())
    assert ended - stop_requested < 10, ended - stop_requested


@pytest.mark.swarm
@pytest.mark.timing   # the achieved rate against the offered one
def test_thread_loop_open_loop_paces_and_stops_during_a_wait(target, tmp_path, monkeypatch):
    """Open loop at a low rate: each user's thread waits ~1 s between SENDs; it keeps the
    schedule (latency from the intended time recorded too) and the stop cuts its wait short."""
    rate = USERS / 1.0                               # each user: one SEND a second
    _prepare(target)
    wd, users, stop_requested, ended = _swarm(target, tmp_path, monkeypatch, target.sender_spec(1), rate)
    assert (wd.users_spawned, wd.users_active) == (USERS, USERS)
    assert wd.errors_total == 0, wd.error_samples
    assert wd.rate == pytest.approx(rate, rel=0.35), wd.rate
    assert wd.latency_corrected is not None and wd.latency_corrected.count == wd.count
    assert ended - stop_requested < 8, ended - stop_requested
