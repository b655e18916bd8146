"""Issue 55, defect 6: the embedded server's own data disk fills inside a window. A full disk
is one line naming the data directory, exit 5, the repetition left to be redone; once space is
freed, ``--resume`` completes with the account exact (counted in the databases themselves)."""

from __future__ import annotations

import errno
import os
import subprocess

import pytest
from conftest_faults import can_mount_tmpfs, check_account, finish, ssbench, start_run, write_matrix

import support.embedded

pytestmark = [pytest.mark.slow, pytest.mark.swarm,
              pytest.mark.untimed("exit codes, the one line and the account counted in the databases")]


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


def test_the_targets_data_disk_filling_mid_window_is_exit_5_and_resumable(private_server, tmp_path, monkeypatch,
                                                                          fault, figures):
    """The server's data directory is a tmpfs of its own, filled to the last block a moment
    into the window: exit 5 and one line naming that directory, no traceback, nothing committed;
    the space freed, ``--resume`` redoes the repetition and the account is exact. On the code
    before it: exit 3 "no SEND completed" (or, with SENDs before the fill, exit 0 undelivered)."""
    srv = private_server
    srv.data_dir.mkdir(parents=True)
    if not can_mount_tmpfs(srv.data_dir):
        pytest.skip("needs root and tmpfs mounts to fill a filesystem for real (mount -t tmpfs)")
    # room for initdb and the run's databases (about 150 MB with their WAL), not much more
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=320m", "ssbench-pgfull", str(srv.data_dir)], check=True)
    monkeypatch.setenv("SSBENCH_PGDATA", str(srv.data_dir))    # the run's server and the audit's
    try:
        srv.start()
        m = write_matrix(tmp_path, measure=4, drain=20)
        out = tmp_path / "run"
        p, lines = start_run(m, out, settle=2.5)   # some SENDs in the window, then none
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
        r = ssbench("run", str(m), "--out", str(out), "--resume")
        assert r.returncode == 0, r.stderr[-3000:]
        check_account(out, 1, figures)
        fault()
    finally:
        srv.stop(mode="immediate")
        subprocess.run(["umount", "-l", str(srv.data_dir)], check=False)
