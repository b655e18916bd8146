"""Load generation that does not lie: N Locust users against a server-side sleep reach close to
N times one user's rate (a blocking driver call inside a greenlet would serialize them).

Real Locust processes (master + worker, distributed mode on loopback), real PostgreSQL."""

from __future__ import annotations

import json
import threading
import time

import gevent
import pytest

from harness.load.blocking import Offload
from harness.load.window import merge_workers
from support import sleep_sender
from support.swarm import run_swarm

# throughput ratios and overlap timed by the clock: nothing else may share the CPUs
pytestmark = pytest.mark.timing   # overlaps timed by the clock

SLEEP = 0.05
WARMUP, MEASURE = 1.0, 3.0


def _rates(pg_server, tmp_path, mode: str) -> tuple[float, float]:
    """One swarm, two initiators side by side: initiator 1 with one user, initiator 2 with 20
    (each on a Locust worker of its own, against the same server-side sleep); their rates over
    the same window. Both in one window, so the comparison shares the host's state."""
    # the Locust workers load the test-only sleep sender from tests/support
    spec = sleep_sender.spec(pg_server.info().conninfo(), SLEEP)
    users = {"1": 1, "2": 20}
    res, _ = run_swarm({"1": spec, "2": spec}, tmp_path / mode, users, warmup=WARMUP, measure=MEASURE,
                       payload_bytes=10, send_mode=mode)
    assert res.spawn_complete and res.worker_files
    start = res.spawn_complete + WARMUP
    rates = []
    for init, n in users.items():
        files = [f for f in res.worker_files if str(json.loads(f.read_text())["initiator"]) == init]
        assert files, (init, res.worker_files)
        wd = merge_workers(files, start, start + MEASURE)
        assert wd.errors_total == 0, wd.error_samples
        # every user got going and kept sending through the window (none stuck in its connect)
        assert (wd.users_spawned, wd.users_active) == (n, n), init
        rates.append(wd.rate)
    return rates[0], rates[1]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["thread", "auto"])
@pytest.mark.swarm
def test_users_run_concurrently(pg_server, tmp_path, mode):
    """mode thread: each user SENDs from its own OS thread (any blocking driver, pyodbc); mode
    auto: the same for this sender, which cannot pump (a sender that can is driven by the hub)."""
    one, many = _rates(pg_server, tmp_path, mode)
    # one user: ~1/SLEEP per second; 20 users must be close to 20x that, not ~1x
    assert one == pytest.approx(1 / SLEEP, rel=0.5)
    assert many >= 0.7 * 20 * one, (one, many)


def test_offload_runs_a_first_call_alone_then_concurrently():
    """Each function's first call runs alone (its lazy imports then cannot race under gevent's
    patched import locks); once it has completed, calls of it run on many threads at once."""
    off = Offload(maxsize=16)
    lock = threading.Lock()
    running, log = [0], []

    def work(i):
        with lock:
            running[0] += 1
            log.append(("start", i, running[0]))
        time.sleep(0.05)
        with lock:
            running[0] -= 1
            log.append(("end", i, running[0]))
        return i

    owners = [object() for _ in range(8)]
    greenlets = [gevent.spawn(off.call, o, work, i) for i, o in enumerate(owners)]
    gevent.joinall(greenlets, timeout=10, raise_error=True)
    assert sorted(g.value for g in greenlets) == list(range(8))
    # the first call started and ended before any other started
    assert log[0][0] == "start" and log[1][0] == "end" and log[0][1] == log[1][1]
    # the other seven then ran together
    assert max(n for kind, _i, n in log[2:] if kind == "start") == 7
    # a failing first call does not mark the function warm: the next first call runs alone too
    def boom(x):
        raise RuntimeError(x)
    with pytest.raises(RuntimeError):
        off.call(owners[0], boom, "x")
    assert Offload._key(boom) not in off._warm
