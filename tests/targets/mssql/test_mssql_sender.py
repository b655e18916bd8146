"""MssqlSender's plumbing for real through ODBC: built from a JSON spec in another process's
way (password from the environment), usable from threads other than the one that opened it,
calls overlapping across senders. The T-SQL statements are swapped for PostgreSQL ones; the
connection, the spec, the dialog cache and the threading are the real code."""

from __future__ import annotations

import json
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict

import pytest
from odbc_support import require_odbc_driver

from harness.errors import TargetError, UserError
from harness.targets.base import open_sender
from harness.targets.mssql import driver, sender as sender_mod, tsql

require_odbc_driver("PostgreSQL Unicode", "odbc-postgresql", module_level=True)


@pytest.fixture
def pg_tables(pg_server, monkeypatch):
    info = pg_server.info()
    suffix = uuid.uuid4().hex[:8]
    dialogs, sent = f"t_dialogs_{suffix}", f"t_sent_{suffix}"
    cs = (f"Driver={{PostgreSQL Unicode}};Server={info.host};Port={info.port};Database=postgres;"
          "Uid=postgres;")
    admin = driver.connect(cs, autocommit=True, where="pg admin")
    admin.execute(f"CREATE TABLE {dialogs} (k int PRIMARY KEY, handle uuid NOT NULL)")
    admin.execute(f"CREATE TABLE {sent} (handle uuid, payload bytea, at timestamptz DEFAULT now())")
    handles = [str(uuid.uuid4()) for _ in range(3)]
    for k, h in enumerate(handles, start=1):
        admin.execute(f"INSERT INTO {dialogs} VALUES (?, CAST(? AS uuid))", (k, h))
    real = tsql.statement
    fake = {("initiator", "dialog_handle"): f"SELECT CAST(handle AS varchar(36)), 0 FROM {dialogs} WHERE k = ?",
            ("initiator", "call_send"): f"INSERT INTO {sent} (handle, payload) "
                                        "SELECT CAST(? AS uuid), ? FROM pg_sleep(0.5)"}
    monkeypatch.setattr(tsql, "statement", lambda f, s, p=None: fake.get((f, s)) or real(f, s, p))
    monkeypatch.setenv("SSBENCH_TEST_PG_PW", "")
    spec = {"sender": "mssql", "initiator": 1, "connection": asdict(driver.ConnSpec(
        flavor="freetds", driver="PostgreSQL Unicode", host=info.host, port=info.port,
        database="postgres", user="postgres", password_env="SSBENCH_TEST_PG_PW",
        query_timeout=10, label="initiator 1"))}
    yield spec, handles, admin, sent
    admin.execute(f"DROP TABLE {dialogs}")
    admin.execute(f"DROP TABLE {sent}")
    admin.close()


def test_sender_roundtrip_from_other_threads(pg_tables):
    spec, handles, admin, sent = pg_tables
    spec = json.loads(json.dumps(spec))           # what a Locust worker receives
    s = open_sender(spec)
    assert isinstance(s, sender_mod.MssqlSender)
    try:
        # opened here, used from a worker thread (one call at a time)
        with ThreadPoolExecutor(1) as pool:
            h = pool.submit(s.dialog, 2).result()
            assert h == handles[1]
            pool.submit(s.send, h, b"\x00payload").result()
        assert s.dialog(2) == h                     # cached
        with pytest.raises(TargetError, match="no dialog 9"):
            s.dialog(9)
        s.send(handles[0], b"x" * 10)
    finally:
        s.close()
    rows = admin.execute(f"SELECT CAST(handle AS varchar(36)), payload FROM {sent} ORDER BY at")
    assert rows == [(handles[1], b"\x00payload"), (handles[0], b"x" * 10)]


@pytest.mark.timing   # an overlap timed by the clock
def test_senders_overlap(pg_tables):
    spec, handles, admin, sent = pg_tables
    senders = [open_sender(spec) for _ in range(4)]
    try:
        t0 = time.monotonic()
        threads = [threading.Thread(target=s.send, args=(handles[0], b"p")) for s in senders]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        took = time.monotonic() - t0
        assert took < 0.5 * 4 * 0.7, f"4 senders x 0.5 s took {took:.2f}s (serial: 2 s)"
    finally:
        for s in senders:
            s.close()
    assert admin.scalar(f"SELECT COUNT(*) FROM {sent}") == 4


def test_sender_needs_the_password_variable(pg_tables, monkeypatch):
    spec, *_ = pg_tables
    monkeypatch.delenv("SSBENCH_TEST_PG_PW")
    with pytest.raises(UserError, match="SSBENCH_TEST_PG_PW is not set"):
        open_sender(spec)
    with pytest.raises(ValueError):
        sender_mod.MssqlSender({"sender": "embedded"})
