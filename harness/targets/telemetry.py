"""What the collectors and the summary read from a target: :class:`Telemetry`.

Shaped like SQL Server's DMVs, so collectors compute the same on every target. Three methods are
required; the rest default to "cannot tell", and their collectors record nothing. A collector
needing more names a derived interface (its ``reads``) and runs only where it is implemented.
"""

from __future__ import annotations

import abc
from pathlib import Path
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class WaitStat:
    """One row of sys.dm_os_wait_stats (cumulative since the target's counters were reset)."""

    wait_type: str
    waiting_tasks: int
    wait_time_ms: float
    #: the part of wait_time_ms spent runnable, waiting for a CPU after the resource came free
    #: (sys.dm_os_wait_stats: wait_time_ms "is inclusive of signal_wait_time_ms"); None where the
    #: target cannot tell
    signal_wait_ms: float | None = None


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

    @property
    def is_gauge(self) -> bool:
        """A current value (passed through), not a cumulative counter (turned into a rate)."""
        return self.kind == "gauge"


class Telemetry(abc.ABC):
    """The telemetry of one target. Calls come from the sampling thread and the runner, one at
    a time (the runner's target lock)."""

    # ---------------------------------------------------------------- required
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

    # ---------------------------------------------------------------- optional: empty by default
    def wait_stats(self) -> list[WaitStat]:
        """Cumulative wait statistics, SQL Server wait-type names, benign waits excluded."""
        return []

    def perf_counters(self) -> list[PerfCounter]:
        """Broker Activation, Broker Statistics (and Broker/DBM Transport where it exists)."""
        return []

    def e2e_latencies_by_priority_us(self, start_epoch: float, end_epoch: float) -> dict[str, list[int]]:
        """:meth:`e2e_latencies_us` split by dialog priority (``high``, ``normal``), for targets
        that declare the ``priority`` capability."""
        return {}

    def e2e_sent_latencies_us(self, start_epoch: float, end_epoch: float) -> list[tuple[int, int]]:
        """(send time in epoch microseconds, :meth:`e2e_latencies_us`'s latency) of the same
        messages: an alternated window (``run.alternate``) gives each strategy the messages
        sent in its slices. For targets that declare the ``alternate`` capability."""
        return []

    def dialog_stats(self) -> dict[str, Any] | None:
        """Dialog lifetime accounting since the last prepare (docs/matrices.md): ``dialogs_begun``
        and ``dialogs_ended`` by the initiators' SEND path, Error messages ``errors_received`` and
        ``errors_lost`` (reached an endpoint its side had ended), and ``endpoints``: conversation
        endpoints left behind by side and state (``initiator.CD``, ``target.DO``, ...). None when
        the target cannot tell."""
        return None

    def dialog_counts(self) -> dict[str, Any] | None:
        """:meth:`dialog_stats`' counts, asked every tick while the load runs: a target whose
        endpoint breakdown costs more than a tick should (SQL Server: a GROUP BY over
        sys.conversation_endpoints) leaves ``endpoints`` out here and reads its counters without
        waiting on the senders. By default: dialog_stats."""
        return self.dialog_stats()

    # ---------------------------------------------------------------- the diagnosis' evidence (docs/diagnosis.md)
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

    def session_waits(self) -> list[tuple[str, str, int]] | None:
        """Sessions of the test waiting now, by role and wait type (benign waits excluded):
        (``"sender"`` (the load's SENDs) or ``"reader"`` (the activated RECEIVE tasks), SQL
        Server wait type, sessions). SQL Server: sys.dm_exec_requests of the load's and the
        activated tasks' sessions (sys.dm_broker_activated_tasks); sampled several times a
        second by the session-waits collector, which tells an alternated window's strategies
        apart by their slices. None where the target cannot tell."""
        return None

    def page_latch_waiters(self) -> list[tuple[str, str, int]]:
        """Tasks waiting on a page latch now, by page: (wait type, the page's object, e.g.
        ``ssb_init1.sys.sysdesend``, or ``page 7:1:1234`` where the server cannot map it, tasks).
        Empty where the target has no page latches to show."""
        return []

    def server_cpu_ms(self) -> dict[str, tuple[float, int]]:
        """Remote database servers the host collector cannot see, by server name: (CPU
        milliseconds the server used so far, cumulative; the CPUs it runs on). The collector
        samples it every tick, so the window's figure covers the window. Empty for local servers."""
        return {}

    def log_flush_stats(self) -> tuple[float, float] | None:
        """Cumulative (log flushes, milliseconds spent in them) of the target's server: its
        commit latency (embedded: PostgreSQL's WAL fsyncs; SQL Server: the log file's writes and
        write stall). None where the target cannot tell."""
        return None

    def log_sizes_mb(self) -> dict[str, float]:
        """The size of each of the test's databases' logs now, MB, by database: a log that grew
        inside the measured window autogrew under the load. Empty where unknown."""
        return {}

    def log_events(self, start_epoch: float, end_epoch: float) -> list[str]:
        """What ran on the test's databases' logs during [start, end) (epoch seconds) that the
        load competed with, one line each: SQL Server's backups (msdb.dbo.backupset). Empty
        where unknown."""
        return []

    def storage_probe_dir(self) -> "str | Path | None":
        """A directory on the file system of the target's data where the storage collector may
        time small fsyncs (the embedded server's data directory's parent); None for a remote
        server."""
        return None

    def blocking_chains(self, start_epoch: float, end_epoch: float) -> dict[str, float]:
        """Diagnostic: who blocked whom within [start, end) (epoch seconds), as chains
        "waiter [wait] <- holder [state]" -> seconds seen, where the target samples it (the
        embedded target with its lock sampler switched on); empty otherwise."""
        return {}

    def server_pids(self) -> list[int]:
        """PIDs of the database server's processes on this host, for the host collector
        (empty for remote servers)."""
        return []
