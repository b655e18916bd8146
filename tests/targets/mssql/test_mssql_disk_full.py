"""SQL Server's full transaction log (9002) and full filegroup (1105), raised by the recording
fake through the real pyodbc layer (driver.Connection's error mapping), are named by the target
as a full disk: the run then exits 5 and leaves the repetition to ``--resume``."""

from __future__ import annotations

from pathlib import Path

import pytest
from mssql_fake import FakeOdbcError, install_raw_senders

from harness.errors import TargetError
from harness.matrix import BrokerSettings
from harness.targets.mssql.sender import MssqlSender
from harness.targets.mssql.target import MssqlTarget

REPO = Path(__file__).resolve().parents[3]
LOG_FULL = ("[42000] [Microsoft][ODBC Driver 18 for SQL Server][SQL Server]The transaction log for database "
            "'ssbench_init1' is full due to 'LOG_BACKUP'. (9002) (SQLExecDirectW)")
FILEGROUP = ("[42000] [Microsoft][ODBC Driver 18 for SQL Server][SQL Server]Could not allocate space for object "
             "'dbo.message_drop' in database 'ssbench_target' because the 'PRIMARY' filegroup is full. Create "
             "disk space by deleting unneeded files, dropping objects in the filegroup, adding additional files "
             "to the filegroup, or setting autogrowth on for existing files in the filegroup. (1105) (SQLExecDirectW)")


@pytest.mark.parametrize("words, named", [(LOG_FULL, "transaction log of database 'ssbench_init1' is full (error 9002)"),
                                          (FILEGROUP, "'PRIMARY' filegroup of SQL Server database 'ssbench_target' is full (error 1105)")])
def test_a_full_log_or_filegroup_is_the_targets_full_disk(fake, monkeypatch, words, named):
    install_raw_senders(monkeypatch, fake)
    t = MssqlTarget.from_file(str(REPO / "topologies" / "example-single.yaml"))
    t.provision(max_initiators=1)
    t.prepare(1, "durable", BrokerSettings(max_queue_readers=1))
    t.create_dialogs(1, 1, 1)
    real = fake.execute

    def full(sess, s, d, what, sql, params, cancel=None):
        if what.endswith("call_send"):
            raise FakeOdbcError("42000", words)
        return real(sess, s, d, what, sql, params, cancel)

    monkeypatch.setattr(fake, "execute", full)
    s = MssqlSender(t.sender_spec(1))
    try:
        with pytest.raises(TargetError) as e:
            s.send(s.dialog(1), bytes(100))
    finally:
        s.close()
    assert t.disk_full(["deadlock victim", str(e.value)]) and named in t.disk_full([str(e.value)])
    assert t.disk_full(["deadlock victim"]) is None
