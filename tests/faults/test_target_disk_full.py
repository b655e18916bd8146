"""Full disks inside a window, one after the other in one run and its resumes: the results'
file system (issue 26), then the embedded server's own data disk (issue 55, defect 6). Each is
the full disk's exit code (5) and one clear line, nothing half written or committed; once space
is freed, ``--resume`` completes with the account exact (counted in the databases themselves)."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import time

import pytest
from conftest_faults import can_mount_tmpfs, check_account, fill, finish, ssbench, start_run, write_matrix
from support import machine

import support.embedded

pytestmark = [pytest.mark.slow, pytest.mark.swarm,
              pytest.mark.untimed("exit codes, the one line and the account counted in the databases; a time bound "
                                  "is stretched to this machine (support.machine.allowance)")]


def _fill_up(mount) -> None:
    """Fill the file system at ``mount`` to the last block (a real file of zeros), while the
    server writes to it too."""
    with open(os.path.join(mount, "filler"), "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * (64 << 10))
        except OSError as e:
            assert e.errno == errno.ENOSPC, e


@pytest.fixture
def private_server():
    with support.embedded.private_server("diskfull") as srv:
        yield srv


def test_the_results_disk_then_the_targets_data_disk_filling_mid_window_is_exit_5_and_resumable(
        private_server, tmp_path, monkeypatch, fault, figures):
    """Two faults, the second in the resume the first one left; the server is this test's
    own, its data directory a tmpfs of its own, and the results are on another small tmpfs:

    1. the results' file system fills up while the swarm runs (64 KiB left): the run stops with
       the full disk's exit code (5) and one clear line soon after the window, never as a
       missing recording (exit 3) after a minute's wait; nothing half written (no temporary
       file, every JSON file whole, no summary); resumable once there is room;
    2. in that resume, the server's data directory filled to the last block a moment into the
       window: exit 5 and one line naming that directory, no traceback, nothing committed; on
       the code before it: exit 3 "no SEND completed" (or, with SENDs before the fill, exit 0
       undelivered).

    The space freed, ``--resume`` redoes the repetition and the account is exact."""
    srv = private_server
    srv.data_dir.mkdir(parents=True)
    mnt = tmp_path / "small"
    mnt.mkdir()
    if not can_mount_tmpfs(srv.data_dir):
        pytest.skip("needs root and tmpfs mounts to fill a filesystem for real (mount -t tmpfs)")
    figures["faults injected"] += 1       # the data disk, the second fault
    # room for initdb and the run's databases (about 150 MB with their WAL), not much more
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=320m", "ssbench-pgfull", str(srv.data_dir)], check=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "ssbench-full2", str(mnt)], check=True)
    monkeypatch.setenv("SSBENCH_PGDATA", str(srv.data_dir))    # the run's server and the audit's
    try:
        srv.start()
        m = write_matrix(tmp_path, threads=8, measure=4, rate=200, drain=20)
        out = mnt / "run"
        _results_disk_full(m, out, mnt)
        _data_disk_full(m, out, srv)
        r = ssbench("run", str(m), "--out", str(out), "--resume")
        assert r.returncode == 0, r.stderr[-3000:]
        check_account(out, 1, figures)
        fault()
        fault()
    finally:
        srv.stop(mode="immediate")
        subprocess.run(["umount", "-l", str(mnt)], check=False)
        subprocess.run(["umount", "-l", str(srv.data_dir)], check=False)


def _results_disk_full(m, out, mnt) -> None:
    """1. As soon as the repetition's directory exists (the issue's reproduction), the results'
    disk filled: the recordings of 8 users' SENDs, written at the swarm's end, no longer fit."""
    p, lines = start_run(m, out, needle=": preparing", sending=0)
    deadline = time.monotonic() + 60
    while not list(out.glob("*/.rep-01.partial")) and time.monotonic() < deadline:
        time.sleep(0.05)
    fill(mnt, 64 * 1024)
    filled = time.monotonic()
    err = finish(p, lines, timeout=180)
    took = time.monotonic() - filled
    assert p.returncode == 5, err[-3000:]
    assert "no space left" in err and "--resume" in err and "Traceback" not in err, err[-3000:]
    assert "no recording" not in err
    # the window (4 s), the drain, the write that failed: not a minute
    assert took < machine.allowance(45), took
    tmp_files = [x for x in out.rglob("*") if x.name.endswith(".tmp")]
    assert not tmp_files, tmp_files
    for f in out.rglob("*.json"):
        json.loads(f.read_text())   # every JSON file that exists is whole
    assert not list(out.glob("*/rep-*/summary.json"))
    os.unlink(mnt / "filler")


def _data_disk_full(m, out, srv) -> None:
    """2. The server's data disk filled to the last block a moment into the resume's window."""
    p, lines = start_run(m, out, sending=50, resume=True)   # some SENDs in the window, then none
    _fill_up(srv.data_dir)
    err = finish(p, lines, timeout=240)
    assert p.returncode == 5, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    line = [x for x in err.splitlines() if "error:" in x]
    assert len(line) == 1, err[-3000:]
    assert str(srv.data_dir) in line[0] and "full" in line[0] and "--resume" in line[0], line
    assert "timed out" not in err, err[-3000:]
    assert not list(out.glob("*/rep-*/summary.json"))
    os.unlink(srv.data_dir / "filler")
