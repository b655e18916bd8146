"""The embedded target's broker process: transport, queue monitor / activation, wait sampler.

What SQL Server does inside the engine, done here by one Python process with one PostgreSQL
connection per activity:

* **Transport** (one thread per initiator): moves committed messages from the initiator's
  transmission queue (``ssb.sysxmitqueue``) to the target's service queue in batches, and
  removes them from the transmission queue only after the target committed them (the ACK).
  The target de-duplicates by dialog and sequence number (a receive high-water mark per dialog
  in ``ssb.sysdercv``), so a crash at any point neither loses nor duplicates a message. The way
  back (EndDialog messages from the target) uses the same protocol.
* **Queue monitor**: while messages wait in the queue, starts one activation task (a reader)
  per monitor interval at most (5 s on SQL Server), up to MAX_QUEUE_READERS, and counts Task
  Limit Reached when it would start one but the limit is reached.
* **Readers** (activation tasks, one thread and one connection each): call the activation
  procedure ``ssb.activation_procedure()`` in a loop, one transaction per batch; exit when a
  WAITFOR times out with no message. A failed batch is rolled back and recorded
  (``ssb.record_rollback``): five in a row disable the queue, as SQL Server does.
* **Wait sampler**: samples ``pg_stat_activity`` every 25 ms and accumulates wait time and
  waiting tasks per PostgreSQL wait event and mapped SQL Server wait type in ``ssb.wait_stats``
  (see :mod:`harness.targets.embedded.waits`).

Run it as ``python -m harness.targets.embedded.broker`` (``--help``); normally
:meth:`EmbeddedTarget.start` does. SIGTERM or SIGINT stops it cleanly (readers are cancelled:
their current batch rolls back and stays in the queue); SIGKILL is safe too. Only one broker
runs per target database (it holds an advisory lock there).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass, field

import psycopg

from ._db import connect, use_raw_arrays
from .waits import map_wait

log = logging.getLogger("ssbench.broker")

ADVISORY_KEY = 0x55B_B40C  # "one broker per target database"
CHECK_CLIENT_MS = 500      # backends of a killed broker notice within this time
MONITOR_TICK_S = 0.05


@dataclass
class BrokerOptions:
    target: str                                   # conninfo of the target database
    initiators: dict[int, str]                    # initiator number -> conninfo
    batch_size: int = 1000                        # messages per transport batch
    sample_interval_s: float = 0.025              # wait sampler period
    flush_interval_s: float = 1.0                 # wait stats written this often
    parent_pid: int | None = None                 # exit when this process is gone
    crash_after_enqueue: int | None = None        # testing: SIGKILL self after the N-th enqueue, before its ACK
    databases: list[str] = field(default_factory=list)  # filled in: names sampled for waits


# --------------------------------------------------------------------------- transport

class TransportLink:
    """One initiator <-> target link: a step moves one batch each way. Not a thread; the
    broker's :class:`Transport` runs steps in a loop, ``EmbeddedTarget.warm_up`` runs them
    in-line."""

    def __init__(self, initiator: int, init_conninfo: str, target_conninfo: str, *,
                 batch_size: int = 1000, application_name: str | None = None,
                 check_client_ms: int | None = CHECK_CLIENT_MS, **settings: str):
        self.initiator = initiator
        self.batch_size = batch_size
        app = application_name or f"ssbench-transport-i{initiator}"
        self.init = connect(init_conninfo, app, check_client_ms=check_client_ms, **settings)
        try:
            self.tgt = connect(target_conninfo, app, check_client_ms=check_client_ms, **settings)
        except Exception:
            self.init.close()
            raise
        for c in (self.init, self.tgt):
            use_raw_arrays(c)
        self.init_cur = self.init.cursor(binary=True)
        self.tgt_cur = self.tgt.cursor(binary=True)
        self.enqueues = 0
        self.on_enqueued = None  # testing hook, called after the target committed, before the ACK

    def close(self) -> None:
        for c in (self.init, self.tgt):
            try:
                c.close()
            except Exception:  # pragma: no cover
                pass

    def forward(self) -> int:
        """Move one batch initiator -> target. Returns messages accepted (0: nothing to move;
        -1: the target queue is disabled and keeps them out)."""
        n, dlgids, seqs, types, bodies = self.init_cur.execute(
            "SELECT * FROM ssb.transmit_batch(%s)", (self.batch_size,)).fetchone()
        if not n:
            return 0
        accepted, ack_dlgids, ack_seqs = self.tgt_cur.execute(
            "SELECT * FROM ssb.enqueue(%s::int2, %s::uuid[], %s::int8[], %s::int2[], %s::bytea[])",
            (self.initiator, dlgids, seqs, types, bodies)).fetchone()
        if accepted < 0:
            return -1
        self.enqueues += 1
        if self.on_enqueued:
            self.on_enqueued(self)
        self.init_cur.execute("SELECT ssb.ack(%s::uuid[], %s::int8[])", (ack_dlgids, ack_seqs))
        # messages that were all duplicates still count as moved (they left the xmitq)
        return max(accepted, 1)

    def backward(self) -> int:
        """Move one batch target -> initiator (EndDialog messages). Returns messages moved."""
        n, dlgids, seqs, types, bodies = self.tgt_cur.execute(
            "SELECT * FROM ssb.transmit_batch(%s::int2, %s)", (self.initiator, self.batch_size)).fetchone()
        if not n:
            return 0
        accepted, ack_dlgids, ack_seqs = self.init_cur.execute(
            "SELECT * FROM ssb.accept_replies(%s::uuid[], %s::int8[], %s::int2[], %s::bytea[])",
            (dlgids, seqs, types, bodies)).fetchone()
        self.tgt_cur.execute("SELECT ssb.ack_outbound(%s::uuid[], %s::int8[])", (ack_dlgids, ack_seqs))
        return max(accepted, 1)


class Transport(threading.Thread):
    def __init__(self, broker: "Broker", initiator: int, conninfo: str):
        super().__init__(name=f"transport-i{initiator}", daemon=True)
        self.broker = broker
        self.initiator = initiator
        self.conninfo = conninfo
        self.link: TransportLink | None = None
        self.moved = 0

    def run(self) -> None:
        stop = self.broker.stopping
        idle = 0.001
        last_back = 0.0
        while not stop.is_set():
            try:
                if self.link is None:
                    self.link = TransportLink(self.initiator, self.conninfo, self.broker.opts.target,
                                              batch_size=self.broker.opts.batch_size)
                    crash_at = self.broker.opts.crash_after_enqueue
                    if crash_at:
                        def hook(link, crash_at=crash_at):
                            if link.enqueues >= crash_at:
                                log.warning("crash-after-enqueue %d reached: SIGKILL", crash_at)
                                os.kill(os.getpid(), signal.SIGKILL)
                        self.link.on_enqueued = hook
                moved = self.link.forward()
                now = time.monotonic()
                if moved or now - last_back >= 0.05:
                    last_back = now
                    back = self.link.backward()
                else:
                    back = 0
                if moved > 0:
                    self.moved += moved
                if moved > 0 or back > 0:
                    idle = 0.001
                    continue
                # nothing to move (or the target queue is disabled): back off up to 10 ms
                stop.wait(0.2 if moved < 0 else idle)
                idle = min(idle * 2, 0.01)
            except Exception as e:  # connection lost, server restart, ...
                if stop.is_set():
                    break
                log.warning("transport i%d: %s", self.initiator, str(e).strip().splitlines()[0])
                if self.link:
                    self.link.close()
                    self.link = None
                stop.wait(0.5)
        if self.link:
            self.link.close()


# --------------------------------------------------------------------------- activation

class Reader(threading.Thread):
    """One activation task: runs the activation procedure until its WAITFOR times out."""

    def __init__(self, broker: "Broker", task_id: int):
        super().__init__(name=f"reader-{task_id}", daemon=True)
        self.broker = broker
        self.task_id = task_id
        self.app = f"ssbench-reader-{task_id}"
        self.conn: psycopg.Connection | None = None
        self.batches = 0
        self.messages = 0
        self.exit_reason = ""

    def cancel(self) -> None:
        conn = self.conn
        if conn is not None:
            try:
                conn.cancel_safe(timeout=2)
            except Exception:
                pass

    def run(self) -> None:
        stop = self.broker.stopping
        try:
            self.conn = connect(self.broker.opts.target, self.app, check_client_ms=CHECK_CLIENT_MS)
        except Exception as e:
            log.error("reader %d cannot connect: %s", self.task_id, e)
            self.broker.task_aborted(self.task_id, "connect failed")
            with self.broker.lock:
                self.broker.readers.pop(self.task_id, None)
            return
        conn = self.conn
        try:
            conn.execute("UPDATE ssb.activation_tasks SET backend_pid = pg_backend_pid() WHERE task_id = %s",
                         (self.task_id,))
            while True:
                if stop.is_set():
                    self.exit_reason = "broker stopping"
                    break
                try:
                    n = conn.execute("SELECT ssb.activation_procedure()").fetchone()[0]
                except psycopg.OperationalError as e:
                    if stop.is_set() or conn.closed:
                        self.exit_reason = "broker stopping" if stop.is_set() else "connection lost"
                        break
                    self._rolled_back(e)
                    if self.exit_reason:
                        break
                    continue
                except psycopg.Error as e:
                    if stop.is_set():
                        self.exit_reason = "broker stopping"
                        break
                    self._rolled_back(e)
                    if self.exit_reason:
                        break
                    continue
                if n < 0:
                    self.exit_reason = "queue disabled"
                    break
                if n == 0:
                    self.exit_reason = "waitfor timeout"
                    conn.execute("UPDATE ssb.activation_counters SET receives_empty = receives_empty + 1")
                    break
                self.batches += 1
                self.messages += n
        except Exception as e:
            self.exit_reason = self.exit_reason or ("broker stopping" if stop.is_set() else f"error: {e}")
        finally:
            self.broker.task_ended(self)
            try:
                conn.close()
            except Exception:  # pragma: no cover
                pass
            self.conn = None

    def _rolled_back(self, e: Exception) -> None:
        """The batch's transaction rolled back (autocommit: the failed statement was the whole
        transaction). Record it; the fifth in a row disables the queue."""
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        log.warning("reader %d: activation procedure failed, rolled back: %s", self.task_id, msg)
        try:
            disabled = self.conn.execute("SELECT ssb.record_rollback(%s)", (msg[:1000],)).fetchone()[0]
        except Exception as e2:
            self.exit_reason = f"error: {e2}"
            return
        if disabled:
            log.error("queue disabled after five consecutive rollbacks (last error: %s)", msg)
            self.exit_reason = "queue disabled"


class QueueMonitor(threading.Thread):
    """Starts readers while messages wait: at most one per monitor interval, up to the queue's
    MAX_QUEUE_READERS."""

    def __init__(self, broker: "Broker"):
        super().__init__(name="queue-monitor", daemon=True)
        self.broker = broker

    def run(self) -> None:
        b = self.broker
        stop = b.stopping
        conn = None
        last_start = last_limit = float("-inf")
        while not stop.is_set():
            try:
                if conn is None:
                    conn = connect(b.opts.target, "ssbench-queue-monitor", check_client_ms=CHECK_CLIENT_MS)
                    next_id = conn.execute("SELECT coalesce(max(task_id), 0) FROM ssb.activation_tasks").fetchone()[0]
                    b.next_task_id = max(b.next_task_id, next_id)
                enabled, activation, max_readers, interval = conn.execute(
                    "SELECT is_receive_enabled, is_activation_enabled, max_readers, monitor_interval_s "
                    "FROM ssb.queues WHERE name = 'MySSBLabTestQueue'").fetchone()
                tick = min(MONITOR_TICK_S, interval / 4)
                if enabled and activation:
                    now = time.monotonic()
                    if now - last_start >= interval and now - last_limit >= interval:
                        waiting = conn.execute(
                            "SELECT EXISTS (SELECT 1 FROM ssb.service_queue ORDER BY queuing_order LIMIT 1)"
                        ).fetchone()[0]
                        if waiting:
                            if b.running_readers() < max_readers:
                                # the start instant, after the check: a reader seen as ended has
                                # recorded its end before this
                                last_start, wall = time.monotonic(), time.time()
                                b.start_reader(conn, wall)
                            else:
                                conn.execute("UPDATE ssb.activation_counters "
                                             "SET task_limit_reached = task_limit_reached + 1")
                                last_limit = now
                stop.wait(tick)
            except Exception as e:
                if stop.is_set():
                    break
                conn = _connection_lost(conn, "queue monitor", e, stop)
        if conn is not None:
            conn.close()


def _connection_lost(conn, who: str, error: Exception, stop: threading.Event) -> None:
    """A broker thread's database call failed: log it, close the connection quietly and pause
    before the thread reconnects. Returns the new (absent) connection."""
    log.warning("%s: %s", who, str(error).strip().splitlines()[0])
    if conn is not None:
        try:
            conn.close()
        except Exception:  # pragma: no cover
            pass
    stop.wait(0.5)
    return None


# --------------------------------------------------------------------------- waits

class WaitSampler(threading.Thread):
    """Samples pg_stat_activity and accumulates wait time per wait event into ssb.wait_stats."""

    QUERY = ("SELECT pid, datname, wait_event_type, wait_event, application_name "
             "FROM pg_stat_activity "
             "WHERE backend_type = 'client backend' AND datname = ANY (%s) "
             "AND pid <> pg_backend_pid() AND state IS DISTINCT FROM 'idle'")

    def __init__(self, broker: "Broker"):
        super().__init__(name="wait-sampler", daemon=True)
        self.broker = broker
        self.pending: dict[tuple, list[float]] = {}
        self.samples = 0

    def run(self) -> None:
        b = self.broker
        stop = b.stopping
        interval = b.opts.sample_interval_s
        conn = None
        prev: dict[int, tuple] = {}
        last = time.monotonic()
        last_flush = last
        while not stop.is_set():
            try:
                if conn is None:
                    conn = connect(b.opts.target, "ssbench-wait-sampler")
                rows = conn.execute(self.QUERY, (b.opts.databases,)).fetchall()
                now = time.monotonic()
                dt_ms = min(now - last, 4 * interval) * 1000.0
                last = now
                cur: dict[int, tuple] = {}
                for pid, db, wtype, wevent, app in rows:
                    pg_type, pg_event, wait_type, benign = map_wait(wtype, wevent, app)
                    key = (db, pg_type, pg_event, wait_type, benign)
                    acc = self.pending.setdefault(key, [0, 0.0])
                    acc[1] += dt_ms
                    if prev.get(pid) != key:
                        acc[0] += 1
                    cur[pid] = key
                prev = cur
                self.samples += 1
                if now - last_flush >= b.opts.flush_interval_s:
                    self.flush(conn)
                    last_flush = now
                stop.wait(max(0.0, interval - (time.monotonic() - now)))
            except Exception as e:
                if stop.is_set():
                    break
                conn = _connection_lost(conn, "wait sampler", e, stop)
        if conn is not None:
            try:
                self.flush(conn)
            except Exception:  # pragma: no cover
                pass
            conn.close()

    def flush(self, conn: psycopg.Connection) -> None:
        if not self.pending:
            return
        items = list(self.pending.items())
        self.pending = {}
        cols = list(zip(*[(k[0], k[1], k[2], k[3], k[4], int(v[0]), float(v[1])) for k, v in items]))
        conn.execute(
            "INSERT INTO ssb.wait_stats AS w (database, pg_wait_type, pg_wait_event, wait_type, benign, "
            "waiting_tasks, wait_time_ms) "
            "SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::bool[], %s::int8[], "
            "%s::float8[]) "
            "ON CONFLICT (database, pg_wait_type, pg_wait_event, wait_type) DO UPDATE "
            "SET waiting_tasks = w.waiting_tasks + excluded.waiting_tasks, "
            "wait_time_ms = w.wait_time_ms + excluded.wait_time_ms",
            [list(c) for c in cols])


# --------------------------------------------------------------------------- the process

class Broker:
    def __init__(self, opts: BrokerOptions):
        self.opts = opts
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.readers: dict[int, Reader] = {}
        self.next_task_id = 0
        self.control: psycopg.Connection | None = None
        self.threads: list[threading.Thread] = []

    # -- activation bookkeeping (called from the monitor and the readers)
    def running_readers(self) -> int:
        with self.lock:
            return sum(1 for r in self.readers.values() if r.is_alive())

    def start_reader(self, conn: psycopg.Connection, decided_at: float | None = None) -> None:
        """Start an activation task; ``decided_at`` (epoch s) is when the monitor decided to, which
        is what activation_tasks.started_at records (the interval is enforced on it)."""
        with self.lock:
            self.next_task_id += 1
            task_id = self.next_task_id
            reader = Reader(self, task_id)
            # record the start before the task runs: the counters never lag what happened
            conn.execute("INSERT INTO ssb.activation_tasks (task_id, reader, started_at) "
                         "VALUES (%s, %s, to_timestamp(%s))",
                         (task_id, reader.app, decided_at if decided_at is not None else time.time()))
            conn.execute("UPDATE ssb.activation_counters SET tasks_started = tasks_started + 1, "
                         "procs_invoked = procs_invoked + 1")
            self.readers[task_id] = reader
            reader.start()
        log.info("activation: started task %d", task_id)

    def task_ended(self, reader: Reader) -> None:
        try:
            reader.conn.execute(
                "UPDATE ssb.activation_tasks SET ended_at = clock_timestamp(), batches = %s, messages = %s, "
                "exit_reason = %s WHERE task_id = %s",
                (reader.batches, reader.messages, reader.exit_reason or "unknown", reader.task_id))
        except Exception:
            self.task_aborted(reader.task_id, reader.exit_reason or "connection lost",
                              reader.batches, reader.messages)
        log.info("activation: task %d ended (%s; %d batches, %d messages)", reader.task_id,
                 reader.exit_reason, reader.batches, reader.messages)
        with self.lock:
            self.readers.pop(reader.task_id, None)

    def task_aborted(self, task_id: int, reason: str, batches: int = 0, messages: int = 0) -> None:
        try:
            with connect(self.opts.target, "ssbench-broker") as c:
                c.execute("UPDATE ssb.activation_tasks SET ended_at = clock_timestamp(), exit_reason = %s, "
                          "batches = %s, messages = %s WHERE task_id = %s",
                          (reason, batches, messages, task_id))
                c.execute("UPDATE ssb.activation_counters SET tasks_aborted = tasks_aborted + 1")
        except Exception:  # pragma: no cover - the database is gone
            pass

    # -- lifecycle
    def run(self) -> int:
        opts = self.opts
        self.control = control = connect(opts.target, "ssbench-broker")
        if not control.execute("SELECT pg_try_advisory_lock(%s)", (ADVISORY_KEY,)).fetchone()[0]:
            other = control.execute("SELECT pid FROM ssb.broker_state").fetchone()[0]
            log.error("another broker is already running on this target database (pid %s)", other)
            return 3
        opts.databases = [control.info.dbname] + [
            psycopg.conninfo.conninfo_to_dict(ci).get("dbname", "") for ci in opts.initiators.values()]
        # tasks of a broker that died without cleaning up
        control.execute("UPDATE ssb.activation_tasks SET ended_at = clock_timestamp(), "
                        "exit_reason = 'broker died' WHERE ended_at IS NULL")
        self.next_task_id = control.execute(
            "SELECT coalesce(max(task_id), 0) FROM ssb.activation_tasks").fetchone()[0]
        for i, ci in sorted(opts.initiators.items()):
            self.threads.append(Transport(self, i, ci))
        self.threads.append(QueueMonitor(self))
        self.threads.append(WaitSampler(self))
        control.execute("UPDATE ssb.broker_state SET pid = %s, host = %s, initiators = %s, "
                        "started_at = clock_timestamp(), heartbeat_at = clock_timestamp(), stopped_at = NULL",
                        (os.getpid(), socket.gethostname(), sorted(opts.initiators)))
        for t in self.threads:
            t.start()
        log.info("broker %d running: %d initiator(s), target %s", os.getpid(), len(opts.initiators),
                 control.info.dbname)
        try:
            while not self.stopping.wait(1.0):
                if opts.parent_pid and not _alive(opts.parent_pid):
                    log.warning("parent process %d is gone: stopping", opts.parent_pid)
                    break
                try:
                    control.execute("UPDATE ssb.broker_state SET heartbeat_at = clock_timestamp()")
                except psycopg.Error as e:
                    log.error("lost the control connection: %s", e)
                    break
        finally:
            self.shutdown()
        return 0

    def shutdown(self) -> None:
        self.stopping.set()
        with self.lock:
            readers = list(self.readers.values())
        for r in readers:
            r.cancel()
        deadline = time.monotonic() + 10
        for t in self.threads + readers:
            t.join(max(0.1, deadline - time.monotonic()))
        try:
            if self.control is not None and not self.control.closed:
                self.control.execute("UPDATE ssb.broker_state SET pid = NULL, stopped_at = clock_timestamp()")
                self.control.close()
        except psycopg.Error:  # pragma: no cover
            pass
        log.info("broker stopped")


_ORIGINAL_PPID = os.getppid()


def _alive(pid: int) -> bool:
    """Is ``pid`` still there? For our own parent, re-parenting says it died (no pid reuse)."""
    if pid == _ORIGINAL_PPID:
        return os.getppid() == pid
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover
        return True
    return True


# --------------------------------------------------------------------------- CLI

def parse_args(argv: list[str] | None = None) -> BrokerOptions:
    p = argparse.ArgumentParser(
        prog="python -m harness.targets.embedded.broker",
        description="Transport, queue monitor / activation and wait sampler of ssbench's embedded "
                    "target (a PostgreSQL emulation of SQL Server Service Broker). Normally started "
                    "by the harness; SIGTERM stops it.")
    p.add_argument("--target", metavar="CONNINFO",
                   help="libpq conninfo of the target database (default: the embedded server's, from "
                        "--data-dir and --prefix)")
    p.add_argument("--initiator", metavar="N=CONNINFO", action="append", default=[],
                   help="an initiator database, repeatable (default: --initiators of the embedded server)")
    p.add_argument("--data-dir", help="embedded server data directory (default: $SSBENCH_PGDATA or the cache)")
    p.add_argument("--prefix", default="ssb", help="database name prefix (default: ssb)")
    p.add_argument("--initiators", type=int, default=None,
                   help="with the embedded server: serve initiators 1..N (default: every one provisioned)")
    p.add_argument("--batch-size", type=int, default=1000, help="messages per transport batch (default 1000)")
    p.add_argument("--sample-interval-ms", type=float, default=25.0,
                   help="wait sampler period in ms (default 25)")
    p.add_argument("--parent-pid", type=int, default=None, help="exit when this process is gone")
    p.add_argument("--crash-after-enqueue", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    a = p.parse_args(argv)
    logging.basicConfig(level=a.log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s broker[%(process)d] %(threadName)s: %(message)s")
    if a.batch_size < 1 or a.sample_interval_ms <= 0:
        p.error("--batch-size and --sample-interval-ms must be positive")
    initiators: dict[int, str] = {}
    for spec in a.initiator:
        num, sep, ci = spec.partition("=")
        if not sep or not num.isdigit() or int(num) < 1:
            p.error(f"--initiator takes N=CONNINFO, got {spec!r}")
        initiators[int(num)] = ci
    target = a.target
    if target is None or not initiators:
        from pathlib import Path

        from ._db import database_names
        from .server import EmbeddedServer

        info = EmbeddedServer(Path(a.data_dir) if a.data_dir else None).info()
        if info is None:
            p.error("the embedded server is not running (ssbench server start), and no --target given")
        if target is None:
            target = info.conninfo(database_names(a.prefix, 0)[0])
        if not initiators:
            n = a.initiators
            if n is None:
                with psycopg.connect(info.conninfo("postgres"), autocommit=True) as c:
                    n = c.execute("SELECT count(*) FROM pg_database WHERE datname ~ %s",
                                  (f"^{a.prefix}_init[0-9]+$",)).fetchone()[0]
            if not n:
                p.error("no initiator databases: provision the target first")
            initiators = {i: info.conninfo(db) for i, db in enumerate(database_names(a.prefix, n)[1], start=1)}
    return BrokerOptions(target=target, initiators=initiators, batch_size=a.batch_size,
                         sample_interval_s=a.sample_interval_ms / 1000.0, parent_pid=a.parent_pid,
                         crash_after_enqueue=a.crash_after_enqueue)


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    broker = Broker(opts)

    def on_signal(signum, frame):
        log.info("signal %d: stopping", signum)
        broker.stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        return broker.run()
    except Exception as e:
        log.error("broker failed: %s", e)
        broker.shutdown()
        return 1


if __name__ == "__main__":
    sys.exit(main())
