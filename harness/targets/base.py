"""The driver interface every system under test implements, in three small parts.

:class:`Target` (lifecycle, exact accounting, :class:`Capabilities`, :class:`TargetConfig`),
:class:`~harness.targets.sender.Sender` and :class:`~harness.targets.telemetry.Telemetry`,
re-exported here. Code outside ``harness/targets/`` uses only these, never a target's kind
(tests/test_architecture.py); docs/targets.md is the guide to writing a target.
"""

from __future__ import annotations

import abc
import contextlib
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ..errors import UserError, full_disk
from ..matrix import BrokerSettings
from ..results.summary import Accounting as Counts, InitiatorAccount as InitiatorCounts  # what counts() returns
from .sender import SendPaths, SendPump, Sender, open_sender, sender_factory
from .telemetry import PerfCounter, Telemetry, WaitStat


def wait_until(done: Callable[[], Any], timeout: float, poll: float) -> bool:
    """Ask ``done()`` every ``poll`` seconds until it is true (True) or ``timeout`` seconds have
    passed (False): the targets' waits for their server to settle."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll)
    return True


@dataclass(frozen=True)
class Capabilities:
    """What a target class implements beyond the required lifecycle. The matrix is checked
    against it before anything starts; run.json records it (``target.capabilities``), so the
    analysis reads it instead of the target's kind."""

    #: conversation priority: a ``priority`` axis and ``broker.high_priority_share``
    #: (:meth:`Telemetry.e2e_latencies_by_priority_us`)
    priority: bool = False
    #: the backlog drain (``run.backlog_messages``): :meth:`Target.set_activation`
    backlog: bool = False
    #: finite dialog lifetimes (``messages_per_dialog``): its senders' ``set_dialog_lifetime``
    dialog_lifetime: bool = False
    #: emulation knobs to build a bottleneck on purpose (docs/embedded.md): a transport rate
    #: limit (``broker.transport_rate_limit``) and a client CPU cost per SEND
    #: (``broker.client_cpu_us_per_send``)
    transport_rate_limit: bool = False
    client_cpu_per_send: bool = False
    #: alternated windows (``run.alternate``): :meth:`Telemetry.e2e_sent_latencies_us`
    alternate: bool = False
    #: the matrix's ``embedded_profiles:`` section maps ``axes.server`` values to its profiles
    profile_aliases: bool = False
    #: the engine whose numbers these are when the target emulates Service Broker on another
    #: one (e.g. "PostgreSQL"): reports then call it "<engine> emulation", never SQL Server
    emulation: str | None = None

    #: the matrix features among the capabilities (harness.matrix.Matrix.check_servers)
    FEATURES: ClassVar[tuple[str, ...]] = ("priority", "backlog", "dialog_lifetime", "transport_rate_limit",
                                           "client_cpu_per_send", "alternate")

    def features(self) -> frozenset[str]:
        return frozenset(f for f in self.FEATURES if getattr(self, f))


@dataclass(frozen=True)
class ConnectionBudget:
    """The connections a target's server accepts, and what the target itself takes of them for
    a permutation: ``fixed`` (its broker process, collectors, the runner, reserved slots), one
    per queue reader, ``per_initiator`` per initiator (the transport). Every client thread is
    one more connection (its own, as in the paper)."""

    limit: int
    fixed: int = 0
    per_initiator: int = 0
    per_reader: int = 1

    def needed(self, perm) -> int:
        return (perm.initiators * perm.threads + self.fixed + self.per_initiator * perm.initiators
                + self.per_reader * perm.broker.max_queue_readers)


@dataclass(frozen=True)
class TargetConfig:
    """What ``--target`` says about a target, read without connecting or starting anything
    (:meth:`Target.read_config`): the commands check the matrix and the load settings with it
    before they build the target (:meth:`Target.from_config`)."""

    name: str                                   # the target's registered name
    profiles: tuple[str, ...]                   # names usable on the matrix's server axis
    capabilities: Capabilities
    #: the target's configuration file, if it has one; its ``client_hosts:`` section belongs to
    #: the load layer (harness.load.hosts)
    file: Path | None = None
    #: the server's connections and what the target takes of them (None: not known without
    #: connecting; the matrix is not checked against them)
    connections: ConnectionBudget | None = None
    #: the initiators' names a ``client_hosts:`` section may use
    initiator_names: tuple[str, ...] = ()
    #: what the target's class read (e.g. a parsed topology), handed back to from_config
    detail: Any = field(default=None, compare=False, repr=False)

    def alias_profiles(self) -> list[str] | None:
        """The profiles the matrix's ``embedded_profiles:`` values must name, when this target
        reads that section (None: it does not)."""
        return list(self.profiles) if self.capabilities.profile_aliases else None

    def check_matrix(self, matrix) -> None:
        """The matrix's server axis and the features it uses, against this target
        (:meth:`harness.matrix.Matrix.check_servers`), and its client threads against the
        server's connections (:attr:`connections`); UserError at the offending line."""
        matrix.check_servers(self.name, self.profiles, supports=self.capabilities.features(),
                             aliases=self.capabilities.profile_aliases)
        budget = self.connections
        for perm in matrix.permutations() if budget is not None else ():
            if budget.needed(perm) > budget.limit:
                fld = next(f for f, t in matrix.axis_items("threads") if t == perm.threads)
                spare = budget.limit - budget.needed(perm) + perm.initiators * perm.threads
                raise UserError(f"{perm.initiators} initiator(s) x {perm.threads} threads need "
                                f"{perm.initiators * perm.threads} client connections, and the {self.name} target's "
                                f"server takes {budget.limit} in all ({spare} left for clients with this "
                                f"permutation's {perm.broker.max_queue_readers} queue readers): permutation "
                                f"{perm.id}", file=str(matrix.path), line=matrix.lines.get(fld), field=fld)


class Target(abc.ABC):
    """A system under test: an initiator/target Service Broker topology, its lifecycle and its
    exact accounting."""

    #: the name results record (run.json and every summary's ``target.kind``)
    kind: ClassVar[str]
    capabilities: ClassVar[Capabilities] = Capabilities()
    #: ``--target NAME:ARG``: what ARG is, for help and errors (None: the target takes none)
    option: ClassVar[str | None] = None
    #: a bare path given as ``--target`` (an existing file) means this target
    opens_files: ClassVar[bool] = False

    #: Human label used in every report and plot, e.g. "PostgreSQL 18.1 emulation of Service
    #: Broker" or "SQL Server 16.0.4135.4". Embedded numbers are never labelled SQL Server.
    label: str = ""

    # ---------------------------------------------------------------- configuration
    @classmethod
    @abc.abstractmethod
    def read_config(cls, arg: str | None) -> TargetConfig:
        """Read and check ``--target``'s argument (None: the name alone) without connecting;
        a bad one is a UserError naming the file, line and field."""

    @classmethod
    @abc.abstractmethod
    def from_config(cls, config: TargetConfig) -> "Target":
        """Build the target (this may connect, or start a server the target owns)."""

    @property
    def telemetry(self) -> Telemetry:
        """What the collectors read: by default the target itself, when its class implements
        :class:`Telemetry`; a target may hand out another object instead."""
        if isinstance(self, Telemetry):
            return self
        raise TypeError(f"{type(self).__name__} implements no Telemetry: derive from it, or override telemetry")

    # ---------------------------------------------------------------- provenance
    @abc.abstractmethod
    def describe(self) -> dict[str, Any]:
        """Provenance for run.json: kind, label, capabilities (:meth:`declared`), server
        versions, topology (passwords redacted), settings that matter. JSON-able."""

    def declared(self) -> dict[str, Any]:
        """The part of :meth:`describe` every target has: kind, label, capabilities."""
        return {"kind": self.kind, "label": self.label, "capabilities": asdict(self.capabilities)}

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

    def settle(self) -> None:
        """Bring the target to a steady state before a measured window, after the warm-up and
        before :meth:`start` (embedded: vacuum, checkpoint, WAL segments in reserve). The
        default does nothing."""

    def start(self) -> None:
        """Start whatever moves and processes messages (embedded: the transport and the queue
        monitor). The default starts nothing: the server does it (SQL Server)."""

    def stop(self) -> None:
        """Stop what :meth:`start` started. Idempotent."""

    @abc.abstractmethod
    def sender_spec(self, initiator: int) -> dict[str, Any]:
        """JSON-able spec :func:`open_sender` turns into a :class:`Sender` in any process.
        Must contain ``"sender"`` (a name registered in ``ssbench.senders``) and no password."""

    def set_activation(self, enabled: bool) -> None:
        """ALTER QUEUE ... WITH ACTIVATION (STATUS = ON | OFF) on the target queue (the backlog
        drain, docs/matrices.md; the ``backlog`` capability). Off: no new activation task
        starts, and this returns once the running ones have finished (their WAITFOR timed out),
        so nothing is received until it is turned on again; messages accumulate in the queue.
        On: the queue monitor starts tasks again, up to MAX_QUEUE_READERS. ``prepare`` turns
        activation on."""
        raise NotImplementedError(f"the {self.kind} target cannot turn activation off and on")

    def run_lock(self, owner: str) -> contextlib.AbstractContextManager:
        """Held for a run's (or a web session's) lifetime so two runs cannot reset the same
        databases under each other; a second holder gets :class:`~harness.errors.UserError`
        naming the first. ``owner`` says who holds it (e.g. the run directory). The default
        locks nothing: a target whose state other runs cannot touch needs no lock."""
        return contextlib.nullcontext()

    def close(self) -> None:
        """Release connections. Idempotent."""

    def closing_note(self) -> str:
        """What a user should know once ssbench let go of the target (e.g. a server it leaves
        running); empty by default."""
        return ""

    def interactive_broker(self, max_queue_readers: int) -> BrokerSettings:
        """Broker settings for interactive use (the web UI), with ``max_queue_readers``."""
        return BrokerSettings(max_queue_readers=max_queue_readers)

    # ---------------------------------------------------------------- accounting
    @abc.abstractmethod
    def counts(self) -> Counts:
        """Exact message accounting since the last :meth:`prepare` (warm-up excluded)."""

    def sent_while_running(self) -> int:
        """SENDs the initiators committed since :meth:`prepare` (warm-up excluded), read while
        senders run (the backlog fill polls it): a target whose exact count would wait on the
        senders' open transactions reads without waiting. By default :meth:`counts`' ``sent``."""
        return self.counts().sent

    def broker_restarts(self) -> int:
        """Times the target's own broker side died and was restarted since :meth:`prepare`
        (0 where the server runs its broker itself, as SQL Server does)."""
        return 0

    def disk_full(self, errors: Iterable[str] = ()) -> str | None:
        """One line naming the target's full disk and what to do, when ``errors`` (the words of
        errors its clients saw) or the target's own record say its disk is full; else None."""
        hit = full_disk(errors)
        return None if hit is None else f"the target's disk is full ({hit}): free space on it"

    def drain(self, timeout: float, poll: float = 0.25, lock=None, stop=None) -> Counts:
        """Wait until every transmission queue and the target queue are empty and everything
        sent was received, the queue is disabled, the target's disk is full
        (:meth:`disk_full`), ``stop`` (an Event) is set, or timeout.
        ``lock`` (the runner's target lock) is taken per poll only, so collectors sharing the
        target keep sampling during the drain. :meth:`counts` is read once :meth:`queues_busy`
        says nothing is queued. Returns the final counts either way."""
        guard = lock if lock is not None else contextlib.nullcontext()
        deadline = time.monotonic() + timeout

        def over() -> bool:
            return time.monotonic() >= deadline or (stop is not None and stop.is_set())

        while True:
            with guard:
                busy = self.queues_busy()
            if not busy or over():
                with guard:
                    c = self.counts()
                    full = not (c.settled or c.queue_disabled) and self.disk_full() is not None
                if c.settled or c.queue_disabled or full or over():
                    return c
            time.sleep(poll)

    def queues_busy(self) -> bool:
        """A cheap look, before :meth:`drain` reads the exact counts: messages are still queued.
        False by default (the counts are read every poll)."""
        return False
