"""End to end against a real SQL Server (2016 SP1 or later), single-instance layout.

Runs only when SSBENCH_MSSQL_HOST is set; otherwise every test is skipped with the reason.

    SSBENCH_MSSQL_HOST=127.0.0.1          # required
    SSBENCH_MSSQL_PORT=1433               # default 1433
    SSBENCH_MSSQL_USER=sa                 # a login with sysadmin, or see docs/sqlserver.md
    SSBENCH_MSSQL_PASSWORD=...            # read from the environment, never written anywhere
    SSBENCH_MSSQL_DRIVER="ODBC Driver 18 for SQL Server"   # or FreeTDS
    SSBENCH_MSSQL_TRUST_CERT=1            # self-signed certificate of a development server
    SSBENCH_MSSQL_ENCRYPT=mandatory       # mandatory | optional | strict
    SSBENCH_MSSQL_DATABASE_PREFIX=ssbench_it_   # databases created and dropped by the test

The test creates <prefix>target, <prefix>init1 and <prefix>init2, provisions them, runs a tiny
flow (dialogs, warm-up, a few messages through real senders, drain, sent == received), reads
every collector, and drops the databases.
"""

from __future__ import annotations

import os
import time

import pytest

from harness.matrix import BrokerSettings

pytestmark = [
    pytest.mark.mssql,
    pytest.mark.skipif(not os.environ.get("SSBENCH_MSSQL_HOST"),
                       reason="no SQL Server: set SSBENCH_MSSQL_HOST (and _PORT, _USER, _PASSWORD, "
                              "_DRIVER, _TRUST_CERT) to run the SQL Server integration tests"),
]


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    from env_topology import env_topology
    from harness.targets.mssql.target import MssqlTarget

    prefix = os.environ.get("SSBENCH_MSSQL_DATABASE_PREFIX") or "ssbench_it_"
    t = MssqlTarget(env_topology(tmp_path_factory.mktemp("topology"), initiators=2, database_prefix=prefix))
    t.provision()
    yield t
    try:
        # ssbench created every object and database here: nothing is kept
        assert t.teardown(drop_databases=True) == []
    finally:
        t.close()


def test_check_after_provision(target):
    results = target.check()
    assert not [r for r in results if r[0] == "fail"], results


def test_tiny_flow(target):
    from harness.targets.base import open_sender

    target.prepare(2, "default", BrokerSettings(max_queue_readers=2, receive_top=100,
                                                waitfor_timeout_ms=500))
    t_start = time.time()
    assert target.create_dialogs(1, 2, 3) == 6          # the 150 trick with every_n = 3
    assert target.create_dialogs(2, 1, 1) == 1
    assert target.warm_up(1) == 6 and target.warm_up(2) == 1
    for i, n in ((1, 7), (2, 5)):
        sender = open_sender(target.sender_spec(i))
        try:
            handles = {sender.dialog(k) for k in range(1, (2 if i == 1 else 1) + 1)}
            assert len(handles) == (2 if i == 1 else 1)
            for m in range(n):
                sender.send(sorted(handles)[m % len(handles)], bytes([m % 256]) * (100 + m))
        finally:
            sender.close()
    c = target.drain(60)
    assert [(x.initiator, x.sent, x.received) for x in c.initiators] == [(1, 7, 7), (2, 5, 5)]
    assert c.in_flight == 0 and c.poison == 0 and not c.queue_disabled
    assert target.messages_processed() == 12
    lat = target.e2e_latencies_us(t_start - 60, time.time() + 60)
    assert len(lat) == 12 and all(0 <= us < 60_000_000 for us in lat)
    # collectors answer
    assert isinstance(target.wait_stats(), list)
    assert all(role in ("sender", "reader") and n > 0 for role, _, n in target.session_waits())
    names = {(p.object_name, p.counter_name) for p in target.perf_counters()}
    assert any(o == "Broker Statistics" for o, _ in names)
    assert set(target.queue_depths()) == {"xmitq.i1", "xmitq.i2", "queue"}
    assert target.queue_depths(exact=True)["queue"] == 0
    assert target.activated_tasks() is not None
    assert set(target.server_cpu_ms()) == {"target"} and target.server_cpu_ms()["target"][1] > 0
    # a second permutation starts clean
    target.prepare(1, "default", BrokerSettings())
    c = target.counts()
    assert c.sent == 0 and c.received == 0 and c.in_flight == 0
    # retired dialogs (issue 31): their initiator endpoints are deleted once both sides end them;
    # sent, dialogs begun and ended still count them (ssbench_counts)
    target.create_dialogs(1, 2, 1)
    target.warm_up(1)
    sender = open_sender(target.sender_spec(1))
    try:
        sender.set_dialog_lifetime(2, False)
        for _ in range(6):
            sender.send(sender.dialog(1), bytes(100))
        sender.set_dialog_lifetime(2, True)
        for _ in range(4):
            sender.send(sender.dialog(2), bytes(100))
    finally:
        sender.close()
    c = target.drain(60)
    assert (c.sent, c.received) == (10, 10), c
    deadline = time.time() + 30                 # the initiator's reader ends its side
    while target.dialog_stats()["dialogs_ended"] < 5 and time.time() < deadline:
        time.sleep(0.5)
    stats = target.dialog_stats()
    assert stats["dialogs_begun"] == stats["dialogs_ended"] == 5, stats


def test_smoke(target):
    c = target.smoke(messages=5)
    assert c.sent == 10 and c.received == 10
