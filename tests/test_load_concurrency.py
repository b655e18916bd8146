"""Load generation that does not lie: N Locust users against a server-side sleep reach close to
N times one user's rate (a blocking driver call inside a greenlet would serialize them).

Real Locust processes (master + worker, distributed mode on loopback), real PostgreSQL."""

from __future__ import annotations

import pytest

from harness.load.spec import SwarmSpec
from harness.load.swarm import Swarm
from harness.load.window import merge_workers

SLEEP = 0.05
WARMUP, MEASURE = 1.0, 3.0


def _rate(pg_server, tmp_path, users: int, mode: str, monkeypatch) -> float:
    monkeypatch.setenv("SSBENCH_SEND_MODE", mode)
    info = pg_server.info()
    spec = SwarmSpec(sender_specs={"1": {"kind": "sleep", "conninfo": info.conninfo(), "seconds": SLEEP}},
                     payload_bytes=10, usable={"1": users}, warmup_seconds=WARMUP,
                     measure_seconds=MEASURE, out_dir=str(tmp_path / f"{mode}-u{users}"))
    swarm = Swarm(spec, tmp_path / f"{mode}-u{users}", initiators=1, threads=users, spawn_rate=1000).start()
    res = swarm.wait(timeout=90)
    assert res.spawn_complete, swarm.log_tail()
    assert res.worker_files, swarm.log_tail()
    start = res.spawn_complete + WARMUP
    wd = merge_workers(res.worker_files, start, start + MEASURE)
    assert wd.errors_total == 0, wd.error_samples
    return wd.rate


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["thread", "auto"])
def test_users_run_concurrently(pg_server, tmp_path, monkeypatch, mode):
    """mode thread: every call offloaded to a real thread (any blocking driver, pyodbc);
    mode auto: the greenlet drives libpq in non-blocking mode itself (the embedded sender)."""
    one = _rate(pg_server, tmp_path, 1, mode, monkeypatch)
    many = _rate(pg_server, tmp_path, 20, mode, monkeypatch)
    # one user: ~1/SLEEP per second; 20 users must be close to 20x that, not ~1x
    assert one == pytest.approx(1 / SLEEP, rel=0.5)
    assert many >= 0.7 * 20 * one, (one, many)
