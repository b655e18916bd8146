"""A full disk, one concept: harness.errors.full_disk recognizes it (the harness's own disk by
its errno or the OS's words, a target's in its servers' words), DiskFull stops with exit 5, and
each target names what of it is full."""

from __future__ import annotations

import errno

import pytest

from harness.commands.run import _run
from harness.errors import DiskFull, TargetError, UserError, full_disk
from harness.targets.embedded.target import pg_disk_full_line
from harness.targets.mssql.target import mssql_disk_full_line

PG = ('could not extend file "base/16384/16390": No space left on device\n'
      'HINT:  Check free disk space.')


def test_a_full_disk_is_known_by_its_errno_or_by_its_text_from_java_or_arrow():
    assert full_disk(OSError(errno.ENOSPC, "No space left on device"))
    assert full_disk(OSError(errno.EDQUOT, "Disk quota exceeded"))
    try:
        try:
            raise OSError(errno.ENOSPC, "full")
        except OSError as inner:
            raise RuntimeError("plot failed") from inner
    except RuntimeError as outer:
        assert full_disk(outer) == "No space left on device: [Errno 28] full"
    assert full_disk(Exception("py4j: java.io.IOException: No space left on device"))
    assert full_disk(Exception("ARROW IOError: NO SPACE LEFT ON DEVICE"))
    assert not full_disk(OSError(errno.EACCES, "Permission denied"))
    assert not full_disk(ValueError("space"))
    assert full_disk(None) is None


def test_postgresql_words_for_a_full_disk_are_recognized_and_named():
    assert full_disk(["deadlock detected", PG]) == 'could not extend file "base/16384/16390": No space left on device'
    assert full_disk(["ERROR:  53100 disk full"]) and full_disk(["psycopg.errors.DiskFull: x"])
    assert full_disk(["SQLSTATE 53100", "is full (53100): free space"]) and full_disk(["x"]) is None
    assert full_disk(["deadlock detected", "port 9002 refused", "timeout (1105 ms)", "port 53100", "53100 rows", ""]) is None
    line = pg_disk_full_line("/data/pg", full_disk([PG]))
    assert line.startswith("the embedded PostgreSQL server's data directory /data/pg is full (could not extend")
    assert "\n" not in line
    assert "transaction log is full (error 9002)" in mssql_disk_full_line("(9002)")
    assert mssql_disk_full_line("No space left on device, then (1105)").startswith("a SQL Server filegroup is full")


def test_a_full_disk_is_one_class_exit_5_whose_text_is_its_one_line():
    e = DiskFull("the data directory /d is full\nnext")
    assert isinstance(e, UserError) and e.exit_code == 5 and str(e) == "the data directory /d is full\\nnext"


class _Rd:
    path = "/results/run-1"

    def __init__(self):
        self.finished = []

    def finish(self, status, lost=None, error=None):
        self.finished.append((status, error))


class _Runner:
    lost_total = 0

    def __init__(self, fault):
        self.fault = fault

    def run(self):
        raise self.fault


class _Progress:
    def close(self):
        pass


@pytest.mark.parametrize("fault, said", [
    (DiskFull("the embedded PostgreSQL server's data directory /pg is full (53100): free space on it"),
     "ssbench: error: the embedded PostgreSQL server's data directory /pg is full (53100): free space on it; "),
    (OSError(errno.ENOSPC, "No space left on device", "/results/run-1/p/.rep-01.partial/x.csv"),
     "ssbench: error: no space left on the device of /results/run-1/p/.rep-01.partial/x.csv: free some space; "),
])
def test_a_run_stopped_by_either_full_disk_is_exit_5_one_line_and_resumable(capsys, fault, said):
    rd = _Rd()
    assert _run(_Runner(fault), rd, _Progress(), "ssbench run m.yaml --resume", None) == 5
    err = capsys.readouterr().err.splitlines()
    assert err == [said + "the repetition in progress was not kept, resume with: ssbench run m.yaml --resume"], err
    assert rd.finished == [("interrupted", "DiskFull: " + said[len("ssbench: error: "):-2])]


class _FullRd(_Rd):
    def finish(self, status, lost=None, error=None):
        raise OSError(errno.ENOSPC, "No space left on device", f"{self.path}/.run.json.tmp")


@pytest.mark.parametrize("fault, code, said", [
    (TargetError("no SEND completed: the repetition measured nothing"), 3,
     "ssbench: target error: no SEND completed: the repetition measured nothing; resume with: r"),
    (KeyboardInterrupt(), 130, "ssbench: interrupted; resume with: r"),
])
def test_a_run_stopped_while_its_disk_is_full_still_says_its_one_line(capsys, fault, code, said):
    """The results disk fills as the run stops for another reason: run.json cannot be closed,
    and the run still ends with that reason's line and exit code (no traceback)."""
    assert _run(_Runner(fault), _FullRd(), _Progress(), "r", None) == code
    assert capsys.readouterr().err.splitlines() == [said]
