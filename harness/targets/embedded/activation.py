"""The embedded broker's activation: the queue monitor and its activation tasks (readers).

As SQL Server does it: while messages wait, the monitor starts at most one reader per monitor
interval, up to MAX_QUEUE_READERS (counting Task Limit Reached); a reader calls
``ssb.activation_procedure()`` in a loop, one transaction per batch, and exits when a WAITFOR
times out. Five rolled-back batches in a row disable the queue.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import TYPE_CHECKING

import psycopg

from ...errors import first_line
from ._db import CHECK_CLIENT_MS, connect
from .wait_sampler import PeriodicSampler

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger("ssbench.broker")

MONITOR_TICK_S = 0.05


class ActivatedReader(threading.Thread):
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
            with contextlib.suppress(Exception):
                conn.cancel_safe(timeout=2)

    def run(self) -> None:
        stop = self.broker.stopping
        try:
            self.conn = connect(self.broker.opts.target, self.app, check_client_ms=CHECK_CLIENT_MS)
        except Exception as e:
            log.error("reader %d cannot connect: %s", self.task_id, e)
            self.exit_reason = "connect failed"
            self.broker.task_ended(self)
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
                except psycopg.Error as e:
                    if stop.is_set() or (isinstance(e, psycopg.OperationalError) and conn.closed):
                        self.exit_reason = "broker stopping" if stop.is_set() else "connection lost"
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
            with contextlib.suppress(Exception):
                conn.close()
            self.conn = None

    def _rolled_back(self, e: Exception) -> None:
        """The batch's transaction rolled back (autocommit: the failed statement was the whole
        transaction). Record it; the fifth in a row disables the queue."""
        msg = first_line(e)
        log.warning("reader %d: activation procedure failed, rolled back: %s", self.task_id, msg)
        try:
            disabled = self.conn.execute("SELECT ssb.record_rollback(%s)", (msg[:1000],)).fetchone()[0]
        except Exception as e2:
            self.exit_reason = f"error: {e2}"
            return
        if disabled:
            log.error("queue disabled after five consecutive rollbacks (last error: %s)", msg)
            self.exit_reason = "queue disabled"


class QueueMonitor(PeriodicSampler):
    """Starts readers while messages wait: at most one per monitor interval, up to the queue's
    MAX_QUEUE_READERS."""

    app = "ssbench-queue-monitor"
    check_client_ms = CHECK_CLIENT_MS

    def __init__(self, broker: "Broker"):
        super().__init__(broker, "queue-monitor", MONITOR_TICK_S)
        self.last_start = self.last_limit = float("-inf")

    def opened(self, conn: psycopg.Connection) -> None:
        next_id = conn.execute("SELECT coalesce(max(task_id), 0) FROM ssb.activation_tasks").fetchone()[0]
        self.broker.next_task_id = max(self.broker.next_task_id, next_id)

    def sample(self, conn: psycopg.Connection, now: float) -> None:
        enabled, activation, max_readers, interval = conn.execute(
            "SELECT is_receive_enabled, is_activation_enabled, max_readers, monitor_interval_s "
            "FROM ssb.queues WHERE name = 'MySSBLabTestQueue'").fetchone()
        self.interval = min(MONITOR_TICK_S, interval / 4)
        now = time.monotonic()
        if not (enabled and activation) or now - self.last_start < interval or now - self.last_limit < interval:
            return
        if not conn.execute("SELECT EXISTS (SELECT 1 FROM ssb.service_queue ORDER BY queuing_order LIMIT 1)"
                            ).fetchone()[0]:
            return
        if self.broker.running_readers() < max_readers:
            # the start instant, after the check: a reader seen as ended has recorded its end before this
            self.last_start, wall = time.monotonic(), time.time()
            self.broker.start_reader(conn, wall)
        else:
            conn.execute("UPDATE ssb.activation_counters SET task_limit_reached = task_limit_reached + 1")
            self.last_limit = now
