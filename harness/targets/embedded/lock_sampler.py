"""The embedded broker's diagnostic lock sampler (off by default): who blocks whom, and why.

Every ``--lock-sample-ms`` it keeps, from ``pg_stat_activity``, ``pg_blocking_pids()`` and
``pg_locks``, the sessions that wait for a lock, hold one another waits for, or have a
transaction open longer than :data:`LONG_XACT_S`, in ``ssb.lock_samples``. :func:`chains` turns
a sample into blocking chains, which the ``locks`` collector records
(docs/findings/receive-stall.md shows what it found).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Iterable

from .wait_sampler import PeriodicSampler

if TYPE_CHECKING:
    from .broker import Broker

#: a transaction open longer than this is recorded even when nobody waits for it (seconds)
LONG_XACT_S = 1.0

QUERY = """
WITH a AS (
    SELECT pid, coalesce(nullif(application_name, ''), backend_type) AS app, datname, backend_type,
           state, wait_event_type, wait_event,
           extract(epoch FROM clock_timestamp() - xact_start)::float8 AS xact_s,
           pg_blocking_pids(pid) AS blocked_by, left(query, 200) AS query
      FROM pg_stat_activity
     WHERE pid <> pg_backend_pid()
       AND (datname = ANY (%(dbs)s) OR backend_type <> 'client backend')
       AND state IS DISTINCT FROM 'idle'
), holders AS (SELECT DISTINCT unnest(blocked_by) AS pid FROM a)
SELECT a.pid, a.app, a.datname, a.backend_type, a.state, a.wait_event_type, a.wait_event, a.xact_s,
       a.blocked_by, l.locktype, l.mode,
       CASE WHEN l.relation IS NULL THEN NULL
            WHEN l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
            THEN l.relation::regclass::text
            ELSE (SELECT datname FROM pg_database WHERE oid = l.database) || ':' || l.relation END AS relation,
       a.query
  FROM a LEFT JOIN LATERAL (SELECT locktype, mode, relation, database FROM pg_locks
                             WHERE pg_locks.pid = a.pid AND NOT granted LIMIT 1) l ON true
 WHERE cardinality(a.blocked_by) > 0 OR a.xact_s > %(long)s OR a.pid IN (SELECT pid FROM holders)
"""

COLUMNS = ("pid", "app", "database", "backend_type", "state", "wait_event_type", "wait_event",
           "xact_seconds", "blocked_by", "lock_type", "lock_mode", "lock_relation", "query")


class LockSampler(PeriodicSampler):
    """Samples blocking and long transactions into ssb.lock_samples (diagnostic mode)."""

    app = "ssbench-lock-sampler"

    def __init__(self, broker: "Broker", interval_s: float):
        super().__init__(broker, "lock-sampler", interval_s)
        self.pending: list[tuple] = []

    def sample(self, conn, now: float) -> None:
        at = conn.execute("SELECT clock_timestamp()").fetchone()[0]
        rows = conn.execute(QUERY, {"dbs": self.broker.opts.databases, "long": LONG_XACT_S}).fetchall()
        self.pending.extend((at, *r) for r in rows)

    def flush(self, conn) -> None:
        if not self.pending:
            return
        rows, self.pending = self.pending, []
        with conn.cursor() as cur:
            with cur.copy("COPY ssb.lock_samples (sampled_at, " + ", ".join(COLUMNS) + ") FROM STDIN") as cp:
                for r in rows:
                    cp.write_row(r)


# --------------------------------------------------------------------------- reading it back

_NUM = re.compile(r"-\d+$")


def _label(s: dict, generic: bool) -> str:
    """A session as a chain link: its role (application name; an autovacuum worker with its
    table) and what it was doing (wait event, or running)."""
    app = s["app"] or s["backend_type"] or "?"
    if s["backend_type"] == "autovacuum worker" and s.get("query"):
        app = s["query"].split(" (", 1)[0]
    if generic:
        app = _NUM.sub("", app)
    if s["wait_event_type"]:
        what = f"{s['wait_event_type']}/{s['wait_event']}"
        if s["wait_event_type"] == "Lock" and s.get("lock_relation"):
            what += f" on {s['lock_relation']}"
    else:
        what = s["state"] or "running"
    return f"{app} [{what}]"


def chains(sample: Iterable[dict], generic: bool = False) -> list[str]:
    """Blocking chains of one sampling instant: for every session that waits for a lock and is
    not itself blocking anyone's way further up, the chain from it to the root holder (the first
    blocker that is not blocked), and every long transaction that blocks nobody on its own
    ("... [xact 8.1 s]"). ``generic``: numbered roles lose their number (reader-3 -> reader)."""
    by_pid = {s["pid"]: s for s in sample}
    out = []
    for s in by_pid.values():
        if not s["blocked_by"]:
            continue
        links, seen, cur = [_label(s, generic)], {s["pid"]}, s
        while cur["blocked_by"]:
            # the root of the queue: a blocker that is not blocked itself, else the first one
            nxt = [by_pid[p] for p in cur["blocked_by"] if p in by_pid and p not in seen]
            if not nxt:
                links.append(f"pid {cur['blocked_by'][0]}")
                break
            cur = next((n for n in nxt if not n["blocked_by"]), nxt[0])
            seen.add(cur["pid"])
            links.append(_label(cur, generic) + (f" [xact {cur['xact_seconds']:.1f} s]"
                                                  if (cur["xact_seconds"] or 0) > LONG_XACT_S else ""))
        out.append(" <- ".join(links))
    holders = {p for s in by_pid.values() for p in s["blocked_by"]}
    for s in by_pid.values():
        if not s["blocked_by"] and s["pid"] not in holders and (s["xact_seconds"] or 0) > LONG_XACT_S:
            out.append(f"{_label(s, generic)} [xact > {LONG_XACT_S:g} s]")
    return out
