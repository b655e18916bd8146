"""The embedded target's broker process: transport, queue monitor / activation, samplers.

What SQL Server does inside the engine, in one process with a connection per activity
(:mod:`.transport`, :mod:`.activation`, :mod:`.wait_sampler`, :mod:`.lock_sampler`). SIGTERM
stops it cleanly, SIGKILL is safe; an advisory lock allows one broker per target database.
"""

from __future__ import annotations

import contextlib
import argparse
import logging
import os
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass, field

import psutil
import psycopg

from ._db import connect
from .activation import QueueMonitor, ActivatedReader
from .lock_sampler import LockSampler
from .transport import Transport
from .wait_sampler import WaitSampler

log = logging.getLogger("ssbench.broker")

ADVISORY_KEY = 0x55B_B40C  # "one broker per target database"


@dataclass
class BrokerOptions:
    target: str                                   # conninfo of the target database
    initiators: dict[int, str]                    # initiator number -> conninfo
    batch_size: int = 1000                        # messages per transport batch
    sample_interval_s: float = 0.025              # wait sampler period
    flush_interval_s: float = 1.0                 # wait stats written this often
    parent_pid: int | None = None                 # exit when this process is gone
    crash_after_enqueue: int | None = None        # testing: SIGKILL self after the N-th enqueue, before its ACK
    transport_rate: float = 0.0                   # emulation knob: messages/s per initiator (0: no limit)
    lock_sample_s: float = 0.0                    # diagnostic lock sampler period (0: off)
    databases: list[str] = field(default_factory=list)  # filled in: names sampled for waits


# --------------------------------------------------------------------------- the process

class Broker:
    def __init__(self, opts: BrokerOptions):
        self.opts = opts
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.readers: dict[int, ActivatedReader] = {}
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
            reader = ActivatedReader(self, task_id)
            # record the start before the task runs: the counters never lag what happened
            conn.execute("INSERT INTO ssb.activation_tasks (task_id, reader, started_at) "
                         "VALUES (%s, %s, to_timestamp(%s))",
                         (task_id, reader.app, decided_at if decided_at is not None else time.time()))
            conn.execute("UPDATE ssb.activation_counters SET tasks_started = tasks_started + 1, "
                         "procs_invoked = procs_invoked + 1")
            self.readers[task_id] = reader
            reader.start()
        log.info("activation: started task %d", task_id)

    def task_ended(self, reader: ActivatedReader) -> None:
        """Record a reader's end on its connection; when that is gone (or was never opened), on
        one of its own, and count the task aborted."""
        end = ("UPDATE ssb.activation_tasks SET ended_at = clock_timestamp(), batches = %s, messages = %s, "
               "exit_reason = %s WHERE task_id = %s")
        try:
            reader.conn.execute(end, (reader.batches, reader.messages, reader.exit_reason or "unknown", reader.task_id))
        except Exception:
            with contextlib.suppress(Exception):
                with connect(self.opts.target, "ssbench-broker") as c:
                    c.execute(end, (reader.batches, reader.messages, reader.exit_reason or "connection lost",
                                    reader.task_id))
                    c.execute("UPDATE ssb.activation_counters SET tasks_aborted = tasks_aborted + 1")
        log.info("activation: task %d ended (%s; %d batches, %d messages)", reader.task_id,
                 reader.exit_reason, reader.batches, reader.messages)
        with self.lock:
            self.readers.pop(reader.task_id, None)

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
        if opts.lock_sample_s > 0:
            self.threads.append(LockSampler(self, opts.lock_sample_s))
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
        with contextlib.suppress(psycopg.Error):
            if self.control is not None and not self.control.closed:
                self.control.execute("UPDATE ssb.broker_state SET pid = NULL, stopped_at = clock_timestamp()")
                self.control.close()
        log.info("broker stopped")


_ORIGINAL_PPID = os.getppid()


def _alive(pid: int) -> bool:
    """Is ``pid`` still there? For our own parent, re-parenting says it died (no pid reuse)."""
    if pid == _ORIGINAL_PPID:
        return os.getppid() == pid
    return psutil.pid_exists(pid)


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
    p.add_argument("--lock-sample-ms", type=float, default=0.0,
                   help="diagnostic: sample who blocks whom (pg_blocking_pids) and long transactions "
                        "every MS milliseconds into ssb.lock_samples (default 0: off)")
    p.add_argument("--parent-pid", type=int, default=None, help="exit when this process is gone")
    p.add_argument("--crash-after-enqueue", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--transport-rate", type=float, default=0.0, metavar="MSG_PER_S",
                   help="move at most this many messages per second per initiator (an emulation knob to "
                        "build a transmission-bound case, docs/embedded.md; default 0: no limit)")
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    a = p.parse_args(argv)
    logging.basicConfig(level=a.log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s broker[%(process)d] %(threadName)s: %(message)s")
    if a.batch_size < 1 or a.sample_interval_ms <= 0:
        p.error("--batch-size and --sample-interval-ms must be positive")
    if not 0 <= a.transport_rate <= 10_000_000:
        p.error("--transport-rate must be between 0 and 10000000 messages per second")
    if not 0 <= a.lock_sample_ms <= 60_000:
        p.error("--lock-sample-ms must be between 0 (off) and 60000")
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
                         crash_after_enqueue=a.crash_after_enqueue, transport_rate=a.transport_rate,
                         lock_sample_s=a.lock_sample_ms / 1000.0)


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
