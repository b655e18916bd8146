"""Faults survived on the embedded target, counted in the databases (see conftest.py)."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time

import pytest
from conftest_faults import (broker_pids, check_account, finish, locust_processes, ssbench, ssbench_popen,
                             start_run, wait_for, write_matrix)
from support.summaries import read as read_summary

pytestmark = [pytest.mark.slow, pytest.mark.swarm,
              pytest.mark.untimed("the account is counted in the databases; no figure depends on the host's speed")]


def test_a_killed_runner_or_worker_ctrl_cs_and_a_postgresql_crash_each_leave_it_resumable(
        pg_server, tmp_path, fault, figures):
    """Five faults, one after the other, each in the resume of the run the one before left (a
    resume is a run like any other: one run for each fault, not two; each checked as it
    happens): 1. the runner killed; 3. a Locust worker killed; 2. Ctrl-C while draining; 5.
    PostgreSQL crashed; two Ctrl-Cs (the helpers below say what each must leave). The matrix
    and the run are at paths with spaces and non-ASCII letters: the last resume is the command
    the two Ctrl-Cs printed, pasted into a shell. It completes with every message accounted for
    exactly once, every user spawned: nothing lost across the five (durability held)."""
    figures["faults injected"] += 4       # the five faults: one counted by the fixture
    odd = tmp_path / "my matrices" / "prüfung (v2)"
    odd.mkdir(parents=True)
    m = write_matrix(odd, initiators=2, measure=3, drain=60)
    out = tmp_path / "runs with spaces" / "ürun"
    _kill_the_runner(m, out)
    _kill_a_worker(m, out)
    _ctrl_c_in_the_drain(m, out)
    _crash_postgresql(pg_server, m, out)
    cmd = _two_ctrl_cs(m, out)
    # pasted into a shell (sh -c), with this venv's ssbench first on PATH
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    r = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    s = read_summary(next(out.glob("*/rep-01/summary.json")))
    assert s["users_spawned"] == s["users_expected"] == 4, s
    check_account(out, 2, figures)
    for _ in range(5):
        fault()


def _kill_the_runner(m, out) -> None:
    """1. ``ssbench run`` killed (SIGKILL) mid-window: no Locust process lives on SENDing (the
    resume started at once runs: the next fault's)."""
    p, lines = start_run(m, out)
    assert locust_processes(str(out)), "no swarm found to orphan"
    p.kill()
    p.wait()
    deadline = time.monotonic() + 10
    while locust_processes(str(out)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not locust_processes(str(out)), "the swarm outlived its runner"


def _kill_a_worker(m, out) -> None:
    """3. A Locust worker killed mid-window: the repetition fails naming the worker and when,
    is not committed (and is redone on resume)."""
    p, lines = start_run(m, out, resume=True)
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


def _ctrl_c_in_the_drain(m, out) -> None:
    """2. Ctrl-C while draining: nothing is reported lost (the messages are queued, not lost),
    the repetition is not committed (it is redone on resume), and run.json agrees."""
    p, lines = start_run(m, out, resume=True)
    brokers = broker_pids(p.pid)
    assert brokers, "no broker process found"
    for b in brokers:              # the broker freezes: messages pile up in the transmission queue
        os.kill(b, signal.SIGSTOP)
    try:
        assert wait_for(lines, p, "draining", 60), "".join(lines)
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


def _crash_postgresql(pg_server, m, out) -> None:
    """5. The server crashes (pg_ctl stop -m immediate) mid-window: one clear line, no
    traceback, no storm of warnings, the users back off (after a restart, the resume completes
    with nothing lost). Runs in the parallel part: the server it takes down is this test
    process's own (one per xdist worker, whose tests run one at a time), and it is started
    again whatever happens, so no later test of this process finds it down."""
    try:
        p, lines = start_run(m, out, resume=True)
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


def _two_ctrl_cs(m, out) -> str:
    """6. Two Ctrl-Cs 0.3 s apart once the users SEND (in the window, or in the drain on a slow
    host: the same interruption): exit 130, run.json interrupted, the resume command printed,
    quoted for a shell (the matrix and the run at paths with spaces and non-ASCII letters);
    returns it."""
    p, lines = start_run(m, out, resume=True)
    p.send_signal(signal.SIGINT)
    time.sleep(0.3)
    p.send_signal(signal.SIGINT)
    err = finish(p, lines, timeout=120)
    assert p.returncode == 130, err[-3000:]
    record = json.loads((out / "run.json").read_text())
    assert record["status"] == "interrupted", record["status"]
    [cmd] = [x.split("resume with: ", 1)[1].strip() for x in err.splitlines() if "resume with: " in x]
    argv = shlex.split(cmd)
    assert argv[:2] == ["ssbench", "run"] and argv[2] == str(m) and argv[-1] == str(out), argv
    return cmd


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


def test_runs_in_the_way_are_refused_a_killed_broker_restarts_and_a_damaged_summary_is_redone(
        pg_server, tmp_path, fault, figures):
    """8. Run A writes ``--out X``; 4. its embedded broker process is killed mid-window:
    supervised and restarted (counted in the summary; the new one then frozen until the runs
    below are refused, so that A is still running); 6. a second ``ssbench run``
    on the same embedded server refuses (exit 2, naming the holder) instead of resetting the
    databases under A; 8. run B, on a server of its own (so the server's run lock cannot stop
    it), asks to ``--resume`` X, then to start a new run there: both are refused at once (exit
    2, one line naming A's pid, host and start), nothing of X is touched, and A completes intact
    (every message once, its rep-01 its own, run.json never "resumed", the broker's restart
    counted).
    A healthy run's master log has no warning about heartbeats before the token proof.
    9. Then A's committed summary.json truncated to half: ``run --resume`` sets the repetition
    aside, says so, and runs it again (``analyze`` counting it among its issues and naming it is
    tests/analysis/test_analysis.py's test_cli_analyze_prints_the_diagnosis_and_the_issues_on_stderr)."""
    import socket

    from support.embedded import private_server

    figures["faults injected"] += 2       # the broker's death and the second run on the server
    m = write_matrix(tmp_path, measure=3, drain=120)
    out = tmp_path / "run"
    with private_server("lock") as srv:
        srv.start()
        env = dict(os.environ, SSBENCH_PGDATA=str(srv.data_dir))
        p, lines = start_run(m, out, sending=0)
        killed = broker_pids(p.pid)
        assert killed
        for b in killed:
            os.kill(b, signal.SIGKILL)
        # the restarted broker frozen while the runs in the way are refused: A stays in its
        # window or drain, however long a loaded machine takes to start them. Frozen once it is
        # up (its restart logged), not before: the supervisor stops a broker that does not come
        # up within 30 s and starts another, which would drain A under the runs in its way
        assert wait_for(lines, p, "broker restarted (pid ", 120), "the broker was not restarted:\n" + "".join(lines)
        frozen = [int(re.search(r"broker restarted \(pid (\d+)", x)[1]) for x in lines if "broker restarted (pid " in x]
        for b in frozen:
            os.kill(b, signal.SIGSTOP)
        try:
            # the second run on A's server beside B's two on their own
            second = ssbench_popen("run", str(m), "--out", str(tmp_path / "second"))
            for extra in (("--resume",), ()):
                b = ssbench("run", str(m), "--out", str(out), *extra, env=env, timeout=300)
                assert b.returncode == 2, b.stderr[-3000:]
                assert len(b.stderr.strip().splitlines()) == 1 and "Traceback" not in b.stderr, b.stderr
                assert f"pid {p.pid} on {socket.gethostname()}" in b.stderr and "started 20" in b.stderr, b.stderr
            _, second_err = second.communicate(timeout=300)
        finally:
            for b in frozen:
                os.kill(b, signal.SIGCONT)
        assert second.returncode == 2, second_err[-2000:]
        assert f"pid {p.pid}" in second_err and "Traceback" not in second_err, second_err
        assert len(second_err.strip().splitlines()) == 1, second_err
        assert not (tmp_path / "second").exists()
        err = finish(p, lines)
    assert p.returncode == 0, err[-3000:]
    record = json.loads((out / "run.json").read_text())
    assert record["status"] == "complete" and "resumed" not in record, record
    s = read_summary(next(out.glob("*/rep-01/summary.json")))
    assert s["broker_restarts"] >= 1, s
    check_account(out, 1, figures)
    fault()
    fault()
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
