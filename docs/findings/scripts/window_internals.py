#!/usr/bin/env python
"""What moves inside the embedded server from one window to the next? (issue 24; not a test)

Two modes, run by hand beside ``ssbench run`` on the embedded target:

``sample OUT.jsonl`` polls, every ``--every`` seconds until interrupted, what a window's level
could follow: ``pg_stat_wal`` (records, full-page images, bytes), the WAL's writes, fsyncs and
their time (``pg_stat_io``), checkpoints and background-writer writes, autovacuum workers and
the oldest snapshot they hold, the block device's writes, flushes and their time
(``/proc/diskstats``), dirty page cache, the CPU seconds of every process class (backends
by application name: senders, readers, transport; autovacuum; Locust; the broker; the rest),
and in the emulation's databases (``--databases``) each ``ssb`` table's scans (sequential
scans, tuples they read, index entries read, dead tuples) and the snapshot horizon: the oldest
``backend_xmin`` of a session that holds it back (an autovacuum worker only while it analyzes:
a plain VACUUM is ignored by the horizon) and whose it is.

``windows RUN_DIR OUT.jsonl`` joins those samples to the run's measured windows and prints, per
repetition of one dialog strategy (``--dialogs``, default per_thread): its receive rate, WAL
bytes and full-page images per message, WAL fsyncs per second and milliseconds per fsync as
PostgreSQL timed them beside the device's own milliseconds per flush, checkpoints, the share
of samples with an autovacuum worker (and analyzing), the service queue's sequentially read
tuples and head-index entries per message, the horizon's p90 age in transactions, and CPU
cores per process class.

    .venv/bin/python docs/findings/scripts/window_internals.py sample /tmp/wi.jsonl &
    .venv/bin/ssbench run MATRIX --out /tmp/wi-run; kill %1
    .venv/bin/python docs/findings/scripts/window_internals.py windows /tmp/wi-run /tmp/wi.jsonl
"""

from __future__ import annotations

import argparse
import bisect
import collections
import contextlib
import glob
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

HZ = os.sysconf("SC_CLK_TCK")


def _device() -> str:
    """The block device of the file system holding the embedded server's data."""
    from harness.targets.embedded.server import EmbeddedServer

    dev = os.stat(EmbeddedServer().data_dir).st_dev
    return Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}").resolve().name


def _processes(names: dict, apps: dict, roles: dict | None = None) -> dict:
    """CPU seconds per process class, from /proc; ``roles`` gets each process's class."""
    acc = collections.Counter()
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            stat = Path(f"/proc/{p}/stat").read_text()
            if p not in names:
                names[p] = Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        rest = stat[stat.rfind(")") + 2:].split()
        cmd = names[p]
        if cmd.startswith("postgres: "):
            kind = next((k for k in ("autovacuum", "walwriter", "checkpointer", "background writer")
                         if k in cmd), None)
            cls = f"pg {kind}" if kind else f"pg {apps.get(p, 'backend')}"
        elif "locust" in cmd:
            cls = "locust"
        elif "broker" in cmd:
            cls = "broker"
        else:
            cls = "other"
        acc[cls] += (int(rest[11]) + int(rest[12])) / HZ
        if roles is not None:
            roles[p] = cls
    return dict(acc)


#: a session holding the snapshot horizon back: any with a snapshot but a plain VACUUM's
HORIZON = """SELECT coalesce(application_name, '') || ' ' || backend_type, age(backend_xmin)
               FROM pg_stat_activity
              WHERE backend_xmin IS NOT NULL AND pid <> pg_backend_pid()
                AND (backend_type <> 'autovacuum worker' OR query ILIKE '%analyze%')
              ORDER BY age(backend_xmin) DESC LIMIT 1"""
TABLES = """SELECT relname, seq_scan, seq_tup_read, coalesce(idx_tup_fetch, 0), n_dead_tup
              FROM pg_stat_user_tables WHERE schemaname = 'ssb'"""
INDEXES = "SELECT indexrelname, idx_tup_read FROM pg_stat_user_indexes WHERE schemaname = 'ssb'"


def _tables(conns: dict) -> dict:
    """Per database: each ssb table's [seq_scan, seq_tup_read, idx_tup_fetch, n_dead_tup] and
    each index's idx_tup_read (a fresh statistics snapshot per call)."""
    out = {}
    for db, c in conns.items():
        c.execute("SELECT pg_stat_clear_snapshot()")
        out[db] = {"tables": {r[0]: list(r[1:]) for r in c.execute(TABLES)},
                   "indexes": dict(c.execute(INDEXES).fetchall())}
    return out


def sample(out: Path, every: float, databases: list[str]) -> None:
    import psycopg

    from harness.targets.embedded.server import EmbeddedServer

    server, dev, names, roles, told = EmbeddedServer(), _device(), {}, {}, {}
    with out.open("a") as f:
        while True:
            info = server.info()
            if info is None:
                time.sleep(0.5)
                continue
            try:
                with contextlib.ExitStack() as stack:
                    c = stack.enter_context(psycopg.connect(info.conninfo(), autocommit=True))
                    conns = {db: stack.enter_context(psycopg.connect(info.conninfo(db), autocommit=True))
                             for db in databases}
                    while True:
                        t = time.time()
                        w = c.execute("SELECT wal_records, wal_fpi, wal_bytes::bigint FROM pg_stat_wal").fetchone()
                        io = c.execute("SELECT coalesce(sum(fsyncs), 0), coalesce(sum(fsync_time), 0) "
                                       "FROM pg_stat_io WHERE object = 'wal'").fetchone()
                        ck = c.execute("SELECT num_timed + num_requested, buffers_written FROM pg_stat_checkpointer").fetchone()
                        av = c.execute("SELECT count(*), max(age(backend_xmin)), "
                                       "count(*) FILTER (WHERE query ILIKE '%analyze%') FROM pg_stat_activity "
                                       "WHERE backend_type = 'autovacuum worker'").fetchone()
                        horizon = c.execute(HORIZON).fetchone()
                        apps = {str(pid): (app or "backend").rstrip("0123456789-")
                                for pid, app in c.execute("SELECT pid, application_name FROM pg_stat_activity "
                                                          "WHERE backend_type = 'client backend'")}
                        d = next(line.split() for line in Path("/proc/diskstats").read_text().splitlines()
                                 if line.split()[2] == dev)
                        dirty = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                                     if line.startswith("Dirty:"))
                        f.write(json.dumps({
                            "t": t, "wal_records": w[0], "wal_fpi": w[1], "wal_bytes": w[2],
                            "fsyncs": float(io[0]), "fsync_ms": float(io[1]), "checkpoints": ck[0],
                            "checkpoint_buffers": ck[1], "autovacuum": av[0], "autovacuum_xmin_age": av[1],
                            "autovacuum_analyze": av[2], "horizon_age": horizon[1] if horizon else 0,
                            "horizon_by": horizon[0] if horizon else "", "db": _tables(conns),
                            "disk_writes": int(d[7]), "disk_write_ms": int(d[10]), "disk_flushes": int(d[18]),
                            "disk_flush_ms": int(d[19]), "dirty_kb": dirty, "cpu": _processes(names, apps, roles),
                            # each process's class once it is known (docs/findings/scripts/window_perf.py's pid -> class)
                            "roles": {p: r for p, r in roles.items() if told.get(p) != r}}) + "\n")
                        told.update(roles)
                        f.flush()
                        time.sleep(every)
            except psycopg.Error as e:  # the server restarted between repetitions, or no such database yet
                print(f"window_internals: {e}".splitlines()[0], file=sys.stderr)
                time.sleep(0.5)


def strategy_summaries(run: Path, dialogs: str):
    """(path, summary) of every repetition of the run's permutations with ``dialogs``."""
    for f in sorted(glob.glob(str(run / "*" / "rep-*" / "summary.json"))):
        s = json.loads(Path(f).read_text())
        if s["permutation"]["dialogs"] == dialogs:
            yield Path(f), s


def window_messages(path: Path, s: dict) -> float:
    """The messages received in a repetition's measured window, every member's of an alternated
    one (they share its counters): each member's receive rate over its own seconds. Not
    ``messages_received``: that is the whole repetition's (warm-up and drain too), and every
    member of an alternated window reports the same one."""
    total = 0.0
    for pid in (s.get("alternation") or {}).get("members") or [s["permutation_id"]]:
        rep = path.parent.parent.parent / pid / path.parent.name / "summary.json"
        if rep.exists():
            m = json.loads(rep.read_text())
            total += m["receive_rate"] * m["window"]["measure_seconds"]
    return total


def _p90(xs: list) -> float:
    xs = sorted(xs)
    return xs[int(0.9 * (len(xs) - 1))] if xs else 0.0


def _queue(a: dict, b: dict, msgs: int, db: str = "ssb_target") -> dict:
    """The service queue's tuples read by sequential scans and its head index's (the primary
    key's: RECEIVE's FIFO head) entries read, per message, between two samples."""
    if db not in a.get("db", {}) or db not in b.get("db", {}):
        return {"queue seq tup/msg": float("nan"), "head idx/msg": float("nan")}
    ta, tb = a["db"][db]["tables"].get("service_queue"), b["db"][db]["tables"].get("service_queue")
    ia, ib = a["db"][db]["indexes"].get("service_queue_pkey"), b["db"][db]["indexes"].get("service_queue_pkey")
    return {"queue seq tup/msg": (tb[1] - ta[1]) / max(msgs, 1) if ta and tb else float("nan"),
            "head idx/msg": (ib - ia) / max(msgs, 1) if ia is not None and ib is not None else float("nan")}


def windows(run: Path, samples: Path, dialogs: str) -> None:
    rows = [json.loads(line) for line in samples.read_text().splitlines() if line.strip()]
    ts = [r["t"] for r in rows]

    def at(t):
        return rows[min(bisect.bisect_left(ts, t), len(rows) - 1)]

    table = []
    for f, s in strategy_summaries(run, dialogs):
        w = s["window"]
        a, b = at(w["measure_start"]), at(w["measure_end"])
        dt = max(b["t"] - a["t"], 1e-9)
        msgs = window_messages(Path(f), s)
        fs = b["fsyncs"] - a["fsyncs"]
        flushes = b["disk_flushes"] - a["disk_flushes"]
        inside = [r for r in rows if w["measure_start"] <= r["t"] <= w["measure_end"]]
        cpu = {k: (b["cpu"].get(k, 0) - a["cpu"].get(k, 0)) / dt for k in b["cpu"]}
        table.append((s["repetition"], s["receive_rate"], {
            "WAL B/msg": (b["wal_bytes"] - a["wal_bytes"]) / max(msgs, 1),
            "FPI/kmsg": 1000 * (b["wal_fpi"] - a["wal_fpi"]) / max(msgs, 1),
            "fsync/s": fs / dt,
            "ms/fsync": (b["fsync_ms"] - a["fsync_ms"]) / max(fs, 1),
            "device ms/flush": (b["disk_flush_ms"] - a["disk_flush_ms"]) / max(flushes, 1),
            "checkpoints": b["checkpoints"] - a["checkpoints"],
            "autovacuum %": 100 * sum(1 for r in inside if r["autovacuum"]) / max(len(inside), 1),
            "analyze %": 100 * sum(1 for r in inside if r.get("autovacuum_analyze")) / max(len(inside), 1),
            **_queue(a, b, msgs),
            "horizon p90": _p90([r.get("horizon_age", 0) for r in inside]),
        }, cpu))
    if not table:
        raise SystemExit(f"no repetition of dialogs={dialogs} in {run}")
    classes = sorted({k for *_, c in table for k in c}, key=lambda k: -sum(c.get(k, 0) for *_, c in table))[:6]
    cols = list(table[0][2])
    print("rep   rate  " + "  ".join(cols) + "  |  cores: " + "  ".join(classes))
    for rep, rate, m, cpu in table:
        print(f"{rep:3d} {rate:6.0f}  " + "  ".join(f"{m[c]:{len(c)}.4g}" for c in cols)
              + "  |         " + "  ".join(f"{cpu.get(k, 0):{len(k)}.2f}" for k in classes))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("sample")
    s.add_argument("out", type=Path)
    s.add_argument("--every", type=float, default=0.25)
    s.add_argument("--databases", default="ssb_target,ssb_init1",
                   help="the emulation's databases whose ssb tables are read (default: the embedded target's)")
    w = sub.add_parser("windows")
    w.add_argument("run", type=Path)
    w.add_argument("samples", type=Path)
    w.add_argument("--dialogs", default="per_thread")
    args = ap.parse_args()
    if args.mode == "sample":
        try:
            sample(args.out, args.every, [d for d in args.databases.split(",") if d])
        except KeyboardInterrupt:
            pass
    else:
        windows(args.run, args.samples, args.dialogs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
