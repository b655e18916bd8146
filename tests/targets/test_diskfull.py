"""A target's full disk recognized in its servers' own words (harness.targets.diskfull)."""

from __future__ import annotations

import errno

from harness.errors import TargetDiskFull
from harness.targets.diskfull import disk_full_evidence, mssql_disk_full_line, pg_disk_full_line

PG = ('could not extend file "base/16384/16390": No space left on device\n'
      'HINT:  Check free disk space.')


def test_postgresql_words_for_a_full_disk_are_recognized_and_named():
    assert disk_full_evidence(["deadlock detected", PG]) == 'could not extend file "base/16384/16390": No space left on device'
    assert disk_full_evidence(["ERROR:  53100 disk full"]) and disk_full_evidence(["psycopg.errors.DiskFull: x"])
    assert disk_full_evidence(["deadlock detected", "port 9002 refused", "timeout (1105 ms)", ""]) is None
    line = pg_disk_full_line("/data/pg", disk_full_evidence([PG]))
    assert line.startswith("the embedded PostgreSQL server's data directory /data/pg is full (could not extend")
    assert "\n" not in line
    assert "transaction log is full (error 9002)" in mssql_disk_full_line("(9002)")


def test_a_targets_full_disk_is_an_enospc_whose_text_is_its_one_line():
    e = TargetDiskFull("the data directory /d is full\nnext")
    assert isinstance(e, OSError) and e.errno == errno.ENOSPC and str(e) == "the data directory /d is full\\nnext"
