"""The SQL Server target's evidence for the diagnosis (docs/diagnosis.md), against the recording
fake: which object's pages the PAGELATCH waits are on (sys.dm_os_waiting_tasks through
sys.dm_db_page_info on 2019 and later, raw page ids before, said so), Service Broker's own waits
and latch classes, sys.dm_broker_activated_tasks against MAX_QUEUE_READERS, the activation
procedure's own time and its processing knob; the collectors and the diagnosis on top. (Both of
Microsoft's parsers check every batch: test_mssql_tsql_parsers.py.)"""

from __future__ import annotations

import datetime as dt
import threading
from pathlib import Path

from harness.collectors.base import SampleContext, WindowView
from harness.collectors.waits import BrokerWaitCollector, PageLatchCollector
from harness.matrix import BrokerSettings
from harness.targets.mssql.driver import ConnSpec
from harness.targets.mssql.session import EPOCH
from harness.targets.mssql.target import MssqlTarget
from support.summaries import summary

REPO = Path(__file__).resolve().parents[3]
DIST = REPO / "topologies" / "example-distributed.yaml"
SINGLE = REPO / "topologies" / "example-single.yaml"


def _target(path=SINGLE, **broker) -> MssqlTarget:
    t = MssqlTarget.from_file(str(path))
    t.prepare(1, t.profiles()[0], BrokerSettings(**broker))
    return t


def test_page_latches_are_named_by_their_object_on_2019_and_later(fake):
    t = _target()
    got = t.page_latch_waiters()
    assert ("PAGELATCH_EX", "ssb_init1.sys.sysdesend", 3) in got and ("PAGELATCH_SH", "ssb_init1.sys.sysdesend", 1) in got
    assert ("PAGELATCH_EX", "page 7:1:88 (sys.dm_db_page_info: no object)", 1) in got
    sent = [(w, p) for _, _, w, _, p in fake.log if w == "collectors.sql page_info"]
    assert sorted(sent) == [("collectors.sql page_info", (7, 1, 88)), ("collectors.sql page_info", (7, 1, 1234))]
    t.page_latch_waiters()                   # each page is looked up once
    assert len([w for _, _, w, _, _ in fake.log if w == "collectors.sql page_info"]) == 2
    q = fake.sql(what="collectors.sql page_latch_waiters")
    assert "FROM sys.dm_os_waiting_tasks" in q and "PAGELATCH[_]%" in q
    assert "sys.dm_db_page_info(?, ?, ?, 'LIMITED')" in fake.sql(what="collectors.sql page_info")


def test_session_waits_by_role_summed_over_the_servers_benign_ones_left_out(fake):
    t = _target(DIST)
    assert len(t._active_servers()) == 2
    assert t.session_waits() == [("reader", "WRITELOG", 2), ("sender", "LCK_M_X", 10), ("sender", "WRITELOG", 4)]
    q = fake.sql(what="collectors.sql session_waits")
    assert "sys.dm_exec_requests" in q and "sys.dm_broker_activated_tasks" in q and "@@SPID" in q
    assert fake.session_waits_app == ("ssbench-sender",)
    # the load's connections carry that program name; the harness's own do not
    spec = t.sender_spec(1)["connection"]
    assert spec["app"] == "ssbench-sender" and "APP=ssbench-sender" in ConnSpec.from_dict(spec).connection_string(None)


def test_before_2019_the_raw_page_ids_stay_and_say_so(fake):
    fake.version = "14.0.3456.2"             # SQL Server 2017: no sys.dm_db_page_info
    t = _target()
    got = t.page_latch_waiters()
    assert ("PAGELATCH_EX", "page 7:1:1234 (not mapped: sys.dm_db_page_info needs SQL Server 2019)", 3) in got
    assert not fake.batches(what="collectors.sql page_info")
    fake.page_waiters = [("PAGELATCH_UP", "not:a:page", 1)]
    assert t.page_latch_waiters() == [("PAGELATCH_UP", "page not:a:page", 1)]


def test_broker_waits_and_latch_classes_summed_over_the_servers(fake):
    t = _target(DIST)
    waits = {w.wait_type: w for w in t.broker_waits()}
    servers = len(t._active_servers())
    assert servers == 2                      # the target and initiator 1
    assert waits["BROKER_RECEIVE_WAITFOR"].wait_time_ms == 24000.0 * servers
    assert waits["SERVICE_BROKER_WAITFOR_MANAGER"].waiting_tasks == 9 * servers
    assert "FROM sys.dm_os_latch_stats" in fake.sql(what="collectors.sql broker_latches")
    assert "LIKE N'BROKER[_]%'" in fake.sql(what="collectors.sql broker_waits")


def test_activated_tasks_against_max_queue_readers(fake):
    t = _target(max_queue_readers=16)
    assert t.activated_tasks() == (0, 16)    # the fake: no task running, MAX_QUEUE_READERS 16
    assert "sys.dm_broker_activated_tasks" in fake.sql(what="collectors.sql activated_tasks")


def test_procedure_time_reads_the_window_in_the_targets_clock(fake):
    t = _target()
    got = t.procedure_time(1000.0, 1005.0)
    assert got == {"seconds": 0.95, "batch_seconds": 1.0, "messages": 1000.0, "receives": 10.0}
    (params,) = [p for _, _, w, _, p in fake.log if w == "target.sql procedure_time"]
    off = t._offsets_s[t._active()[0].server_key]
    a, b = (EPOCH + dt.timedelta(seconds=x + off) for x in (1000.0, 1005.0))
    assert params == (a, a, b, b, a, a, a, b, a)


def test_the_activation_procedure_does_its_work_per_message(fake):
    t = MssqlTarget.from_file(str(SINGLE))
    t.provision()
    assert "ADD finished_at datetime2(7) NULL" in fake.sql(what="target.sql tables")
    t.prepare(1, t.profiles()[0], BrokerSettings(processing_us_per_message=1500))
    proc = fake.sql(what="target.sql activation_procedure").split("CREATE OR ALTER PROCEDURE")[-1]
    assert "IF 1500 > 0 AND @data > 0" in proc and "WAITFOR DELAY @work;" in proc
    assert "CAST(@data AS bigint)" in proc and "* 1500 / 1000.0" in proc
    assert proc.count("batch_messages, finished_at)") == 2   # the tally records when processing ended
    t.prepare(1, t.profiles()[0], BrokerSettings())
    assert "IF 0 > 0 AND @data > 0" in fake.sql(what="target.sql activation_procedure").split("CREATE OR ALTER")[-1]


def test_collectors_and_the_diagnosis_on_sql_server_evidence(fake):
    from harness.analysis.diagnosis import diagnose_rep
    from harness.collectors.base import Sample

    t = _target()
    ctx = SampleContext(target=t, lock=threading.Lock())
    latch, waits = PageLatchCollector(), BrokerWaitCollector()
    samples = []
    for now in (100.0, 101.0, 102.0):     # the latch class accrues 100 ms of wait a second
        fake.broker_latches = [("SERVICE_BROKER_WAITFOR_MANAGER", int(now), 310.0 + 100 * (now - 100))]
        for c in (latch, waits):
            samples += [Sample(now, c.family, m, k, float(v)) for m, k, v in c.sample(ctx, now)]
    view = WindowView(100.0, 103.0, tuple(samples))
    objects = latch.summary_fields(ctx, view)["page_latch_objects"]
    assert objects == {"ssb_init1.sys.sysdesend": 4.0, "page 7:1:88 (sys.dm_db_page_info: no object)": 1.0}
    # 200 ms between the first and the last sample, per second of the 3 s window
    assert waits.summary_fields(ctx, view)["broker_waits"]["SERVICE_BROKER_WAITFOR_MANAGER"] == round(200 / 3, 3)
    # the diagnosis names the object, as the paper did (sys.sysdesend: the 150 trick)
    d = diagnose_rep(summary(waits={"PAGELATCH_EX": 4000.0}, page_latch_objects=objects))
    assert d.detail == "page latch on ssb_init1.sys.sysdesend" and d.primary.remedy == "page latch"
