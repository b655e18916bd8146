"""Faults survived on the embedded target, counted in the databases (see conftest.py)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import time

import pytest
from conftest_faults import (broker_pids, check_account, finish, locust_processes, ssbench, start_run,
                             wait_for, write_matrix)
from support.summaries import read as read_summary

pytestmark = [pytest.mark.slow, pytest.mark.swarm,
              pytest.mark.untimed("the account is counted in the databases; no figure depends on the host's speed")]


def test_sigkill_of_the_runner_takes_its_swarm_with_it_and_resume_completes(pg_server, tmp_path, fault, figures):
    """1. ``ssbench run`` killed (SIGKILL) mid-window: no Locust process lives on SENDing, and a
    resume started at once completes with every message accounted for exactly once."""
    m = write_matrix(tmp_path, measure=3)
    out = tmp_path / "run"
    p, lines = start_run(m, out, settle=2)
    assert locust_processes(str(out)), "no swarm found to orphan"
    p.kill()
    p.wait()
    deadline = time.monotonic() + 10
    while locust_processes(str(out)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not locust_processes(str(out)), "the swarm outlived its runner"
    r = ssbench("run", str(m), "--out", str(out), "--resume")
    assert r.returncode == 0, r.stderr[-3000:]
    s = read_summary(next(out.glob("*/rep-01/summary.json")))
    assert s["users_spawned"] == s["users_expected"] == 2, s
    check_account(out, 1, figures)
    fault()


def test_ctrl_c_during_the_drain_leaves_the_repetition_incomplete_never_lost(pg_server, tmp_path, fault, figures):
    """2. Ctrl-C while draining: nothing is reported lost (the messages are queued, not lost),
    the repetition is redone on resume, and run.json agrees with the summaries."""
    m = write_matrix(tmp_path, measure=3, drain=60)
    out = tmp_path / "run"
    p, lines = start_run(m, out, settle=1)
    brokers = broker_pids(p.pid)
    assert brokers, "no broker process found"
    for b in brokers:              # the broker freezes: messages pile up in the transmission queue
        os.kill(b, signal.SIGSTOP)
    try:
        assert wait_for(lines, p, "draining", 60), "".join(lines)
        time.sleep(1)
        p.send_signal(signal.SIGINT)
        p.wait(timeout=120)
    finally:
        for b in brokers:
            try:
                os.kill(b, signal.SIGCONT)
            except ProcessLookupError:
                pass
    err = "".join(lines) + p.stderr.read()
    assert p.returncode == 130, err[-3000:]
    assert "LOST" not in err
    assert not list(out.glob("*/rep-*/summary.json")), "an interrupted drain was committed"
    record = json.loads((out / "run.json").read_text())
    assert record["status"] == "interrupted" and record["messages_lost"] == 0
    r = ssbench("run", str(m), "--out", str(out), "--resume")
    assert r.returncode == 0, r.stderr[-3000:]
    check_account(out, 1, figures)
    fault()


def test_a_killed_worker_fails_the_repetition_and_resume_redoes_it(pg_server, tmp_path, fault, figures):
    """3. A Locust worker killed mid-window: the repetition fails naming the worker and when,
    is not committed, and is redone on resume."""
    m = write_matrix(tmp_path, initiators=2, measure=3)
    out = tmp_path / "run"
    p, lines = start_run(m, out, settle=2)
    workers = [w for w in locust_processes(str(out)) if "--worker" in " ".join(w.cmdline())]
    assert len(workers) == 2, workers
    victim = workers[0]
    victim.kill()
    err = finish(p, lines, timeout=180)
    assert p.returncode == 3, err[-3000:]
    assert f"pid {victim.pid}) died at" in err and "resume" in err, err[-2000:]
    assert "Traceback" not in err
    assert not list(out.glob("*/rep-*/summary.json"))
    assert json.loads((out / "run.json").read_text())["status"] == "failed"
    r = ssbench("run", str(m), "--out", str(out), "--resume")
    assert r.returncode == 0, r.stderr[-3000:]
    check_account(out, 2, figures)
    fault()


def test_a_postgresql_crash_is_one_clear_line_and_users_stop(pg_server, tmp_path, fault, figures):
    """5. The server crashes (pg_ctl stop -m immediate) mid-window: one clear line, no traceback,
    no storm of warnings, the users back off; after a restart, resume completes with nothing
    lost (durability held). Runs in the parallel part: the server it takes down is this test
    process's own (one per xdist worker, whose tests run one at a time), and it is started
    again whatever happens, so no later test of this process finds it down."""
    m = write_matrix(tmp_path, measure=3, drain=20)
    out = tmp_path / "run"
    try:
        p, lines = start_run(m, out, settle=2)
        _immediate_stop(pg_server)
        err = finish(p, lines)
    finally:
        pg_server.start()    # a no-op when it runs; after the crash, WAL replay
    assert p.returncode in (3, 130), err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert err.count("collector") < 20, "a warning storm:\n" + err[-4000:]
    assert not list(out.glob("*/rep-*/summary.json"))
    # the last line says why and how to go on; run.json records why (docs/results.md)
    last = err.strip().splitlines()[-1]
    assert "resume with: " in last, err[-3000:]
    assert shlex.split(last.split("resume with: ", 1)[1]) == ["ssbench", "run", str(m), "--resume", "--out", str(out)]
    record = json.loads((out / "run.json").read_text())
    assert record["status"] == ("failed" if p.returncode == 3 else "interrupted"), record
    assert record["error"] and "\n" not in record["error"], record
    r = ssbench("run", str(m), "--out", str(out), "--resume")
    assert r.returncode == 0, r.stderr[-3000:]
    check_account(out, 1, figures)
    fault()


def _immediate_stop(srv) -> None:
    """What ``pg_ctl stop -m immediate`` does: SIGQUIT to the postmaster (no checkpoint; the
    next start replays the WAL)."""
    pid = srv.info().pid
    os.kill(pid, signal.SIGQUIT)
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)


def test_a_second_run_is_refused_and_a_killed_broker_is_restarted_nothing_lost(pg_server, tmp_path, fault, figures):
    """6. A second ``ssbench run`` on the same embedded server refuses (exit 2, naming the
    holder) instead of resetting the databases under the first; 4. then the first run's embedded
    broker process is killed mid-window: supervised and restarted (counted in the summary). The
    first run completes intact: every message delivered exactly once, and the run says so."""
    m = write_matrix(tmp_path, measure=5)
    out = tmp_path / "run"
    p, lines = start_run(m, out, settle=0)
    second = ssbench("run", str(m), "--out", str(tmp_path / "second"))
    assert second.returncode == 2, second.stderr[-2000:]
    assert f"pid {p.pid}" in second.stderr and "Traceback" not in second.stderr, second.stderr
    assert len(second.stderr.strip().splitlines()) == 1, second.stderr
    assert not (tmp_path / "second").exists()
    fault()
    figures["faults injected"] += 1       # the broker's death, the second fault of this run
    brokers = broker_pids(p.pid)
    assert brokers
    for b in brokers:
        os.kill(b, signal.SIGKILL)
    err = finish(p, lines)
    assert p.returncode == 0, err[-3000:]
    s = read_summary(next(out.glob("*/rep-01/summary.json")))
    assert s["broker_restarts"] >= 1, s
    check_account(out, 1, figures)
    fault()


def test_a_results_directory_in_use_is_refused_and_a_damaged_summary_is_redone(pg_server, tmp_path, fault, figures):
    """8. Run A writes ``--out X``; in its window run B, on a server of its own (so the server's
    run lock cannot stop it), asks to ``--resume`` X, then to start a new run there: both are
    refused at once (exit 2, one line naming A's pid, host and start), nothing of X is touched,
    and A completes intact (every message once, its rep-01 its own, run.json never "resumed").
    A healthy run's master log has no warning about heartbeats before the token proof.
    9. Then A's committed summary.json truncated to half: ``run --resume`` sets the repetition
    aside, says so, and runs it again (``analyze`` counting it among its issues and naming it is
    tests/analysis/test_analysis.py's test_cli_analyze_prints_the_diagnosis_and_the_issues_on_stderr)."""
    import socket

    from support.embedded import private_server

    m = write_matrix(tmp_path, measure=6)
    out = tmp_path / "run"
    with private_server("lock") as srv:
        srv.start()
        env = dict(os.environ, SSBENCH_PGDATA=str(srv.data_dir))
        p, lines = start_run(m, out, settle=1)
        for extra in (("--resume",), ()):
            b = ssbench("run", str(m), "--out", str(out), *extra, env=env, timeout=300)
            assert b.returncode == 2, b.stderr[-3000:]
            assert len(b.stderr.strip().splitlines()) == 1 and "Traceback" not in b.stderr, b.stderr
            assert f"pid {p.pid} on {socket.gethostname()}" in b.stderr and "started 20" in b.stderr, b.stderr
        err = finish(p, lines)
    assert p.returncode == 0, err[-3000:]
    record = json.loads((out / "run.json").read_text())
    assert record["status"] == "complete" and "resumed" not in record, record
    check_account(out, 1, figures)
    fault()

    figures["faults injected"] += 1       # the damaged summary, the second fault of this run
    [rep] = list(out.glob("*/rep-01"))
    log = (rep / "locust-master.log").read_text()
    assert "not proved the run token" not in log, log
    summary = rep / "summary.json"
    text = summary.read_text()
    summary.write_text(text[: len(text) // 2])
    r = ssbench("run", str(m), "--out", str(out), "--resume")
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"{summary}: not valid JSON" in r.stderr and "set aside as rep-01.damaged-" in r.stderr, r.stderr[-3000:]
    assert json.loads((out / "run.json").read_text())["status"] == "complete"
    assert list(rep.parent.glob("rep-01.damaged-*/summary.json"))
    check_account(out, 1, figures)
    fault()
