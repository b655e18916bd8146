"""Faults, round 2 (issue 26): every fault named with the right exit code, promptly. Real
processes, real signals, real file systems. The results' disk filling inside the window (1.) is
test_target_disk_full.py's, with the server's own data disk in the resume; the two Ctrl-Cs (5.
and 6.) are a fault of test_faults.py's chain, whose last resume is the printed command pasted
into a shell. The account is checked in the databases themselves (conftest_faults.audit)
whenever a run is resumed to the end."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time

import psycopg
import pytest
from conftest_faults import (can_mount_tmpfs, check_account, fill, finish, locust_processes, ssbench, start_run,
                             write_matrix)
from support import machine
from support.summaries import read as read_summary

pytestmark = [pytest.mark.slow, pytest.mark.swarm,
              pytest.mark.untimed("exit codes, messages and the account counted in the databases; a time bound is "
                                  "stretched to this machine (support.machine.allowance)")]


def test_a_matrix_beyond_the_servers_connections_is_refused_and_failed_connects_are_errors(
        pg_server, tmp_path, fault, figures):
    """2. 2 initiators x 300 threads on the embedded server (400 connections): refused before
    anything starts, one line naming the threads field, by ``matrix --target`` and by ``run``.
    And when a run's users cannot connect (the server's connections taken by someone else),
    each failed connect is an error in the summary, with the server's own words."""
    m = write_matrix(tmp_path, initiators=2, threads=300)
    for args in (("matrix", str(m), "--target", "embedded", "--count"), ("run", str(m), "--out", str(tmp_path / "x"))):
        r = ssbench(*args)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        line = r.stderr.strip().splitlines()
        assert len(line) == 1 and re.search(r"fault\.yaml:4: axes\.threads\[0\]: 2 initiator\(s\) x 300 threads need "
                                            r"600 client connections", line[0]), line
        assert not (tmp_path / "x").exists()
    # a run within the limit whose clients find the server full: every connection taken but what
    # the target itself needs and three clients' worth (the test holds the rest)
    from harness.targets.embedded.server import connection_budget
    from harness.targets.embedded.target import EmbeddedTarget

    info = EmbeddedTarget().info
    with psycopg.connect(info.conninfo("postgres"), autocommit=True) as c:
        used = c.execute("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'").fetchone()[0]
    b = connection_budget()
    leave = b.fixed + b.per_initiator + 2 * b.per_reader + 3
    hogs = [psycopg.connect(info.conninfo("postgres"), autocommit=True) for _ in range(b.limit - used - 1 - leave)]
    try:
        m = write_matrix(tmp_path, name="crowded", threads=40, measure=3)
        out = tmp_path / "crowded"
        r = ssbench("run", str(m), "--out", str(out))
    finally:
        for h in hogs:
            h.close()
    assert r.returncode == 0, r.stderr[-3000:]
    [path] = list(out.glob("*/rep-01/summary.json"))
    d = read_summary(path)
    assert d["errors"] > 0 and any("too many clients" in x for x in d["error_samples"]), (d["errors"], d["error_samples"])
    # errors, unless a disturbance the host caused (a busy host's sampler gap read as a frozen
    # server) precedes it: which status comes first is tests/results/test_summary.py's
    from harness.results import DISTURBED_STATUSES

    assert d["status"] in ("errors", *DISTURBED_STATUSES) and d["users_active"] < 40, d["status"]
    assert d["messages_lost"] == 0
    fault()


def _kill_master(out) -> int:
    deadline = time.monotonic() + 60
    while True:
        masters = [p for p in locust_processes(str(out)) if "--master" in p.cmdline()]
        if masters or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    [master] = masters
    master.kill()
    return master.pid


def test_a_killed_master_stops_the_swarm_at_once(pg_server, tmp_path, fault, figures):
    """3. The Locust master killed mid-window: the swarm stops at once (no worker SENDs on), the
    repetition fails naming the master (exit 3, not kept), and resume completes."""
    m = write_matrix(tmp_path, initiators=2, measure=10)
    out = tmp_path / "run"
    p, lines = start_run(m, out)
    pid = _kill_master(out)
    killed = time.monotonic()
    err = finish(p, lines, timeout=180)
    took = time.monotonic() - killed
    assert p.returncode == 3, err[-3000:]
    assert f"the Locust master (pid {pid}) died at" in err and "resume" in err, err[-2000:]
    assert "no recording" not in err and "Traceback" not in err
    # the drain of what was sent, not the 10 s window or a minute
    assert took < machine.allowance(10), took
    assert not locust_processes(str(out)), "a worker kept running after its master died"
    assert not list(out.glob("*/rep-*/summary.json"))
    assert json.loads((out / "run.json").read_text())["status"] == "failed"
    r = ssbench("run", str(m), "--out", str(out), "--resume")
    assert r.returncode == 0, r.stderr[-3000:]
    check_account(out, 2, figures)
    fault()


def test_a_full_disk_under_analyze_is_exit_5_one_line_and_the_report_as_it_was(spark, tmp_path, capfd, fault):
    """9. ``ssbench analyze --out`` on a small tmpfs (a real Spark analysis of a small stored
    run, the session's Spark): with room, a report; then the disk filled to 16 KiB free, the
    same analysis again and one into a new directory: exit 5 (never 1, the gate's regression),
    one line naming the report directory, no traceback, the first report byte for byte as it
    was, the new one not there, no temporary directory left."""
    import shutil

    from harness.cli import main

    mnt = tmp_path / "small"
    mnt.mkdir()
    if not can_mount_tmpfs(mnt):
        pytest.skip("needs root and tmpfs mounts to fill a filesystem for real (mount -t tmpfs)")
    run = tmp_path / "run-2aae5f3"
    shutil.copytree(os.path.join(os.path.dirname(__file__), "..", "gate", "data", "run-2aae5f3"), run)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "ssbench-full-report", str(mnt)], check=True)
    try:
        report = mnt / "report"
        assert main(["analyze", "-q", str(run), "--out", str(report)]) == 0, capfd.readouterr().err[-3000:]
        capfd.readouterr()
        before = {p.relative_to(report): p.read_bytes() for p in report.rglob("*") if p.is_file()}
        assert (report / "index.html") in [report / p for p in before], sorted(before)
        fill(mnt, 16 * 1024)
        for out in (report, mnt / "new"):
            for quiet in ((), ("-q",)):
                code = main(["analyze", *quiet, str(run), "--out", str(out)])
                err = capfd.readouterr().err
                assert code == 5, err[-3000:]
                mine = [x for x in err.splitlines() if x.startswith("ssbench: error")]
                assert mine == [f"ssbench: error: {out}: no space left on the device of the report directory: "
                                "nothing written (a previous report there is kept); free some space and analyze "
                                "again"], err[-3000:]
                assert "Traceback" not in err and "Exception" not in err, err[-3000:]
        assert {p.relative_to(report): p.read_bytes() for p in report.rglob("*") if p.is_file()} == before
        assert not (mnt / "new").exists()
        assert sorted(p.name for p in mnt.iterdir()) == ["filler", "report"]
        fault()
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
