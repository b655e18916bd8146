"""The pyodbc plumbing of the SQL Server target.

Connection strings and error mapping are unit-tested with SQL Server's own messages; the generic
path (connect, autocommit, query timeouts, worker threads, error mapping) runs for real against
PostgreSQL through psqlODBC ("PostgreSQL Unicode"), with the embedded server from conftest.
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict

import pytest
from odbc_support import require_pyodbc

from harness.errors import TargetError, UserError
from harness.targets.mssql import driver
from harness.targets.mssql.topology import Auth, DriverConfig, Instance

pyodbc = require_pyodbc(module_level=True)

PG_DRIVER = "PostgreSQL Unicode"
needs_psqlodbc = pytest.mark.skipif(
    PG_DRIVER not in pyodbc.drivers(),
    reason=f"psqlODBC ({PG_DRIVER!r}) is not registered with unixODBC; "
           "apt-get install -y unixodbc odbc-postgresql (the CI script does)")


# --------------------------------------------------------------------------- connection strings

def inst(**kw) -> Instance:
    auth = kw.pop("auth", Auth("sql", "ssbench", "SSBENCH_TEST_PW"))
    return Instance(kw.pop("name", "target"), kw.pop("host", "sqltarget.lab"), kw.pop("port", 1433),
                    kw.pop("database", "SSBReceiver"), auth, auth, "sqltarget.lab", 4022)


def test_msodbc_connection_string():
    spec = driver.spec_for(inst(), DriverConfig(trust_server_certificate=True))
    cs = spec.connection_string("p;a}ss")
    assert cs.startswith("Driver={ODBC Driver 18 for SQL Server};Server=tcp:sqltarget.lab,1433;")
    assert "Database=SSBReceiver;" in cs and "Encrypt=Mandatory;" in cs
    assert "TrustServerCertificate=Yes;" in cs and "UID=ssbench;" in cs
    assert cs.endswith("PWD={p;a}}ss};")
    strict = driver.spec_for(inst(), DriverConfig(encrypt="strict",
                                                  host_name_in_certificate="sql.lab"))
    cs = strict.connection_string("x")
    assert "Encrypt=Strict;" in cs and "TrustServerCertificate=No;" in cs
    assert "HostNameInCertificate=sql.lab;" in cs


def test_freetds_connection_string():
    spec = driver.spec_for(inst(port=1444), DriverConfig(kind="freetds", name="FreeTDS",
                                                         tds_version="7.4", encryption="require"))
    cs = spec.connection_string("pw")
    assert cs.startswith("Driver={FreeTDS};Server=sqltarget.lab;Port=1444;Database=SSBReceiver;")
    assert "TDS_Version=7.4;" in cs and "Encryption=require;" in cs and "Encrypt=" not in cs
    # issue 52, item 10: FreeTDS takes APP= too (its ODBC attributes: "Application name"), so
    # the sampled session waits find the senders by program_name under either driver
    sender = driver.spec_for(inst(), DriverConfig(kind="freetds", name="FreeTDS"), sender=True)
    assert f"APP={driver.SENDER_APP};" in sender.connection_string("pw") and "APP=ssbench;" in cs


def test_integrated_auth_string():
    spec = driver.spec_for(inst(auth=Auth("integrated")), DriverConfig())
    cs = spec.connection_string(None)
    assert "Trusted_Connection=Yes;" in cs and "UID" not in cs and "PWD" not in cs
    assert spec.password() is None


def test_password_from_environment(monkeypatch):
    spec = driver.spec_for(inst(), DriverConfig())
    monkeypatch.delenv("SSBENCH_TEST_PW", raising=False)
    with pytest.raises(UserError, match="SSBENCH_TEST_PW is not set"):
        spec.password()
    monkeypatch.setenv("SSBENCH_TEST_PW", "s3cret")
    assert spec.password() == "s3cret"
    d = asdict(spec)
    assert "s3cret" not in repr(d) and d["password_env"] == "SSBENCH_TEST_PW"
    assert driver.ConnSpec.from_dict(d) == spec
    with pytest.raises(ValueError):
        driver.ConnSpec.from_dict({**d, "password": "x"})


def test_odbc_value_quoting():
    assert driver.odbc_value("plain") == "plain"
    assert driver.odbc_value("a;b") == "{a;b}"
    assert driver.odbc_value("a}b") == "{a}}b}"
    assert driver.odbc_value(" x") == "{ x}"
    with pytest.raises(UserError):
        driver.odbc_value("a\0b")


# --------------------------------------------------------------------------- error mapping

class FakeOdbcError(Exception):
    pass


def fake(state: str, msg: str) -> FakeOdbcError:
    return FakeOdbcError(state, msg)


def test_login_failure_message():
    e = driver.map_error(fake("28000", "[28000] [Microsoft][ODBC Driver 18 for SQL Server][SQL Server]"
                                       "Login failed for user 'ssbench'. (18456) (SQLDriverConnect)"),
                         phase="connect", where="target (h:1433, database D)", user="ssbench",
                         password_env="SSBENCH_MSSQL_PASSWORD")
    assert isinstance(e, driver.LoginError) and isinstance(e, TargetError)
    assert str(e) == ("target (h:1433, database D): login as ssbench failed: Login failed for user "
                      "'ssbench'.. Check the login and the password in $SSBENCH_MSSQL_PASSWORD.")
    assert e.native == 18456 and e.sqlstate == "28000"


def test_certificate_error_message():
    e = driver.map_error(fake("08001", "[08001] [Microsoft][ODBC Driver 18 for SQL Server]SSL Provider: "
                                       "[error:0A000086:SSL routines::certificate verify failed:"
                                       "self-signed certificate] (-1) (SQLDriverConnect)"),
                         phase="connect", where="target")
    assert isinstance(e, driver.CertificateError)
    assert "trust_server_certificate" in str(e) and "certificate verify failed" in str(e)


def test_unreachable_messages():
    for state, msg in [
        ("HYT00", "[HYT00] [Microsoft][ODBC Driver 18 for SQL Server]Login timeout expired (0) (SQLDriverConnect)"),
        ("08001", "[08001] [Microsoft][ODBC Driver 18 for SQL Server]TCP Provider: Error code 0x2749 (10057) (SQLDriverConnect)"),
        ("08S01", "[08S01] [FreeTDS][SQL Server]Unable to connect: Adaptive Server is unavailable or does not exist (20009) (SQLDriverConnect)"),
    ]:
        e = driver.map_error(fake(state, msg), phase="connect", where="init1 (h:1433, database S)")
        assert isinstance(e, driver.UnreachableError), msg
        assert str(e).startswith("init1 (h:1433, database S): cannot reach the server")


def test_missing_driver_lists_installed_ones():
    e = driver.map_error(fake("01000", "[01000] [unixODBC][Driver Manager]Can't open lib 'ODBC Driver 18 "
                                       "for SQL Server' : file not found (0) (SQLDriverConnect)"),
                         phase="connect", where="x", driver_name="ODBC Driver 18 for SQL Server")
    assert isinstance(e, driver.DriverNotFoundError)
    assert "'ODBC Driver 18 for SQL Server' is not installed" in str(e)
    for name in pyodbc.drivers():
        assert repr(name) in str(e)


def test_query_errors():
    e = driver.map_error(fake("HYT00", "[HYT00] [Microsoft][ODBC Driver 18 for SQL Server]Query timeout "
                                       "expired (0) (SQLExecDirectW)"), phase="query", where="t",
                         timeout=30)
    assert isinstance(e, driver.QueryTimeoutError) and "30 s" in str(e)
    e = driver.map_error(fake("42000", "[42000] [Microsoft][ODBC Driver 18 for SQL Server][SQL Server]"
                                       "Could not find stored procedure 'dbo.ssbench_reset'. (2812) "
                                       "(SQLExecDirectW)"), phase="query", where="t")
    assert isinstance(e, driver.QueryError) and e.native == 2812
    assert str(e) == "t: Could not find stored procedure 'dbo.ssbench_reset'. [SQLSTATE 42000, error 2812]"


def test_secret_scrubbed():
    e = driver.map_error(fake("08001", "[08001] bad option PWD=hunter2 (0) (SQLDriverConnect)"),
                         phase="connect", where="t", secret="hunter2")
    assert "hunter2" not in str(e)


# --------------------------------------------------------------------------- psqlODBC, for real

@pytest.fixture(scope="module")
def pg(pg_server):
    info = pg_server.info()
    assert info is not None
    return info


def pg_cs(info, user="postgres", port=None, drv=PG_DRIVER) -> str:
    return (f"Driver={{{drv}}};Server={info.host};Port={port or info.port};Database=postgres;"
            f"Uid={user};")


@needs_psqlodbc
def test_connect_autocommit(pg):
    c = driver.connect(pg_cs(pg), autocommit=True, where="pg")
    try:
        assert c.raw.autocommit is True and c.autocommit
        assert c.scalar("SELECT 40 + ?", (2,)) == 42
        # autocommit: a write is visible from another connection without COMMIT
        c.execute("CREATE TEMP TABLE IF NOT EXISTS t (x int)")
        assert c.execute("SELECT 1 UNION ALL SELECT 2") == [(1,), (2,)]
    finally:
        c.close()
    c = driver.connect(pg_cs(pg), autocommit=False, where="pg")
    try:
        assert c.raw.autocommit is False
    finally:
        c.close()


@needs_psqlodbc
@pytest.mark.untimed("a timeout's or a sleep's own length bounds it, with seconds of slack")
def test_query_timeout_cancels(pg):
    c = driver.connect(pg_cs(pg), autocommit=True, query_timeout=0.5, where="pg")
    try:
        t0 = time.monotonic()
        with pytest.raises(driver.QueryTimeoutError) as e:
            c.execute("SELECT pg_sleep(5)")
        took = time.monotonic() - t0
        assert 0.4 < took < 2.5, took
        assert "query timeout of 0.5 s" in str(e.value)
        # the connection is still usable, and a per-call timeout overrides the default
        assert c.scalar("SELECT 1") == 1
        assert c.scalar("SELECT 1 FROM pg_sleep(0.7)", timeout=5) == 1
        with pytest.raises(driver.QueryTimeoutError):
            c.execute("SELECT pg_sleep(3)", timeout=0.3)
    finally:
        c.close()


@needs_psqlodbc
def test_login_failure_is_clean(pg):
    with pytest.raises(driver.LoginError) as e:
        driver.connect(pg_cs(pg, user="nobody"), autocommit=True, where="pg (127.0.0.1)",
                       user="nobody", password_env="PGPW")
    msg = str(e.value)
    assert msg.startswith("pg (127.0.0.1): login as nobody failed:")
    assert 'role "nobody" does not exist' in msg and "$PGPW" in msg
    assert "[unixODBC]" not in msg and "SQLDriverConnect" not in msg


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@needs_psqlodbc
@pytest.mark.untimed("a timeout's or a sleep's own length bounds it, with seconds of slack")
def test_unreachable_host_is_clean(pg):
    port = closed_port()
    t0 = time.monotonic()
    with pytest.raises(driver.UnreachableError) as e:
        driver.connect(pg_cs(pg, port=port), autocommit=True, login_timeout=3,
                       where=f"pg (127.0.0.1:{port})")
    assert time.monotonic() - t0 < 5
    assert str(e.value).startswith(f"pg (127.0.0.1:{port}): cannot reach the server")
    assert "Connection refused" in str(e.value)


def test_missing_driver_is_clean():
    with pytest.raises(driver.DriverNotFoundError) as e:
        driver.connect("Driver={No Such Driver 99};Server=127.0.0.1;", autocommit=True, where="x")
    msg = str(e.value)
    assert "'No Such Driver 99' is not installed" in msg
    for name in pyodbc.drivers():
        assert repr(name) in msg


@needs_psqlodbc
@pytest.mark.timing   # an overlap timed by the clock
def test_calls_overlap_in_threads(pg):
    n = 4
    conns = [driver.connect(pg_cs(pg), autocommit=True, where=f"pg{i}") for i in range(n)]
    try:
        # threads (as the load generator's offload pool) calling connections opened on this
        # (another) thread: pyodbc releases the GIL while the driver waits
        t0 = time.monotonic()
        with ThreadPoolExecutor(n) as pool:
            list(pool.map(lambda c: c.execute("SELECT pg_sleep(0.5)"), conns))
        took = time.monotonic() - t0
        assert took < 0.5 * n * 0.6, f"{n} x pg_sleep(0.5) took {took:.2f}s: calls did not overlap"
    finally:
        for c in conns:
            c.close()


@needs_psqlodbc
@pytest.mark.untimed("a timeout's or a sleep's own length bounds it, with seconds of slack")
def test_one_call_at_a_time_per_connection(pg):
    c = driver.connect(pg_cs(pg), autocommit=True, where="pg")
    try:
        t0 = time.monotonic()
        threads = [threading.Thread(target=c.execute, args=("SELECT pg_sleep(0.3)",)) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert time.monotonic() - t0 >= 0.55  # serialised by the connection's lock
    finally:
        c.close()


@needs_psqlodbc
def test_query_error_and_later_result_sets(pg):
    c = driver.connect(pg_cs(pg), autocommit=True, where="pg")
    try:
        with pytest.raises(driver.QueryError) as e:
            c.execute("SELECT 1/0")
        assert e.value.sqlstate == "22012" and "division by zero" in str(e.value)
        assert c.scalar("SELECT 7") == 7
        assert c.execute("SELECT ?::bytea", (b"\x00\xff",)) == [(b"\x00\xff",)]
        with pytest.raises(driver.OdbcError):
            c.execute("SELECT 1; SELECT 1/0")
    finally:
        c.close()
    assert len(driver._WATCHDOG) == 0


def test_closed_connection():
    class Raw:
        autocommit = True

        def close(self):
            pass

    c = driver.Connection(Raw(), where="x", query_timeout=1, autocommit=True)
    c.close()
    with pytest.raises(driver.QueryError, match="closed"):
        c.execute("SELECT 1")


def test_watchdog_runs_callbacks():
    fired = threading.Event()
    wd = driver._Watchdog()
    tok = wd.schedule(0.05, fired.set)
    never = threading.Event()
    tok2 = wd.schedule(0.05, never.set)
    wd.cancel(tok2)
    assert fired.wait(2)
    time.sleep(0.1)
    assert not never.is_set() and len(wd) == 0
    assert tok != tok2


# --------------------------------------------------------------------------- issue 15, item 6

def test_encrypt_values_per_driver_version():
    """ODBC Driver 17 takes Encrypt=yes/no; Mandatory/Optional/Strict exist from 18 on."""
    for name, enc, want in [("ODBC Driver 17 for SQL Server", "mandatory", "Encrypt=yes;"),
                            ("ODBC Driver 17 for SQL Server", "optional", "Encrypt=no;"),
                            ("ODBC Driver 13 for SQL Server", "mandatory", "Encrypt=yes;"),
                            ("ODBC Driver 18 for SQL Server", "mandatory", "Encrypt=Mandatory;"),
                            ("ODBC Driver 18 for SQL Server", "optional", "Encrypt=Optional;"),
                            ("ODBC Driver 18 for SQL Server", "strict", "Encrypt=Strict;"),
                            ("My SQL Server DSN driver", "optional", "Encrypt=Optional;")]:
        spec = driver.spec_for(inst(), DriverConfig(name=name, encrypt=enc))
        assert want in spec.connection_string("pw"), (name, enc)
    spec = driver.spec_for(inst(), DriverConfig(name="ODBC Driver 17 for SQL Server", encrypt="strict"))
    with pytest.raises(UserError, match="Strict needs ODBC Driver 18"):
        spec.connection_string("pw")


def test_encrypt_strict_with_driver_17_refused_at_load(tmp_path):
    from harness.targets.mssql.topology import load_topology

    p = tmp_path / "t.yaml"
    p.write_text("layout: single\n"
                 "driver: {kind: msodbc, name: ODBC Driver 17 for SQL Server, encrypt: strict}\n"
                 "auth: {kind: sql, user: sa, password_env: PW}\n"
                 "instances:\n  t: {host: h, database: a}\n  i: {host: h, database: b}\n"
                 "target: t\ninitiators: [i]\n")
    with pytest.raises(UserError) as e:
        load_topology(p)
    assert e.value.line == 2 and e.value.field == "driver.encrypt"
    assert "Encrypt=yes" in str(e.value)


def test_login_and_certificate_patterns_only_when_connecting():
    """A statement's error that mentions a login or a certificate is a query error."""
    for state, msg in [
        ("42000", "[42000] [Microsoft][ODBC Driver 18 for SQL Server][SQL Server]Login failed for "
                  "user 'ssbench_peer_init1'. (18456) (SQLExecDirectW)"),
        ("42000", "[42000] [Microsoft][ODBC Driver 18 for SQL Server][SQL Server]Cannot find the "
                  "certificate 'ssbench_dialog_init1', because it does not exist or you do not have "
                  "permission. (15151) (SQLExecDirectW)"),
        ("28000", "[28000] [FreeTDS][SQL Server]The certificate name is wrong (1) (SQLExecDirectW)"),
    ]:
        e = driver.map_error(fake(state, msg), phase="query", where="t")
        assert type(e) is driver.QueryError, msg
        assert str(e).startswith("t: ") and "[SQLSTATE" in str(e)
    e = driver.map_error(fake("28000", "[28000] [Microsoft][ODBC Driver 18 for SQL Server][SQL Server]"
                                       "Login failed for user 'x'. (18456) (SQLDriverConnect)"),
                         phase="connect", where="t")
    assert isinstance(e, driver.LoginError)


def test_freetds_refuses_a_password_with_a_brace(monkeypatch):
    """FreeTDS 1.3 ends a braced value at the first '};' and keeps '}}': refuse, never echo."""
    spec = driver.spec_for(inst(), DriverConfig(kind="freetds", name="FreeTDS"))
    for pw in ("pa}ss", "end}", "a};b", "}}"):
        monkeypatch.setenv("SSBENCH_TEST_PW", pw)
        with pytest.raises(UserError) as e:
            spec.connect()
        msg = str(e.value)
        assert "contains '}'" in msg and "$SSBENCH_TEST_PW" in msg and "driver.kind: msodbc" in msg
        assert pw not in msg.replace("'}'", "").replace("'}}'", "").replace("'};'", "")
    # other characters are braced as usual
    assert "PWD={p;a=s{s};" in spec.connection_string("p;a=s{s")
    # Microsoft's driver doubles '}' inside braces, as ODBC specifies
    ms = driver.spec_for(inst(), DriverConfig())
    assert ms.connection_string("a};b").endswith("PWD={a}};b};")


@pytest.mark.untimed("a timeout's or a sleep's own length bounds it, with seconds of slack")
def test_connection_level_timeout_is_never_set():
    """pyodbc's Connection.timeout is SQL_ATTR_CONNECTION_TIMEOUT plus a value for cursors
    created later: ssbench never sets it; the watchdog enforces each call's timeout."""

    class Cursor:
        def __init__(self):
            self.description = None
            self.cancelled = threading.Event()

        def execute(self, sql, *params):
            if sql == "sleep":
                if not self.cancelled.wait(5):
                    raise AssertionError("not cancelled")
                raise pyodbc.OperationalError("HY008", "[HY008] Operation canceled (0) (SQLExecDirectW)")

        def nextset(self):
            return False

        def cancel(self):
            self.cancelled.set()

        def close(self):
            pass

    class Raw:
        autocommit = True

        def __setattr__(self, name, value):
            raise AssertionError(f"Connection.{name} set")

        def cursor(self):
            return Cursor()

        def close(self):
            pass

    c = driver.Connection(Raw(), where="x", query_timeout=30, autocommit=True)
    assert c.execute("quick", timeout=30) == []          # the cursor exists now
    t0 = time.monotonic()
    with pytest.raises(driver.QueryTimeoutError, match="0.2 s"):
        c.execute("sleep", timeout=0.2)
    assert time.monotonic() - t0 < 2


@needs_psqlodbc
@pytest.mark.untimed("a timeout's or a sleep's own length bounds it, with seconds of slack")
def test_per_call_timeout_on_a_reused_cursor(pg):
    """The first call creates the connection's cursor with a long timeout; a later call's
    shorter timeout still cancels it, and a longer one still lets it finish."""
    c = driver.connect(pg_cs(pg), autocommit=True, query_timeout=30, where="pg")
    try:
        assert c.scalar("SELECT 1", timeout=30) == 1
        t0 = time.monotonic()
        with pytest.raises(driver.QueryTimeoutError, match="0.4 s"):
            c.execute("SELECT pg_sleep(5)", timeout=0.4)
        assert time.monotonic() - t0 < 2.5
        assert c.scalar("SELECT 2 FROM pg_sleep(0.6)", timeout=5) == 2
        t0 = time.monotonic()
        with pytest.raises(driver.QueryTimeoutError):
            c.execute("SELECT pg_sleep(5)", timeout=0.3)
        assert time.monotonic() - t0 < 2.5
        assert c.scalar("SELECT 3") == 3
    finally:
        c.close()


# --------------------------------------------------------------------------- issue 31, item 2

@needs_psqlodbc
def test_a_cancelled_transaction_is_rolled_back_with_its_connection(pg):
    """A call cancelled by its query timeout inside a transaction it opened (on SQL Server the
    attention leaves it open; psqlODBC happens to clean up itself, ssbench does not rely on a
    driver doing so): the connection is discarded, the server rolls the transaction back, and
    the next call runs on a new connection with the same autocommit. (The SQL Server side of
    this, a later call nesting in the open transaction, is modelled in the recording fake:
    test_mssql_accounting.py.)"""
    table = f"t_cancel_{uuid.uuid4().hex[:8]}"
    admin = driver.connect(pg_cs(pg), autocommit=True, where="pg admin")
    admin.execute(f"CREATE TABLE {table} (n int)")
    c = driver.connect(pg_cs(pg), autocommit=True, query_timeout=30, where="pg")
    first = c.raw
    try:
        with pytest.raises(driver.QueryTimeoutError):
            c.execute(f"BEGIN; INSERT INTO {table} VALUES (1); SELECT pg_sleep(5);", timeout=0.3)
        assert c.scalar("SELECT 2") == 2
        assert c.raw is not first and c.raw.autocommit     # a new connection, autocommit as asked
        c.execute(f"INSERT INTO {table} VALUES (3)")
        assert admin.execute(f"SELECT n FROM {table} ORDER BY n") == [(3,)]
    finally:
        c.close()
        admin.execute(f"DROP TABLE {table}")
        admin.close()
