"""The embedded target: a PostgreSQL emulation of Service Broker's send / transmit / receive path.

Topology on the private embedded PostgreSQL server (:mod:`.server`): one target database
(``ssb_target``) and one database per initiator (``ssb_init1`` ...), loaded from
``workloads/embedded/{target,initiator}.sql``. The broker process (:mod:`.broker`) moves
messages and runs activation; this class provisions, resets, counts and reports.

Its numbers are PostgreSQL's. Every report says so (:attr:`label`); docs/embedded.md explains
what the emulation reproduces of SQL Server and what it does not.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from ... import paths
from ...errors import TargetError, UserError
from ...matrix import BrokerSettings
from ..base import Counts, InitiatorCounts, PerfCounter, Target, WaitStat
from .profiles import EMBEDDED_PROFILES
from . import server as server_mod
from ._db import PREFIX_RE, connect, database_names
from .server import EmbeddedServer, ServerInfo

log = logging.getLogger(__name__)

QUEUE = "MySSBLabTestQueue"
SEND_DELAY_ENV = "SSBENCH_EMBEDDED_SEND_DELAY_MS"
SEND_DELAY_SETTING = ("ssbench", "send_delay_ms")
MAX_INITIATORS = 64
SCHEMA_TABLE = "ssbench_schema"  # public.ssbench_schema: which workload file version is loaded
RESET_LOCK_TIMEOUT = "5s"


def _sql_file(kind: str) -> tuple[str, str]:
    path = paths.WORKLOADS / "embedded" / f"{kind}.sql"
    try:
        text = path.read_text()
    except OSError as e:
        raise TargetError(f"cannot read the embedded workload {path}: {e.strerror}") from None
    return text, hashlib.sha256(text.encode()).hexdigest()[:16]


class EmbeddedTarget(Target):
    """Service Broker emulated on the embedded PostgreSQL server.

    ``server``: an :class:`EmbeddedServer`, or its data directory, or None for the default one
    ($SSBENCH_PGDATA or the cache). The server is started (or reused) on construction.
    ``prefix``: database name prefix (``ssb`` -> ``ssb_target``, ``ssb_init1`` ...).
    """

    kind = "embedded"

    def __init__(self, server: EmbeddedServer | str | Path | None = None, *, prefix: str = "ssb"):
        if not PREFIX_RE.fullmatch(prefix):
            raise UserError(f"invalid database prefix {prefix!r} (lowercase letters, digits, '_')")
        if isinstance(server, EmbeddedServer):
            self.server = server
        else:
            self.server = EmbeddedServer(Path(server) if server is not None else None)
        self.prefix = prefix
        self.target_db = database_names(prefix, 0)[0]
        self._info: ServerInfo = self.server.start()
        self.version = self.server.version()
        self.label = f"PostgreSQL {self.version} emulation of Service Broker"
        self._lock = threading.RLock()
        self._conns: dict[str, psycopg.Connection] = {}
        self._provisioned = 0
        self._initiators = 0          # initiators of the current permutation (prepare)
        self._profile: str | None = None
        self._broker_settings = BrokerSettings()
        self._proc: subprocess.Popen | None = None
        self._closed = False
        self._provisioned = self._existing_initiators()
        atexit.register(self._atexit)

    @classmethod
    def default(cls) -> "EmbeddedTarget":
        """The default embedded target: the default data directory, databases ``ssb_*``."""
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
        self._info = info
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

    def _existing_initiators(self) -> int:
        rows = self._query("postgres", "SELECT datname FROM pg_database WHERE datname ~ %s",
                           (f"^{self.prefix}_init[0-9]+$",))
        nums = sorted(int(r[0][len(self.prefix) + 5:]) for r in rows)
        n = 0
        while n < len(nums) and nums[n] == n + 1:
            n += 1
        return n

    # ------------------------------------------------------------------ provenance
    def describe(self) -> dict[str, Any]:
        info = self.info
        settings = {}
        try:
            rows = self._query(self.target_db if self._provisioned else "postgres",
                               "SELECT name, current_setting(name) FROM pg_settings WHERE name = ANY (%s) ORDER BY 1",
                               (sorted(set(server_mod.SETTINGS) | {"fsync", "full_page_writes", "synchronous_commit",
                                                                     "wal_sync_method", "io_method"}),))
            settings = dict(rows)
        except psycopg.Error:  # pragma: no cover - informational
            pass
        return {
            "kind": self.kind,
            "label": self.label,
            "versions": {"postgresql": self.version, "psycopg": psycopg.__version__,
                         "emulation": {"initiator_sql": _sql_file("initiator")[1],
                                       "target_sql": _sql_file("target")[1]}},
            "topology": {"server": "embedded", "data_dir": str(info.data_dir), "host": info.host,
                         "port": info.port, "target_database": self.target_db,
                         "initiator_databases": [self.initiator_db(i) for i in range(1, self._provisioned + 1)],
                         "queue": QUEUE},
            "settings": {"server": settings, "server_conf": dict(server_mod.SETTINGS),
                         "profile": self._profile,
                         "send_delay_ms": os.environ.get(SEND_DELAY_ENV) or None,
                         "broker": asdict(self._broker_settings)},
            "profiles": {k: dict(v) for k, v in EMBEDDED_PROFILES.items()},
            "note": "PostgreSQL numbers from an emulation of Service Broker; not SQL Server measurements",
        }

    def profiles(self) -> list[str]:
        return list(EMBEDDED_PROFILES)

    # ------------------------------------------------------------------ lifecycle
    def provision(self, max_initiators: int) -> None:
        """Create the target database and ``max_initiators`` initiator databases (idempotent) and
        load the emulation's schema into each (reloaded when the workload file changed)."""
        if isinstance(max_initiators, bool) or not isinstance(max_initiators, int) \
                or not 1 <= max_initiators <= MAX_INITIATORS:
            raise UserError(f"max_initiators must be an integer 1..{MAX_INITIATORS}, got {max_initiators!r}")
        dbs = [(self.target_db, "target", 0)] + [(self.initiator_db(i), "initiator", i)
                                                 for i in range(1, max_initiators + 1)]
        with self._lock:
            existing = {r[0] for r in self._query("postgres", "SELECT datname FROM pg_database")}
            for db, kind, num in dbs:
                if db not in existing:
                    log.info("creating database %s", db)
                    self._conn("postgres").execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(db)))
                self._load_schema(db, kind, num)
            self._provisioned = max(self._provisioned, max_initiators)

    def _load_schema(self, db: str, kind: str, num: int) -> None:
        text, version = _sql_file(kind)
        c = self._conn(db)
        c.execute(f"CREATE TABLE IF NOT EXISTS public.{SCHEMA_TABLE} "
                  "(singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton), kind text, version text)")
        row = c.execute(f"SELECT kind, version FROM public.{SCHEMA_TABLE}").fetchone()
        if row == (kind, version) and c.execute("SELECT to_regnamespace('ssb') IS NOT NULL").fetchone()[0]:
            if kind == "initiator":
                c.execute("UPDATE ssb.config SET initiator = %s WHERE initiator <> %s", (num, num))
            return
        log.info("loading the embedded %s schema into %s (version %s)", kind, db, version)
        self._terminate_others(db)
        with c.transaction():
            c.execute("DROP SCHEMA IF EXISTS ssb CASCADE")
            c.execute(text.encode())
            if kind == "initiator":
                c.execute("UPDATE ssb.config SET initiator = %s", (num,))
            c.execute(f"INSERT INTO public.{SCHEMA_TABLE} (kind, version) VALUES (%s, %s) "
                      "ON CONFLICT (singleton) DO UPDATE SET kind = excluded.kind, version = excluded.version",
                      (kind, version))

    def _terminate_others(self, db: str) -> int:
        """Disconnect every other session of ``db`` (WITH ROLLBACK IMMEDIATE), ours excepted."""
        keep = [c.info.backend_pid for c in self._conns.values() if not c.closed and not c.broken]
        return len(self._query("postgres",
                               "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                               "WHERE datname = %s AND pid <> ALL (%s)", (db, keep)))

    def _require(self, initiators: int) -> None:
        if initiators > self._provisioned:
            raise UserError(f"{initiators} initiator(s) asked but only {self._provisioned} provisioned "
                            "(call provision(max_initiators) first)")

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
        delay = _send_delay_from_env()
        self.stop()
        with self._lock:
            all_dbs = [self.target_db] + [self.initiator_db(i) for i in range(1, self._provisioned + 1)]
            pg = self._conn("postgres")
            for db in all_dbs:
                for name, value in EMBEDDED_PROFILES[profile].items():
                    pg.execute(sql.SQL("ALTER DATABASE {} SET {} = {}").format(
                        sql.Identifier(db), sql.Identifier(*name.split(".")), sql.Literal(str(value))))
            for db in all_dbs[1:]:
                if delay is None:
                    pg.execute(sql.SQL("ALTER DATABASE {} RESET {}").format(
                        sql.Identifier(db), sql.Identifier(*SEND_DELAY_SETTING)))
                else:
                    pg.execute(sql.SQL("ALTER DATABASE {} SET {} = {}").format(
                        sql.Identifier(db), sql.Identifier(*SEND_DELAY_SETTING), sql.Literal(delay)))
            for db in all_dbs:
                self._reset_db(db)
            self._conn(self.target_db).execute(
                "UPDATE ssb.queues SET max_readers = %s, receive_top = %s, waitfor_timeout_ms = %s, "
                "monitor_interval_s = %s, is_activation_enabled = true, try_catch = true, process_delay_ms = 0 "
                "WHERE name = %s",
                (broker.max_queue_readers, broker.receive_top, broker.waitfor_timeout_ms,
                 float(broker.monitor_interval_seconds), QUEUE))
            # settings changed per database reach new sessions only: drop ours
            for db in all_dbs:
                c = self._conns.pop(db, None)
                if c is not None:
                    c.close()
        self._initiators = initiators
        self._profile = profile
        self._broker_settings = broker

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
        from .broker import TransportLink

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
            while self._one(self.target_db, "SELECT EXISTS (SELECT 1 FROM ssb.service_queue "
                                            "WHERE initiator = %s)", (initiator,)):
                if time.monotonic() > deadline:
                    raise TargetError(f"warm-up of initiator {initiator}: messages still queued after "
                                      f"{timeout:.0f} s")
                time.sleep(0.1)
        else:
            # the activation procedure in-line, on a few connections at once (one per core)
            errors: list[BaseException] = []

            def work() -> None:
                try:
                    with connect(self.conninfo(self.target_db), "ssbench-warmup", synchronous_commit="off") as c:
                        c.execute("CALL ssb.activated_task(NULL, 0)")
                except BaseException as e:  # pragma: no cover - reported below
                    errors.append(e)

            workers = [threading.Thread(target=work) for _ in range(max(1, min(4, os.cpu_count() or 1)))]
            for w in workers:
                w.start()
            for w in workers:
                w.join()
            if errors:
                raise TargetError(f"warm-up of initiator {initiator}: processing failed: {errors[0]}")
        return n

    # ------------------------------------------------------------------ the broker process
    def broker_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def broker_log(self) -> Path:
        d = self.server.data_dir
        return d.parent / f"{d.name}.{self.prefix}.broker.log"

    def broker_command(self, initiators: int | None = None, extra: list[str] | None = None) -> list[str]:
        n = initiators or self._initiators or self._provisioned
        cmd = [sys.executable, "-m", "harness.targets.embedded.broker",
               "--target", self.conninfo(self.target_db), "--parent-pid", str(os.getpid())]
        for i in range(1, n + 1):
            cmd += ["--initiator", f"{i}={self.conninfo(self.initiator_db(i))}"]
        return cmd + list(extra or [])

    def start(self, extra_args: list[str] | None = None, timeout: float = 30.0) -> None:
        """Start the broker process (transport, queue monitor, wait sampler) for the initiators
        of the last :meth:`prepare`. Returns once it runs; raises TargetError if it cannot."""
        if self.broker_running():
            return
        if not self._provisioned:
            raise UserError("provision() the embedded target before start()")
        self._reap()
        cmd = self.broker_command(extra=extra_args)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(paths.REPO_ROOT), env.get("PYTHONPATH")) if p)
        logf = open(self.broker_log, "ab")
        try:
            self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                                          env=env, cwd=str(paths.REPO_ROOT), start_new_session=True)
        finally:
            logf.close()
        deadline = time.monotonic() + timeout
        while True:
            if self._proc.poll() is not None:
                code = self._proc.returncode
                self._proc = None
                raise TargetError(f"the broker process exited ({code}) at start" + self._broker_log_tail())
            if self._one(self.target_db, "SELECT pid FROM ssb.broker_state") == self._proc.pid:
                return
            if time.monotonic() > deadline:
                self.stop()
                raise TargetError("the broker process did not come up in time" + self._broker_log_tail())
            time.sleep(0.05)

    def stop(self, timeout: float = 15.0) -> None:
        """Stop the broker process: SIGTERM (readers are cancelled; their batches roll back and
        stay queued), SIGKILL after ``timeout``. Idempotent."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            try:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                log.warning("broker %d did not stop in %.0f s: SIGKILL", proc.pid, timeout)
                proc.kill()
                proc.wait(10)
            except ProcessLookupError:  # pragma: no cover
                pass
        self._proc = None
        self._reap()

    def kill_broker(self) -> int | None:
        """SIGKILL the broker process (crash tests). Returns its pid."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return None
        proc.kill()
        proc.wait(10)
        self._proc = None
        return proc.pid

    def _reap(self, timeout: float = 10.0) -> None:
        """Wait until no backend of a dead broker is left (they exit within about half a second
        of losing their client): their open transactions must not overlap a new broker's."""
        deadline = time.monotonic() + timeout
        pattern = "^ssbench-(reader|transport|queue-monitor|wait-sampler|broker)"
        dbs = [self.target_db] + [self.initiator_db(i) for i in range(1, self._provisioned + 1)]
        while self._one("postgres", "SELECT count(*) FROM pg_stat_activity WHERE datname = ANY (%s) "
                                    "AND application_name ~ %s", (dbs, pattern)):
            if time.monotonic() > deadline:
                self._query("postgres", "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                        "WHERE datname = ANY (%s) AND application_name ~ %s", (dbs, pattern))
                break
            time.sleep(0.05)

    def _broker_log_tail(self) -> str:
        try:
            lines = self.broker_log.read_text(errors="replace").splitlines()[-15:]
        except OSError:
            return ""
        return f"\nlast lines of {self.broker_log}:\n" + "\n".join(lines)

    # ------------------------------------------------------------------ test knobs
    def set_queue_options(self, *, try_catch: bool | None = None, process_delay_ms: int | None = None,
                          enabled: bool | None = None, activation: bool | None = None,
                          max_readers: int | None = None, monitor_interval_s: float | None = None,
                          waitfor_timeout_ms: int | None = None, receive_top: int | None = None) -> None:
        """ALTER QUEUE for tests and experiments: the TRY/CATCH of the activation procedure, a
        processing delay per batch, STATUS (re-enabling also clears the rollback count),
        ACTIVATION STATUS, MAX_QUEUE_READERS, monitor interval, WAITFOR timeout, RECEIVE TOP."""
        sets: list[sql.Composable] = []
        values = {"try_catch": try_catch, "process_delay_ms": process_delay_ms,
                  "is_activation_enabled": activation, "max_readers": max_readers,
                  "monitor_interval_s": monitor_interval_s, "waitfor_timeout_ms": waitfor_timeout_ms,
                  "receive_top": receive_top}
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

    # ------------------------------------------------------------------ accounting
    def counts(self) -> Counts:
        """Exact counts since the last prepare, warm-up excluded. Read upstream first (sent, then
        transmission queues, then the target queue, then the drop table), so a message moving
        while we count is counted twice rather than missed: a drain never ends early."""
        n = self._initiators or self._provisioned
        sent = {i: int(self._one(self.initiator_db(i), "SELECT ssb.sent_count()")) for i in range(1, n + 1)}
        xmitq = {i: int(self._one(self.initiator_db(i), "SELECT count(*) FROM ssb.sysxmitqueue"))
                 for i in range(1, n + 1)}
        queue = int(self._one(self.target_db, "SELECT count(*) FROM ssb.service_queue"))
        received = dict(self._query(self.target_db,
                                    "SELECT initiator, count(*) FROM ssb.message_drop WHERE NOT warmup "
                                    "GROUP BY initiator"))
        errors, disabled = self._query(self.target_db,
                                       "SELECT (SELECT count(*) FROM ssb.message_errors), NOT is_receive_enabled "
                                       "FROM ssb.queues WHERE name = %s", (QUEUE,))[0]
        return Counts(initiators=[InitiatorCounts(i, sent[i], int(received.get(i, 0)), xmitq[i])
                                  for i in range(1, n + 1)],
                      target_queue=queue, errors=int(errors), queue_disabled=bool(disabled))

    def sender_spec(self, initiator: int) -> dict[str, Any]:
        self._require(initiator)
        db = self.initiator_db(initiator)
        return {"kind": "embedded", "conninfo": self.conninfo(db), "initiator": int(initiator), "database": db}

    # ------------------------------------------------------------------ telemetry
    def wait_stats(self) -> list[WaitStat]:
        rows = self._query(self.target_db,
                           "SELECT wait_type, sum(waiting_tasks)::bigint, sum(wait_time_ms) FROM ssb.wait_stats "
                           "WHERE NOT benign GROUP BY wait_type ORDER BY 3 DESC, 1")
        return [WaitStat(w, int(n), float(ms)) for w, n, ms in rows]

    def perf_counters(self) -> list[PerfCounter]:
        """Broker Activation (instance: the target database) and Broker Statistics, named as in
        SQL Server's sys.dm_os_performance_counters; */sec counters are cumulative raw values."""
        n = self._initiators or self._provisioned
        sends = system = dequeued = 0
        for i in range(1, n + 1):
            # one statement, one snapshot: sent and still queued are consistent with each other
            s, sysm, xq = self._query(self.initiator_db(i),
                                      "SELECT coalesce((SELECT sum(send_seq) FROM ssb.sysdesend), 0), "
                                      "(SELECT system_sent FROM ssb.config), "
                                      "(SELECT count(*) FROM ssb.sysxmitqueue)")[0]
            sends += int(s)
            system += int(sysm)
            dequeued += int(s) - int(xq)
        (started, limit, invoked, aborted, empty, tally_batches, tally_msgs, enqueued, rollbacks,
         act_errors, running) = self._query(self.target_db, """
            SELECT a.tasks_started, a.task_limit_reached, a.procs_invoked, a.tasks_aborted, a.receives_empty,
                   (SELECT count(*) FROM ssb.receive_tally), (SELECT coalesce(sum(messages), 0) FROM ssb.receive_tally),
                   (SELECT coalesce(sum(rcv_seq), 0) FROM ssb.sysdercv), q.rollbacks_total, q.activation_errors,
                   (SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
                                                            AND application_name LIKE 'ssbench-reader-%%')
              FROM ssb.activation_counters a, ssb.queues q WHERE q.name = %s""", (QUEUE,))[0]
        db = self.target_db
        act = "Broker Activation"
        st = "Broker Statistics"
        sql_sends = sends - system
        receives = int(tally_batches) + int(empty)
        return [
            PerfCounter(act, "Tasks Started/sec", db, float(started)),
            PerfCounter(act, "Tasks Running", db, float(running), "gauge"),
            PerfCounter(act, "Task Limit Reached", db, float(limit)),
            PerfCounter(act, "Task Limit Reached/sec", db, float(limit)),
            PerfCounter(act, "Stored Procedures Invoked/sec", db, float(invoked)),
            PerfCounter(act, "Tasks Aborted/sec", db, float(aborted)),
            PerfCounter(st, "SQL SENDs/sec", "", float(sql_sends)),
            PerfCounter(st, "SQL SEND Total", "", float(sql_sends)),
            PerfCounter(st, "SQL RECEIVEs/sec", "", float(receives)),
            PerfCounter(st, "SQL RECEIVE Total", "", float(receives)),
            PerfCounter(st, "Enqueued Messages/sec", "", float(enqueued)),
            PerfCounter(st, "Enqueued Messages Total", "", float(enqueued)),
            PerfCounter(st, "Enqueued Transmission Msgs/sec", "", float(sends)),
            PerfCounter(st, "Dequeued Transmission Msgs/sec", "", float(dequeued)),
            PerfCounter(st, "Broker Transaction Rollbacks", "", float(rollbacks)),
            PerfCounter(st, "Activation Errors Total", "", float(act_errors)),
            # not a SQL Server counter: messages the activation procedure received (the tally)
            PerfCounter(st, "Messages Received Total", "", float(tally_msgs)),
        ]

    def queue_depths(self, exact: bool = False) -> dict[str, int]:
        """Transmission-queue depth per initiator and target-queue depth. Approximate by default:
        pg_stat_user_tables.n_live_tup (maintained by the statistics system, up to about a second
        behind), the analogue of reading sys.partitions.rows; COUNT(*) when ``exact``."""
        n = self._initiators or self._provisioned
        if exact:
            q_x = "SELECT count(*) FROM ssb.sysxmitqueue"
            q_q = "SELECT count(*) FROM ssb.service_queue"
        else:
            q_x = ("SELECT greatest(coalesce(sum(n_live_tup), 0), 0) FROM pg_stat_user_tables "
                   "WHERE schemaname = 'ssb' AND relname = 'sysxmitqueue'")
            q_q = ("SELECT greatest(coalesce(sum(n_live_tup), 0), 0) FROM pg_stat_user_tables "
                   "WHERE schemaname = 'ssb' AND relname = 'service_queue'")
        out = {f"xmitq.i{i}": int(self._one(self.initiator_db(i), q_x)) for i in range(1, n + 1)}
        out["queue"] = int(self._one(self.target_db, q_q))
        return out

    def messages_processed(self) -> int:
        return int(self._one(self.target_db, "SELECT coalesce(sum(messages), 0) FROM ssb.receive_tally"))

    def e2e_latencies_us(self, start_epoch: float, end_epoch: float) -> list[int]:
        rows = self._query(self.target_db,
                           "SELECT received_us - sent_us FROM ssb.message_drop WHERE NOT warmup "
                           "AND received_us >= %s AND received_us < %s",
                           (int(start_epoch * 1_000_000), int(end_epoch * 1_000_000)))
        return [int(r[0]) for r in rows]

    def server_pids(self) -> list[int]:
        try:
            import psutil

            main = psutil.Process(self.info.pid)
            return [main.pid] + [p.pid for p in main.children(recursive=True)]
        except Exception:
            return [self.info.pid]

    # ------------------------------------------------------------------ teardown
    def close(self) -> None:
        self.stop()
        with self._lock:
            for c in self._conns.values():
                try:
                    c.close()
                except Exception:  # pragma: no cover
                    pass
            self._conns.clear()
        self._closed = True

    def _atexit(self) -> None:
        try:
            if self._proc is not None:
                self.stop(timeout=5)
        except Exception:  # pragma: no cover
            pass


def _send_delay_from_env() -> str | None:
    raw = os.environ.get(SEND_DELAY_ENV)
    if raw is None or raw.strip() == "":
        return None
    try:
        v = float(raw)
    except ValueError:
        raise UserError(f"{SEND_DELAY_ENV} must be a number of milliseconds, got {raw!r}") from None
    if not 0 <= v <= 60_000:
        raise UserError(f"{SEND_DELAY_ENV} must be between 0 and 60000 ms, got {raw!r}")
    return f"{v:g}"
