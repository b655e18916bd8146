"""Load generation that does not lie: N Locust users against a server-side sleep reach close to
N times one user's rate (a blocking driver call inside a greenlet would serialize them).

Real Locust processes (master + worker, distributed mode on loopback), real PostgreSQL."""

from __future__ import annotations

import threading
import time

import gevent
import pytest

from harness.load.offload import Offload
from harness.load.spec import SwarmSpec
from harness.load.swarm import Swarm
from harness.load.window import merge_workers
from support import pythonpath_env, sleep_sender

# throughput ratios and overlap timed by the clock: nothing else may share the CPUs
pytestmark = pytest.mark.alone

SLEEP = 0.05
WARMUP, MEASURE = 1.0, 3.0


def _rate(pg_server, tmp_path, users: int, mode: str, monkeypatch) -> float:
    monkeypatch.setenv("SSBENCH_SEND_MODE", mode)
    # the Locust workers load the test-only sleep sender from tests/support
    monkeypatch.setenv("PYTHONPATH", pythonpath_env()["PYTHONPATH"])
    info = pg_server.info()
    spec = SwarmSpec(sender_specs={"1": sleep_sender.spec(info.conninfo(), SLEEP)},
                     payload_bytes=10, usable={"1": users}, warmup_seconds=WARMUP,
                     measure_seconds=MEASURE, out_dir=str(tmp_path / f"{mode}-u{users}"))
    swarm = Swarm(spec, tmp_path / f"{mode}-u{users}", initiators=1, threads=users, spawn_rate=1000).start()
    res = swarm.wait(timeout=90)
    assert res.spawn_complete, swarm.log_tail()
    assert res.worker_files, swarm.log_tail()
    start = res.spawn_complete + WARMUP
    wd = merge_workers(res.worker_files, start, start + MEASURE)
    assert wd.errors_total == 0, wd.error_samples
    # every user got going and kept sending through the window (none stuck in its connect)
    assert (wd.users_spawned, wd.users_active) == (users, users), swarm.log_tail()
    return wd.rate


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["thread", "offload", "auto"])
def test_users_run_concurrently(pg_server, tmp_path, monkeypatch, mode):
    """mode thread: each user SENDs from its own OS thread (any blocking driver, pyodbc); mode
    offload: every SEND offloaded to the hub threadpool (the former path);
    mode auto: the greenlet drives libpq in non-blocking mode itself (the embedded sender)."""
    one = _rate(pg_server, tmp_path, 1, mode, monkeypatch)
    many = _rate(pg_server, tmp_path, 20, mode, monkeypatch)
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


def test_green_conn_runs_commands_of_many_connections_at_once(pg_server):
    """GreenConn: libpq in non-blocking mode, waiting through gevent's hub, so greenlets on
    separate connections overlap (10 x 0.2 s sleeps take about 0.2 s, not 2 s); results and
    errors come back as libpq results; the connection stays usable by psycopg afterwards."""
    import psycopg
    from psycopg.pq import ExecStatus

    from harness.targets.embedded.green import GreenConn

    conns = [psycopg.connect(pg_server.info().conninfo(), autocommit=True) for _ in range(10)]
    try:
        greens = [GreenConn(c.pgconn) for c in conns]

        def one(g):
            return g.execute(lambda: g.pg.send_query(b"SELECT pg_sleep(0.2), 42"))

        t0 = time.monotonic()
        jobs = [gevent.spawn(one, g) for g in greens]
        gevent.joinall(jobs, timeout=10, raise_error=True)
        assert time.monotonic() - t0 < 1.0
        assert all(j.value.status == ExecStatus.TUPLES_OK and j.value.get_value(0, 1) == b"42" for j in jobs)

        g = greens[0]
        assert g.pg.prepare(b"s1", b"SELECT $1::int + 1").status == ExecStatus.COMMAND_OK
        res = g.exec_prepared(b"s1", [b"41"], [0])
        assert res.status == ExecStatus.TUPLES_OK and res.get_value(0, 0) == b"42"
        bad = g.execute(lambda: g.pg.send_query(b"SELECT 1/0"))
        assert bad.status == ExecStatus.FATAL_ERROR
        assert conns[0].execute("SELECT 7").fetchone() == (7,)
        for g in greens:
            g.close()
    finally:
        for c in conns:
            c.close()
