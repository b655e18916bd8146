"""Connections and the shared state of a SQL Server topology in use.

:class:`ServerSession` is what every concern of :class:`~.target.MssqlTarget` shares: topology,
connection pool, the active permutation, what the servers said (versions, broker GUIDs, clock
offsets), and running a rendered template on an instance with one reconnect.
"""

from __future__ import annotations

import datetime as dt
import logging
import secrets
import threading
from typing import Any, Iterable

from ...errors import TargetError
from ...matrix import BrokerSettings
from . import driver, tsql
from .topology import Instance, Topology

log = logging.getLogger(__name__)

#: SQL Server 2016 SP1: CREATE OR ALTER, DROP ... IF EXISTS, DATEDIFF_BIG, CERTENCODED.
MIN_VERSION = (13, 0, 4001)

EPOCH = dt.datetime(1970, 1, 1)


def message_prefix(initiator: int, warmup: bool = False) -> bytes:
    """First 8 bytes of a message body: 'SSB1' (or 'SSBW'), the initiator as 3 digits, ';'."""
    if not 1 <= initiator <= 999:
        raise ValueError(f"initiator number {initiator} out of range")
    return (b"SSBW" if warmup else b"SSB1") + f"{initiator:03d}".encode("ascii") + b";"


def random_password() -> str:
    """For master keys and peer logins: strong, random, never stored (the service master key
    opens master keys; nobody logs in with a peer login's password)."""
    return "Ss1!" + secrets.token_urlsafe(30)


def as_datetime(value: Any) -> dt.datetime:
    """datetime2 arrives as datetime (ODBC Driver 18, FreeTDS with TDS 7.3+) or as text."""
    if isinstance(value, dt.datetime):
        return value
    text = str(value).strip().replace("T", " ")
    head, _, frac = text.partition(".")
    return dt.datetime.fromisoformat(head + ("." + frac[:6].ljust(6, "0") if frac else ""))


def version_tuple(version: str) -> tuple[int, ...]:
    """'16.0.4135.4' -> (16, 0, 4135); a part that is not a number counts 0."""
    return tuple(int(p) if p.isdigit() else 0 for p in version.split(".")[:3])


class Pool:
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

    def discard(self, server_key: str | None = None, database: str = "") -> None:
        """Close the connections to ``database`` on ``server_key`` (every one: None)."""
        with self._lock:
            keys = [k for k in self._conns if server_key is None or k[:2] == (server_key, database.lower())]
            conns = [self._conns.pop(k) for k in keys]
        for c in conns:
            c.close()


class ServerSession:
    """A topology, its connections and the active permutation."""

    def __init__(self, topology: Topology):
        self.topology = topology
        self._pool = Pool(topology)
        self._profile = topology.default_profile
        self._n_initiators = len(topology.profile(None).initiators)
        self._broker = BrokerSettings()
        self._offsets_s: dict[str, float] = {}      # server_key -> server clock - local clock
        self._versions: dict[str, str] = {}
        self._guids: dict[str, str] = {}            # instance name -> broker GUID
        #: databases whose options a prepare changed (name -> instance): close() puts them back
        self._changed: dict[str, Instance] = {}

    # ------------------------------------------------------------------ running templates
    def _names(self, **extra: Any) -> dict[str, Any]:
        b = self.topology.broker
        p: dict[str, Any] = {"message_type": b.message_type, "contract": b.contract,
                             "service": b.service, "queue": b.queue,
                             "activation_procedure": b.activation_procedure}
        p.update(extra)
        return p

    def _retrying(self, inst: Instance, database: str | None, purpose: str, fn) -> Any:
        """Run fn(conn); reconnect once if the connection was broken (SQLSTATE 08xxx)."""
        conn = self._pool.get(inst, database, purpose)
        try:
            return fn(conn)
        except driver.OdbcError as e:
            if not e.sqlstate.startswith("08"):
                raise
            log.info("%s: connection lost (%s); reconnecting", inst.name, e.sqlstate)
            self._pool.discard(inst.server_key, database or inst.database)
            return fn(self._pool.get(inst, database, purpose))

    def _run(self, inst: Instance, file: str, section: str, params: dict[str, Any] | None = None,
             database: str | None = None, purpose: str = "admin", timeout: Any = ...) -> None:
        batches = tsql.batches(file, section, params or {})
        self._retrying(inst, database, purpose,
                       lambda c: c.run_batches(batches, timeout=timeout, what=f"{file}.sql {section}"))

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

    # ------------------------------------------------------------------ which instances
    @staticmethod
    def _servers(insts: Iterable[Instance]) -> dict[str, Instance]:
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

    def _server_time(self, inst: Instance, epoch: float) -> dt.datetime:
        """``epoch`` (this machine's clock, seconds) in ``inst``'s server's clock (naive UTC)."""
        return EPOCH + dt.timedelta(seconds=epoch + self._offsets_s.get(inst.server_key, 0.0))

    def _active(self) -> tuple[Instance, list[Instance]]:
        return self.topology.active(self._profile, self._n_initiators)

    def _active_servers(self) -> dict[str, Instance]:
        target, inits = self._active()
        return self._servers([target, *inits])

    def _initiator(self, initiator: int) -> Instance:
        _, inits = self._active()
        if not 1 <= initiator <= len(inits):
            raise TargetError(f"initiator {initiator} is not active (this permutation uses "
                              f"{len(inits)} initiator(s))")
        return inits[initiator - 1]

    # ------------------------------------------------------------------ what the servers say
    def _server_info(self, inst: Instance) -> tuple:
        rows = self._query(inst, "server", "server_info", database="master")
        self._versions[inst.server_key] = rows[0][0]
        return rows[0]

    def _database_info(self, inst: Instance) -> tuple | None:
        rows = self._query(inst, "server", "database_info", [inst.database], database="master",
                           purpose="admin")
        return rows[0] if rows else None

    def _broker_guid(self, inst: Instance, refresh: bool = False) -> str:
        if refresh or inst.name not in self._guids:
            info = self._database_info(inst)
            if info is None:
                raise TargetError(f"database {inst.database} does not exist on {inst.server_key}")
            self._guids[inst.name] = str(info[3]).lower()
        return self._guids[inst.name]

    def _reset(self, inst: Instance, file: str = "objects", section: str = "call_reset") -> str | None:
        """Run ssbench_reset (every conversation of the service ended WITH CLEANUP, ssbench's
        tables emptied); a line saying what it left behind, or None when it left nothing."""
        rows = self._query(inst, file, section, params=self._names(), purpose="admin")
        _, left, failed = (int(x or 0) for x in rows[0][:3]) if rows and len(rows[0]) >= 3 else (0, 0, 0)
        if not left:
            return None
        return (f"{inst.where()}: the reset left {left} conversation(s) of {self.topology.broker.service} "
                f"({failed} END CONVERSATION WITH CLEANUP failed over three passes); their messages "
                "may be counted in the next permutation: run it again, or end them by hand")

    def _sent_counts(self, inst: Instance, live: bool = False) -> tuple[int, int, int]:
        """(SENDs committed, dialogs begun, dialogs ended) by the SEND path of an initiator
        database (its ssbench_counts, updated inside each sending transaction). ``live``: for the
        collectors while senders run, without waiting on their transactions (WITH (NOLOCK))."""
        rows = self._query(inst, "initiator", "sent_counts_live" if live else "sent_counts")
        return (int(rows[0][0] or 0), int(rows[0][1] or 0), int(rows[0][2] or 0)) if rows else (0, 0, 0)

    # ------------------------------------------------------------------ code the permutation sets
    def _install_initiator_code(self, inst: Instance, index: int) -> None:
        """The initiator's procedures with its number in the message header, and its queue's
        reader (ssbench_initiator_end) off until a sender with a finite dialog lifetime turns it
        on (ssbench_initiator_reader_on, up to the permutation's MAX_QUEUE_READERS)."""
        p = self._names(data_prefix=message_prefix(index), warmup_prefix=message_prefix(index, True),
                        dialog_encryption="ON" if self.topology.broker.dialog_encryption else "OFF",
                        initiator_readers=self._broker.max_queue_readers)
        for sec in ("begin_dialog_procedure", "send_procedure", "send_retiring_procedure", "create_dialogs_procedure",
                    "warm_up_procedure", "reset_procedure", "initiator_end_procedure",
                    "initiator_reader_procedure", "initiator_end_off"):
            self._run(inst, "initiator", sec, p)

    def _install_activation(self, target: Instance, broker: BrokerSettings) -> None:
        p = self._names(receive_top=broker.receive_top, waitfor_timeout_ms=broker.waitfor_timeout_ms,
                        max_queue_readers=broker.max_queue_readers,
                        processing_us_per_message=broker.processing_us_per_message)
        self._run(target, "target", "activation_procedure", p)
        self._run(target, "target", "activation_on", p)

    def close(self) -> None:
        self._pool.discard()
