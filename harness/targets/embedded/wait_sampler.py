"""The embedded broker's wait sampler: PostgreSQL wait events as SQL Server wait statistics.

Samples ``pg_stat_activity`` every few tens of milliseconds and accumulates wait time and
waiting tasks per PostgreSQL wait event and mapped SQL Server wait type in ``ssb.wait_stats``
(the mapping and the one list of benign waits: :mod:`harness.targets.embedded.waits`).
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import TYPE_CHECKING

import psycopg

from ._db import connect, connection_lost
from .waits import ACTIVE_SESSIONS_QUERY, map_wait

if TYPE_CHECKING:
    from .broker import Broker


class PeriodicSampler(threading.Thread):
    """A broker thread that samples the server every ``interval`` seconds on a connection of
    its own (reconnecting after a failure) and writes what it gathered every
    ``flush_interval_s`` and when the broker stops. Subclasses: :meth:`sample`, :meth:`flush`
    (:meth:`opened`: on each new connection)."""

    app = "ssbench-sampler"
    #: the connection's client_connection_check_interval (_db.connect), if any
    check_client_ms: int | None = None

    def __init__(self, broker: "Broker", name: str, interval: float):
        super().__init__(name=name, daemon=True)
        self.broker = broker
        self.interval = interval
        self.samples = 0

    def sample(self, conn: psycopg.Connection, now: float) -> None:
        raise NotImplementedError

    def flush(self, conn: psycopg.Connection) -> None:
        """Write what the samples gathered (nothing by default)."""

    def opened(self, conn: psycopg.Connection) -> None:
        """A new connection, before its first sample."""

    def run(self) -> None:
        b = self.broker
        stop = b.stopping
        conn = None
        last_flush = time.monotonic()
        while not stop.is_set():
            try:
                if conn is None:
                    conn = connect(b.opts.target, self.app, check_client_ms=self.check_client_ms)
                    self.opened(conn)
                now = time.monotonic()
                self.sample(conn, now)
                self.samples += 1
                if now - last_flush >= b.opts.flush_interval_s:
                    self.flush(conn)
                    last_flush = now
                stop.wait(max(0.0, self.interval - (time.monotonic() - now)))
            except Exception as e:
                if stop.is_set():
                    break
                conn = connection_lost(conn, self.name.replace("-", " "), e, stop)
        if conn is not None:
            with contextlib.suppress(Exception):
                self.flush(conn)
            conn.close()


class WaitSampler(PeriodicSampler):
    """Samples pg_stat_activity and accumulates wait time per wait event into ssb.wait_stats."""

    app = "ssbench-wait-sampler"
    QUERY = ACTIVE_SESSIONS_QUERY

    def __init__(self, broker: "Broker"):
        super().__init__(broker, "wait-sampler", broker.opts.sample_interval_s)
        self.pending: dict[tuple, list[float]] = {}
        self.prev: dict[int, tuple] = {}
        self.last = time.monotonic()

    def sample(self, conn: psycopg.Connection, now: float) -> None:
        rows = conn.execute(self.QUERY, (self.broker.opts.databases,)).fetchall()
        now = time.monotonic()
        dt_ms = min(now - self.last, 4 * self.interval) * 1000.0
        self.last = now
        cur: dict[int, tuple] = {}
        for pid, db, wtype, wevent, app in rows:
            pg_type, pg_event, wait_type, benign = map_wait(wtype, wevent, app)
            key = (db, pg_type, pg_event, wait_type, benign)
            acc = self.pending.setdefault(key, [0, 0.0])
            acc[1] += dt_ms
            if self.prev.get(pid) != key:
                acc[0] += 1
            cur[pid] = key
        self.prev = cur

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
