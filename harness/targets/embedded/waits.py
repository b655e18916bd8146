"""PostgreSQL wait events -> SQL Server wait types, for the embedded target's wait statistics.

Every waiting session sampled accrues the time since the previous sample to the SQL Server wait
type its wait event maps to; entering a new wait counts one waiting task. The mapping is loose
by nature (docs/embedded.md). Benign waits are stored but left out of
:meth:`EmbeddedTarget.wait_stats`, as SQL Server wait queries leave out idle waits.
"""

from __future__ import annotations

#: Sessions whose PgSleep is the RECEIVE's WAITFOR (the activation readers' application_name).
READER_APP_PREFIX = "ssbench-reader"
#: ...unless the activation procedure is doing its own work (broker.processing_us_per_message,
#: ssb.process_work): then the sleep is the procedure's, SQL Server's WAITFOR (DELAY).
PROCESSING_APP_SUFFIX = "/processing"
#: The load's sessions (the senders' application_name: this, then the initiator, ``i1``).
SENDER_APP_PREFIX = "ssbench-sender-"
#: The test's sessions doing something now (not idle), with their wait event: what the
#: broker's wait sampler accumulates and Telemetry.session_waits counts (%s: the databases).
ACTIVE_SESSIONS_QUERY = ("SELECT pid, datname, wait_event_type, wait_event, application_name "
                         "FROM pg_stat_activity "
                         "WHERE backend_type = 'client backend' AND datname = ANY (%s) "
                         "AND pid <> pg_backend_pid() AND state IS DISTINCT FROM 'idle'")

#: (wait_event_type, wait_event) -> SQL Server wait type. ``None`` as the event: any event of
#: that type not listed more specifically.
MAPPING: dict[tuple[str, str | None], str] = {
    # the log flush on commit: SQL Server's WRITELOG
    ("IO", "WalSync"): "WRITELOG",
    ("IO", "WalWrite"): "WRITELOG",
    ("IO", "WalInitSync"): "WRITELOG",
    ("IO", "WalInitWrite"): "WRITELOG",
    ("LWLock", "WALWrite"): "WRITELOG",        # waiting for another backend's WAL flush (group commit)
    # inserting into the in-memory log buffer
    ("LWLock", "WALInsert"): "LOGBUFFER",
    ("LWLock", "WALBufMapping"): "LOGBUFFER",
    # row and transaction locks (a hot sysdesend row held by another SEND)
    ("Lock", "transactionid"): "LCK_M_X",
    ("Lock", "tuple"): "LCK_M_X",
    ("Lock", "advisory"): "LCK_M_X",
    ("Lock", "userlock"): "LCK_M_X",
    ("Lock", "page"): "LCK_M_X",
    ("Lock", "spectoken"): "LCK_M_X",
    ("Lock", "frozenid"): "LCK_M_X",
    ("Lock", "applytransaction"): "LCK_M_X",
    ("Lock", "virtualxid"): "LCK_M_S",
    ("Lock", "relation"): "LCK_M_SCH_S",       # table-level lock (TRUNCATE, DDL)
    ("Lock", "object"): "LCK_M_SCH_S",
    ("Lock", "extend"): "PAGELATCH_UP",        # extending a table or index: page allocation
    # page (buffer) latches: the sysdesend hot-page contention of the paper
    ("LWLock", "BufferContent"): "PAGELATCH_EX",
    ("BufferPin", "BufferPin"): "PAGELATCH_SH",
    # data page I/O
    ("IO", "DataFileRead"): "PAGEIOLATCH_SH",
    ("IO", "DataFilePrefetch"): "PAGEIOLATCH_SH",
    ("IO", "AioIoCompletion"): "PAGEIOLATCH_SH",
    ("IO", "DataFileWrite"): "PAGEIOLATCH_EX",
    ("IO", "DataFileExtend"): "PAGEIOLATCH_EX",
    ("IO", "DataFileFlush"): "PAGEIOLATCH_EX",
    ("IO", "DataFileSync"): "PAGEIOLATCH_EX",
    ("IO", "DataFileImmediateSync"): "PAGEIOLATCH_EX",
    ("IO", None): "IO_COMPLETION",
    # other internal latches (buffer mapping, lock manager, proc array, SLRUs, ...)
    ("LWLock", None): "LATCH_EX",
    ("IPC", "ProcarrayGroupUpdate"): "LATCH_EX",
    ("IPC", "XactGroupUpdate"): "LATCH_EX",
    ("Timeout", "SpinDelay"): "SPINLOCK_BACKOFF",
    # the network
    ("Client", "ClientWrite"): "ASYNC_NETWORK_IO",
    # benign (stored, excluded from wait_stats())
    ("Client", "ClientRead"): "PG_CLIENT_READ",          # idle in transaction: the client thinks
    ("Timeout", "PgSleep"): "WAITFOR",                   # a pg_sleep outside RECEIVE (send delay knob)
    ("Timeout", "VacuumDelay"): "PG_VACUUM_DELAY",
    ("Activity", None): "PG_IDLE_BACKGROUND",
    ("CPU", "running"): "CPU_RUNNING",                   # active, not waiting: not a wait at all
}

#: Wait types left out of wait_stats(): idle waits, the RECEIVE's WAITFOR, running on CPU.
#: WAITFOR (the SEND delay knob's sleep) is deliberately *not* benign: a slowed SEND shows why.
BENIGN: frozenset[str] = frozenset({
    "BROKER_RECEIVE_WAITFOR", "PG_CLIENT_READ", "PG_VACUUM_DELAY", "PG_IDLE_BACKGROUND", "CPU_RUNNING",
})


def map_wait(wait_event_type: str | None, wait_event: str | None,
             application_name: str | None = None) -> tuple[str, str, str, bool]:
    """``(pg_wait_type, pg_wait_event, sql_server_wait_type, benign)`` for one sampled session.

    A session that is active without a wait event is on CPU (``CPU``/``running``)."""
    if not wait_event_type:
        pg_type, pg_event = "CPU", "running"
    else:
        pg_type, pg_event = wait_event_type, wait_event or ""
    app = application_name or ""
    if pg_type == "Timeout" and pg_event == "PgSleep" and app.startswith(READER_APP_PREFIX) \
            and not app.endswith(PROCESSING_APP_SUFFIX):
        wait_type = "BROKER_RECEIVE_WAITFOR"
    else:
        wait_type = MAPPING.get((pg_type, pg_event)) or MAPPING.get((pg_type, None)) \
            or f"PG_{pg_type}_{pg_event}".upper()
    return pg_type, pg_event, wait_type, wait_type in BENIGN
