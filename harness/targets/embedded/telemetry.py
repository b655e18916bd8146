"""Accounting and telemetry of the embedded target: exact counts, DMV-shaped waits and
counters, queue depths, end-to-end latencies.

Mixed into :class:`~harness.targets.embedded.target.EmbeddedTarget` (uses ``_query``, ``_one``,
``initiator_db``, ``target_db``, ``_initiators``, ``_provisioned`` and ``info``).
"""

from __future__ import annotations

from ..base import Counts, InitiatorCounts, PerfCounter, WaitStat
from ..telemetry import Telemetry
from ._db import QUEUE
from .waits import ACTIVE_SESSIONS_QUERY, READER_APP_PREFIX, SENDER_APP_PREFIX, map_wait


#: the activation readers running now (their sessions), in the target database
READERS_RUNNING = ("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                   "AND application_name LIKE 'ssbench-reader-%%'")
#: an initiator's data messages (not warm-up: flag bit 0 of the header) still in its
#: transmission queue
XMITQ_DATA = ("SELECT count(*) FROM ssb.sysxmitqueue WHERE msgtype = 1 "
              "AND NOT (length(msgbody) >= 16 AND (get_byte(msgbody, 15) & 1) = 1)")
#: per initiator, the target's side of the accounting: distinct messages received, tallies beyond
#: a message's first, messages in the error table never received, data messages still queued
TARGET_COUNTS = """
WITH d AS (SELECT initiator, count(DISTINCT (diag_id, msgseqnum)) AS received,
                  count(*) - count(DISTINCT (diag_id, msgseqnum)) AS duplicates
             FROM ssb.message_drop WHERE NOT warmup GROUP BY initiator),
     e AS (SELECT initiator, count(DISTINCT (diag_id, msgseqnum)) AS poison
             FROM ssb.message_errors x
            WHERE NOT ssb.is_warmup(x.message_val)
              AND NOT EXISTS (SELECT 1 FROM ssb.message_drop m
                               WHERE m.diag_id = x.diag_id AND m.msgseqnum = x.msgseqnum)
            GROUP BY initiator),
     q AS (SELECT initiator, count(*) AS queued FROM ssb.service_queue
            WHERE msgtype = 1 AND NOT ssb.is_warmup(msgbody) GROUP BY initiator)
SELECT i, coalesce(d.received, 0), coalesce(q.queued, 0), coalesce(e.poison, 0), coalesce(d.duplicates, 0)
  FROM (SELECT initiator AS i FROM d UNION SELECT initiator FROM e UNION SELECT initiator FROM q) AS k
  LEFT JOIN d ON d.initiator = k.i LEFT JOIN e ON e.initiator = k.i LEFT JOIN q ON q.initiator = k.i
"""


#: an initiator's dialogs and the last sequence number of a data message each sent (warm-up
#: included): an EndDialog, the last message of a dialog this side ended (DO, CD), is not one
DIALOGS_SENT = ("SELECT coalesce(array_agg(diag_id), '{}'), "
                "coalesce(array_agg(send_seq - (state IN ('DO', 'CD'))::int), '{}') FROM ssb.sysdesend")
#: data messages the target holds (processed, poison, queued; warm-up excluded) from one
#: initiator under a (dialog, sequence number) it never sent: each counted once
PHANTOMS = """
WITH f AS (SELECT diag_id, msgseqnum FROM ssb.message_drop WHERE initiator = %(i)s AND NOT warmup
           UNION SELECT diag_id, msgseqnum FROM ssb.message_errors
                  WHERE initiator = %(i)s AND NOT ssb.is_warmup(message_val)
           UNION SELECT diag_id, msgseqnum FROM ssb.service_queue
                  WHERE initiator = %(i)s AND msgtype = 1 AND NOT ssb.is_warmup(msgbody))
SELECT count(*) FROM f LEFT JOIN unnest(%(dialogs)s::uuid[], %(last)s::bigint[]) AS s(diag_id, last)
    ON s.diag_id = f.diag_id
 WHERE s.diag_id IS NULL OR f.msgseqnum < 1 OR f.msgseqnum > s.last
"""


def _target_side(row) -> dict[str, int]:
    received, queued, poison, duplicates = (int(v) for v in (row or (0, 0, 0, 0)))
    return {"received": received, "queued": queued, "poison": poison, "duplicates": duplicates}


class EmbeddedTelemetry(Telemetry):
    """What the runner and the collectors read from the embedded target."""

    _initiators: int
    _provisioned: int

    def _initiator_dbs(self, n: int | None = None) -> dict[int, str]:
        """Initiator number -> database: the first ``n``, by default the permutation's (every
        one provisioned before a prepare)."""
        n = n if n is not None else (self._initiators or self._provisioned)
        return {i: self.initiator_db(i) for i in range(1, n + 1)}

    def counts(self) -> Counts:
        """Exact counts of data messages since the last prepare, warm-up excluded. Read upstream
        first (sent, then transmission queues, then the target side), so a message moving while
        we count is counted twice rather than missed: a drain never ends early. A message counts
        once however often the drop table has it (the rest are duplicates), and as poison only
        when it is in the error table and was never received."""
        inits = self._initiator_dbs()
        sent = {i: int(self._one(db, "SELECT ssb.sent_count()")) for i, db in inits.items()}
        xmitq = {i: int(self._one(db, XMITQ_DATA)) for i, db in inits.items()}
        side = {int(r[0]): r[1:] for r in self._query(self.target_db, TARGET_COUNTS)}
        disabled = self._one(self.target_db, "SELECT NOT is_receive_enabled FROM ssb.queues WHERE name = %s",
                             (QUEUE,))
        c = Counts(initiators=[InitiatorCounts(i, sent[i], xmitq=xmitq[i], **_target_side(side.get(i)))
                               for i in inits], queue_disabled=bool(disabled))
        if c.in_flight == 0:
            for i in c.initiators:
                i.phantoms = self._phantoms(i.initiator)
        return c

    def _phantoms(self, initiator: int) -> int:
        """The per-dialog check (:data:`PHANTOMS`): the target's messages from ``initiator``
        whose (dialog, sequence number) it never sent. With those taken out, what the target
        holds is a subset of what was sent, so ``lost`` (sent less what the target holds) counts
        exactly the sequence numbers sent and found nowhere: a gap is a loss even when the totals
        match. Read once nothing is in flight: the drain's last readings, the senders stopped."""
        dialogs, last = self._query(self.initiator_db(initiator), DIALOGS_SENT)[0]
        return int(self._one(self.target_db, PHANTOMS, {"i": initiator, "dialogs": dialogs, "last": last}))

    def dialog_stats(self) -> dict:
        """Dialog lifetime accounting since the last prepare, summed over the initiators, and
        the conversation endpoints left behind per side and state (sys.conversation_endpoints)."""
        out = {"dialogs_begun": 0, "dialogs_ended": 0, "errors_received": 0, "errors_lost": 0}
        endpoints: dict[str, int] = {}
        for db in self._initiator_dbs().values():
            begun, ended, received, lost, states, counts = self._query(db, "SELECT * FROM ssb.dialog_stats()")[0]
            for k, v in zip(out, (begun, ended, received, lost)):
                out[k] += int(v)
            for state, count in zip(states, counts):
                endpoints[f"initiator.{state}"] = endpoints.get(f"initiator.{state}", 0) + int(count)
        for state, count in self._query(self.target_db, "SELECT * FROM ssb.endpoint_states()"):
            endpoints[f"target.{state}"] = int(count)
        out["endpoints"] = endpoints
        return out

    # ------------------------------------------------------------------ telemetry
    def wait_stats(self) -> list[WaitStat]:
        return self._waits("NOT benign", "3 DESC, 1")

    def _waits(self, where: str, order: str) -> list[WaitStat]:
        rows = self._query(self.target_db, "SELECT wait_type, sum(waiting_tasks)::bigint, sum(wait_time_ms) "
                                           f"FROM ssb.wait_stats WHERE {where} GROUP BY wait_type ORDER BY {order}")
        return [WaitStat(w, int(n), float(ms)) for w, n, ms in rows]

    #: the roles of session_waits, by application_name (the load's senders, the activation readers)
    SESSION_ROLES = ((SENDER_APP_PREFIX, "sender"), (READER_APP_PREFIX, "reader"))

    def session_waits(self) -> list[tuple[str, str, int]]:
        """pg_stat_activity now: the senders' and readers' sessions, their wait events mapped as
        the broker's wait sampler maps them (harness.targets.embedded.waits.map_wait)."""
        dbs = [self.target_db, *self._initiator_dbs().values()]
        counts: dict[tuple[str, str], int] = {}
        for _, _, wtype, wevent, app in self._query(self.target_db, ACTIVE_SESSIONS_QUERY, (dbs,)):
            role = next((r for prefix, r in self.SESSION_ROLES if (app or "").startswith(prefix)), None)
            _, _, wait_type, benign = map_wait(wtype, wevent, app)
            if role is not None and not benign:
                counts[role, wait_type] = counts.get((role, wait_type), 0) + 1
        return [(role, wt, k) for (role, wt), k in sorted(counts.items())]

    def perf_counters(self) -> list[PerfCounter]:
        """Broker Activation (instance: the target database) and Broker Statistics, named as in
        SQL Server's sys.dm_os_performance_counters; */sec counters are cumulative raw values."""
        sends = system = dequeued = 0
        for db in self._initiator_dbs().values():
            # one statement, one snapshot: sent and still queued are consistent with each other
            s, sysm, xq = self._query(db,
                                      "SELECT coalesce((SELECT sum(send_seq) FROM ssb.sysdesend), 0), "
                                      "(SELECT system_sent FROM ssb.config), "
                                      "(SELECT count(*) FROM ssb.sysxmitqueue)")[0]
            sends += int(s)
            system += int(sysm)
            dequeued += int(s) - int(xq)
        (started, limit, invoked, aborted, empty, tally_batches, tally_msgs, enqueued, rollbacks,
         act_errors, running) = self._query(self.target_db, """
            SELECT a.tasks_started, a.task_limit_reached, a.procs_invoked, a.tasks_aborted, a.receives_empty,
                   (SELECT count(*) FROM ssb.receive_tally), (SELECT coalesce(sum(messages), 0) FROM ssb.receive_tally),
                   (SELECT coalesce(sum(rcv_seq), 0) FROM ssb.sysdercv), q.rollbacks_total, q.activation_errors,
                   (""" + READERS_RUNNING + """)
              FROM ssb.activation_counters a, ssb.queues q WHERE q.name = %s""", (QUEUE,))[0]
        db = self.target_db
        act = "Broker Activation"
        st = "Broker Statistics"
        sql_sends = sends - system
        receives = int(tally_batches) + int(empty)
        return [
            PerfCounter(act, "Tasks Started/sec", db, float(started)),
            PerfCounter(act, "Tasks Running", db, float(running), "gauge"),
            PerfCounter(act, "Task Limit Reached", db, float(limit)),
            PerfCounter(act, "Task Limit Reached/sec", db, float(limit)),
            PerfCounter(act, "Stored Procedures Invoked/sec", db, float(invoked)),
            PerfCounter(act, "Tasks Aborted/sec", db, float(aborted)),
            PerfCounter(st, "SQL SENDs/sec", "", float(sql_sends)),
            PerfCounter(st, "SQL SEND Total", "", float(sql_sends)),
            PerfCounter(st, "SQL RECEIVEs/sec", "", float(receives)),
            PerfCounter(st, "SQL RECEIVE Total", "", float(receives)),
            PerfCounter(st, "Enqueued Messages/sec", "", float(enqueued)),
            PerfCounter(st, "Enqueued Messages Total", "", float(enqueued)),
            PerfCounter(st, "Enqueued Transmission Msgs/sec", "", float(sends)),
            PerfCounter(st, "Dequeued Transmission Msgs/sec", "", float(dequeued)),
            PerfCounter(st, "Broker Transaction Rollbacks", "", float(rollbacks)),
            PerfCounter(st, "Activation Errors Total", "", float(act_errors)),
            # not a SQL Server counter: messages the activation procedure received (the tally)
            PerfCounter(st, "Messages Received Total", "", float(tally_msgs)),
        ]

    def queue_depths(self, exact: bool = False) -> dict[str, int]:
        """Transmission-queue depth per initiator and target-queue depth, exact as of each
        statement's snapshot either way: the transmission queues counted (their
        pg_stat_user_tables.n_live_tup, the analogue of sys.partitions.rows, lags up to a second
        and moves in steps of a thousand while the transport keeps the table busy: too coarse for
        the diagnosis' growth figure) and the target queue as messages enqueued minus received
        (the receive endpoints' sequence numbers and the tally: cheap), or counted when
        ``exact``."""
        q_x = "SELECT count(*) FROM ssb.sysxmitqueue"
        if exact:
            q_q = "SELECT count(*) FROM ssb.service_queue"
        else:
            q_q = ("SELECT greatest((SELECT coalesce(sum(rcv_seq), 0) FROM ssb.sysdercv) "
                   "- (SELECT coalesce(sum(messages), 0) FROM ssb.receive_tally), 0)")
        out = {f"xmitq.i{i}": int(self._one(db, q_x)) for i, db in self._initiator_dbs().items()}
        out["queue"] = int(self._one(self.target_db, q_q))
        return out

    def activated_tasks(self) -> tuple[int, int]:
        """Readers running now (their sessions) against the queue's MAX_QUEUE_READERS."""
        running, limit = self._query(self.target_db, f"SELECT ({READERS_RUNNING}), max_readers FROM ssb.queues "
                                                     "WHERE name = %s", (QUEUE,))[0]
        return int(running), int(limit)

    def procedure_time(self, start_epoch: float, end_epoch: float) -> dict[str, float]:
        """From the tally: RECEIVE returned (received_us) to processing done (finished_us)."""
        a, b = int(start_epoch * 1_000_000), int(end_epoch * 1_000_000)
        inside, us, messages, receives = self._query(
            self.target_db,
            "SELECT coalesce(sum(least(finished_us, %(b)s) - greatest(received_us, %(a)s)), 0), "
            "coalesce(sum(finished_us - received_us) FILTER (WHERE received_us >= %(a)s), 0), "
            "coalesce(sum(processed - warmup) FILTER (WHERE received_us >= %(a)s), 0), "
            "count(*) FILTER (WHERE received_us >= %(a)s) "
            "FROM ssb.receive_tally WHERE received_us < %(b)s AND finished_us > %(a)s", {"a": a, "b": b})[0]
        return {"seconds": float(inside) / 1e6, "batch_seconds": float(us) / 1e6, "messages": float(messages),
                "receives": float(receives)}

    def broker_waits(self) -> list[WaitStat]:
        """BROKER_* waits, idle ones included (the readers' RECEIVE WAITFOR)."""
        return self._waits("wait_type LIKE 'BROKER%%'", "1")

    def messages_processed(self) -> int:
        return int(self._one(self.target_db, "SELECT coalesce(sum(messages), 0) FROM ssb.receive_tally"))

    def e2e_latencies_us(self, start_epoch: float, end_epoch: float) -> list[int]:
        return [us for _, us in self.e2e_sent_latencies_us(start_epoch, end_epoch)]

    def e2e_sent_latencies_us(self, start_epoch: float, end_epoch: float) -> list[tuple[int, int]]:
        rows = self._query(self.target_db,
                           "SELECT sent_us, received_us - sent_us FROM ssb.message_drop WHERE NOT warmup "
                           "AND received_us >= %s AND received_us < %s",
                           (int(start_epoch * 1_000_000), int(end_epoch * 1_000_000)))
        return [(int(r[0]), int(r[1])) for r in rows]

    def log_flush_stats(self) -> tuple[float, float] | None:
        """Cumulative WAL fsyncs and their milliseconds, every backend type (pg_stat_io; timed
        with track_wal_io_timing, which provisioning switches on)."""
        row = self._query("postgres", "SELECT coalesce(sum(fsyncs), 0)::float8, coalesce(sum(fsync_time), 0)::float8 "
                                      "FROM pg_stat_io WHERE object = 'wal'")
        return (row[0][0], row[0][1]) if row else None

    def storage_probe_dir(self):
        return self.server.data_dir.parent

    def blocking_chains(self, start_epoch: float, end_epoch: float) -> dict[str, float]:
        """The diagnostic lock sampler's blocking chains in [start, end) (broker started with
        ``--lock-sample-ms``; empty otherwise): chain -> seconds seen (sampling instants it
        was seen at x the sampling period), numbered roles merged (reader-3 -> reader)."""
        from .lock_sampler import COLUMNS, chains

        rows = self._query(self.target_db,
                           "SELECT extract(epoch FROM sampled_at)::float8, " + ", ".join(COLUMNS)
                           + " FROM ssb.lock_samples WHERE sampled_at >= to_timestamp(%s) "
                             "AND sampled_at < to_timestamp(%s) ORDER BY 1", (start_epoch, end_epoch))
        if not rows:
            return {}
        instants: dict[float, list[dict]] = {}
        names: dict[str, str] = {}
        for r in rows:
            s = dict(zip(COLUMNS, r[1:]))
            rel = s["lock_relation"]
            if rel and ":" in rel:     # a relation of another database: "ssb_init1:16658"
                if rel not in names:
                    dbname, oid = rel.split(":", 1)
                    got = self._query(dbname, "SELECT %s::oid::regclass::text", (int(oid),)) if oid.isdigit() else []
                    names[rel] = f"{dbname}:{got[0][0]}" if got else rel
                s["lock_relation"] = names[rel]
            instants.setdefault(r[0], []).append(s)
        ts = sorted(instants)
        gaps = sorted(b - a for a, b in zip(ts, ts[1:]))
        period = gaps[len(gaps) // 2] if gaps else 0.1
        out: dict[str, float] = {}
        for sample in instants.values():
            for c in set(chains(sample, generic=True)):
                out[c] = out.get(c, 0.0) + period
        return {c: round(v, 3) for c, v in sorted(out.items(), key=lambda kv: -kv[1])}

    def server_pids(self) -> list[int]:
        try:
            import psutil

            main = psutil.Process(self.info.pid)
            return [main.pid] + [p.pid for p in main.children(recursive=True)]
        except Exception:
            return [self.info.pid]
