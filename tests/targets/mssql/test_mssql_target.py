"""MssqlTarget's logic against a recording fake of SQL Server: what provisioning, preparing,
accounting, collectors and teardown send, for both layouts. (Real SQL Server:
test_mssql_integration.py.)"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from mssql_fake import FakeConn, whats

from harness.errors import TargetError
from harness.matrix import BrokerSettings
from harness.targets.mssql.target import MssqlTarget
from harness.targets.mssql.telemetry import is_benign_wait, parse_perf_counters
from harness.targets.mssql.topology import load_topology

REPO = Path(__file__).resolve().parents[3]
DIST = REPO / "topologies" / "example-distributed.yaml"
SINGLE = REPO / "topologies" / "example-single.yaml"


# --------------------------------------------------------------------------- provisioning

def test_provision_distributed(fake):
    t = MssqlTarget.from_file(str(DIST))
    t.provision()
    servers = ["sqltarget.lab.example:1433"] + [f"sqlinit{i}.lab.example:1433" for i in (1, 2, 3)]
    tgt = servers[0]
    # databases created with the broker on; the paper's objects in each
    assert {k for k in fake.dbs} == {(tgt, "ssbreceiver")} | {(s, "ssbsender") for s in servers[1:]}
    for s, db in [(tgt, "SSBReceiver"), (servers[1], "SSBSender")]:
        sql = fake.sql(server=s, db=db)
        assert "CREATE MESSAGE TYPE [//MySSB.com/Lab/M_Test] AUTHORIZATION [dbo]\n        VALIDATION = NONE;" in sql
        assert "([//MySSB.com/Lab/M_Test] SENT BY ANY)" in sql
        assert "CREATE QUEUE [dbo].[MySSBLabTestQueue] WITH STATUS = ON, RETENTION = OFF ON [PRIMARY];" in sql
        assert "ON QUEUE [dbo].[MySSBLabTestQueue] ([//MySSB.com/Lab/C_Test]);" in sql
    tsql_target = fake.sql(server=tgt, db="SSBReceiver")
    assert "CREATE OR ALTER PROCEDURE [dbo].[SRPerf_Queue_LabTest]" in tsql_target
    assert "MAX_QUEUE_READERS = 16" in tsql_target and "EXECUTE AS OWNER" in tsql_target
    # transport security: an endpoint per instance, certificate-authenticated, paper's encryption
    for i, s in enumerate(servers):
        label = ["target", "init1", "init2", "init3"][i]
        ep = fake.sql(what="server.sql endpoint_create", server=s)
        assert "CREATE ENDPOINT [ssbench_broker_endpoint]" in ep
        assert "LISTENER_PORT = 4022, LISTENER_IP = ALL" in ep
        assert f"AUTHENTICATION = CERTIFICATE [ssbench_transport_{label}]" in ep
        assert "ENCRYPTION = DISABLED" in ep and "MESSAGE_FORWARDING = DISABLED" in ep
    # the target's master trusts the three initiators' certificates, each initiator the target's
    peers = fake.sql(what="server.sql peer_login", server=tgt)
    for label in ("init1", "init2", "init3"):
        assert f"CREATE LOGIN [ssbench_peer_{label}] WITH PASSWORD = N'" in peers
        cert = fake.certs[(servers[int(label[-1])], "master", f"ssbench_transport_{label}")]
        installed = fake.sql(what="server.sql peer_certificate", server=tgt)
        assert f"FROM BINARY = 0x{cert.hex().upper()};" in installed
    assert "GRANT CONNECT ON ENDPOINT::[ssbench_broker_endpoint] TO [ssbench_peer_init2];" in \
        fake.sql(what="server.sql peer_grant_connect", server=tgt)
    assert "ssbench_peer_target" in fake.sql(what="server.sql peer_login", server=servers[1])
    assert "ssbench_peer_init2" not in fake.sql(what="server.sql peer_login", server=servers[1])
    # dialog security: a certificate per database, exchanged; GRANT SEND; RSB ANONYMOUS = OFF
    assert "GRANT SEND ON SERVICE::[//MySSB.com/Lab/S_Test] TO [ssbench_peer_init3];" in \
        fake.sql(what="objects.sql grant_send", server=tgt)
    rsb = fake.sql(what="objects.sql remote_service_binding", server=servers[2])
    assert "CREATE REMOTE SERVICE BINDING [ssbench_rsb_target]" in rsb
    assert "TO SERVICE N'//MySSB.com/Lab/S_Test'" in rsb
    assert "WITH USER = [ssbench_peer_target], ANONYMOUS = OFF;" in rsb
    # routes both ways with BROKER_INSTANCE, TCP to the far endpoint; msdb routes for delivery
    tguid = fake.dbs[(tgt, "ssbreceiver")]["guid"].lower()
    i1guid = fake.dbs[(servers[1], "ssbsender")]["guid"].lower()
    r = fake.sql(what="objects.sql route", server=servers[1])
    assert f"BROKER_INSTANCE = N'{tguid}'" in r and "ADDRESS = N'TCP://sqltarget.lab.example:4022'" in r
    r = fake.sql(what="objects.sql route", server=tgt)
    assert f"BROKER_INSTANCE = N'{i1guid}'" in r and "ADDRESS = N'TCP://sqlinit1.lab.example:4022'" in r
    msdb = fake.batches(what="server.sql msdb_route", server=tgt)
    assert msdb and all(d == "msdb" for _, d, _, _ in msdb)
    assert f"BROKER_INSTANCE = N'{tguid}'" in "\n".join(q for *_, q in msdb)
    cfg = [p for s, d, w, q, p in fake.log if "ssbench_config" in q and p and s == servers[1]]
    assert (tguid, "target_broker_guid", "target_broker_guid", tguid) in cfg
    # the send procedure of initiator 2 stamps '002'
    assert "0x535342313030323B" in fake.sql(what="initiator.sql send_procedure", server=servers[2])


def test_provision_is_idempotent(fake):
    t = MssqlTarget.from_file(str(DIST))
    t.provision()
    n_created = len(fake.batches(what="server.sql create_database"))
    fake.log.clear()
    t.provision()
    assert not fake.batches(what="server.sql create_database") and n_created == 4
    assert not fake.batches(what="server.sql peer_certificate")      # thumbprints match
    assert not fake.batches(what="server.sql endpoint_create")
    assert len(fake.batches(what="server.sql endpoint_alter")) == 4


def test_peer_certificate_replaced_when_it_changes(fake):
    t = MssqlTarget.from_file(str(DIST))
    t.provision()
    key = ("sqlinit1.lab.example:1433", "master", "ssbench_transport_init1")
    fake.certs[key] = b"a new certificate"
    fake.log.clear()
    t.provision()
    assert "DROP CERTIFICATE [ssbench_transport_init1]" in fake.sql(
        what="server.sql drop_certificate", server="sqltarget.lab.example:1433")
    assert "0x" + b"a new certificate".hex().upper() in fake.sql(what="server.sql peer_certificate")


def test_provision_single(fake):
    t = MssqlTarget.from_file(str(SINGLE))
    t.provision(max_initiators=2)
    s = "127.0.0.1:1433"
    assert {k[1] for k in fake.dbs} == {"ssbench_target", "ssbench_init1", "ssbench_init2"}
    assert not fake.batches(what="server.sql endpoint_create")
    assert not fake.batches(what="server.sql peer_login")
    assert not fake.batches(what="server.sql msdb_route")
    assert all(d != "master" for _, d, w, _ in fake.batches(what="server.sql own_certificate"))
    routes = fake.sql(what="objects.sql route", server=s)
    assert routes.count("ADDRESS = N'LOCAL';") == 4 and "N'TCP://" not in routes
    # dialog security still exchanged (SQL Server requires it for encrypted cross-database dialogs)
    assert "WITH USER = [ssbench_peer_target], ANONYMOUS = OFF;" in fake.sql(
        what="objects.sql remote_service_binding", db="ssbench_init2")


def test_foreign_endpoint_is_reported(fake):
    fake.endpoints["sqltarget.lab.example:1433"] = [("Mirroring_or_other", 5022, "STARTED", "WINDOWS", "AES", None)]
    t = MssqlTarget.from_file(str(DIST))
    with pytest.raises(TargetError, match=r"endpoint \[Mirroring_or_other\] .* exists and ssbench did not create it"):
        t.provision()


def test_old_server_refused(fake, monkeypatch):
    orig = FakeConn.execute

    def old(self, sql, params=(), timeout=..., what=""):
        if what == "server.sql server_info":
            return [("12.0.6024.0", "Standard", "x", "SP3", "sa")]
        return orig(self, sql, params, timeout, what)

    monkeypatch.setattr(FakeConn, "execute", old)
    with pytest.raises(TargetError, match="2016 SP1"):
        MssqlTarget.from_file(str(SINGLE)).provision()


def test_duplicate_broker_guids_get_new_broker(fake):
    t = MssqlTarget.from_file(str(SINGLE))
    t.provision(max_initiators=1)
    s = "127.0.0.1:1433"
    fake.dbs[(s, "ssbench_init1")]["guid"] = fake.dbs[(s, "ssbench_target")]["guid"]
    fake.log.clear()
    t.provision(max_initiators=1)
    nb = fake.batches(what="server.sql new_broker")
    assert len(nb) == 1 and "ALTER DATABASE [ssbench_init1] SET NEW_BROKER WITH ROLLBACK IMMEDIATE;" in nb[0][3]


# --------------------------------------------------------------------------- permutations

def test_prepare_sequence(fake):
    t = MssqlTarget.from_file(str(DIST))
    t.provision()
    fake.log.clear()
    t.prepare(2, "delayed", BrokerSettings(max_queue_readers=8, receive_top=500, waitfor_timeout_ms=1000))
    w = whats(fake)
    order = [w.index("target.sql activation_off"), w.index("collectors.sql activated_tasks"),
             w.index("objects.sql call_reset"), w.index("server.sql delayed_durability"),
             w.index("initiator.sql send_procedure"), w.index("target.sql queue_enable"),
             w.index("target.sql activation_procedure"), w.index("target.sql activation_on")]
    assert order == sorted(order)
    # every initiator of the profile and the target are reset, initiators first
    resets = fake.batches(what="objects.sql call_reset")
    assert [s.split(".")[0] for s, *_ in resets] == ["sqlinit1", "sqlinit2", "sqlinit3", "sqltarget"]
    dd = fake.sql(what="server.sql delayed_durability")
    assert dd.count("SET DELAYED_DURABILITY = FORCED;") == 4
    proc = fake.sql(what="target.sql activation_procedure")
    assert "RECEIVE TOP (500)" in proc and "TIMEOUT 1000;" in proc
    assert "MAX_QUEUE_READERS = 8" in fake.sql(what="target.sql activation_on")
    # only the active initiators get their numbers stamped
    sp = fake.batches(what="initiator.sql send_procedure")
    assert [s.split(".")[0] for s, *_ in sp] == ["sqlinit1", "sqlinit2"]
    assert t.describe()["profile"] == "delayed"
    assert t.label == ("SQL Server 16.0.4135.4, profile delayed (DELAYED_DURABILITY = FORCED), "
                       "distributed, dialog security: full (encrypted)")


def test_prepare_new_broker_recreates_routes(fake, tmp_path):
    text = SINGLE.read_text().replace("profiles:", "broker: {reset: new_broker}\nprofiles:")
    p = tmp_path / "nb.yaml"
    p.write_text(text)
    t = MssqlTarget.from_file(str(p))
    t.provision()
    old = fake.dbs[("127.0.0.1:1433", "ssbench_target")]["guid"].lower()
    fake.log.clear()
    t.prepare(1, "durable", BrokerSettings())
    assert len(fake.batches(what="server.sql new_broker")) == 4
    new = fake.dbs[("127.0.0.1:1433", "ssbench_target")]["guid"].lower()
    assert new != old
    routes = fake.sql(what="objects.sql route", db="ssbench_init1")
    assert f"BROKER_INSTANCE = N'{new}'" in routes
    assert not fake.batches(what="objects.sql call_reset")


def test_prepare_too_many_initiators(fake):
    t = MssqlTarget.from_file(str(DIST))
    from harness.errors import UserError

    with pytest.raises(UserError, match="needs 4 initiator"):
        t.prepare(4, "durable", BrokerSettings())


def test_dialogs_warmup_and_counts(fake):
    t = MssqlTarget.from_file(str(SINGLE))
    t.provision()
    t.prepare(2, "durable", BrokerSettings())
    assert t.create_dialogs(1, 50, 150) == 7500
    call = fake.batches(what="initiator.sql call_create_dialogs")[-1]
    assert call[1] == "ssbench_init1"
    assert [p for *_, w, q, p in fake.log if w == "initiator.sql call_create_dialogs"][-1] == (50, 150, 0)
    assert t.warm_up(1) == 7500 and t.warm_up(2) == 0    # one message on every dialog begun
    s = "127.0.0.1:1433"
    fake.add_sent(s, "ssbench_init1", 100)          # 100 measured sends committed
    fake.add_sent(s, "ssbench_init2", 30)
    fake.tally[s] = [(1, 100, 4), (2, 29, 4)]
    c = t.counts()
    assert [(x.initiator, x.sent, x.received) for x in c.initiators] == [(1, 100, 100), (2, 30, 29)]
    assert c.sent == 130 and c.received == 129 and not c.queue_disabled
    spec = t.sender_spec(2)
    assert spec["sender"] == "mssql" and spec["initiator"] == 2
    assert spec["connection"]["database"] == "ssbench_init2"
    assert spec["connection"]["password_env"] == "SSBENCH_MSSQL_PASSWORD"
    assert "password" not in spec["connection"]
    with pytest.raises(TargetError, match="not active"):
        t.sender_spec(3)


def test_priority_objects_honor_and_high_dialogs(fake):
    """A `priority` axis on the SQL Server target (against the recording fake: no SQL Server
    exists here): provisioning creates the high-priority contract, adds it to the service and
    creates the broker priority at level 10 in every database; a permutation with a share of
    high dialogs turns HONOR_BROKER_PRIORITY on in the target and its initiators and tells
    ssbench_create_dialogs the share in thousandths; the baseline turns it off; teardown
    removes all of it."""
    from harness.matrix import high_priority_slot

    t = MssqlTarget.from_file(str(SINGLE))
    t.provision()
    prio = fake.batches(what="objects.sql priority_objects")
    assert {d.lower() for _, d, _, _ in prio} == {"ssbench_target", "ssbench_init1", "ssbench_init2", "ssbench_init3"}
    q = fake.sql(what="objects.sql priority_objects", db="ssbench_target")
    assert "CREATE CONTRACT [ssbench_high_priority]" in q
    assert "ALTER SERVICE [//MySSB.com/Lab/S_Test] (ADD CONTRACT [ssbench_high_priority])" in q
    assert "CREATE BROKER PRIORITY [ssbench_high] FOR CONVERSATION" in q and "PRIORITY_LEVEL = 10" in q

    t.prepare(2, "durable", BrokerSettings(high_priority_share=0.5))
    honor = fake.batches(what="objects.sql honor_priority")
    assert {d.lower() for _, d, _, _ in honor} == {"ssbench_target", "ssbench_init1", "ssbench_init2"}
    assert all("SET HONOR_BROKER_PRIORITY ON" in q and "<> 1" in q for *_, q in honor)
    t.create_dialogs(1, 10, 1)
    assert [p for *_, w, q, p in fake.log if w == "initiator.sql call_create_dialogs"][-1] == (10, 1, 500)
    assert [k for k in range(1, 11) if high_priority_slot(k, 0.5)] == [2, 4, 6, 8, 10]
    assert sum(high_priority_slot(k, 0.25) for k in range(1, 101)) == 25
    assert not any(high_priority_slot(k, 0.0) for k in range(1, 101))

    n = len(fake.log)
    t.prepare(2, "durable", BrokerSettings())
    assert all("SET HONOR_BROKER_PRIORITY OFF" in q and "<> 0" in q
               for _, _, w, q, _ in fake.log[n:] if w == "objects.sql honor_priority")
    t.teardown()
    drop = fake.sql(what="teardown.sql priority_drop")
    assert "DROP BROKER PRIORITY [ssbench_high]" in drop and "DROP CONTRACT [ssbench_high_priority]" in drop
    order = whats(fake)
    assert order.index("teardown.sql priority_drop") < order.index("teardown.sql service_drop")


def test_drain_returns_when_done(fake):
    t = MssqlTarget.from_file(str(SINGLE))
    t.provision()
    t.prepare(1, "durable", BrokerSettings())
    t.warm_up(1)
    fake.add_sent("127.0.0.1:1433", "ssbench_init1", 5)
    fake.tally["127.0.0.1:1433"] = [(1, 5, 0)]
    c = t.drain(timeout=5, poll=0.01)
    assert c.sent == 5 and c.received == 5 and c.in_flight == 0


@pytest.mark.untimed("returns on a stop, seconds before its timeout")
def test_drain_takes_the_lock_per_poll_and_stops_on_request(fake):
    import threading
    import time

    t = MssqlTarget.from_file(str(SINGLE))
    t.provision()
    t.prepare(1, "durable", BrokerSettings())
    t.warm_up(1)
    fake.add_sent("127.0.0.1:1433", "ssbench_init1", 5)          # sent, never received
    lock, stop = threading.Lock(), threading.Event()
    threading.Timer(0.3, stop.set).start()
    t0 = time.monotonic()
    c = t.drain(timeout=30, poll=0.01, lock=lock, stop=stop)
    assert time.monotonic() - t0 < 5 and not c.settled          # returned on stop, not timeout
    assert lock.acquire(blocking=False)                          # released after every poll


# --------------------------------------------------------------------------- collectors

def test_wait_stats_filtered_and_summed(fake):
    fake.waits = [("WRITELOG", 10, 100.0, 60.0), ("PAGELATCH_EX", 5, 40.0, 1.0), ("BROKER_RECEIVE_WAITFOR", 3, 9e6, 0),
                  ("SLEEP_TASK", 1, 1e6, 0), ("XE_TIMER_EVENT", 1, 1e6, 0), ("LAZYWRITER_SLEEP", 1, 1.0, 0),
                  ("SQLTRACE_INCREMENTAL_FLUSH_SLEEP", 1, 2.0, 0)]
    t = MssqlTarget.from_file(str(DIST))
    t._profile, t._n_initiators = "durable", 2
    waits = t.wait_stats()
    # issue 52, item 7: the signal wait (inside wait_time_ms) is read and summed apart
    assert [(w.wait_type, w.waiting_tasks, w.wait_time_ms, w.signal_wait_ms) for w in waits] == \
        [("WRITELOG", 30, 300.0, 180.0), ("PAGELATCH_EX", 15, 120.0, 3.0)]      # 3 servers summed
    assert "signal_wait_time_ms" in fake.sql(what="collectors.sql wait_stats")
    # a single-instance topology is asked once, not once per database
    s = MssqlTarget.from_file(str(SINGLE))
    fake.log.clear()
    s.wait_stats()
    assert len(fake.batches(what="collectors.sql wait_stats")) == 1


def test_benign_waits():
    for w in ("BROKER_TO_FLUSH", "BROKER_EVENTHANDLER", "BROKER_TRANSMITTER", "CHECKPOINT_QUEUE",
              "SQLTRACE_BUFFER_FLUSH", "XE_DISPATCHER_WAIT", "SLEEP_TASK", "REQUEST_FOR_DEADLOCK_SEARCH",
              "LOGMGR_QUEUE", "DIRTY_PAGE_POLL", "HADR_FILESTREAM_IOMGR_IOCOMPLETION",
              "SP_SERVER_DIAGNOSTICS_SLEEP", "WAITFOR", "BROKER_TASK_STOP"):
        assert is_benign_wait(w), w
    for w in ("WRITELOG", "PAGELATCH_EX", "PAGELATCH_SH", "LCK_M_X", "SOS_SCHEDULER_YIELD",
              "BROKER_ENDPOINT_STATE_MUTEX", "PAGEIOLATCH_SH"):
        assert not is_benign_wait(w), w


def test_perf_counters_parsing():
    rows = [
        ("SQLServer:Broker Activation", "Tasks Running", "SSBReceiver", 4, 65792),
        ("MSSQL$INST2:Broker Activation", "Tasks Started/sec", "_Total", 17, 272696576),
        ("SQLServer:Broker Statistics", "SQL SENDs/sec", "", 123456, 272696576),
        ("SQLServer:Broker/DBM Transport", "Send I/Os/sec", "", 99, 272696576),
        ("SQLServer:Broker TO Statistics", "Avg. Length of Batched Writes", "", 5, 1073874176),
        ("SQLServer:Buffer Manager", "Page life expectancy", "", 300, 65792),
        ("SQLServer:Broker Statistics", "Enqueued Messages/sec", "", 1, 272696576),
    ]
    out = parse_perf_counters(rows)
    assert [(c.object_name, c.counter_name, c.instance_name, c.value, c.kind) for c in out] == [
        ("Broker Activation", "Tasks Running", "SSBReceiver", 4.0, "gauge"),
        ("Broker Activation", "Tasks Started/sec", "_Total", 17.0, "cumulative"),
        ("Broker Statistics", "SQL SENDs/sec", "", 123456.0, "cumulative"),
        ("Broker/DBM Transport", "Send I/Os/sec", "", 99.0, "cumulative"),
        ("Broker Statistics", "Enqueued Messages/sec", "", 1.0, "cumulative"),
    ]


def test_perf_counters_summed_over_servers(fake, monkeypatch):
    orig = FakeConn.execute

    def counters(self, sql, params=(), timeout=..., what=""):
        if what == "collectors.sql perf_counters":
            return [("SQLServer:Broker Statistics", "SQL SENDs/sec", "", 10, 272696576)]
        return orig(self, sql, params, timeout, what)

    monkeypatch.setattr(FakeConn, "execute", counters)
    t = MssqlTarget.from_file(str(DIST))
    t._profile, t._n_initiators = "durable", 3
    [c] = t.perf_counters()
    assert c.value == 40.0 and c.kind == "cumulative"


def test_activation_counters_are_the_target_databases_alone(fake, monkeypatch):
    """Issue 52, item 6: Broker Activation reports each database and _Total; only the target
    database's instance is kept (not _Total, which counts every queue of the instance, nor an
    initiator's or a DBA's database)."""
    orig = FakeConn.execute

    def counters(self, sql, params=(), timeout=..., what=""):
        if what == "collectors.sql perf_counters":
            return [("SQLServer:Broker Activation", "Tasks Started/sec", inst, 5, 272696576)
                    for inst in ("SSBReceiver", "SSBSender", "dba_db", "_Total")]
        return orig(self, sql, params, timeout, what)

    monkeypatch.setattr(FakeConn, "execute", counters)
    t = MssqlTarget.from_file(str(DIST))
    t._profile, t._n_initiators = "durable", 3
    assert [(c.instance_name, c.value) for c in t.perf_counters()] == [("SSBReceiver", 5.0)]


def test_depths_activation_cpu(fake):
    t = MssqlTarget.from_file(str(DIST))
    t._profile, t._n_initiators = "durable", 3
    assert t.queue_depths() == {"xmitq.i1": 0, "xmitq.i2": 0, "xmitq.i3": 0, "queue": 0}
    assert t.queue_depths(exact=True) == {"xmitq.i1": 0, "xmitq.i2": 0, "xmitq.i3": 0, "queue": 0}
    assert "xmitq_fast" in " ".join(whats(fake)) and "xmitq_exact" in " ".join(whats(fake))
    assert t.activated_tasks() == (0, 16)
    assert t._query(t._active()[0], "collectors", "queue_state", [t.topology.broker.queue])[0][2]   # activation on
    assert t.server_cpu_ms() == {n: (45000.0, 4) for n in ("target", "init1", "init2", "init3")}
    assert "total_cpu_usage_ms" in fake.sql(what="collectors.sql server_cpu")


def test_e2e_latency_clock_correction(fake):
    t = MssqlTarget.from_file(str(DIST))
    t.provision()
    fake.clock["sqltarget.lab.example:1433"] = 0.002      # target's clock 2 ms ahead of ours
    fake.clock["sqlinit1.lab.example:1433"] = -0.001     # initiator 1 a millisecond behind
    t.prepare(2, "durable", BrokerSettings())
    lat = t.e2e_latencies_us(1000.0, 2000.0)
    # raw 5000 us from initiator 1 includes +3 ms of skew; initiator 2 +2 ms
    assert abs(lat[0] - 2000) < 1500 and abs(lat[1] - 5000) < 1500
    [(_, _, _, _, params)] = [e for e in fake.log if e[2] == "target.sql e2e_latencies"]
    assert abs((params[0] - dt.datetime(1970, 1, 1)).total_seconds() - 1000.002) < 0.01
    assert t.describe()["clock_offsets_ms"]["target"] == pytest.approx(2.0, abs=1.5)
    # a `priority` axis: the same latencies split by messageDrop.high, clock-corrected alike
    by = t.e2e_latencies_by_priority_us(1000.0, 2000.0)
    assert len(by["high"]) == 1 and len(by["normal"]) == 2
    assert abs(by["high"][0] - 2000) < 1500 and abs(by["normal"][0] - 5000) < 1500
    # an alternated window: each message's send time in our clock (initiator 1's stamp is a
    # millisecond behind ours, initiator 2's on time), with the same corrected latencies
    sent = t.e2e_sent_latencies_us(1000.0, 2000.0)
    assert abs(sent[0][0] - 1_500_000_001_000) < 500 and abs(sent[1][0] - 1_500_010_000_000) < 500
    assert [us for _, us in sent] == lat


# --------------------------------------------------------------------------- check, teardown

def test_check_reports(fake, monkeypatch):
    t = MssqlTarget.from_file(str(DIST))
    monkeypatch.setattr("harness.targets.mssql.driver.pyodbc_module", lambda: None)
    import harness.targets.mssql.driver as drv

    orig = drv.drivers
    drv.drivers = lambda: ["ODBC Driver 18 for SQL Server", "FreeTDS"]
    try:
        res = t.check()
        statuses = {s for s, _, _ in res}
        assert "fail" not in statuses
        assert any("does not exist (provision creates it)" in d for _, _, d in res)
        t.provision()
        res = t.check()
        assert all(s == "ok" for s, _, _ in res), [r for r in res if r[0] != "ok"]
        drv.drivers = lambda: ["FreeTDS"]
        res = t.check()
        assert res[0][0] == "fail" and "not installed" in res[0][2]
    finally:
        drv.drivers = orig


def test_teardown(fake):
    t = MssqlTarget.from_file(str(DIST))
    t.provision()
    fake.log.clear()
    t.teardown(drop_databases=True)
    w = whats(fake)
    assert w.count("server.sql endpoint_drop") == 4
    assert "DROP REMOTE SERVICE BINDING [ssbench_rsb_target]" in fake.sql(
        what="teardown.sql binding_drop", server="sqlinit1.lab.example:1433")
    assert "DROP LOGIN [ssbench_peer_init3]" in fake.sql(what="server.sql peer_drop",
                                                          server="sqltarget.lab.example:1433")
    assert w.count("server.sql drop_database") == 4
    assert w.index("teardown.sql end_conversations") < w.index("teardown.sql service_drop")


def test_topology_profiles_exposed(fake):
    t = MssqlTarget.from_file(str(DIST))
    assert t.profiles() == ["durable", "delayed"]
    d = t.describe()
    assert d["kind"] == "mssql" and d["versions"]["target"] == "16.0.4135.4"
    assert d["topology"]["layout"] == "distributed"


def test_make_target_opens_a_topology_file(fake):
    """A bare file given as --target, or mssql:FILE, is this target's topology, read once
    (the TargetConfig carries it to from_config) and without connecting."""
    from harness.targets.factory import make_target, target_config

    config = target_config(str(SINGLE))
    assert config.name == "mssql" and config.file == SINGLE and config.detail.name == "laptop"
    assert config.capabilities.priority and not config.capabilities.profile_aliases
    assert target_config(f"mssql:{SINGLE}").profiles == config.profiles
    assert not fake.log                                   # nothing connected yet
    t = make_target(config)
    assert isinstance(t, MssqlTarget) and t.topology is config.detail
    assert load_topology(SINGLE).name == "laptop"


# --------------------------------------------------------------------------- issue 15: honest labels

def test_profile_label_says_what_it_is(fake):
    """A profile is instances and settings; the label every report shows says exactly that."""
    t = MssqlTarget.from_file(str(DIST))
    t.provision()
    for prof, dd in (("durable", "DISABLED"), ("delayed", "FORCED")):
        t.prepare(1, prof, BrokerSettings())
        assert t.label == (f"SQL Server 16.0.4135.4, profile {prof} (DELAYED_DURABILITY = {dd}), distributed, "
                           "dialog security: full (encrypted)")
        d = t.describe()
        assert d["profile_settings"] == f"DELAYED_DURABILITY = {dd}" and d["profile_description"]
        assert d["notes"] == []
        # run.json's label names no single profile (a run may use several); each is described
        assert d["label"] == "SQL Server 16.0.4135.4, distributed, dialog security: full (encrypted)"
        assert d["profiles"][prof]["label"] == f"profile {prof} (DELAYED_DURABILITY = {dd})"
        assert t.label.startswith(f"SQL Server 16.0.4135.4, profile {prof} ")  # still the permutation's
    # the examples do not borrow the paper's build names for durability settings
    for path in (DIST, SINGLE):
        topo = load_topology(path)
        assert not {"sql2005", "sql2008"} & set(topo.profiles), path
        for p in topo.profiles.values():
            assert p.settings() in p.description or "full durability" in p.description


def test_message_drop_is_a_heap(fake):
    """16 readers inserting 10,000-row batches must not queue on one last page (PAGELATCH_EX)."""
    t = MssqlTarget.from_file(str(SINGLE))
    t.provision()
    tables = fake.sql(what="target.sql tables", db="ssbench_target")
    create = tables[tables.index("CREATE TABLE [dbo].[messageDrop]"):]
    create = create[:create.index(");") + 2]
    assert "IDENTITY" not in create and "PRIMARY KEY" not in create and "CLUSTERED" not in create
    assert "CREATE CLUSTERED INDEX" not in tables and "ON [dbo].[messageDrop]" not in tables
    # an older clustered messageDrop is replaced
    assert "index_id = 1)\n    DROP TABLE [dbo].[messageDrop];" in tables


def test_tally_has_a_row_for_every_receive(fake):
    """A RECEIVE of only EndDialog or Error messages is tallied too (initiator NULL), and the
    accounting reads only the per-initiator rows."""
    t = MssqlTarget.from_file(str(SINGLE))
    t.provision()
    proc = fake.sql(what="target.sql activation_procedure")
    body = proc[proc.index("WAITFOR ("):]
    # @data counts the valid data messages (the rows copied to messageDrop) ...
    drop = body.index("INSERT INTO [dbo].[messageDrop]")
    assert body.index("SET @data = @@ROWCOUNT;") > drop
    # ... a RECEIVE with anything else gets a NULL-initiator row carrying its size
    tail = body[body.index("IF @data < @rows"):]
    assert tail.index("VALUES (@now, NULL, 0, 0, @rows, SYSUTCDATETIME());") < tail.index("INSERT INTO [dbo].[messageErrors]")
    # the RECEIVE's size is on every tally row; nothing between RECEIVE and the tally resets it
    assert "SUM(CASE WHEN h.warmup = 1 THEN 1 ELSE 0 END), @rows" in body
    assert "SET @rows = @@ROWCOUNT;" in body
    assert "WHERE initiator IS NOT NULL" in tsql_section("target", "received_by_initiator")
    t.prepare(1, "durable", BrokerSettings())
    fake.tally["127.0.0.1:1433"] = [(1, 7, 0)]       # the server filters the NULL rows
    assert t.counts().received == 7


def tsql_section(file, name):
    from harness.targets.mssql import tsql

    return tsql.statement(file, name, {"queue": "q"})


# --------------------------------------------------------------------------- issue 15, item 8

def fails(res):
    return [(w, d) for s, w, d in res if s == "fail"]


def test_check_broker_enabled_endpoint_and_permissions(fake, monkeypatch):
    """One clear line per failed check: is_broker_enabled, the endpoint's state, and the
    permissions each step needs."""
    monkeypatch.setattr("harness.targets.mssql.driver.pyodbc_module", lambda: None)
    monkeypatch.setattr("harness.targets.mssql.driver.drivers", lambda: ["ODBC Driver 18 for SQL Server"])
    t = MssqlTarget.from_file(str(DIST))
    t.provision()
    assert fails(t.check()) == []
    tgt, i1 = "sqltarget.lab.example:1433", "sqlinit1.lab.example:1433"
    # broker disabled in a provisioned database
    fake.dbs[(i1, "ssbsender")]["broker"] = False
    # the target's endpoint stopped
    fake.endpoints[tgt] = [("ssbench_broker_endpoint", 4022, "STOPPED", "CERTIFICATE", "NONE", "c")]
    # no VIEW SERVER STATE, no CREATE ROUTE in msdb on init1
    fake.perms[i1] = (0, 0, 1, 1, 1, 1, 0)
    # not db_owner, no ALTER on the target database
    fake.db_perms[(tgt, "ssbreceiver")] = (0, 0)
    got = fails(t.check())
    lines = [f"{w}: {d}" for w, d in got]
    assert len(got) == 6, lines
    assert any("database init1" in w and "Service Broker is disabled (is_broker_enabled = 0)" in d
               for w, d in got)
    assert any(w.startswith("server target") and "endpoint [ssbench_broker_endpoint] is STOPPED" in d
               for w, d in got)
    assert any(w.startswith("server init1") and d.startswith("VIEW SERVER STATE missing: the collectors")
               for w, d in got)
    assert any(w.startswith("server init1") and d.startswith("CREATE ROUTE in msdb missing")
               for w, d in got)
    assert any("database target" in w and "not db_owner" in d for w, d in got)
    assert any("database target" in w and "no ALTER permission" in d for w, d in got)
    assert all("\n" not in d for _, d in got)


def test_check_foreign_endpoint_and_missing_database(fake, monkeypatch):
    monkeypatch.setattr("harness.targets.mssql.driver.pyodbc_module", lambda: None)
    monkeypatch.setattr("harness.targets.mssql.driver.drivers", lambda: ["ODBC Driver 18 for SQL Server"])
    tgt = "sqltarget.lab.example:1433"
    fake.endpoints[tgt] = [("Mirroring", 5022, "STARTED", "WINDOWS NEGOTIATE", "AES", None)]
    fake.perms[tgt] = (0, 1, 1, 1, 0, 1, 1)
    got = fails(MssqlTarget.from_file(str(DIST)).check())
    assert any("endpoint [Mirroring]" in d and "broker.use_existing_endpoint: true" in d for _, d in got)
    assert any(d.startswith("CREATE ANY DATABASE missing: provision creates SSBReceiver") for _, d in got)


def test_backlog_set_activation_renders_alter_queue(fake):
    """The backlog drain's ACTIVATION (STATUS = OFF / ON), rendered through tsql.py (the fake
    records the T-SQL: no SQL Server here)."""
    t = MssqlTarget.from_file(str(DIST))
    t.provision()
    t.prepare(1, "delayed", BrokerSettings(max_queue_readers=3))
    fake.log.clear()
    t.set_activation(False)
    off = fake.sql(what="target.sql activation_off")
    assert "ALTER QUEUE [dbo].[MySSBLabTestQueue] WITH ACTIVATION (STATUS = OFF);" in off
    # off waits for the running activated tasks to finish before returning
    w = whats(fake)
    assert w.index("target.sql activation_off") < w.index("collectors.sql activated_tasks")
    fake.log.clear()
    t.set_activation(True)
    on = fake.sql(what="target.sql activation_on")
    assert "STATUS = ON" in on and "MAX_QUEUE_READERS = 3" in on and "ALTER QUEUE [dbo].[MySSBLabTestQueue]" in on


def test_collectors_never_wait_on_the_senders_or_scan_closed_endpoints(fake):
    """Issue 52, item 9: every tick, the dialog collector reads ssbench_counts WITH (NOLOCK) (a
    SUM at READ COMMITTED waits on every SEND's open transaction, its LCK_M_S in the measured
    waits) and leaves the GROUP BY over sys.conversation_endpoints, which grows with the target's
    CLOSED endpoints, to after the window; the tallies are read WITH (READPAST)."""
    import threading

    from harness.collectors.base import SampleContext, WindowView
    from harness.collectors.dialogs import DialogCollector
    from harness.collectors.throughput import ThroughputCollector

    t = MssqlTarget.from_file(str(SINGLE))
    t.provision()
    t.prepare(2, "durable", BrokerSettings())
    ctx = SampleContext(target=t, lock=threading.Lock())
    dialogs, throughput = DialogCollector(), ThroughputCollector()
    fake.log.clear()
    for k in range(3):
        dialogs.sample(ctx, float(k))
        throughput.sample(ctx, float(k))
    ticks = whats(fake)
    assert "collectors.sql endpoint_states" not in ticks and "initiator.sql sent_counts" not in ticks
    assert ticks.count("initiator.sql sent_counts_live") == 6
    assert "WITH (NOLOCK)" in fake.sql(what="initiator.sql sent_counts_live")
    assert "WITH (READPAST)" in fake.sql(what="target.sql processed_total")
    assert "WITH (READPAST)" in fake.sql(what="initiator.sql dialog_errors_received")
    fields = dialogs.summary_fields(ctx, WindowView(0.5, 2.5, ()))
    assert "endpoints" in fields and "collectors.sql endpoint_states" in whats(fake)
    # the backlog fill's stop, polled while the senders fill: the same read, not counts()'
    fake.log.clear()
    live = t.sent_while_running()
    assert "initiator.sql sent_counts" not in whats(fake) and whats(fake).count("initiator.sql sent_counts_live") == 2
    assert live == t.counts().sent                  # one read per initiator, each as counts() reads it
