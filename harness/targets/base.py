"""The narrow interface every system under test implements.

Two targets implement it: ``embedded`` (a PostgreSQL-hosted emulation of Service Broker's
send / transmit / receive path, :mod:`harness.targets.embedded`) and ``mssql`` (a real SQL
Server through pyodbc, :mod:`harness.targets.mssql`). The runner, the Locust users, the
collectors and the web UI only ever talk to a target through this module.

Shapes follow SQL Server's DMVs so collectors compute the same things on both targets:

* :meth:`Target.wait_stats` is shaped like ``sys.dm_os_wait_stats`` (cumulative).
* :meth:`Target.perf_counters` is shaped like ``sys.dm_os_performance_counters`` rows.
* :meth:`Target.queue_depths` gives transmission-queue and target-queue depth.

Load generation runs in other processes (Locust workers), so a target hands out a JSON-able
:meth:`Target.sender_spec` and :func:`open_sender` turns it into a :class:`Sender` anywhere.
Specs never contain a password: SQL Server passwords are read from environment variables.
"""

from __future__ import annotations

import abc
import contextlib
import importlib
import re
from dataclasses import dataclass
from typing import Any, Callable, ClassVar

from ..matrix import BrokerSettings
from ..results.summary import Accounting, InitiatorAccount
from ..errors import TargetError


@dataclass(frozen=True)
class WaitStat:
    """One row of sys.dm_os_wait_stats (cumulative since the target's counters were reset)."""

    wait_type: str
    waiting_tasks: int
    wait_time_ms: float


@dataclass(frozen=True)
class PerfCounter:
    """One row of sys.dm_os_performance_counters.

    ``kind`` is ``"cumulative"`` (a */sec counter: the raw value only grows; collectors turn
    deltas into rates) or ``"gauge"`` (a current value such as Tasks Running).
    ``object_name`` carries no instance prefix ("Broker Activation", "Broker Statistics",
    "Broker/DBM Transport").
    """

    object_name: str
    counter_name: str
    instance_name: str
    value: float
    kind: str = "cumulative"


#: one initiator's exact counts (sent, received, still in its transmission queue): the results
#: contract's own type, so the accounting the runner reports is the target's, field for field
InitiatorCounts = InitiatorAccount


@dataclass
class Counts:
    """Exact accounting after a drain poll, as the target counts it."""

    initiators: list[InitiatorCounts]
    target_queue: int            # messages waiting in the target's service queue
    errors: int = 0              # rows in the target's error table (poison messages)
    queue_disabled: bool = False  # five consecutive rollbacks disabled the queue

    def accounting(self) -> Accounting:
        return Accounting(initiators=list(self.initiators), poison_messages=self.errors,
                          queue_disabled=self.queue_disabled, in_flight=self.in_flight)

    @property
    def sent(self) -> int:
        return self.accounting().sent

    @property
    def received(self) -> int:
        return self.accounting().received

    @property
    def in_flight(self) -> int:
        return sum(c.xmitq for c in self.initiators) + self.target_queue

    @property
    def settled(self) -> bool:
        """Queues empty and every message sent accounted for: processed, or in the error table
        (a poison message is received and logged, not lost)."""
        return self.in_flight == 0 and self.received + self.errors >= self.sent


class Sender(abc.ABC):
    """One client connection to one initiator: what one Locust user (client thread) holds.

    Implementations may block (database drivers do); the Locust user offloads every call to a
    real thread, so a Sender must be usable from a thread other than the one that opened it
    (one call at a time).
    """

    @abc.abstractmethod
    def dialog(self, slot: int) -> str:
        """Handle of usable dialog ``slot`` (1-based; the paper's ``dbo.dialogs`` row k)."""

    @abc.abstractmethod
    def send(self, dialog: str, payload: bytes) -> None:
        """SEND ON CONVERSATION ``dialog`` one message carrying ``payload``, in its own
        transaction. The target stamps the send time into the message body."""

    @abc.abstractmethod
    def close(self) -> None:
        """Close the connection (callers make sure no call is in flight)."""

    def set_dialog_lifetime(self, messages_per_dialog: int | None, fire_and_forget: bool = False) -> None:
        """Retire each dialog after ``messages_per_dialog`` messages and begin a new one (None:
        reuse for ever); ``fire_and_forget``: END it right after its last SEND (docs/matrices.md)."""
        if messages_per_dialog:
            raise TargetError(f"{type(self).__name__} does not support messages_per_dialog")

    def pump(self, dialog: str, payload: bytes) -> "SendPump | None":
        """The cheapest SEND path, for drivers that can SEND without blocking: a :class:`SendPump`
        for SENDs of ``payload`` on ``dialog`` that an event loop drives (harness.load.hubloop),
        or None (the default) when this sender cannot (then a blocking path is used)."""
        return None


class SendPump(abc.ABC):
    """One connection's SEND as non-blocking steps, driven by an event loop that watches
    :attr:`fileno`. The loop owns the connection while it drives it: nothing else uses it.

    ``begin()`` queues one SEND; ``flush()`` writes what is left when the socket is writable;
    ``read()``, when it is readable, takes what arrived: ``(False, None)`` the SEND is not
    complete yet, ``(True, None)`` it committed, ``(True, exc)`` it failed with ``exc`` (a lost
    connection included: the sender's blocking ``send`` reconnects afterwards)."""

    fileno: int

    @abc.abstractmethod
    def begin(self) -> bool:
        """Queue one SEND; True when output is still to be flushed (wait until writable)."""

    @abc.abstractmethod
    def flush(self) -> bool:
        """Write queued output; True when some is still left."""

    @abc.abstractmethod
    def read(self) -> tuple[bool, BaseException | None]:
        """Consume input: (complete, error)."""


class Target(abc.ABC):
    """A system under test: an initiator/target Service Broker topology."""

    kind: ClassVar[str]

    #: Human label used in every report and plot, e.g. "PostgreSQL 18.1 emulation of Service
    #: Broker" or "SQL Server 16.0.4135.4". Embedded numbers are never labelled SQL Server.
    label: str = ""

    # ---------------------------------------------------------------- provenance
    @abc.abstractmethod
    def describe(self) -> dict[str, Any]:
        """Provenance for run.json: kind, label, server versions, topology (passwords
        redacted), settings that matter. JSON-able."""

    @abc.abstractmethod
    def profiles(self) -> list[str]:
        """Names usable on the matrix's ``server`` axis."""

    # ---------------------------------------------------------------- lifecycle
    @abc.abstractmethod
    def provision(self, max_initiators: int) -> None:
        """Create (idempotently) everything the topology needs for up to ``max_initiators``."""

    @abc.abstractmethod
    def prepare(self, initiators: int, profile: str, broker: BrokerSettings) -> None:
        """Start a permutation from a clean state: clear every conversation and message (the
        analogue of SET NEW_BROKER), reset cumulative counters where the target can, apply the
        server profile and the queue's broker settings (MAX_QUEUE_READERS, RECEIVE TOP,
        WAITFOR timeout)."""

    @abc.abstractmethod
    def create_dialogs(self, initiator: int, usable: int, every_n: int) -> int:
        """BEGIN DIALOG ``usable * every_n`` times on ``initiator``; keep every ``every_n``-th
        handle in the dialogs table as slots 1..usable (the paper's 150 trick when every_n is
        150). Returns the number of dialogs begun."""

    @abc.abstractmethod
    def warm_up(self, initiator: int) -> int:
        """Send one short message on every conversation begun on ``initiator`` (the paper's
        warm-up, so the target's receive-side endpoints exist). Returns messages sent; they do
        not count in :meth:`counts`' ``sent``."""

    @abc.abstractmethod
    def start(self) -> None:
        """Start whatever moves and processes messages (embedded: the transport and the queue
        monitor; SQL Server: nothing, the server does it)."""

    @abc.abstractmethod
    def stop(self) -> None:
        """Stop what :meth:`start` started. Idempotent."""

    @abc.abstractmethod
    def counts(self) -> Counts:
        """Exact message accounting since the last :meth:`prepare` (warm-up excluded)."""

    def drain(self, timeout: float, poll: float = 0.25, lock=None, stop=None) -> Counts:
        """Wait until every transmission queue and the target queue are empty and everything
        sent was received, the queue is disabled, ``stop`` (an Event) is set, or timeout.
        ``lock`` (the runner's target lock) is taken per poll only, so collectors sharing the
        target keep sampling during the drain. Returns the final counts either way."""
        import contextlib
        import time

        deadline = time.monotonic() + timeout
        while True:
            with lock if lock is not None else contextlib.nullcontext():
                c = self.counts()
            if c.settled or c.queue_disabled or time.monotonic() >= deadline \
                    or (stop is not None and stop.is_set()):
                return c
            time.sleep(poll)

    @abc.abstractmethod
    def sender_spec(self, initiator: int) -> dict[str, Any]:
        """JSON-able spec :func:`open_sender` turns into a :class:`Sender` in any process.
        Must contain ``"kind"`` and no password."""

    # ---------------------------------------------------------------- telemetry
    @abc.abstractmethod
    def wait_stats(self) -> list[WaitStat]:
        """Cumulative wait statistics, SQL Server wait-type names, benign waits excluded."""

    @abc.abstractmethod
    def perf_counters(self) -> list[PerfCounter]:
        """Broker Activation, Broker Statistics (and Broker/DBM Transport where it exists)."""

    @abc.abstractmethod
    def queue_depths(self, exact: bool = False) -> dict[str, int]:
        """``{"xmitq.i1": n, ..., "queue": n}``: fast approximate counts by default (partition
        row counts), exact counts (COUNT(*)) when ``exact``."""

    @abc.abstractmethod
    def messages_processed(self) -> int:
        """Cumulative messages processed by the target's activation procedure (the tally)."""

    @abc.abstractmethod
    def e2e_latencies_us(self, start_epoch: float, end_epoch: float) -> list[int]:
        """End-to-end latency (receive time minus the send time stamped in the message), in
        microseconds, of every message processed within [start, end) (epoch seconds)."""

    def e2e_latencies_by_priority_us(self, start_epoch: float, end_epoch: float) -> dict[str, list[int]]:
        """:meth:`e2e_latencies_us` split by dialog priority (``high``, ``normal``) for a
        ``priority`` axis; empty where the target does not implement priority."""
        return {}

    def dialog_stats(self) -> dict[str, Any] | None:
        """Dialog lifetime accounting since the last prepare (docs/matrices.md): ``dialogs_begun``
        and ``dialogs_ended`` by the initiators' SEND path, Error messages ``errors_received`` and
        ``errors_lost`` (reached an endpoint its side had ended), and ``endpoints``: conversation
        endpoints left behind by side and state (``initiator.CD``, ``target.DO``, ...). None when
        the target cannot tell."""
        return None

    # ---------------------------------------------------------------- diagnosis evidence (docs/diagnosis.md)
    def activated_tasks(self) -> tuple[int, int] | None:
        """(activation tasks running now for the test's queue, its MAX_QUEUE_READERS): SQL
        Server's sys.dm_broker_activated_tasks against sys.service_queues.max_readers. None where
        the target cannot tell."""
        return None

    def procedure_time(self, start_epoch: float, end_epoch: float) -> dict[str, float] | None:
        """The activation procedure's own time, from each RECEIVE's return to the end of its
        processing (before COMMIT), over [start, end) (epoch seconds): ``seconds`` of it inside
        the window (all tasks), and of the RECEIVEs that returned inside it ``batch_seconds``
        (their whole time), ``messages`` (data messages) and ``receives``. None where unknown."""
        return None

    def broker_waits(self) -> list[WaitStat]:
        """Cumulative Service Broker waits, idle ones included (BROKER_*: a reader waiting in its
        RECEIVE, a task stopping, the transmitter idle) and Service Broker latch classes
        (sys.dm_os_latch_stats: SERVICE_BROKER_WAITFOR_MANAGER, ...). Empty where unknown."""
        return []

    def page_latch_waiters(self) -> list[tuple[str, str, int]]:
        """Tasks waiting on a page latch now, by page: (wait type, the page's object, e.g.
        ``ssb_init1.sys.sysdesend``, or ``page 7:1:1234`` where the server cannot map it, tasks).
        Empty where the target has no page latches to show."""
        return []

    def server_cpu_percent(self) -> dict[str, float | None]:
        """CPU of remote database servers (percent of each machine), by server name, for
        servers the host collector cannot see (empty for local servers)."""
        return {}

    def server_pids(self) -> list[int]:
        """PIDs of the database server's processes on this host, for the host collector
        (empty for remote servers)."""
        return []

    def set_activation(self, enabled: bool) -> None:
        """ALTER QUEUE ... WITH ACTIVATION (STATUS = ON | OFF) on the target queue (the backlog
        drain, docs/matrices.md). Off: no new activation task starts, and this returns once the
        running ones have finished (their WAITFOR timed out), so nothing is received until it is
        turned on again; messages accumulate in the queue. On: the queue monitor starts tasks
        again, up to MAX_QUEUE_READERS. ``prepare`` turns activation on."""
        raise NotImplementedError(f"the {self.kind} target cannot turn activation off and on")

    def broker_restarts(self) -> int:
        """Times the target's own broker side died and was restarted since :meth:`prepare`
        (0 where the server runs its broker itself, as SQL Server does)."""
        return 0

    def run_lock(self, owner: str) -> contextlib.AbstractContextManager:
        """Held for a run's (or a web session's) lifetime so two runs cannot reset the same
        databases under each other; a second holder gets :class:`~harness.errors.UserError`
        naming the first. ``owner`` says who holds it (e.g. the run directory). The default
        locks nothing: a target whose state other runs cannot touch needs no lock."""
        return contextlib.nullcontext()

    def close(self) -> None:
        """Release connections. Idempotent."""


#: Built-in sender kinds -> their module. A spec may instead name its module itself
#: (``spec["module"]``, a dotted path importable in the Locust workers): the plugin hook tests
#: and experiments use for senders that are not targets (e.g. a server-side sleep).
SENDER_MODULES = {"embedded": "harness.targets.embedded.sender",
                  "mssql": "harness.targets.mssql.sender"}


def sender_factory(spec: dict[str, Any]) -> Callable[[dict[str, Any]], Sender]:
    """Import the sender module of ``spec`` (``spec["module"]``, else the built-in one of
    ``spec["kind"]``) and its driver; return its ``open_sender``.

    Does every import up front, so the returned function can run on pool threads: a Locust
    worker calls this in its main greenlet and opens connections on threads, where concurrent
    imports under gevent's patched locks can deadlock."""
    name = spec.get("module") or SENDER_MODULES.get(spec.get("kind"))
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", name):
        raise ValueError(f"sender spec of kind {spec.get('kind')!r}: no module to load "
                         f"(built-in kinds: {', '.join(SENDER_MODULES)}; or set \"module\")")
    module = importlib.import_module(name)
    prepare = getattr(module, "prepare", None)
    if prepare is not None:
        prepare()
    return module.open_sender


def open_sender(spec: dict[str, Any]) -> Sender:
    """Turn a :meth:`Target.sender_spec` into a connected :class:`Sender` (any process)."""
    return sender_factory(spec)(spec)
