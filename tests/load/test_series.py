"""A run's swarms on one Locust master and one set of workers (harness.load.series): real Locust
processes, a test-only sender that sleeps on a real PostgreSQL server."""

from __future__ import annotations

import os
import signal
import socket

import pytest

from harness.load import swarm as swarm_module
from harness.load.protocol import SwarmPlan
from harness.load.series import SwarmSeries
from harness.load.spec import SwarmSpec
from harness.load.swarm import Swarm
from harness.load.window import merge_workers
from harness.ports import free_port
from support import pythonpath_env, sleep_sender, slow_stop

WARMUP, MEASURE = 0.5, 1.0


def _plan(spec: dict, users: dict[str, int]) -> SwarmPlan:
    s = SwarmSpec(sender_specs={k: spec for k in users}, payload_bytes=10, usable={k: 4 for k in users},
                  users=dict(users))
    return SwarmPlan(spec=s, users=dict(users), warmup_seconds=WARMUP, planned_seconds=MEASURE,
                     worker_wait_seconds=60)


def _swarm(series: SwarmSeries, spec: dict, users: dict[str, int], out, pin: set[int] | None = None):
    """One swarm on the series; ``pin``: its workers pinned to these CPUs as it starts (as
    run.pin_cpus does)."""
    out.mkdir(parents=True)
    pids = {}

    def started(sw):
        pids.update(master=sw.procs["master"].pid, workers=sw.worker_pids())
        for pid in pids["workers"].values() if pin else ():
            os.sched_setaffinity(pid, pin)

    res = series.run(_plan(spec, users), out, 1000, on_started=started)
    # every user of this swarm sent on these workers: over the swarm's whole span, since on a
    # loaded machine a fresh worker's first connect can outlast a 0.5 s warm-up
    wd = merge_workers(res.worker_files, res.spawn_complete, res.spawn_complete + 3600)
    assert wd.errors_total == 0, wd.error_samples
    assert (wd.users_spawned, wd.users_active) == (sum(users.values()),) * 2
    assert sorted(res.workers) == sorted(f"i{k}.w1" for k in users)
    assert (out / "locust-master.log").exists() and (out / "locust_stats.csv").exists()
    return res, pids


@pytest.mark.slow
@pytest.mark.swarm
@pytest.mark.untimed("which processes served which swarm, and counts")
def test_one_master_serves_the_runs_swarms_and_a_new_set_starts_when_needed(pg_server, tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", pythonpath_env()["PYTHONPATH"])   # the workers load the sleep sender
    spec = sleep_sender.spec(pg_server.info().conninfo(), 0.01)
    series = SwarmSeries(tmp_path / ".locust")
    try:
        a, pa = _swarm(series, spec, {"1": 2}, tmp_path / "a")
        b, pb = _swarm(series, spec, {"1": 2}, tmp_path / "b")
        # the second swarm ran on the first one's master and worker
        assert series.started == 1 and pb["master"] == pa["master"]
        assert b.workers["i1.w1"]["pid"] == a.workers["i1.w1"]["pid"]
        # another initiator: a worker the set lacks, so a new set with every claim seen so far
        c, pc = _swarm(series, spec, {"1": 1, "2": 1}, tmp_path / "c")
        assert series.started == 2 and pc["master"] != pa["master"]
        # back to one initiator: the same set, its second worker idle (not this swarm's client)
        d, pd = _swarm(series, spec, {"1": 2}, tmp_path / "d")
        assert series.started == 2 and d.workers["i1.w1"]["pid"] == c.workers["i1.w1"]["pid"]
        assert list(series.swarm.worker_pids()) == ["worker.i1.w1"], series.swarm.worker_pids()
        # a set whose master died between two swarms is replaced, not reused; and when another
        # listener takes the new master's port before it binds it, the set starts again elsewhere
        os.kill(pd["master"], signal.SIGKILL)
        series.swarm.procs["master"].wait(timeout=10)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
            squatter.bind(("127.0.0.1", 0))
            squatter.listen()
            taken = squatter.getsockname()[1]
            ports = iter([taken])
            monkeypatch.setattr(swarm_module, "free_port", lambda: next(ports, None) or free_port())
            cpu = {min(os.sched_getaffinity(0))}
            e, pe = _swarm(series, spec, {"1": 2}, tmp_path / "e", pin=cpu)
        assert series.started == 3 and pe["master"] != pd["master"] and series.swarm.port != taken
        assert f"port {taken} was taken" in (tmp_path / ".locust" / "locust-master.log").read_text()
        # the set started again keeps the CPUs its workers were pinned to
        assert e.workers["i1.w1"]["pid"] != pe["workers"]["worker.i1.w1"]
        assert os.sched_getaffinity(e.workers["i1.w1"]["pid"]) == cpu
        # so is one whose idle worker died (the swarm would otherwise fail on it)
        os.kill(series.swarm.procs["worker.i2.w1"].pid, signal.SIGKILL)
        series.swarm.procs["worker.i2.w1"].wait(timeout=10)
        _f, pf = _swarm(series, spec, {"1": 2}, tmp_path / "f")
        assert series.started == 4 and pf["master"] != pe["master"]
    finally:
        series.close()
        Swarm.wait_closed()
    # each swarm has its own part of the run's logs; the run's logs hold them all
    assert "Aggregated" in (tmp_path / ".locust" / "locust-master.log").read_text()


@pytest.mark.slow
@pytest.mark.swarm
@pytest.mark.untimed("which users ran, and counts")
def test_a_worker_slow_to_stop_gets_the_next_swarm_once_it_is_ready(pg_server, tmp_path, monkeypatch):
    """Locust's master takes a worker's users as stopped from its statistics, but forgets the
    worker only when it says it has stopped, and adds it again when it says it is ready: a swarm
    placed on it in between was redistributed by Locust when it left and came back."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(slow_stop.SITECUSTOMIZE)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), pythonpath_env()["PYTHONPATH"]]))
    monkeypatch.setenv(slow_stop.DELAY_VAR, "6")
    mark = tmp_path / "slow-stops"
    monkeypatch.setenv(slow_stop.MARK_VAR, str(mark))
    spec = sleep_sender.spec(pg_server.info().conninfo(), 0.01)
    series = SwarmSeries(tmp_path / ".locust")
    try:
        a, pa = _swarm(series, spec, {"1": 2}, tmp_path / "a")
        b, pb = _swarm(series, spec, {"1": 2}, tmp_path / "b")
        assert pb["master"] == pa["master"] and b.workers["i1.w1"]["pid"] == a.workers["i1.w1"]["pid"]
    finally:
        series.close()
        Swarm.wait_closed()
    # the worker was slow to stop after the first swarm (the hook loaded), and served the second
    assert mark.read_text().split()[0] == str(pa["workers"]["worker.i1.w1"]), mark.read_text()
