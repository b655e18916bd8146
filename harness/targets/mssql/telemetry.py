"""The SQL Server target's collectors: DMVs read while a permutation runs.

Wait stats (benign waits filtered here, the one list), Broker performance counters, queue
depths, activated tasks and queue monitors, the scheduler-monitor ring buffer (CPU) and the
end-to-end latency table: :class:`MssqlTelemetry`, mixed into the target (a
:class:`~.session.ServerSession`); the SQL is in ``workloads/mssql/collectors.sql`` and
``target.sql``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterable

from ..base import PerfCounter, WaitStat
from .driver import SENDER_APP, OdbcError
from ..telemetry import Telemetry
from .session import version_tuple

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
#: (No HADR_ prefix: HADR_SYNC_COMMIT is the commit's wait for synchronous Availability Group
#: secondaries, a cost of the workload; only the idle HADR_ waits are in the list above.)
BENIGN_WAIT_PREFIXES = ("SQLTRACE_", "XE_", "SLEEP_", "QDS_", "PWAIT_")


def is_benign_wait(wait_type: str) -> bool:
    return wait_type in BENIGN_WAITS or wait_type.startswith(BENIGN_WAIT_PREFIXES)


#: Performance objects the collectors keep (matched on the part after the instance prefix).
BROKER_OBJECTS = ("Broker Activation", "Broker Statistics", "Broker/DBM Transport",
                  "Broker TO Statistics")
#: its instances are the databases and _Total
ACTIVATION_OBJECT = "Broker Activation"
#: Counters that only grow although their names do not say "/sec" or "Total" (their cntr_type,
#: 65792, is the "last observed value" type of current values too: Broker Statistics' "SQL SEND
#: Total" is reported like Activation's "Tasks Running").
CUMULATIVE_COUNTERS = frozenset({"Broker Transaction Rollbacks", "Task Limit Reached",
                                 "Recv I/O Buffer Copies Count"})


def counter_kind(counter_name: str) -> str | None:
    """PerfCounter.kind of a Broker counter, by its name (sys.dm_os_performance_counters'
    cntr_type cannot tell a running total from a current value): ``cumulative`` for the
    per-second counters (their raw value is a running total) and the totals, ``gauge`` for
    current values, None for averages and their bases (a ratio of two raw values)."""
    name = counter_name.strip()
    if " Avg" in name or name.startswith("Avg.") or name.endswith(" Base"):
        return None
    if (name.lower().endswith("/sec") or name.endswith((" Total", " Tot"))
            or name in CUMULATIVE_COUNTERS):
        return "cumulative"
    return "gauge"


def counter_object(object_name: str) -> str | None:
    """'SQLServer:Broker Statistics' / 'MSSQL$INST:Broker Activation' -> the known suffix."""
    suffix = object_name.split(":", 1)[1] if ":" in object_name else object_name
    suffix = suffix.strip()
    return suffix if suffix in BROKER_OBJECTS else None


def parse_perf_counters(rows: Iterable[tuple]) -> list[PerfCounter]:
    """Rows of (object_name, counter_name, instance_name, cntr_value, cntr_type) ->
    PerfCounters for the Broker objects, object names without the instance prefix."""
    out = []
    for obj, counter, instance, value, _ in rows:
        name = counter_object(str(obj))
        kind = counter_kind(str(counter))
        if name is None or kind is None:
            continue
        out.append(PerfCounter(name, str(counter).strip(), str(instance or "").strip(),
                               float(value), kind))
    return out


#: msdb.dbo.backupset.type
BACKUP_TYPES = {"D": "full database", "I": "differential", "L": "log", "F": "file", "G": "differential file",
                "P": "partial", "Q": "differential partial"}


#: sys.dm_db_page_info: SQL Server 2019 (15.x) and later
PAGE_INFO_MAJOR = 15


def sum_waits(rows: Iterable[tuple]) -> list[WaitStat]:
    """(wait type, waiting tasks, wait ms, signal wait ms or None) rows, summed by wait type
    (a name's padding stripped), longest wait first."""
    acc: dict[str, list] = {}
    for name, n, ms, signal in rows:
        a = acc.setdefault(str(name).strip(), [0, 0.0, None])
        a[0] += int(n or 0)
        a[1] += float(ms or 0.0)
        a[2] = a[2] if signal is None else (a[2] or 0.0) + float(signal)
    return sorted((WaitStat(k, *v) for k, v in acc.items()), key=lambda w: -w.wait_time_ms)


class MssqlTelemetry(Telemetry):
    """What the runner and the collectors read from a SQL Server topology. Mixed into
    :class:`~.target.MssqlTarget` (a :class:`~.session.ServerSession`)."""

    def wait_stats(self) -> list[WaitStat]:
        """Summed over the active permutation's SQL Server instances (wait and signal wait)."""
        return sum_waits(r for inst in self._active_servers().values()
                         for r in self._query(inst, "collectors", "wait_stats", database="master")
                         if not is_benign_wait(str(r[0])))

    def perf_counters(self) -> list[PerfCounter]:
        """The Broker objects, summed over the permutation's instances (per-second counters and
        gauges both add up). Broker Activation reports each database and _Total (which counts
        every queue of the instance): only the target database's instance is kept, so activation
        figures are the test queue's, counted once."""
        target, _ = self._active()
        acc: dict[tuple[str, str, str], PerfCounter] = {}
        for key, inst in self._active_servers().items():
            for c in parse_perf_counters(self._query(inst, "collectors", "perf_counters", database="master")):
                if c.object_name != ACTIVATION_OBJECT or (key == target.server_key
                                                          and c.instance_name.lower() == target.database.lower()):
                    k = (c.object_name, c.counter_name, c.instance_name)
                    acc[k] = c if k not in acc else replace(c, value=acc[k].value + c.value)
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

    def log_sizes_mb(self) -> dict[str, float]:
        """The permutation's databases' log sizes (MB) by instance name: sys.master_files per server."""
        target, inits = self._active()
        out: dict[str, float] = {}
        for key, inst in self._active_servers().items():
            rows = self._query(inst, "collectors", "log_sizes", database="master")
            sizes = {str(r[0]).lower(): float(r[1] or 0) for r in rows if r[0] is not None}
            for db in [target, *inits]:
                if db.server_key == key and db.database.lower() in sizes:
                    out[db.name] = sizes[db.database.lower()]
        return out

    def log_events(self, start_epoch: float, end_epoch: float) -> list[str]:
        """Backups of the permutation's databases that overlapped [start, end) (msdb.dbo.backupset,
        the window in each server's clock): a log backup reads and truncates the log the load writes."""
        target, inits = self._active()
        out = []
        for inst in [target, *inits]:
            a, b = self._server_time(inst, start_epoch), self._server_time(inst, end_epoch)
            for kind, began, ended in self._query(inst, "collectors", "backups_between", [inst.database, b, a],
                                               database="master"):
                out.append(f"{inst.where()}: a {BACKUP_TYPES.get(str(kind).strip(), str(kind))} backup ran from "
                           f"{began} to {ended} (server time), inside the measured window: it competed with the load")
        return out

    def dialog_counts(self, live: bool = True) -> dict[str, Any]:
        """Dialog lifetime accounting since the permutation's prepare: the dialogs the initiators'
        SEND path began and ended and the Error messages their reader received, counted by ssbench
        itself (dbo.ssbench_counts, dbo.ssbench_dialog_errors: once both sides have ended a dialog
        its initiator endpoint is deleted, so sys.conversation_endpoints cannot count them). SQL
        Server discards an Error that reaches an endpoint its side had ended (fire and forget)
        without a trace a query can count: ``errors_lost`` is None. ``live`` (every tick): read
        without waiting on the senders' transactions."""
        _, inits = self._active()
        begun = ended = errors = 0
        baseline = getattr(self, "_baseline", {})
        for idx, inst in enumerate(inits, start=1):
            _, b, e = self._sent_counts(inst, live=live)
            base = baseline.get(idx, (0, 0, 0))
            begun += max(0, b - base[1])
            ended += max(0, e - base[2])
            errors += int(self._scalar(inst, "initiator", "dialog_errors_received") or 0)
        return {"dialogs_begun": begun, "dialogs_ended": ended, "errors_received": errors,
                "errors_lost": None}

    def dialog_stats(self) -> dict[str, Any]:
        """:meth:`dialog_counts` as committed, and the conversation endpoints left behind, by side
        and state: a GROUP BY over sys.conversation_endpoints, which grows with the target's CLOSED
        endpoints under a finite lifetime (about 30 minutes each), so the collectors ask for it after
        the window only."""
        target, inits = self._active()
        svc = self.topology.broker.service
        endpoints: dict[str, int] = {}
        for side, insts in (("target", [target]), ("initiator", inits)):
            for inst in insts:
                for state, n, _ in self._query(inst, "collectors", "endpoint_states", [svc]):
                    key = f"{side}.{str(state).strip()}"   # SO, SI, CO, DI, DO, ER, CD as on SQL Server
                    endpoints[key] = endpoints.get(key, 0) + int(n)
        return {**self.dialog_counts(live=False), "endpoints": endpoints}

    def server_cpu_ms(self) -> dict[str, tuple[float, int]]:
        """Per SQL Server instance of the permutation: (CPU milliseconds SQL Server used so far,
        every resource pool's total_cpu_usage_ms; its schedulers). Cumulative: the host collector
        samples it every tick and takes the window's difference."""
        out: dict[str, tuple[float, int]] = {}
        for key, inst in self._active_servers().items():
            rows = self._query(inst, "collectors", "server_cpu", database="master")
            if rows and rows[0][0] is not None:
                out[self._server_label(key)] = (float(rows[0][0]), int(rows[0][1] or 0))
        return out

    def messages_processed(self) -> int:
        target, _ = self._active()
        return int(self._scalar(target, "target", "processed_total") or 0)

    def e2e_latencies_us(self, start_epoch: float, end_epoch: float) -> list[int]:
        return [us for _, us, _ in self._e2e_rows(start_epoch, end_epoch, "e2e_latencies")]

    def e2e_latencies_by_priority_us(self, start_epoch: float, end_epoch: float) -> dict[str, list[int]]:
        """End-to-end latencies split by the dialog's priority (``high``: begun on the
        high-priority contract; ``normal``: the others), for a ``priority`` axis."""
        out: dict[str, list[int]] = {"high": [], "normal": []}
        for _, us, row in self._e2e_rows(start_epoch, end_epoch, "e2e_latencies_by_priority"):
            out["high" if row[2] else "normal"].append(us)
        return out

    def e2e_sent_latencies_us(self, start_epoch: float, end_epoch: float) -> list[tuple[int, int]]:
        """(send time in this machine's clock, epoch microseconds; latency) of the same messages,
        for an alternated window (run.alternate): the initiator stamped the send time in its own
        clock, corrected here by its measured offset."""
        _, inits = self._active()
        off_us = {idx: round(self._offsets_s.get(inst.server_key, 0.0) * 1e6)
                  for idx, inst in enumerate(inits, start=1)}
        return [(int(row[2]) - off_us.get(init, 0), us)
                for init, us, row in self._e2e_rows(start_epoch, end_epoch, "e2e_sent_latencies")]

    def _e2e_rows(self, start_epoch: float, end_epoch: float, section: str) -> list[tuple[int, int, tuple]]:
        """(initiator, latency in microseconds corrected for the clocks' offsets, the row) of every
        measured message ``section`` returns for the window [start, end) of this machine's clock."""
        target, inits = self._active()
        off_t = self._offsets_s.get(target.server_key, 0.0)
        # the window in the target's clock (received_at is SYSUTCDATETIME() there)
        start, end = self._server_time(target, start_epoch), self._server_time(target, end_epoch)
        skew_us = {idx: round((off_t - self._offsets_s.get(inst.server_key, off_t)) * 1e6)
                   for idx, inst in enumerate(inits, start=1)}
        rows = self._query(target, "target", section, [start, end], purpose="admin")
        return [(int(r[0]), max(0, int(r[1]) - skew_us.get(int(r[0]), 0)), tuple(r)) for r in rows]

    # ---------------------------------------------------------------- the diagnosis' evidence (docs/diagnosis.md)
    def activated_tasks(self) -> tuple[int, int] | None:
        """sys.dm_broker_activated_tasks for the test's queue against its MAX_QUEUE_READERS
        (sys.service_queues.max_readers); None when the queue is not found."""
        target, _ = self._active()
        q = self.topology.broker.queue
        state = self._query(target, "collectors", "queue_state", [q])
        if not state or state[0][3] is None:
            return None
        return int(self._scalar(target, "collectors", "activated_tasks", [q]) or 0), int(state[0][3])

    def procedure_time(self, start_epoch: float, end_epoch: float) -> dict[str, float]:
        """The activation procedure's own time (the tally's received_at to finished_at) over [start,
        end), the window in the target's clock (Target.procedure_time)."""
        target, _ = self._active()
        a, b = self._server_time(target, start_epoch), self._server_time(target, end_epoch)
        inside, batches, messages, receives = self._query(target, "target", "procedure_time",
                                                          [a, a, b, b, a, a, a, b, a], purpose="admin")[0]
        return {"seconds": float(inside or 0) / 1e6, "batch_seconds": float(batches or 0) / 1e6,
                "messages": float(messages or 0), "receives": float(receives or 0)}

    def broker_waits(self) -> list[WaitStat]:
        """Summed over the permutation's instances: Service Broker's own waits, idle ones included
        (BROKER_*), and its latch classes (SERVICE_BROKER_*, sys.dm_os_latch_stats)."""
        return sum_waits((*row, None) for inst in self._active_servers().values()
                         for section in ("broker_waits", "broker_latches")
                         for row in self._query(inst, "collectors", section, database="master"))

    def session_waits(self) -> list[tuple[str, str, int]]:
        """The load's and the activated tasks' requests waiting now on the permutation's instances,
        by role and wait type (benign waits left out), summed over the instances."""
        counts: dict[tuple[str, str], int] = {}
        for inst in self._active_servers().values():
            rows = self._query(inst, "collectors", "session_waits", [SENDER_APP], database="master")
            for role, wait_type, n in rows:
                if not is_benign_wait(str(wait_type)):
                    key = (str(role), str(wait_type))
                    counts[key] = counts.get(key, 0) + int(n)
        return [(role, wt, n) for (role, wt), n in sorted(counts.items())]

    def page_latch_waiters(self) -> list[tuple[str, str, int]]:
        """Tasks waiting on a page latch now on the permutation's instances, each page named by its
        object (:meth:`page_object`)."""
        out = []
        for inst in self._active_servers().values():
            for wait_type, resource, n in self._query(inst, "collectors", "page_latch_waiters", database="master"):
                out.append((str(wait_type), self.page_object(inst, str(resource)), int(n)))
        return out

    def page_object(self, inst, resource: str) -> str:
        """``database.schema.object`` of the page ``database_id:file_id:page_id`` through
        sys.dm_db_page_info (2019 and later; cached per page), else the raw page id, saying why."""
        parts = resource.strip().split(":")
        if len(parts) < 3 or not all(x.isdigit() for x in parts[:3]):
            return f"page {resource.strip()}"
        d, f, p = (int(x) for x in parts[:3])
        cache: dict = self.__dict__.setdefault("_page_objects", {})
        key = (inst.server_key, d, f, p)
        if key not in cache:
            version = self._versions.get(inst.server_key) or self._server_info(inst)[0]
            raw = f"page {d}:{f}:{p}"
            if version_tuple(str(version))[0] < PAGE_INFO_MAJOR:
                cache[key] = f"{raw} (not mapped: sys.dm_db_page_info needs SQL Server 2019)"
                return cache[key]
            try:
                rows = self._query(inst, "collectors", "page_info", [d, f, p], database="master")
            except OdbcError as e:          # no permission (VIEW DATABASE STATE): keep the id, say why
                return f"{raw} (not mapped: {str(e).splitlines()[0][:80]})"
            if rows and rows[0][2]:
                db, schema, obj = (str(v) for v in rows[0][:3])
                cache[key] = f"{db}.{schema}.{obj}"
            else:
                cache[key] = f"{raw} (sys.dm_db_page_info: no object)"
        return cache[key]
