"""pyodbc plumbing: connection strings, autocommit, per-call timeouts, clean errors.

:func:`connect`, :class:`Connection` and :func:`map_error` work with any ODBC driver; a
:class:`ConnSpec` (never a password: it names its environment variable) builds strings for ODBC
Driver 18 and FreeTDS. A watchdog thread cancels an overrunning call, whose connection is then
discarded: an attention does not roll back its transaction (docs/sqlserver.md, "Transactions,
cancels and XACT_ABORT"). pyodbc is imported lazily, so ssbench runs without unixODBC.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import os
import re
import time
from dataclasses import dataclass, fields
from typing import Any, Callable, Sequence

from ...errors import TargetError, UserError
from .topology import msodbc_major, server_address

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- errors

class OdbcError(TargetError):
    """A database call failed. ``sqlstate`` and ``native`` come from the driver's diagnostics."""

    def __init__(self, message: str, *, sqlstate: str = "", native: int | None = None):
        super().__init__(message)
        self.sqlstate = sqlstate
        self.native = native


class DriverNotFoundError(OdbcError):
    """unixODBC has no driver of that name."""


class LoginError(OdbcError):
    """The server refused the login (wrong user or password, no access to the database)."""


class UnreachableError(OdbcError):
    """No server answered (wrong host or port, firewall, server down, login timeout)."""


class CertificateError(OdbcError):
    """TLS: the server's certificate was not trusted (ODBC Driver 18 encrypts by default)."""


class QueryTimeoutError(OdbcError):
    """A call overran its query timeout and was cancelled."""


class QueryError(OdbcError):
    """The server raised an error for a statement."""


class ConnectError(OdbcError):
    """Connecting failed for another reason."""


_PREFIX_RE = re.compile(r"^(?:\s*\[[^\]]*\])+\s*")
_TRAILER_RE = re.compile(r"\s*\((-?\d+)\)\s*\((SQL\w+)\)\s*$")


def _diag(exc: BaseException) -> tuple[str, str, int | None]:
    """(sqlstate, cleaned message, native error) from a pyodbc exception."""
    args = getattr(exc, "args", ())
    if len(args) >= 2 and isinstance(args[0], str) and isinstance(args[1], str):
        state, msg = args[0], args[1]
    else:
        state, msg = "", str(exc)
    native = None
    parts = []
    for piece in re.split(r";\s*(?=\[)", msg):
        m = _TRAILER_RE.search(piece)
        if m:
            if native is None:
                native = int(m.group(1))
            piece = piece[:m.start()]
        piece = _PREFIX_RE.sub("", piece).strip()
        piece = piece.replace("\n", " ").replace("\t", " ")
        piece = re.sub(r"\s{2,}", " ", piece)
        if piece and piece not in parts:
            parts.append(piece)
    return state, "; ".join(parts) or msg.strip(), native


def _scrub(text: str, secret: str | None) -> str:
    return text.replace(secret, "***") if secret else text


_CERT_PATTERNS = ("certificate verify failed", "ssl provider", "certificate chain",
                  "self-signed certificate", "self signed certificate", "ssl routines",
                  "certificate is not trusted", "unable to get local issuer", "hostname mismatch",
                  "certificate name", "tls handshake")
_LOGIN_PATTERNS = ("login failed", "password authentication failed", "login incorrect",
                   "authentication failed", "no pg_hba.conf entry", "cannot open database",
                   "not able to access the database")
_UNREACHABLE_PATTERNS = ("connection refused", "tcp provider", "unable to connect",
                         "login timeout expired", "could not connect", "server was not found",
                         "name or service not known", "could not translate host name",
                         "network-related", "no route to host", "connection timed out",
                         "adaptive server is unavailable", "server is not found",
                         "temporary failure in name resolution", "is the server running")


def map_error(exc: BaseException, *, phase: str, where: str, driver_name: str | None = None,
              user: str | None = None, password_env: str | None = None, timed_out: bool = False,
              timeout: float | None = None, secret: str | None = None) -> OdbcError:
    """Turn a pyodbc exception into an :class:`OdbcError` with one readable message.

    ``phase`` is ``"connect"`` or ``"query"``; ``where`` names the server/database for the
    message; ``timed_out`` says the watchdog cancelled the call."""
    state, msg, native = _diag(exc)
    msg = _scrub(msg, secret)
    low = msg.lower()
    kw = dict(sqlstate=state, native=native)

    if timed_out or (phase == "query" and (state in ("HYT00", "HYT01") or "query timeout expired" in low)):
        t = f" of {timeout:g} s" if timeout else ""
        return QueryTimeoutError(f"{where}: the call exceeded its query timeout{t} and was "
                                 f"cancelled ({msg})", **kw)
    if phase == "connect" and (state == "IM002" or "can't open lib" in low
                               or "data source name not found" in low
                               or "driver not found" in low or "file not found" in low):
        available = ", ".join(repr(d) for d in drivers()) or "none"
        name = f"{driver_name!r}" if driver_name else "the requested driver"
        return DriverNotFoundError(
            f"ODBC driver {name} is not installed for unixODBC (installed drivers: {available}). "
            "Install Microsoft's 'ODBC Driver 18 for SQL Server' (package msodbcsql18) or FreeTDS "
            "(apt-get install tdsodbc), or set driver.name in the topology to one of the installed "
            f"drivers ({msg})", **kw)
    if phase == "connect" and any(p in low for p in _CERT_PATTERNS):
        return CertificateError(
            f"{where}: the server's TLS certificate is not trusted ({msg}). ODBC Driver 18 "
            "encrypts and validates by default: install the server's CA on this machine, or set "
            "driver.host_name_in_certificate when the certificate names another host, or (lab "
            "servers with self-signed certificates only) set driver.trust_server_certificate: "
            "true, or SSBENCH_MSSQL_TRUST_CERT=1 for the integration tests", **kw)
    if phase == "connect" and (state == "28000" or native == 18456
                               or any(p in low for p in _LOGIN_PATTERNS)
                               or ("does not exist" in low and ("role" in low or "database" in low))):
        who = f" as {user}" if user else ""
        hint = (f" Check the login and the password in ${password_env}." if password_env
                else " Check the login's permissions.")
        return LoginError(f"{where}: login{who} failed: {msg}.{hint}", **kw)
    if phase == "connect" and (state in ("08001", "08S01", "HYT00", "HYT01")
                               or any(p in low for p in _UNREACHABLE_PATTERNS)):
        return UnreachableError(f"{where}: cannot reach the server ({msg}). Check the host and the "
                                "port, that the server listens on TCP and that no firewall is in "
                                "the way", **kw)
    if phase == "connect":
        return ConnectError(f"{where}: cannot connect: {msg} [SQLSTATE {state}]", **kw)
    return QueryError(f"{where}: {msg} [SQLSTATE {state}{', error ' + str(native) if native else ''}]",
                      **kw)


# --------------------------------------------------------------------------- pyodbc

_pyodbc = None


class PyodbcUnavailable(UserError):
    """pyodbc cannot be imported: a package is missing on this machine (exit code 2)."""


def pyodbc_module():
    """Import pyodbc on first use; raise :class:`PyodbcUnavailable` naming what to install."""
    global _pyodbc
    if _pyodbc is None:
        try:
            import pyodbc  # noqa: PLC0415
        except ModuleNotFoundError as e:
            raise PyodbcUnavailable(
                f"pyodbc cannot be imported ({e}): the SQL Server target needs pyodbc "
                "(pip install pyodbc) and unixODBC (apt-get install unixodbc)") from None
        except ImportError as e:
            # the wheel is there but its driver manager is not: libodbc.so.2 missing
            raise PyodbcUnavailable(
                f"pyodbc cannot be imported ({e}): the SQL Server target needs unixODBC's "
                "driver manager: apt-get install unixodbc") from None
        pyodbc.pooling = False  # one real connection per Connection; no hidden sharing
        _pyodbc = pyodbc
    return _pyodbc


def drivers() -> list[str]:
    """ODBC drivers unixODBC knows (``pyodbc.drivers()``); empty if pyodbc is unusable."""
    try:
        return list(pyodbc_module().drivers())
    except Exception:  # noqa: BLE001 - only used in messages
        return []


# --------------------------------------------------------------------------- watchdog

# Native locks and threads (harness.os_threads): SENDs run on real OS threads in a Locust worker, and
# a gevent lock or condition used from such a thread is a cross-thread wait (pyodbc through
# psqlODBC, 4 users, null statement, one noisy 1 s window each: 389 SENDs/s before, 4,086 after).
from ...os_threads import allocate_lock as _allocate_lock, start_new_thread as _start_new_thread  # noqa: E402


class _Watchdog:
    """One OS thread running deadline callbacks (query timeouts) for the process.

    Native locks only (:mod:`harness.os_threads`). The thread is woken only when a new deadline comes
    before its own wake-up: with one query timeout for every call (the SEND path) that is
    almost never, so a call costs a lock and a heap push, no cross-thread wake-up. Cancelled
    entries are dropped lazily; the heap is rebuilt when they pile up, so its size stays
    proportional to the calls actually in flight."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int]] = []
        self._pending: dict[int, Callable[[], None]] = {}
        self._mutex = _allocate_lock()
        self._wakeup = _allocate_lock()      # released to wake the thread
        self._wakeup.acquire()
        self._seq = itertools.count()
        self._started = False
        self._wake_at = float("-inf")        # when the thread wakes next (under the mutex)

    def schedule(self, delay: float, callback: Callable[[], None]) -> int:
        with self._mutex:
            if not self._started:
                self._started = True
                _start_new_thread(self._run, ())
            token = next(self._seq)
            self._pending[token] = callback
            deadline = time.monotonic() + delay
            heapq.heappush(self._heap, (deadline, token))
            if len(self._heap) > 2 * len(self._pending) + 1024:
                self._heap = [e for e in self._heap if e[1] in self._pending]
                heapq.heapify(self._heap)
            wake = deadline < self._wake_at
        if wake:
            self._wake()
        return token

    def _wake(self) -> None:
        with contextlib.suppress(RuntimeError):   # already released: a wake-up is pending
            self._wakeup.release()

    def cancel(self, token: int) -> None:
        with self._mutex:
            self._pending.pop(token, None)

    def __len__(self) -> int:
        with self._mutex:
            return len(self._pending)

    def _run(self) -> None:
        while True:
            cb = None
            with self._mutex:
                while self._heap and self._heap[0][1] not in self._pending:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._wake_at, wait = float("inf"), -1.0
                else:
                    wait = self._heap[0][0] - time.monotonic()
                    if wait <= 0:
                        _, token = heapq.heappop(self._heap)
                        cb = self._pending.pop(token)
                        self._wake_at = float("-inf")   # running a callback: it re-reads the heap
                    else:
                        self._wake_at = self._heap[0][0]
            if cb is None:
                self._wakeup.acquire(True, wait)      # until the deadline, or woken
                continue
            try:
                cb()
            except Exception:  # noqa: BLE001 - a failed cancel must not kill the watchdog
                log.debug("watchdog callback failed", exc_info=True)


_WATCHDOG = _Watchdog()


# --------------------------------------------------------------------------- connections

class Connection:
    """One pyodbc connection: one call at a time (a lock), usable from any thread, with a
    query timeout on every call and errors mapped to :class:`OdbcError`."""

    def __init__(self, raw: Any, *, where: str, query_timeout: float | None, autocommit: bool,
                 reopen: Callable[[], Any] | None = None):
        self._raw = raw
        self._reopen = reopen             # a new raw connection, after a cancel discarded one
        self.where = where
        self.query_timeout = query_timeout
        self.autocommit = autocommit
        self._lock = _allocate_lock()     # native (harness.os_threads): callers are OS threads
        self._guard = _allocate_lock()    # a call's end vs its timeout's cancel
        self._cursor: Any = None
        self._closed = False

    @property
    def raw(self) -> Any:
        return self._raw

    # ------------------------------------------------------------------ calls
    def call(self, fn: Callable[[Any], Any], *, timeout: float | None = ...,  # type: ignore[assignment]
             what: str = "") -> Any:
        """Run ``fn(cursor)`` under the lock with the query timeout; map errors."""
        if self._closed:
            raise QueryError(f"{self.where}: connection is closed")
        t = self.query_timeout if timeout is ... else timeout
        with self._lock:
            if self._raw is None:
                self._raw = self._reopen()   # errors are OdbcErrors already (connect)
            # One cursor for the connection's life: pyodbc keeps the last prepared statement
            # on it, so a repeated parameterised call (the send path) is not re-prepared.
            if self._cursor is None:
                self._cursor = self._raw.cursor()
            cursor = self._cursor
            state = [False, False]     # this call is done; its timeout fired
            guard = self._guard
            token = None
            if t:
                def on_timeout(c=cursor) -> None:
                    with guard:          # never cancel the next call on this cursor
                        if state[0]:
                            return
                        state[1] = True
                        c.cancel()
                token = _WATCHDOG.schedule(t, on_timeout)
            try:
                return fn(cursor)
            except Exception as e:  # noqa: BLE001
                self._cursor = None          # a failed or cancelled cursor is not reused
                with contextlib.suppress(Exception):
                    cursor.close()
                if state[1]:
                    self._discard()          # cancelled: roll back whatever it left open
                pyodbc = pyodbc_module()
                if isinstance(e, pyodbc.Error):
                    where = f"{self.where}{' (' + what + ')' if what else ''}"
                    raise map_error(e, phase="query", where=where, timed_out=state[1],
                                    timeout=t) from None
                raise
            finally:
                if token is not None:
                    with guard:
                        state[0] = True
                    _WATCHDOG.cancel(token)

    def _discard(self) -> None:
        """Close the raw connection after a cancel (the server rolls back a transaction the
        cancelled call left open); the next call opens a new one."""
        raw, self._raw = self._raw, None
        with contextlib.suppress(Exception):
            raw.close()
        if self._reopen is None:
            self._closed = True
        log.info("%s: connection closed after a cancelled call (rolls back what it left open)", self.where)

    def execute(self, sql: str, params: Sequence[Any] = (), *, timeout: float | None = ...,  # type: ignore[assignment]
                what: str = "") -> list[tuple]:
        """Execute one batch; return the rows of its first result set ([] if none). Every
        further result set is read too, so errors raised after the first one surface."""

        def run(cur):
            cur.execute(sql, *params) if params else cur.execute(sql)
            return _drain(cur)

        return self.call(run, timeout=timeout, what=what)

    def scalar(self, sql: str, params: Sequence[Any] = (), **kw) -> Any:
        rows = self.execute(sql, params, **kw)
        return rows[0][0] if rows else None

    def run_batches(self, batches: Sequence[str], *, timeout: float | None = ..., what: str = "") -> None:  # type: ignore[assignment]
        for b in batches:
            self.execute(b, timeout=timeout, what=what)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._lock:
            for obj in (self._cursor, self._raw):
                with contextlib.suppress(Exception):
                    if obj is not None:
                        obj.close()
            self._cursor = None


def _drain(cur) -> list[tuple]:
    first: list[tuple] | None = None
    while True:
        if cur.description is not None:
            rows = [tuple(r) for r in cur.fetchall()]
            if first is None:
                first = rows
        if not cur.nextset():
            break
    return first or []


def connect(conn_str: str, *, autocommit: bool, login_timeout: float | None = 15,
            query_timeout: float | None = 30, where: str = "database",
            driver_name: str | None = None, user: str | None = None,
            password_env: str | None = None, secret: str | None = None) -> Connection:
    """Open a connection with ``autocommit`` set explicitly; errors become :class:`OdbcError`."""
    pyodbc = pyodbc_module()
    if driver_name is None:
        m = re.search(r"(?i)\bdriver=\{([^}]*)\}", conn_str)
        driver_name = m.group(1) if m else None

    def open_raw() -> Any:
        raw = pyodbc.connect(conn_str, autocommit=bool(autocommit), timeout=int(login_timeout or 0))
        if raw.autocommit != bool(autocommit):
            raw.autocommit = bool(autocommit)
        if raw.autocommit != bool(autocommit):  # pragma: no cover - a driver ignoring the attribute
            raw.close()
            raise ConnectError(f"{where}: the driver did not accept autocommit={autocommit}")
        return raw

    def opened() -> Any:
        try:
            return open_raw()
        except pyodbc.Error as e:
            raise map_error(e, phase="connect", where=where, driver_name=driver_name, user=user,
                            password_env=password_env, secret=secret) from None

    return Connection(opened(), where=where, query_timeout=query_timeout, autocommit=bool(autocommit),
                      reopen=opened)


# --------------------------------------------------------------------------- SQL Server specs

def odbc_value(value: str) -> str:
    """Quote a connection-string value: ``{...}`` with ``}`` doubled when it needs it."""
    if "\0" in value:
        raise UserError("connection-string values cannot contain NUL")
    if value == "" or any(c in value for c in ";{}=") or value != value.strip():
        return "{" + value.replace("}", "}}") + "}"
    return value


@dataclass(frozen=True)
class ConnSpec:
    """How to reach one SQL Server database: JSON-able, no password (only the name of the
    environment variable that holds it)."""

    flavor: str                       # msodbc | freetds
    driver: str                       # unixODBC driver name
    host: str
    port: int
    database: str
    auth: str = "sql"                 # sql | integrated
    user: str | None = None
    password_env: str | None = None
    encrypt: str = "mandatory"        # msodbc
    trust_server_certificate: bool = False
    host_name_in_certificate: str | None = None
    tds_version: str = "7.4"          # freetds
    encryption: str | None = None     # freetds
    login_timeout: float = 15.0
    query_timeout: float = 60.0
    app: str = "ssbench"
    label: str = ""
    instance: str = ""                # a named instance: found through SQL Browser when port is 0

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ConnSpec":
        unknown = set(d) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"unknown connection spec keys: {sorted(unknown)}")
        return cls(**d)

    @property
    def server(self) -> str:
        return server_address(self.host, self.instance, self.port)

    @property
    def where(self) -> str:
        return f"{self.label + ' ' if self.label else ''}({self.server}, database {self.database})"

    def password(self) -> str | None:
        if self.auth != "sql":
            return None
        if not self.password_env:
            raise UserError(f"{self.where}: SQL authentication needs password_env")
        value = os.environ.get(self.password_env)
        if value is None:
            raise UserError(f"{self.where}: environment variable {self.password_env} is not set "
                            f"(it holds the password of login {self.user})")
        return value

    def encrypt_value(self) -> str:
        """``Encrypt=``: Mandatory / Optional / Strict for ODBC Driver 18 and later; ODBC Driver
        17 and older take yes / no (Strict does not exist there)."""
        major = msodbc_major(self.driver)
        if major is not None and major < 18:
            if self.encrypt == "strict":
                raise UserError(f"{self.where}: Encrypt=Strict needs ODBC Driver 18 or later "
                                f"({self.driver} is installed as the driver)")
            return "yes" if self.encrypt == "mandatory" else "no"
        return self.encrypt.capitalize()

    def connection_string(self, password: str | None) -> str:
        parts = [f"Driver={{{self.driver.replace('}', '}}')}}}"]
        if self.flavor == "freetds":    # Server=host\INSTANCE names an instance (FreeTDS's attributes)
            parts += [f"Server={odbc_value(self.server.split(',')[0] if self.instance else self.host)}",
                      *([f"Port={self.port}"] if self.port else []),
                      f"Database={odbc_value(self.database)}", f"TDS_Version={self.tds_version}", "ClientCharset=UTF-8"]
            if self.encryption:
                parts.append(f"Encryption={self.encryption}")
            if password and "}" in password:
                raise UserError(
                    f"{self.where}: the password in ${self.password_env} contains '}}', which "
                    "FreeTDS cannot take in a connection string (1.3 ends a braced value at the "
                    "first '};' and keeps '}}' doubled, 1.4 undoubles it): choose a password "
                    "without '}', or use driver.kind: msodbc")
        else:
            parts += [f"Server={odbc_value('tcp:' + self.server.replace(':', ',', 1))}",
                      f"Database={odbc_value(self.database)}",
                      f"Encrypt={self.encrypt_value()}",
                      f"TrustServerCertificate={'Yes' if self.trust_server_certificate else 'No'}"]
            if self.host_name_in_certificate:
                parts.append(f"HostNameInCertificate={odbc_value(self.host_name_in_certificate)}")
        parts.append(f"APP={odbc_value(self.app)}")   # both drivers: session_waits finds the senders by it
        if self.auth == "integrated":
            parts.append("Trusted_Connection=Yes")
        else:
            parts.append(f"UID={odbc_value(self.user or '')}")
            parts.append("PWD={" + (password or "").replace("}", "}}") + "}")
        return ";".join(parts) + ";"

    def connect(self, *, autocommit: bool = True, query_timeout: float | None = ...) -> Connection:  # type: ignore[assignment]
        password = self.password()
        return connect(self.connection_string(password), autocommit=autocommit,
                       login_timeout=self.login_timeout,
                       query_timeout=self.query_timeout if query_timeout is ... else query_timeout,
                       where=self.where, driver_name=self.driver, user=self.user,
                       password_env=self.password_env, secret=password or None)


SENDER_APP = "ssbench-sender"   #: the load's program_name (APP=): session_waits tells its waits apart


def spec_for(instance, driver_cfg, *, sender: bool = False, database: str | None = None,
             label: str | None = None) -> ConnSpec:
    """A :class:`ConnSpec` for a topology instance (admin login, or the sender login)."""
    auth = instance.sender_auth if sender else instance.auth
    return ConnSpec(
        flavor=driver_cfg.kind, driver=driver_cfg.name, host=instance.host, port=instance.port,
        instance=instance.instance_name,
        database=database or instance.database, auth=auth.kind, user=auth.user,
        password_env=auth.password_env, encrypt=driver_cfg.encrypt,
        trust_server_certificate=driver_cfg.trust_server_certificate,
        host_name_in_certificate=driver_cfg.host_name_in_certificate,
        tds_version=driver_cfg.tds_version, encryption=driver_cfg.encryption,
        login_timeout=driver_cfg.login_timeout_seconds, query_timeout=driver_cfg.query_timeout_seconds,
        app=SENDER_APP if sender else ConnSpec.app, label=label or instance.name)
