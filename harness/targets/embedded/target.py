"""The embedded target: a PostgreSQL emulation of Service Broker's send / transmit / receive path.

A target database and one database per initiator on the private server (:mod:`.server`),
loaded from ``workloads/embedded/``; the broker process (:mod:`.broker`) moves messages and runs
activation. This class is the lifecycle; :mod:`.provisioning`, :mod:`.telemetry` and
:mod:`.supervisor` hold the rest. Its numbers are PostgreSQL's, and every report says so
(:attr:`label`; docs/embedded.md).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from ...errors import TargetError, UserError, full_disk
from ...matrix import BrokerSettings
from ...results.lock import HeldLock
from ..base import Capabilities, Target, TargetConfig, wait_until
from . import server as server_mod, waits
from .server import connection_budget
from ._db import QUEUE, connect, database_names
from .profiles import EMBEDDED_PROFILES
from .provisioning import MAX_INITIATORS, Provisioning, sql_file
from .server import EmbeddedServer, ServerInfo
from .supervisor import BrokerSupervisor
from .telemetry import READERS_RUNNING, EmbeddedTelemetry
from ... import environment

log = logging.getLogger(__name__)

SEND_DELAY_ENV = "SSBENCH_EMBEDDED_SEND_DELAY_MS"
#: diagnostic: the broker's lock sampler period in ms (lock_sampler.py); unset or 0: off
LOCK_SAMPLE_ENV = "SSBENCH_EMBEDDED_LOCK_SAMPLE_MS"
SEND_DELAY_SETTING = ("ssbench", "send_delay_ms")
RESET_LOCK_TIMEOUT = "5s"
#: WAL segments (16 MB each) kept ahead of a measured window (settle(); server.SETTINGS keeps
#: min_wal_size above this, so a checkpoint recycles them instead of removing them)
WAL_RESERVE_SEGMENTS = 16
#: the emulation's tables settle() vacuums: (initiator, target)
SETTLE_TABLES = {False: ("ssb.sysdesend", "ssb.sysxmitqueue", "ssb.dialogs", "ssb.initiator_queue"),
                 True: ("ssb.sysdercv", "ssb.conversation_groups", "ssb.service_queue", "ssb.sysxmitqueue",
                        "ssb.message_drop", "ssb.receive_tally")}


class EmbeddedTarget(Provisioning, EmbeddedTelemetry, Target):
    """Service Broker emulated on the embedded PostgreSQL server.

    ``server``: an :class:`EmbeddedServer`, or its data directory, or None for the default one
    ($SSBENCH_PGDATA or the cache). The server is started (or reused) on construction.
    ``prefix``: database name prefix (``ssb`` -> ``ssb_target``, ``ssb_init1`` ...).
    """

    kind = "embedded"
    capabilities = Capabilities(backlog=True, dialog_lifetime=True, profile_aliases=True, emulation="PostgreSQL",
                                alternate=True,
                                transport_rate_limit=True, client_cpu_per_send=True)

    def __init__(self, server: EmbeddedServer | str | Path | None = None, *, prefix: str = "ssb"):
        self.target_db = database_names(prefix, 0)[0]        # the prefix checked first
        if isinstance(server, EmbeddedServer):
            self.server = server
        else:
            self.server = EmbeddedServer(Path(server) if server is not None else None)
        self.prefix = prefix
        self.server.start()
        self.version = self.server.version()
        self.label = f"PostgreSQL {self.version} emulation of Service Broker"
        self._lock = threading.RLock()
        self._conns: dict[str, psycopg.Connection] = {}
        self._initiators = 0          # initiators of the current permutation (prepare)
        self._broker_settings = BrokerSettings()
        self._broker = BrokerSupervisor(self.broker_log, self._broker_is_up, self._reap)
        self._provisioned = self._existing_initiators()
        self._log_pos, self._log_hit = self._log_size(), None
        atexit.register(self._atexit)

    @classmethod
    def read_config(cls, arg: str | None) -> TargetConfig:
        return TargetConfig(name=cls.kind, profiles=tuple(EMBEDDED_PROFILES), capabilities=cls.capabilities,
                            connections=connection_budget())

    @classmethod
    def from_config(cls, config: TargetConfig) -> "EmbeddedTarget":
        return cls()

    # ------------------------------------------------------------------ names and connections
    def initiator_db(self, initiator: int) -> str:
        if not 1 <= int(initiator) <= MAX_INITIATORS:
            raise UserError(f"initiator must be 1..{MAX_INITIATORS}, got {initiator}")
        return f"{self.prefix}_init{int(initiator)}"

    def conninfo(self, dbname: str) -> str:
        """libpq conninfo of one of this target's databases (Unix socket, no password)."""
        return self.info.conninfo(dbname)

    @property
    def info(self) -> ServerInfo:
        info = self.server.info()
        if info is None:
            raise TargetError("the embedded PostgreSQL server is not running (ssbench server start)")
        return info

    def _conn(self, dbname: str) -> psycopg.Connection:
        """A cached autocommit connection (callers hold self._lock)."""
        c = self._conns.get(dbname)
        if c is None or c.closed or c.broken:
            c = connect(self.conninfo(dbname), "ssbench-harness")
            self._conns[dbname] = c
        return c

    def _query(self, dbname: str, query, params=None) -> list[tuple]:
        with self._lock:
            c = self._conn(dbname)
            try:
                return c.execute(query, params).fetchall()
            except psycopg.OperationalError:
                if not (c.closed or c.broken):
                    raise
                # the server restarted or our session was terminated: reconnect, one retry
                self._conns.pop(dbname, None)
                return self._conn(dbname).execute(query, params).fetchall()

    def _one(self, dbname: str, query, params=None):
        rows = self._query(dbname, query, params)
        return rows[0][0] if rows else None

    # ------------------------------------------------------------------ provenance
    def describe(self) -> dict[str, Any]:
        info = self.info
        settings = {}
        with contextlib.suppress(psycopg.Error):
            rows = self._query(self.target_db if self._provisioned else "postgres",
                               "SELECT name, current_setting(name) FROM pg_settings WHERE name = ANY (%s) ORDER BY 1",
                               (sorted(set(server_mod.SETTINGS) | {"fsync", "full_page_writes", "synchronous_commit",
                                                                     "wal_sync_method", "io_method"}),))
            settings = dict(rows)
        return {
            **self.declared(),
            "versions": {"postgresql": self.version, "psycopg": psycopg.__version__,
                         "emulation": {"initiator_sql": sql_file("initiator")[1],
                                       "target_sql": sql_file("target")[1]}},
            "topology": {"server": "embedded", "data_dir": str(info.data_dir), "host": info.host,
                         "port": info.port, "target_database": self.target_db,
                         "initiator_databases": list(self._initiator_dbs(self._provisioned).values()),
                         "queue": QUEUE},
            # the profile and the broker settings (MAX_QUEUE_READERS, RECEIVE TOP, WAITFOR) are
            # per permutation: run.json's matrix section and every summary's permutation say them
            "settings": {"server": settings, "server_conf": dict(server_mod.SETTINGS),
                         "send_delay_ms": environment.get(SEND_DELAY_ENV)},
            "profiles": {k: dict(v) for k, v in EMBEDDED_PROFILES.items()},
            "note": "PostgreSQL numbers from an emulation of Service Broker; not SQL Server measurements",
            "notes": [
                "PostgreSQL emulation: these numbers are PostgreSQL's, not SQL Server's.",
                "Wait types are mapped from PostgreSQL wait events (wait_mapping; docs/embedded.md): "
                "the analogy is loose by nature.",
                "The page-latch contention that the 150 trick relieves on SQL Server does not exist on "
                "PostgreSQL: expect no gain from it here.",
            ],
            "wait_mapping": [{"pg_wait_type": t, "pg_wait_event": e or "*", "wait_type": w}
                             for (t, e), w in waits.MAPPING.items()],
        }

    def profiles(self) -> list[str]:
        return list(EMBEDDED_PROFILES)

    # ------------------------------------------------------------------ lifecycle
    def prepare(self, initiators: int, profile: str, broker: BrokerSettings) -> None:
        """Clean state for a permutation: stop the broker, clear every conversation, message,
        counter and wait sample (SET NEW_BROKER), apply the server profile and the send-delay
        knob per database, and set the queue's activation settings."""
        if profile not in EMBEDDED_PROFILES:
            raise UserError(f"unknown embedded profile {profile!r} (expected {', '.join(EMBEDDED_PROFILES)})")
        if isinstance(initiators, bool) or not isinstance(initiators, int) or initiators < 1:
            raise UserError(f"initiators must be a positive integer, got {initiators!r}")
        if initiators > self._provisioned:
            self.provision(initiators)
        delay = _ms_from_env(SEND_DELAY_ENV, 60_000)
        _ms_from_env(LOCK_SAMPLE_ENV, 60_000)     # a bad value is refused before anything changes
        self.stop()
        self._broker.restarts = 0
        self._log_pos, self._log_hit = self._log_size(), None    # a full disk is this permutation's news
        with self._lock:
            all_dbs = [self.target_db, *self._initiator_dbs(self._provisioned).values()]
            changed = self._apply_db_settings(all_dbs, profile, delay)
            for db in all_dbs:
                self._reset_db(db)
            self.set_queue_options(max_readers=broker.max_queue_readers, receive_top=broker.receive_top,
                                   waitfor_timeout_ms=broker.waitfor_timeout_ms, activation=True, try_catch=True,
                                   monitor_interval_s=float(broker.monitor_interval_seconds), process_delay_ms=0,
                                   processing_us_per_message=broker.processing_us_per_message)
            # settings changed per database reach new sessions only: drop ours of those databases
            for db in changed:
                c = self._conns.pop(db, None)
                if c is not None:
                    c.close()
        self._initiators = initiators
        self._broker_settings = broker

    def _apply_db_settings(self, all_dbs: list[str], profile: str, delay: str | None) -> list[str]:
        """``ALTER DATABASE ... SET`` the profile's settings on every database and the send
        delay on the initiators' (RESET when unset), where a database's stored settings differ
        (a repetition of the same permutation changes none: no catalog write, no reconnection).
        Returns the databases whose settings changed (the caller holds self._lock)."""
        pg = self._conn("postgres")
        stored = {db: dict(item.partition("=")[::2] for item in (config or ())) for db, config in pg.execute(
            "SELECT d.datname, s.setconfig FROM pg_database d LEFT JOIN pg_db_role_setting s "
            "ON s.setdatabase = d.oid AND s.setrole = 0 WHERE d.datname = ANY (%s)", (all_dbs,)).fetchall()}
        changed = []
        for db in all_dbs:
            want: dict[str, str | None] = {name: str(value) for name, value in EMBEDDED_PROFILES[profile].items()}
            if db != self.target_db:
                want[".".join(SEND_DELAY_SETTING)] = delay
            have = stored.get(db, {})
            todo = {name: value for name, value in want.items() if have.get(name) != value}
            for name, value in todo.items():
                ident = sql.Identifier(*name.split("."))
                pg.execute(sql.SQL("ALTER DATABASE {} RESET {}").format(sql.Identifier(db), ident) if value is None
                           else sql.SQL("ALTER DATABASE {} SET {} = {}").format(sql.Identifier(db), ident,
                                                                                 sql.Literal(value)))
            if todo:
                changed.append(db)
        return changed

    def _reset_db(self, db: str) -> None:
        c = self._conn(db)
        c.execute(sql.SQL("SET lock_timeout = {}").format(sql.Literal(RESET_LOCK_TIMEOUT)))
        try:
            c.execute("SELECT ssb.reset()")
        except psycopg.errors.LockNotAvailable:
            n = self._terminate_others(db)
            log.warning("reset of %s waited for locks: terminated %d other session(s)", db, n)
            c.execute("SELECT ssb.reset()")
        finally:
            if not c.broken:
                c.execute("RESET lock_timeout")

    def create_dialogs(self, initiator: int, usable: int, every_n: int) -> int:
        """BEGIN DIALOG ``usable * every_n`` times on ``initiator`` in one set-based call; keep
        every ``every_n``-th handle as usable slots 1..usable."""
        self._require(initiator)
        for name, v in (("usable", usable), ("every_n", every_n)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise UserError(f"{name} must be a positive integer, got {v!r}")
        n = usable * every_n
        return int(self._one(self.initiator_db(initiator), "SELECT ssb.begin_dialogs(%s, %s)", (n, every_n)))

    def warm_up(self, initiator: int, timeout: float = 600.0) -> int:
        """The paper's warm-up on ``initiator``: one short message on every conversation, then
        delivered (so every receive-side endpoint exists) and processed, before returning, so
        the measured window starts clean. Warm-up messages are excluded from :meth:`counts`.
        Delivery and processing here commit without waiting for the WAL flush (not measured)."""
        self._require(initiator)
        db = self.initiator_db(initiator)
        n = int(self._one(db, "SELECT ssb.warm_up()"))
        from .transport import TransportLink

        deadline = time.monotonic() + timeout
        link = TransportLink(initiator, self.conninfo(db), self.conninfo(self.target_db),
                             batch_size=5000, application_name="ssbench-warmup", synchronous_commit="off")
        try:
            while link.forward() > 0:
                if time.monotonic() > deadline:
                    raise TargetError(f"warm-up of initiator {initiator}: delivery did not finish in {timeout:.0f} s")
        finally:
            link.close()
        if self.broker_running():
            # the broker's readers process them; wait until they did
            if not wait_until(lambda: not self._one(self.target_db, "SELECT EXISTS (SELECT 1 FROM ssb.service_queue "
                                                                    "WHERE initiator = %s)", (initiator,)),
                              deadline - time.monotonic(), 0.1):
                raise TargetError(f"warm-up of initiator {initiator}: messages still queued after {timeout:.0f} s")
        else:
            # the activation procedure in-line, on a few connections at once (one per core)
            def work() -> None:
                with connect(self.conninfo(self.target_db), "ssbench-warmup", synchronous_commit="off") as c:
                    c.execute("CALL ssb.activated_task(NULL, 0)")

            workers = max(1, min(4, os.cpu_count() or 1))
            with ThreadPoolExecutor(workers) as pool:
                done = [pool.submit(work) for _ in range(workers)]
            failed = next((e for e in (f.exception() for f in done) if e is not None), None)
            if failed is not None:
                raise TargetError(f"warm-up of initiator {initiator}: processing failed: {failed}")
        return n

    # ------------------------------------------------------------------ steady state
    def settle(self) -> None:
        """A quieter window: with the warm-up processed and the broker not yet
        started, vacuum and analyze the emulation's tables (autovacuum would otherwise do the
        warm-up's dead rows in the window's first seconds, and an emptied queue table can be
        truncated now, while nobody holds it), keep WAL segments in reserve for the window
        (recycled, not created and zero-filled in it) and checkpoint (the warm-up's dirty
        pages are written now, and no timed checkpoint falls due for checkpoint_timeout).
        Durability is untouched: every setting stays as the profile says."""
        if self.broker_running():
            raise TargetError("settle() before start(): the broker holds the queue tables")
        t0 = time.monotonic()
        with self._lock:
            for db in [self.target_db, *self._initiator_dbs(self._initiators).values()]:
                self._conn(db).execute("VACUUM (ANALYZE) " + ", ".join(SETTLE_TABLES[db == self.target_db]))
            pg = self._conn("postgres")
            have = pg.execute("SELECT count(*) FROM pg_ls_waldir() WHERE name ~ '^[0-9A-F]{24}$'").fetchone()[0]
            if have < WAL_RESERVE_SEGMENTS:
                # each switch after a write starts a new segment (created and zero-filled now); the
                # checkpoint below recycles them as the next ones (min_wal_size keeps them)
                pg.execute("CREATE TABLE IF NOT EXISTS public.ssbench_wal_reserve (n int)")
                for _ in range(WAL_RESERVE_SEGMENTS - have):
                    pg.execute("INSERT INTO public.ssbench_wal_reserve VALUES (1)")
                    pg.execute("SELECT pg_switch_wal()")
                pg.execute("TRUNCATE public.ssbench_wal_reserve")
            pg.execute("CHECKPOINT")
        log.info("settled in %.2f s", time.monotonic() - t0)

    # ------------------------------------------------------------------ the broker process
    def disk_full(self, errors=()) -> str | None:
        """The data directory's full disk, from the clients' errors or the server's log since
        :meth:`prepare` (the log is off the data directory's file system when it is a mount
        of its own; on the same one its lines may be lost, the errors still say it)."""
        hit = full_disk(errors) or self._log_disk_full()
        return None if hit is None else pg_disk_full_line(self.server.data_dir, hit)

    def _log_size(self) -> int:
        try:
            return self.server.log_file.stat().st_size
        except OSError:
            return 0

    def _log_disk_full(self) -> str | None:
        """The first disk-full line of the server log since :meth:`prepare`, read on from
        where the last call stopped (whole lines, at most 8 MiB a call)."""
        if self._log_hit is None:
            if self._log_size() < self._log_pos:    # a new log (the server's files recreated)
                self._log_pos = 0
            try:
                with open(self.server.log_file, "rb") as f:
                    f.seek(self._log_pos)
                    chunk = f.read(8 << 20)
            except OSError:
                return None
            end = chunk.rfind(b"\n") + 1
            self._log_pos += end
            self._log_hit = full_disk(chunk[:end].decode(errors="replace").splitlines())
        return self._log_hit

    def broker_running(self) -> bool:
        return self._broker.running()

    def broker_restarts(self) -> int:
        """Times the broker process died and was restarted since the last :meth:`prepare`
        (0 in a healthy run; the runner reports it in the repetition's summary)."""
        return self._broker.restarts

    @property
    def broker_log(self) -> Path:
        d = self.server.data_dir
        return d.parent / f"{d.name}.{self.prefix}.broker.log"

    def broker_command(self, initiators: int | None = None, extra: list[str] | None = None) -> list[str]:
        cmd = [sys.executable, "-m", "harness.targets.embedded.broker",
               "--target", self.conninfo(self.target_db), "--parent-pid", str(os.getpid())]
        for i, db in self._initiator_dbs(initiators or None).items():
            cmd += ["--initiator", f"{i}={self.conninfo(db)}"]
        return cmd + list(extra or [])

    def start(self, extra_args: list[str] | None = None, timeout: float = 30.0) -> None:
        """Start the broker process (transport, queue monitor, wait sampler) for the initiators
        of the last :meth:`prepare`, supervised: restarted if it dies (:meth:`broker_restarts`)
        until :meth:`stop`. Returns once it runs; raises TargetError if it cannot."""
        if self.broker_running():
            return
        if not self._provisioned:
            raise UserError("provision() the embedded target before start()")
        rate = self._broker_settings.transport_rate_limit   # an emulation knob (docs/embedded.md)
        lock_ms = _ms_from_env(LOCK_SAMPLE_ENV, 60_000)
        extra = (["--transport-rate", f"{rate:g}"] if rate else []) \
            + (["--lock-sample-ms", lock_ms] if lock_ms is not None else []) + list(extra_args or [])
        self._broker.start(self.broker_command(extra=extra), timeout)

    def stop(self, timeout: float = 15.0) -> None:
        """Stop the broker process: SIGTERM (readers are cancelled; their batches roll back and
        stay queued), SIGKILL after ``timeout``. Idempotent."""
        self._broker.stop(timeout)

    def _broker_is_up(self, pid: int) -> bool:
        """Has broker ``pid`` taken its post (it holds the advisory lock and records its pid)?"""
        return self._one(self.target_db, "SELECT pid FROM ssb.broker_state") == pid

    def _reap(self, timeout: float = 10.0) -> None:
        """Wait until no backend of a dead broker is left (they exit within about half a second
        of losing their client): their open transactions must not overlap a new broker's."""
        brokers = "FROM pg_stat_activity WHERE datname = ANY (%s) AND application_name ~ %s"
        args = ([self.target_db, *self._initiator_dbs(self._provisioned).values()],
                "^ssbench-(reader|transport|queue-monitor|wait-sampler|lock-sampler|broker)")
        if not wait_until(lambda: not self._one("postgres", f"SELECT count(*) {brokers}", args), timeout, 0.05):
            self._query("postgres", f"SELECT pg_terminate_backend(pid) {brokers}", args)

    # ------------------------------------------------------------------ one run at a time
    def run_lock(self, owner: str) -> contextlib.AbstractContextManager:
        return run_lock(self.server.data_dir, owner)

    # ------------------------------------------------------------------ test knobs
    def set_queue_options(self, *, try_catch: bool | None = None, process_delay_ms: int | None = None,
                          enabled: bool | None = None, activation: bool | None = None,
                          max_readers: int | None = None, monitor_interval_s: float | None = None,
                          waitfor_timeout_ms: int | None = None, receive_top: int | None = None,
                          processing_us_per_message: int | None = None) -> None:
        """ALTER QUEUE (prepare's, and for tests and experiments): the TRY/CATCH of the activation
        procedure, a processing delay per batch, STATUS (re-enabling also clears the rollback
        count), ACTIVATION STATUS, MAX_QUEUE_READERS, monitor interval, WAITFOR timeout, RECEIVE
        TOP, the procedure's own work per message."""
        sets: list[sql.Composable] = []
        values = {"try_catch": try_catch, "process_delay_ms": process_delay_ms,
                  "is_activation_enabled": activation, "max_readers": max_readers,
                  "monitor_interval_s": monitor_interval_s, "waitfor_timeout_ms": waitfor_timeout_ms,
                  "receive_top": receive_top, "processing_us_per_message": processing_us_per_message}
        for col, v in values.items():
            if v is not None:
                sets.append(sql.SQL("{} = {}").format(sql.Identifier(col), sql.Literal(v)))
        if enabled is not None:
            sets.append(sql.SQL("is_receive_enabled = {}").format(sql.Literal(bool(enabled))))
            if enabled:
                sets.append(sql.SQL("consecutive_rollbacks = 0, disabled_at = NULL"))
        if not sets:
            return
        self._query(self.target_db, sql.SQL("UPDATE ssb.queues SET {} WHERE name = {} RETURNING 1").format(
            sql.SQL(", ").join(sets), sql.Literal(QUEUE)))

    def set_activation(self, enabled: bool, timeout: float | None = None) -> None:
        """ACTIVATION (STATUS = ON | OFF) through the queue's options (the queue monitor reads
        them). Off waits until no reader runs (up to the WAITFOR timeout plus 30 s)."""
        self.set_queue_options(activation=bool(enabled))
        if enabled:
            return
        wait = timeout if timeout is not None else self._broker_settings.waitfor_timeout_ms / 1000 + 30
        if not wait_until(lambda: not self._one(self.target_db, READERS_RUNNING, ()), wait, 0.05):
            raise TargetError(f"activation turned off, but readers still run after {wait:g} s")

    def sender_spec(self, initiator: int) -> dict[str, Any]:
        self._require(initiator)
        db = self.initiator_db(initiator)
        cpu = self._broker_settings.client_cpu_us_per_send   # an emulation knob (docs/embedded.md)
        return {"sender": "embedded", "conninfo": self.conninfo(db), "initiator": int(initiator), "database": db,
                **({"client_cpu_us_per_send": cpu} if cpu else {})}

    def interactive_broker(self, max_queue_readers: int) -> BrokerSettings:
        """A 1 s queue monitor, so activation reacts within a second in the web UI."""
        return BrokerSettings(max_queue_readers=max_queue_readers, receive_top=10000, waitfor_timeout_ms=1000,
                              monitor_interval_seconds=1.0)

    # ------------------------------------------------------------------ teardown
    def closing_note(self) -> str:
        return ("The embedded PostgreSQL server keeps running (it is shared and reused; "
                "`ssbench server stop` stops it).")

    def close(self) -> None:
        self.stop()
        with self._lock:
            for c in self._conns.values():
                with contextlib.suppress(Exception):
                    c.close()
            self._conns.clear()

    def _atexit(self) -> None:
        with contextlib.suppress(Exception):
            if self._broker.running():
                self.stop(timeout=5)


def _ms_from_env(name: str, limit: float) -> str | None:
    """A millisecond knob from the environment, checked (UserError naming it); None if unset."""
    raw = environment.get(name)
    if raw is None or raw.strip() == "":
        return None
    try:
        v = float(raw)
    except ValueError:
        raise UserError(f"{name} must be a number of milliseconds, got {raw!r}") from None
    if not 0 <= v <= limit:
        raise UserError(f"{name} must be between 0 and {limit:g} ms, got {raw!r}")
    return f"{v:g}"


def run_lock(data_dir, owner: str) -> HeldLock:
    """One run (or web session) at a time per embedded server, as every run resets the
    emulation's databases: a flock on ``ssbench-run.lock`` in its data directory; a second
    holder gets UserError (exit 2) naming the first."""
    return HeldLock(Path(data_dir) / "ssbench-run.lock", owner, lambda holder: UserError(
        f"the embedded server {Path(data_dir)} is in use by {holder}; wait for it to end, or give this run "
        "its own server (SSBENCH_PGDATA=another directory)"))


def pg_disk_full_line(data_dir, evidence: str) -> str:
    """What is full on the embedded PostgreSQL server and what to do."""
    return (f"the embedded PostgreSQL server's data directory {data_dir} is full ({evidence}): "
            f"free space on its file system (df {data_dir})")
