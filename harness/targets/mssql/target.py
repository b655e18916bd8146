"""The SQL Server target: the SQLCAT whitepaper's Service Broker topology, driven through pyodbc.

:class:`MssqlTarget` implements :class:`harness.targets.base.Target` for a topology file
(:mod:`.topology`). Everything it runs on the servers is a rendered template from
``workloads/mssql/`` (:mod:`.tsql`):

* :meth:`MssqlTarget.provision` creates (idempotently) the databases, the paper's message type,
  contract, queues and services, the tables and procedures, dialog security (a certificate per
  database, exchanged with CERTENCODED / CREATE CERTIFICATE FROM BINARY, users without login,
  GRANT SEND, remote service bindings with ANONYMOUS = OFF), and for the distributed layout
  transport security (a certificate per instance in master, a certificate-authenticated
  Service Broker endpoint, a login per peer instance with CONNECT on the endpoint), then the
  routes with BROKER_INSTANCE both ways (and msdb routes for local delivery).
* :meth:`prepare` resets between permutations (END CONVERSATION WITH CLEANUP, or SET
  NEW_BROKER and re-created routes), applies the server profile (DELAYED_DURABILITY) and the
  queue's broker settings (RECEIVE TOP, WAITFOR timeout, MAX_QUEUE_READERS).
* :meth:`create_dialogs` runs the paper's 150-trick script, :meth:`warm_up` its cursor script.
* Collectors read DMVs: sys.dm_os_wait_stats, sys.dm_os_performance_counters,
  sys.dm_broker_activated_tasks, sys.dm_broker_queue_monitors, the scheduler-monitor ring
  buffer, sys.transmission_queue and partition row counts.

Message accounting: ``sent`` is the growth of ``SUM(send_sequence)`` over the initiator's
conversation endpoints since dialogs were created and warmed up (SEND advances it in the
sending transaction, so only committed sends count, at no cost to the send path); ``received``
is the activation procedure's tally per initiator (the initiator number travels in the message
header); warm-up messages are marked and excluded.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import secrets
import threading
import time
from typing import Any, Iterable

from ...errors import TargetError
from ...matrix import BrokerSettings
from ..base import Counts, InitiatorCounts, PerfCounter, Target, WaitStat
from . import driver, tsql
from .topology import Instance, Topology, load_topology

log = logging.getLogger(__name__)

#: SQL Server 2016 SP1: CREATE OR ALTER, DROP ... IF EXISTS, DATEDIFF_BIG, CERTENCODED.
MIN_VERSION = (13, 0, 4001)

#: Waits that say nothing about the workload (idle background tasks, timers, sleeping
#: receivers). The one list the collectors use; the rest of sys.dm_os_wait_stats is reported.
BENIGN_WAITS = frozenset({
    "BROKER_EVENTHANDLER", "BROKER_RECEIVE_WAITFOR", "BROKER_TASK_STOP", "BROKER_TO_FLUSH",
    "BROKER_TRANSMITTER", "CHECKPOINT_QUEUE", "CHKPT", "CLR_AUTO_EVENT", "CLR_MANUAL_EVENT",
    "CLR_SEMAPHORE", "CXCONSUMER", "DBMIRROR_DBM_EVENT", "DBMIRROR_EVENTS_QUEUE",
    "DBMIRROR_WORKER_QUEUE", "DBMIRRORING_CMD", "DIRTY_PAGE_POLL", "DISPATCHER_QUEUE_SEMAPHORE",
    "EXECSYNC", "FSAGENT", "FT_IFTS_SCHEDULER_IDLE_WAIT", "FT_IFTSHC_MUTEX",
    "HADR_CLUSAPI_CALL", "HADR_FILESTREAM_IOMGR_IOCOMPLETION", "HADR_LOGCAPTURE_WAIT",
    "HADR_NOTIFICATION_DEQUEUE", "HADR_TIMER_TASK", "HADR_WORK_QUEUE", "KSOURCE_WAKEUP",
    "LAZYWRITER_SLEEP", "LOGMGR_QUEUE", "MEMORY_ALLOCATION_EXT", "ONDEMAND_TASK_QUEUE",
    "PARALLEL_REDO_DRAIN_WORKER", "PARALLEL_REDO_LOG_CACHE", "PARALLEL_REDO_TRAN_LIST",
    "PARALLEL_REDO_WORKER_SYNC", "PARALLEL_REDO_WORKER_WAIT_WORK",
    "PREEMPTIVE_XE_GETTARGETSTATE", "PWAIT_ALL_COMPONENTS_INITIALIZED",
    "PWAIT_DIRECTLOGCONSUMER_GETNEXT", "PWAIT_EXTENSIBILITY_CLEANUP_TASK",
    "QDS_PERSIST_TASK_MAIN_LOOP_SLEEP", "QDS_ASYNC_QUEUE",
    "QDS_CLEANUP_STALE_QUERIES_TASK_MAIN_LOOP_SLEEP", "QDS_SHUTDOWN_QUEUE",
    "REDO_THREAD_PENDING_WORK", "REQUEST_FOR_DEADLOCK_SEARCH", "RESOURCE_QUEUE",
    "SERVER_IDLE_CHECK", "SLEEP_BPOOL_FLUSH", "SLEEP_DBSTARTUP", "SLEEP_DCOMSTARTUP",
    "SLEEP_MASTERDBREADY", "SLEEP_MASTERMDREADY", "SLEEP_MASTERUPGRADED", "SLEEP_MSDBSTARTUP",
    "SLEEP_SYSTEMTASK", "SLEEP_TASK", "SLEEP_TEMPDBSTARTUP", "SNI_HTTP_ACCEPT",
    "SOS_WORK_DISPATCHER", "SP_SERVER_DIAGNOSTICS_SLEEP", "SQLTRACE_BUFFER_FLUSH",
    "SQLTRACE_INCREMENTAL_FLUSH_SLEEP", "SQLTRACE_WAIT_ENTRIES", "VDI_CLIENT_OTHER",
    "WAIT_FOR_RESULTS", "WAITFOR", "WAITFOR_TASKSHUTDOWN", "WAIT_XTP_RECOVERY",
    "WAIT_XTP_HOST_WAIT", "WAIT_XTP_OFFLINE_CKPT_NEW_LOG", "WAIT_XTP_CKPT_CLOSE",
    "XE_DISPATCHER_JOIN", "XE_DISPATCHER_WAIT", "XE_TIMER_EVENT", "XE_LIVE_TARGET_TVF",
})
BENIGN_WAIT_PREFIXES = ("SQLTRACE_", "XE_", "SLEEP_", "QDS_", "HADR_", "PWAIT_")


def is_benign_wait(wait_type: str) -> bool:
    return wait_type in BENIGN_WAITS or wait_type.startswith(BENIGN_WAIT_PREFIXES)


#: Performance objects the collectors keep (matched on the part after the instance prefix).
BROKER_OBJECTS = ("Broker Activation", "Broker Statistics", "Broker/DBM Transport",
                  "Broker TO Statistics")
#: cntr_type -> PerfCounter.kind (per-second counters are cumulative raw values).
COUNTER_KINDS = {272696576: "cumulative", 65792: "gauge"}

_EPOCH = dt.datetime(1970, 1, 1)


def counter_object(object_name: str) -> str | None:
    """'SQLServer:Broker Statistics' / 'MSSQL$INST:Broker Activation' -> the known suffix."""
    suffix = object_name.split(":", 1)[1] if ":" in object_name else object_name
    suffix = suffix.strip()
    return suffix if suffix in BROKER_OBJECTS else None


def message_prefix(initiator: int, warmup: bool = False) -> bytes:
    """First 8 bytes of a message body: 'SSB1' (or 'SSBW'), the initiator as 3 digits, ';'."""
    if not 1 <= initiator <= 999:
        raise ValueError(f"initiator number {initiator} out of range")
    return (b"SSBW" if warmup else b"SSB1") + f"{initiator:03d}".encode("ascii") + b";"


def _random_password() -> str:
    """For master keys and peer logins: strong, random, never stored (the service master key
    opens master keys; nobody logs in with a peer login's password)."""
    return "Ss1!" + secrets.token_urlsafe(30)


def _as_datetime(value: Any) -> dt.datetime:
    """datetime2 arrives as datetime (ODBC Driver 18, FreeTDS with TDS 7.3+) or as text."""
    if isinstance(value, dt.datetime):
        return value
    text = str(value).strip().replace("T", " ")
    head, _, frac = text.partition(".")
    return dt.datetime.fromisoformat(head + ("." + frac[:6].ljust(6, "0") if frac else ""))


def _version_tuple(version: str) -> tuple[int, ...]:
    out = []
    for part in version.split(".")[:3]:
        try:
            out.append(int(part))
        except ValueError:
            out.append(0)
    return tuple(out)


class _Pool:
    """Connections by (server, database, purpose): 'admin' (long timeouts) and 'telemetry'
    (the collectors run beside long admin calls)."""

    def __init__(self, topology: Topology):
        self.topology = topology
        self._conns: dict[tuple[str, str, str], driver.Connection] = {}
        self._lock = threading.Lock()

    def get(self, inst: Instance, database: str | None = None, purpose: str = "admin") -> driver.Connection:
        db = database or inst.database
        key = (inst.server_key, db.lower(), purpose)
        with self._lock:
            conn = self._conns.get(key)
        if conn is not None:
            return conn
        spec = driver.spec_for(inst, self.topology.driver, database=db, label=inst.name)
        d = self.topology.driver
        timeout = d.admin_timeout_seconds if purpose == "admin" else d.query_timeout_seconds
        conn = spec.connect(autocommit=True, query_timeout=timeout)
        with self._lock:
            existing = self._conns.setdefault(key, conn)
        if existing is not conn:
            conn.close()
        return existing

    def discard(self, server_key: str, database: str) -> None:
        with self._lock:
            keys = [k for k in self._conns if k[0] == server_key and k[1] == database.lower()]
            conns = [self._conns.pop(k) for k in keys]
        for c in conns:
            c.close()

    def close_all(self) -> None:
        with self._lock:
            conns = list(self._conns.values())
            self._conns.clear()
        for c in conns:
            c.close()


class MssqlTarget(Target):
    """A topology of real SQL Server databases (see :mod:`harness.targets.mssql.topology`)."""

    kind = "mssql"

    def __init__(self, topology: Topology):
        self.topology = topology
        self.label = "SQL Server"
        self._pool = _Pool(topology)
        self._profile = topology.default_profile
        self._n_initiators = len(topology.profile(None).initiators)
        self._broker = BrokerSettings()
        self._baseline: dict[int, int] = {}
        self._offsets_s: dict[str, float] = {}      # server_key -> server clock - local clock
        self._versions: dict[str, str] = {}
        self._guids: dict[str, str] = {}            # instance name -> broker GUID

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_file(cls, path: str) -> "MssqlTarget":
        return cls(load_topology(path))

    @classmethod
    def from_env(cls, prefix: str = "SSBENCH_MSSQL_", initiators: int = 1) -> "MssqlTarget":
        return cls(Topology.from_env(prefix, initiators=initiators))

    # ------------------------------------------------------------------ helpers
    def _names(self, **extra: Any) -> dict[str, Any]:
        b = self.topology.broker
        p: dict[str, Any] = {"message_type": b.message_type, "contract": b.contract,
                             "service": b.service, "queue": b.queue,
                             "activation_procedure": b.activation_procedure}
        p.update(extra)
        return p

    def _conn(self, inst: Instance, database: str | None = None, purpose: str = "admin") -> driver.Connection:
        return self._pool.get(inst, database, purpose)

    def _retrying(self, inst: Instance, database: str | None, purpose: str, fn) -> Any:
        """Run fn(conn); reconnect once if the connection was broken (SQLSTATE 08xxx)."""
        conn = self._conn(inst, database, purpose)
        try:
            return fn(conn)
        except driver.OdbcError as e:
            if not e.sqlstate.startswith("08"):
                raise
            log.info("%s: connection lost (%s); reconnecting", inst.name, e.sqlstate)
            self._pool.discard(inst.server_key, database or inst.database)
            return fn(self._conn(inst, database, purpose))

    def _run(self, inst: Instance, file: str, section: str, params: dict[str, Any] | None = None,
             database: str | None = None, purpose: str = "admin") -> None:
        batches = tsql.batches(file, section, params or {})
        self._retrying(inst, database, purpose,
                       lambda c: c.run_batches(batches, what=f"{file}.sql {section}"))

    def _query(self, inst: Instance, file: str, section: str, args: Iterable[Any] = (),
               params: dict[str, Any] | None = None, database: str | None = None,
               purpose: str = "telemetry", timeout: Any = ...) -> list[tuple]:
        sql = tsql.statement(file, section, params or {})
        args = tuple(args)
        return self._retrying(inst, database, purpose,
                              lambda c: c.execute(sql, args, timeout=timeout,
                                                  what=f"{file}.sql {section}"))

    def _scalar(self, *a, **kw) -> Any:
        rows = self._query(*a, **kw)
        return rows[0][0] if rows and rows[0] else None

    def _servers(self, insts: Iterable[Instance]) -> dict[str, Instance]:
        """server_key -> the first instance on that server."""
        out: dict[str, Instance] = {}
        for i in insts:
            out.setdefault(i.server_key, i)
        return out

    def _server_label(self, server_key: str) -> str:
        """A stable name for a SQL Server instance: the first topology instance on it."""
        for inst in self.topology.instances.values():
            if inst.server_key == server_key:
                return inst.name
        raise KeyError(server_key)

    def _active(self) -> tuple[Instance, list[Instance]]:
        return self.topology.active(self._profile, self._n_initiators)

    def _initiator(self, initiator: int) -> Instance:
        _, inits = self._active()
        if not 1 <= initiator <= len(inits):
            raise TargetError(f"initiator {initiator} is not active (this permutation uses "
                              f"{len(inits)} initiator(s))")
        return inits[initiator - 1]

    # ------------------------------------------------------------------ provenance
    def _server_info(self, inst: Instance) -> tuple:
        rows = self._query(inst, "server", "server_info", database="master")
        version = rows[0][0]
        self._versions[inst.server_key] = version
        return rows[0]

    def describe(self) -> dict[str, Any]:
        target, inits = self._active()
        for inst in self._servers([target, *inits]).values():
            if inst.server_key not in self._versions:
                self._server_info(inst)
        tv = self._versions.get(target.server_key, "?")
        self.label = f"SQL Server {tv}"
        return {
            "kind": self.kind, "label": self.label,
            "versions": {self._server_label(k): v for k, v in self._versions.items()},
            "layout": self.topology.layout, "profile": self._profile,
            "initiators": [i.name for i in inits], "target_instance": target.name,
            "topology": self.topology.to_dict(),
            "settings": {"reset": self.topology.broker.reset,
                         "dialog_encryption": self.topology.broker.dialog_encryption,
                         "endpoint_encryption": self.topology.broker.endpoint_encryption,
                         "queue_monitor_interval_seconds": 5,
                         "broker": {"max_queue_readers": self._broker.max_queue_readers,
                                    "receive_top": self._broker.receive_top,
                                    "waitfor_timeout_ms": self._broker.waitfor_timeout_ms}},
            "clock_offsets_ms": {self._server_label(k): round(v * 1000, 3)
                                 for k, v in self._offsets_s.items()},
        }

    def profiles(self) -> list[str]:
        return list(self.topology.profiles)

    # ------------------------------------------------------------------ provisioning
    def _check_version(self, inst: Instance) -> str:
        row = self._server_info(inst)
        version = row[0]
        if _version_tuple(version) < MIN_VERSION:
            raise TargetError(f"{inst.host}:{inst.port} runs SQL Server {version}; ssbench needs "
                              "SQL Server 2016 SP1 (13.0.4001) or later (CREATE OR ALTER, "
                              "DATEDIFF_BIG, CERTENCODED)")
        return version

    def _database_info(self, inst: Instance) -> tuple | None:
        rows = self._query(inst, "server", "database_info", [inst.database], database="master",
                           purpose="admin")
        return rows[0] if rows else None

    def _ensure_database(self, inst: Instance) -> None:
        info = self._database_info(inst)
        if info is None:
            if not self.topology.broker.create_databases:
                raise TargetError(f"database {inst.database} does not exist on {inst.host}:"
                                  f"{inst.port} (broker.create_databases is false)")
            log.info("creating database %s on %s", inst.database, inst.server_key)
            self._run(inst, "server", "create_database", {"database": inst.database},
                      database="master")
            info = self._database_info(inst)
            if info is None:
                raise TargetError(f"database {inst.database} was not created on {inst.server_key}")
        if info[5] != "ONLINE":
            raise TargetError(f"database {inst.database} on {inst.server_key} is {info[5]}")
        if not info[2]:
            log.info("enabling Service Broker in %s", inst.database)
            self._pool.discard(inst.server_key, inst.database)
            try:
                self._run(inst, "server", "enable_broker", {"database": inst.database},
                          database="master")
            except driver.QueryError as e:
                log.warning("ENABLE_BROKER failed in %s (%s); using NEW_BROKER", inst.database, e)
                self._run(inst, "server", "new_broker", {"database": inst.database},
                          database="master")

    def _broker_guid(self, inst: Instance, refresh: bool = False) -> str:
        if refresh or inst.name not in self._guids:
            info = self._database_info(inst)
            if info is None:
                raise TargetError(f"database {inst.database} does not exist on {inst.server_key}")
            self._guids[inst.name] = str(info[3]).lower()
        return self._guids[inst.name]

    def _new_broker(self, inst: Instance) -> None:
        self._pool.discard(inst.server_key, inst.database)
        self._run(inst, "server", "new_broker", {"database": inst.database}, database="master")
        self._broker_guid(inst, refresh=True)

    def _dedupe_guids(self, insts: list[Instance]) -> None:
        """Every database needs its own broker GUID (copies of a database share one)."""
        seen: dict[str, Instance] = {}
        for inst in sorted(insts, key=lambda i: self.topology.role(i) != "target"):
            g = self._broker_guid(inst, refresh=True)
            if g in seen:
                log.warning("%s shares broker GUID %s with %s; giving it a new one (NEW_BROKER)",
                            inst.where(), g, seen[g].where())
                self._new_broker(inst)
                g = self._guids[inst.name]
            seen[g] = inst

    def _create_objects(self, inst: Instance, role: str, index: int = 1) -> None:
        names = self._names()
        for sec in ("message_type", "contract", "queue", "service", "config_table"):
            self._run(inst, "objects", sec, names)
        if role == "target":
            self._run(inst, "target", "tables", names)
            self._run(inst, "target", "reset_procedure", names)
            self._install_activation(inst, self._broker)
        else:
            self._run(inst, "initiator", "tables", names)
            self._install_initiator_code(inst, index)

    def _install_initiator_code(self, inst: Instance, index: int) -> None:
        p = self._names(data_prefix=message_prefix(index), warmup_prefix=message_prefix(index, True),
                        dialog_encryption="ON" if self.topology.broker.dialog_encryption else "OFF")
        for sec in ("send_procedure", "create_dialogs_procedure", "warm_up_procedure",
                    "reset_procedure"):
            self._run(inst, "initiator", sec, p)

    def _install_activation(self, target: Instance, broker: BrokerSettings) -> None:
        p = self._names(receive_top=broker.receive_top, waitfor_timeout_ms=broker.waitfor_timeout_ms,
                        max_queue_readers=broker.max_queue_readers)
        self._run(target, "target", "activation_procedure", p)
        self._run(target, "target", "activation_on", p)

    def _cert_dates(self) -> dict[str, dt.date]:
        today = dt.datetime.now(dt.timezone.utc).date()
        # a day back, so a peer whose clock runs behind does not see a not-yet-valid certificate
        years = self.topology.broker.certificate_years
        try:
            expiry = today.replace(year=today.year + years)
        except ValueError:  # 29 February
            expiry = today.replace(year=today.year + years, day=28)
        return {"start_date": today - dt.timedelta(days=1), "expiry_date": expiry}

    def _own_certificate(self, inst: Instance, cert: str, subject: str, database: str) -> tuple[bytes, bytes]:
        self._run(inst, "server", "master_key", {"password": _random_password()}, database=database)
        self._run(inst, "server", "own_certificate",
                  {"certificate": cert, "subject": subject, **self._cert_dates()}, database=database)
        rows = self._query(inst, "server", "certificate_public", [cert], database=database,
                           purpose="admin")
        if not rows or rows[0][0] is None:
            raise TargetError(f"{inst.where()}: certificate {cert} has no public key")
        return bytes(rows[0][0]), bytes(rows[0][1])

    def _install_peer_certificate(self, inst: Instance, database: str, cert: str, user: str,
                                  public: tuple[bytes, bytes]) -> None:
        """Install (or replace, if the peer's certificate changed) a peer's public certificate
        owned by ``user``."""
        data, thumbprint = public
        rows = self._query(inst, "server", "certificate_thumbprint", [cert], database=database,
                           purpose="admin")
        if rows and rows[0][0] is not None and bytes(rows[0][0]) == thumbprint:
            return
        if rows:
            self._run(inst, "server", "drop_certificate", {"certificate": cert}, database=database)
        self._run(inst, "server", "peer_certificate",
                  {"certificate": cert, "user": user, "certificate_bytes": data}, database=database)

    @staticmethod
    def _dialog_cert(inst: Instance) -> str:
        return f"ssbench_dialog_{inst.name}"

    @staticmethod
    def _peer_user(name: str) -> str:
        return f"ssbench_peer_{name}"

    def _dialog_security(self, pairs: list[tuple[Instance, Instance, int]]) -> None:
        """Full dialog security, as the paper (BEGIN DIALOG ... WITH ENCRYPTION = ON and a
        remote service binding with ANONYMOUS = OFF): each database's dbo owns a certificate;
        each side installs the other's public certificate for a user without login."""
        publics: dict[str, tuple[bytes, bytes]] = {}
        insts = {i.name: i for pair in pairs for i in pair[:2]}
        for inst in insts.values():
            publics[inst.name] = self._own_certificate(
                inst, self._dialog_cert(inst), f"ssbench dialog security {inst.name}"[:64],
                inst.database)
        for t, i, _ in pairs:
            names = self._names()
            # target: the initiator's service owner, allowed to connect and send
            tu = self._peer_user(i.name)
            self._run(t, "objects", "proxy_user", {"user": tu})
            self._install_peer_certificate(t, t.database, self._dialog_cert(i), tu, publics[i.name])
            self._run(t, "objects", "grant_send", {**names, "user": tu})
            # initiator: the target's service owner, named by the remote service binding
            iu = self._peer_user(t.name)
            self._run(i, "objects", "proxy_user", {"user": iu})
            self._install_peer_certificate(i, i.database, self._dialog_cert(t), iu, publics[t.name])
            self._run(i, "objects", "remote_service_binding",
                      {**names, "binding": f"ssbench_rsb_{t.name}", "user": iu})
            # messages the target sends back (EndDialog, Error) arrive as that user
            self._run(i, "objects", "grant_send", {**names, "user": iu})

    def _transport(self, pairs: list[tuple[Instance, Instance, int]]) -> None:
        """Transport security between instances: a certificate per instance in master, the
        Service Broker endpoint authenticating with it, and for every peer instance a login,
        a master user owning the peer's public certificate and CONNECT on the endpoint."""
        b = self.topology.broker
        links: set[tuple[str, str]] = set()
        for t, i, _ in pairs:
            if t.server_key != i.server_key:
                links.add((t.server_key, i.server_key))
                links.add((i.server_key, t.server_key))
        if not links:
            return
        servers = self._servers(x for pair in pairs for x in pair[:2])
        publics: dict[str, tuple[bytes, bytes]] = {}
        for key in sorted({k for link in links for k in link}):
            inst = servers[key]
            label = self._server_label(key)
            cert = f"ssbench_transport_{label}"
            publics[key] = self._own_certificate(inst, cert, f"ssbench transport {label}"[:64], "master")
            rows = self._query(inst, "server", "broker_endpoints", database="master", purpose="admin")
            params = {"endpoint": b.endpoint_name, "port": inst.broker_port, "certificate": cert,
                      "encryption": b.endpoint_encryption.upper()}
            if rows and rows[0][0] != b.endpoint_name:
                raise TargetError(
                    f"{inst.host}:{inst.port} already has a Service Broker endpoint [{rows[0][0]}] "
                    f"(port {rows[0][1]}); an instance has only one. Set broker.endpoint_name: "
                    f"{rows[0][0]} in the topology to let ssbench reconfigure it for certificate "
                    "authentication, or drop it")
            self._run(inst, "server", "endpoint_alter" if rows else "endpoint_create", params,
                      database="master")
        for a, peer in sorted(links):
            inst = servers[a]
            plabel = self._server_label(peer)
            login = user = f"ssbench_peer_{plabel}"
            self._run(inst, "server", "peer_login",
                      {"login": login, "user": user, "password": _random_password()}, database="master")
            self._install_peer_certificate(inst, "master", f"ssbench_transport_{plabel}", user,
                                           publics[peer])
            self._run(inst, "server", "peer_grant_connect",
                      {"endpoint": b.endpoint_name, "login": login}, database="master")

    def _routing(self, pairs: list[tuple[Instance, Instance, int]]) -> None:
        """Routes with BROKER_INSTANCE both ways (TCP to the far endpoint, or LOCAL), msdb
        routes for local delivery (distributed layout), and the target's GUID for BEGIN DIALOG."""
        service = self.topology.broker.service
        local_done: set[str] = set()
        for t, i, _ in pairs:
            same = t.server_key == i.server_key
            gt, gi = self._broker_guid(t), self._broker_guid(i)
            self._run(i, "objects", "route", {"service": service, "route": f"ssbench_to_{t.name}",
                                              "broker_instance": gt,
                                              "address": "LOCAL" if same else t.broker_address})
            self._run(t, "objects", "route", {"service": service, "route": f"ssbench_to_{i.name}",
                                              "broker_instance": gi,
                                              "address": "LOCAL" if same else i.broker_address})
            self._config_set(i, "target_broker_guid", gt)
            self._config_set(i, "target_instance", t.name)
            if not same:
                for inst in (t, i):
                    if inst.name not in local_done:
                        self._run(inst, "server", "msdb_route",
                                  {"service": service, "route": f"ssbench_local_{inst.name}",
                                   "broker_instance": self._broker_guid(inst)}, database="msdb")
                        local_done.add(inst.name)

    def _config_set(self, inst: Instance, name: str, value: str) -> None:
        sql = tsql.statement("objects", "config_set")
        self._retrying(inst, None, "admin", lambda c: c.execute(sql, (value, name, name, value)))

    def provision(self, max_initiators: int | None = None) -> None:
        """Create everything the topology needs, idempotently (safe to run again)."""
        topo = self.topology
        pairs = topo.pairs(max_initiators)
        insts = topo.used_instances(max_initiators)
        for inst in self._servers(insts).values():
            self._check_version(inst)
        for inst in insts:
            self._ensure_database(inst)
        self._dedupe_guids(insts)
        index = {i.name: idx for _, i, idx in pairs}
        for inst in insts:
            self._create_objects(inst, topo.role(inst), index.get(inst.name, 1))
        self._dialog_security(pairs)
        if topo.layout == "distributed":
            self._transport(pairs)
        self._routing(pairs)
        log.info("provisioned %d database(s) on %d server(s)", len(insts),
                 len(self._servers(insts)))

    # ------------------------------------------------------------------ permutations
    def _wait_activation_idle(self, target: Instance, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            n = self._scalar(target, "collectors", "activated_tasks", [self.topology.broker.queue])
            if not n:
                return
            if time.monotonic() >= deadline:
                log.warning("%d activated task(s) still running on %s", n, target.name)
                return
            time.sleep(0.25)

    def prepare(self, initiators: int, profile: str, broker: BrokerSettings) -> None:
        try:
            self._prepare(initiators, profile, broker)
        except driver.QueryError as e:
            raise TargetError(f"{e}. Is the topology provisioned? Run: ssbench mssql provision "
                              f"{self.topology.path or 'TOPOLOGY.yaml'}") from None

    def _prepare(self, initiators: int, profile: str, broker: BrokerSettings) -> None:
        topo = self.topology
        target, inits = topo.active(profile, initiators)
        prof = topo.profile(profile)
        family = [topo.instances[n] for n in prof.initiators]
        self._profile, self._n_initiators, self._broker = prof.name, initiators, broker
        # 1. no new receive tasks; let the running ones finish their WAITFOR
        self._run(target, "target", "activation_off", self._names())
        self._wait_activation_idle(target, self._broker.waitfor_timeout_ms / 1000 + 30)
        # 2. every conversation and message gone
        if topo.broker.reset == "new_broker":
            for inst in [target, *family]:
                self._new_broker(inst)
            # every route naming one of the new GUIDs, in whatever profile
            renamed = {target.name, *(i.name for i in family)}
            self._routing([p for p in topo.pairs() if p[0].name in renamed or p[1].name in renamed])
            self._run(target, "target", "truncate_tables", self._names())
            for inst in family:
                self._run(inst, "initiator", "truncate_dialogs")
        else:
            for inst in [*family, target]:
                self._run(inst, "objects", "call_reset")
        # 3. the server profile
        for inst in [target, *family]:
            self._run(inst, "server", "delayed_durability",
                      {"database": inst.database, "delayed_durability": prof.delayed_durability.upper()},
                      database="master")
        # 4. initiator numbers in the message header; the queue's broker settings
        for idx, inst in enumerate(inits, start=1):
            self._install_initiator_code(inst, idx)
        self._run(target, "target", "queue_enable", self._names())
        self._install_activation(target, broker)
        # 5. clocks (end-to-end latency crosses servers) and the accounting baseline
        self._measure_offsets([target, *inits])
        self._baseline = {idx: self._sent_sequence(inst) for idx, inst in enumerate(inits, start=1)}
        self.label = f"SQL Server {self._versions.get(target.server_key) or self._server_info(target)[0]}"

    def _measure_offsets(self, insts: list[Instance]) -> None:
        for key, inst in self._servers(insts).items():
            best = None
            for _ in range(3):
                t0 = time.time()
                now = _as_datetime(self._scalar(inst, "server", "utc_now", database="master"))
                t1 = time.time()
                server_epoch = (now - _EPOCH).total_seconds()
                sample = (t1 - t0, server_epoch - (t0 + t1) / 2)
                if best is None or sample[0] < best[0]:
                    best = sample
            self._offsets_s[key] = best[1]

    def _sent_sequence(self, inst: Instance) -> int:
        rows = self._query(inst, "initiator", "sent_sequence", [self.topology.broker.service])
        return int(rows[0][0] or 0) if rows else 0

    def create_dialogs(self, initiator: int, usable: int, every_n: int) -> int:
        inst = self._initiator(initiator)
        rows = self._query(inst, "initiator", "call_create_dialogs", [int(usable), int(every_n)],
                           purpose="admin")
        begun = int(rows[0][0]) if rows else 0
        self._baseline[initiator] = self._sent_sequence(inst)
        return begun

    def warm_up(self, initiator: int) -> int:
        inst = self._initiator(initiator)
        rows = self._query(inst, "initiator", "call_warm_up", purpose="admin")
        sent = int(rows[0][0]) if rows else 0
        self._baseline[initiator] = self._sent_sequence(inst)
        return sent

    def start(self) -> None:
        """Nothing to start: SQL Server transmits and activates by itself."""

    def stop(self) -> None:
        """Nothing to stop."""

    # ------------------------------------------------------------------ accounting
    def counts(self) -> Counts:
        target, inits = self._active()
        received = {int(r[0]): int(r[1] or 0)
                    for r in self._query(target, "target", "received_by_initiator")}
        per = []
        for idx, inst in enumerate(inits, start=1):
            sent = max(0, self._sent_sequence(inst) - self._baseline.get(idx, 0))
            xmitq = int(self._scalar(inst, "collectors", "xmitq_exact") or 0)
            per.append(InitiatorCounts(initiator=idx, sent=sent, received=received.get(idx, 0),
                                       xmitq=xmitq))
        queue = int(self._scalar(target, "target", "queue_exact", params=self._names()) or 0)
        errors = int(self._scalar(target, "target", "error_count") or 0)
        state = self._query(target, "collectors", "queue_state", [self.topology.broker.queue])
        disabled = bool(state) and not state[0][0]
        return Counts(initiators=per, target_queue=queue, errors=errors, queue_disabled=disabled)

    def drain(self, timeout: float, poll: float = 0.25, lock=None, stop=None) -> Counts:
        """Poll the cheap partition row counts; read exact counts once they reach zero.
        ``lock`` and ``stop`` as in :meth:`Target.drain`."""
        guard = lock if lock is not None else contextlib.nullcontext()
        deadline = time.monotonic() + timeout
        while True:
            with guard:
                depths = self.queue_depths(exact=False)
            over = time.monotonic() >= deadline or (stop is not None and stop.is_set())
            if not any(depths.values()) or over:
                with guard:
                    c = self.counts()
                if c.settled or c.queue_disabled or over:
                    return c
            time.sleep(poll)

    def sender_spec(self, initiator: int) -> dict[str, Any]:
        inst = self._initiator(initiator)
        spec = driver.spec_for(inst, self.topology.driver, sender=True,
                               label=f"initiator {initiator} ({inst.name})")
        return {"kind": "mssql", "initiator": initiator, "connection": spec.to_dict()}

    # ------------------------------------------------------------------ telemetry
    def _active_servers(self) -> dict[str, Instance]:
        target, inits = self._active()
        return self._servers([target, *inits])

    def wait_stats_by_server(self) -> dict[str, list[WaitStat]]:
        out: dict[str, list[WaitStat]] = {}
        for key, inst in self._active_servers().items():
            rows = self._query(inst, "collectors", "wait_stats", database="master")
            out[self._server_label(key)] = sorted(
                (WaitStat(str(r[0]), int(r[1]), float(r[2])) for r in rows
                 if not is_benign_wait(str(r[0]))),
                key=lambda w: -w.wait_time_ms)
        return out

    def wait_stats(self) -> list[WaitStat]:
        """Summed over the active permutation's SQL Server instances."""
        acc: dict[str, list[float]] = {}
        for stats in self.wait_stats_by_server().values():
            for w in stats:
                a = acc.setdefault(w.wait_type, [0, 0.0])
                a[0] += w.waiting_tasks
                a[1] += w.wait_time_ms
        return sorted((WaitStat(k, int(v[0]), v[1]) for k, v in acc.items()),
                      key=lambda w: -w.wait_time_ms)

    def perf_counters_by_server(self) -> dict[str, list[PerfCounter]]:
        out: dict[str, list[PerfCounter]] = {}
        for key, inst in self._active_servers().items():
            rows = self._query(inst, "collectors", "perf_counters", database="master")
            out[self._server_label(key)] = parse_perf_counters(rows)
        return out

    def perf_counters(self) -> list[PerfCounter]:
        """Summed over instances (per-second counters and gauges both add up)."""
        acc: dict[tuple[str, str, str], PerfCounter] = {}
        for counters in self.perf_counters_by_server().values():
            for c in counters:
                k = (c.object_name, c.counter_name, c.instance_name)
                prev = acc.get(k)
                acc[k] = c if prev is None else PerfCounter(c.object_name, c.counter_name,
                                                            c.instance_name, prev.value + c.value,
                                                            c.kind)
        return list(acc.values())

    def queue_depths(self, exact: bool = False) -> dict[str, int]:
        target, inits = self._active()
        out: dict[str, int] = {}
        for idx, inst in enumerate(inits, start=1):
            rows = [] if exact else self._query(inst, "collectors", "xmitq_fast")
            if rows and rows[0][1]:
                out[f"xmitq.i{idx}"] = int(rows[0][0] or 0)
            else:
                out[f"xmitq.i{idx}"] = int(self._scalar(inst, "collectors", "xmitq_exact") or 0)
        if exact:
            out["queue"] = int(self._scalar(target, "target", "queue_exact", params=self._names()) or 0)
        else:
            out["queue"] = int(self._scalar(target, "collectors", "queue_fast",
                                            [self.topology.broker.queue]) or 0)
        return out

    def activation(self) -> dict[str, Any]:
        """sys.dm_broker_activated_tasks, sys.dm_broker_queue_monitors and sys.service_queues
        for the target queue."""
        target, _ = self._active()
        q = self.topology.broker.queue
        tasks = int(self._scalar(target, "collectors", "activated_tasks", [q]) or 0)
        mon = self._query(target, "collectors", "queue_monitor", [q])
        state = self._query(target, "collectors", "queue_state", [q])
        out: dict[str, Any] = {"tasks_running": tasks}
        if mon:
            out.update(monitor_state=mon[0][0], tasks_waiting=mon[0][1],
                       last_activated_time=mon[0][2], last_empty_rowset_time=mon[0][3])
        if state:
            out.update(is_receive_enabled=bool(state[0][0]), is_enqueue_enabled=bool(state[0][1]),
                       is_activation_enabled=bool(state[0][2]), max_readers=state[0][3])
        return out

    def server_cpu_percent(self) -> dict[str, float | None]:
        """Per SQL Server instance of the permutation: SQL Server's CPU use in percent of the
        whole machine, from the latest RING_BUFFER_SCHEDULER_MONITOR record (one a minute)."""
        out: dict[str, float | None] = {}
        for key, inst in self._active_servers().items():
            rows = self._query(inst, "collectors", "server_cpu", database="master")
            out[self._server_label(key)] = float(rows[0][0]) if rows and rows[0][0] is not None else None
        return out

    def messages_processed(self) -> int:
        target, _ = self._active()
        return int(self._scalar(target, "target", "processed_total") or 0)

    def e2e_latencies_us(self, start_epoch: float, end_epoch: float) -> list[int]:
        target, inits = self._active()
        off_t = self._offsets_s.get(target.server_key, 0.0)
        # the window in the target's clock (received_at is SYSUTCDATETIME() there)
        start = _EPOCH + dt.timedelta(seconds=start_epoch + off_t)
        end = _EPOCH + dt.timedelta(seconds=end_epoch + off_t)
        skew_us = {idx: round((off_t - self._offsets_s.get(inst.server_key, off_t)) * 1e6)
                   for idx, inst in enumerate(inits, start=1)}
        rows = self._query(target, "target", "e2e_latencies", [start, end], purpose="admin")
        return [max(0, int(us) - skew_us.get(int(i), 0)) for i, us in rows]

    def errors(self) -> list[tuple]:
        target, _ = self._active()
        return self._query(target, "target", "error_samples")

    def close(self) -> None:
        self._pool.close_all()

    # ------------------------------------------------------------------ check / teardown
    def check(self, max_initiators: int | None = None) -> list[tuple[str, str, str]]:
        """Preflight: ``[(status, what, detail)]`` with status ``ok``, ``warn`` or ``fail``.
        Connection failures raise (they are the first thing to fix)."""
        topo = self.topology
        out: list[tuple[str, str, str]] = []
        have = driver.drivers()
        if topo.driver.name in have:
            out.append(("ok", "ODBC driver", f"{topo.driver.name} (unixODBC has: {', '.join(have)})"))
        else:
            out.append(("fail", "ODBC driver", f"{topo.driver.name!r} is not installed; unixODBC "
                                               f"has: {', '.join(have) or 'none'}"))
            return out
        insts = topo.used_instances(max_initiators)
        pairs = topo.pairs(max_initiators)
        for key, inst in self._servers(insts).items():
            label = f"server {self._server_label(key)} ({key})"
            row = self._server_info(inst)
            ok = _version_tuple(row[0]) >= MIN_VERSION
            out.append(("ok" if ok else "fail", label,
                        f"SQL Server {row[0]} {row[1]}, logged in as {row[4]}"
                        + ("" if ok else "; needs 2016 SP1 (13.0.4001) or later")))
            perms = self._query(inst, "server", "permissions", database="master", purpose="admin")[0]
            control, vss, cep, ala, cad = (bool(x) for x in perms[:5])
            out.append(("ok" if vss else "fail", label,
                        "VIEW SERVER STATE (DMV collectors)" + ("" if vss else " missing")))
            if topo.layout == "distributed":
                good = control or (cep and ala)
                out.append(("ok" if good else "fail", label,
                            "CREATE ENDPOINT + ALTER ANY LOGIN (endpoint, peer logins)"
                            + ("" if good else " missing: grant CONTROL SERVER or both")))
                eps = self._query(inst, "server", "broker_endpoints", database="master", purpose="admin")
                if not eps:
                    out.append(("warn", label, "no Service Broker endpoint yet (provision creates "
                                               f"[{topo.broker.endpoint_name}] on port {inst.broker_port})"))
                elif eps[0][0] != topo.broker.endpoint_name:
                    out.append(("fail", label, f"another Service Broker endpoint [{eps[0][0]}] exists "
                                               f"(port {eps[0][1]}); set broker.endpoint_name: {eps[0][0]}"))
                else:
                    good = eps[0][2] == "STARTED" and eps[0][1] == inst.broker_port
                    out.append(("ok" if good else "warn", label,
                                f"endpoint [{eps[0][0]}] port {eps[0][1]} {eps[0][2]}, "
                                f"authentication {eps[0][3]}, certificate {eps[0][5]}"))
        guids: dict[str, str] = {}
        for inst in insts:
            label = f"database {inst.where()}"
            info = self._database_info(inst)
            if info is None:
                status = "warn" if topo.broker.create_databases else "fail"
                out.append((status, label, "does not exist"
                            + (" (provision creates it)" if status == "warn" else "")))
                continue
            guid = str(info[3]).lower()
            self._guids[inst.name] = guid
            dup = [n for n, g in guids.items() if g == guid]
            guids[inst.name] = guid
            out.append(("ok" if info[2] else "warn", label,
                        f"{info[5]}, broker {'enabled' if info[2] else 'disabled (provision enables it)'}, "
                        f"GUID {guid}, DELAYED_DURABILITY {info[4]}, owner {info[6]}"))
            if info[6] is None:
                out.append(("fail", label, "the database owner's login does not exist on this "
                                           "server (a restored database?): EXECUTE AS OWNER fails; "
                                           f"run ALTER AUTHORIZATION ON DATABASE::[{inst.database}] "
                                           "TO [sa]"))
            if dup:
                out.append(("warn", label, f"same broker GUID as {', '.join(dup)} (provision runs NEW_BROKER)"))
            b = topo.broker
            rows = self._query(inst, "objects", "objects_present",
                               [b.message_type, b.contract, b.queue, b.service], purpose="admin")
            pres = rows[0] if rows else (0,) * 7
            if not pres[6]:
                out.append(("fail", label, "the login is not db_owner here"))
            objs = all(pres[:4])
            out.append(("ok" if objs else "warn", label,
                        "Service Broker objects present" if objs else "not provisioned yet"))
            if objs:
                stuck = self._query(inst, "objects", "transmission_status", purpose="admin")
                for to_service, to_broker, status, n in stuck:
                    if status:
                        out.append(("warn", label, f"{n} message(s) to {to_service} ({to_broker}) "
                                                   f"stuck in sys.transmission_queue: {status}"))
        for t, i, _ in pairs:
            if t.name not in guids or i.name not in guids:
                continue
            routes = {r[0]: r for r in self._query(i, "objects", "routes", purpose="admin")}
            r = routes.get(f"ssbench_to_{t.name}")
            if r is None:
                out.append(("warn", f"route {i.name} -> {t.name}", "missing (run provision)"))
            elif str(r[2]).lower() != guids[t.name]:
                out.append(("warn", f"route {i.name} -> {t.name}",
                            f"names broker {r[2]} but {t.name} has {guids[t.name]} (run provision)"))
            else:
                out.append(("ok", f"route {i.name} -> {t.name}", f"{r[3]}"))
        return out

    def teardown(self, drop_databases: bool = False) -> None:
        """Remove what provision created (all profiles). Databases stay unless asked."""
        topo = self.topology
        pairs = topo.pairs()
        insts = topo.used_instances()
        partners: dict[str, list[Instance]] = {}
        for t, i, _ in pairs:
            partners.setdefault(t.name, []).append(i)
            partners.setdefault(i.name, []).append(t)
        for inst in insts:
            if self._database_info(inst) is None:
                continue
            names = self._names()
            self._run(inst, "teardown", "end_conversations", names)
            for p in partners.get(inst.name, []):
                self._run(inst, "teardown", "route_drop", {"route": f"ssbench_to_{p.name}"})
            binding = f"ssbench_rsb_{partners[inst.name][0].name}" if topo.role(inst) == "initiator" \
                else "ssbench_rsb_none"
            self._run(inst, "teardown", "broker_objects", {**names, "binding": binding})
            for p in partners.get(inst.name, []):
                self._run(inst, "teardown", "proxy_drop",
                          {"certificate": self._dialog_cert(p), "user": self._peer_user(p.name)})
            self._run(inst, "teardown", "code_and_tables", names)
            self._run(inst, "teardown", "own_certificate_drop", {"certificate": self._dialog_cert(inst)})
        if topo.layout == "distributed":
            servers = self._servers(insts)
            for key, inst in servers.items():
                for other in insts:
                    if other.server_key == key:
                        self._run(inst, "server", "msdb_route_drop",
                                  {"route": f"ssbench_local_{other.name}"}, database="msdb")
                self._run(inst, "server", "endpoint_drop", {"endpoint": topo.broker.endpoint_name},
                          database="master")
                for peer in servers:
                    if peer != key:
                        pl = self._server_label(peer)
                        self._run(inst, "server", "peer_drop",
                                  {"certificate": f"ssbench_transport_{pl}",
                                   "user": f"ssbench_peer_{pl}", "login": f"ssbench_peer_{pl}"},
                                  database="master")
                self._run(inst, "server", "drop_certificate",
                          {"certificate": f"ssbench_transport_{self._server_label(key)}"},
                          database="master")
        if drop_databases:
            for inst in insts:
                self._pool.discard(inst.server_key, inst.database)
                self._run(inst, "server", "drop_database", {"database": inst.database},
                          database="master")

    # ------------------------------------------------------------------ a tiny end-to-end flow
    def smoke(self, messages: int = 10, usable: int = 2, every_n: int = 1, timeout: float = 60.0,
              profile: str | None = None) -> Counts:
        """Prepare, create dialogs, warm up, send ``messages`` per initiator through real
        senders, drain; raises TargetError unless every message arrived."""
        from .sender import open_sender

        prof = self.topology.profile(profile)
        n = len(prof.initiators)
        self.prepare(n, prof.name, BrokerSettings(max_queue_readers=2, receive_top=1000,
                                                  waitfor_timeout_ms=1000))
        for i in range(1, n + 1):
            self.create_dialogs(i, usable, every_n)
            self.warm_up(i)
        for i in range(1, n + 1):
            sender = open_sender(self.sender_spec(i))
            try:
                handles = [sender.dialog(k) for k in range(1, usable + 1)]
                for m in range(messages):
                    sender.send(handles[m % usable], bytes(100))
            finally:
                sender.close()
        c = self.drain(timeout)
        if c.sent != n * messages or c.received != c.sent or c.in_flight:
            detail = [f"i{x.initiator}: sent {x.sent}, received {x.received}, xmitq {x.xmitq}"
                      for x in c.initiators]
            stuck = []
            for inst in [self._active()[0], *self._active()[1]]:
                for row in self._query(inst, "objects", "transmission_status", purpose="admin"):
                    if row[2]:
                        stuck.append(f"{inst.name}: {row[2]}")
            raise TargetError("smoke test failed: " + "; ".join(detail)
                              + f"; target queue {c.target_queue}, errors {c.errors}"
                              + (f"; transmission_status: {' | '.join(stuck)}" if stuck else ""))
        return c


def parse_perf_counters(rows: Iterable[tuple]) -> list[PerfCounter]:
    """Rows of (object_name, counter_name, instance_name, cntr_value, cntr_type) ->
    PerfCounters for the Broker objects, object names without the instance prefix."""
    out = []
    for obj, counter, instance, value, ctype in rows:
        name = counter_object(str(obj))
        kind = COUNTER_KINDS.get(int(ctype))
        if name is None or kind is None:
            continue
        out.append(PerfCounter(name, str(counter).strip(), str(instance or "").strip(),
                               float(value), kind))
    return out


__all__ = ["MssqlTarget", "BENIGN_WAITS", "is_benign_wait", "parse_perf_counters",
           "counter_object", "message_prefix"]
