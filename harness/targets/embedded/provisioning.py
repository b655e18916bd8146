"""Provisioning of the embedded target: its databases and the emulation's schema in each.

Mixed into :class:`~harness.targets.embedded.target.EmbeddedTarget` (uses its connections:
``_conn``, ``_query``, ``_lock``, ``_conns``, and its names: ``prefix``, ``target_db``,
``initiator_db``).
"""

from __future__ import annotations

import hashlib
import logging

from psycopg import sql

from ... import paths
from ...errors import TargetError, UserError
from ...matrix import MAX_INITIATORS

log = logging.getLogger(__name__)

SCHEMA_TABLE = "ssbench_schema"  # public.ssbench_schema: which workload file version is loaded


def sql_file(kind: str) -> tuple[str, str]:
    """The workload file of ``kind`` (target or initiator) and its version (a short hash)."""
    path = paths.WORKLOADS / "embedded" / f"{kind}.sql"
    try:
        text = path.read_text()
    except OSError as e:
        raise TargetError(f"cannot read the embedded workload {path}: {e.strerror}") from None
    return text, hashlib.sha256(text.encode()).hexdigest()[:16]


class Provisioning:
    """Create the databases (idempotently) and load or reload the emulation's schema."""

    _provisioned: int

    def _existing_initiators(self) -> int:
        rows = self._query("postgres", "SELECT datname FROM pg_database WHERE datname ~ %s",
                           (f"^{self.prefix}_init[0-9]+$",))
        nums = sorted(int(r[0][len(self.prefix) + 5:]) for r in rows)
        n = 0
        while n < len(nums) and nums[n] == n + 1:
            n += 1
        return n

    def provision(self, max_initiators: int) -> None:
        """Create the target database and ``max_initiators`` initiator databases (idempotent) and
        load the emulation's schema into each (reloaded when the workload file changed)."""
        if isinstance(max_initiators, bool) or not isinstance(max_initiators, int) \
                or not 1 <= max_initiators <= MAX_INITIATORS:
            raise UserError(f"max_initiators must be an integer 1..{MAX_INITIATORS}, got {max_initiators!r}")
        dbs = [(self.target_db, "target", 0)] + [(self.initiator_db(i), "initiator", i)
                                                 for i in range(1, max_initiators + 1)]
        with self._lock:
            self._reload_settings()
            existing = {r[0] for r in self._query("postgres", "SELECT datname FROM pg_database")}
            for db, kind, num in dbs:
                if db not in existing:
                    log.info("creating database %s", db)
                    self._conn("postgres").execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(db)))
                self._load_schema(db, kind, num)
            self._provisioned = max(self._provisioned, max_initiators)

    def _reload_settings(self) -> None:
        """Settings added to server.SETTINGS after this server was initialized, where a reload
        applies them (server.RELOADABLE): ALTER SYSTEM, then reload."""
        from .server import RELOADABLE, SETTINGS

        want = {k: SETTINGS[k].strip("'") for k in RELOADABLE}
        have = dict(self._query("postgres", "SELECT name, setting FROM pg_settings WHERE name = ANY (%s)",
                                (list(want),)))
        stale = [k for k, v in want.items() if have.get(k) != v]
        for k in stale:
            self._conn("postgres").execute(sql.SQL("ALTER SYSTEM SET {} = {}").format(
                sql.Identifier(k), sql.Literal(want[k])))
        if stale:
            self._query("postgres", "SELECT pg_reload_conf()")

    def _load_schema(self, db: str, kind: str, num: int) -> None:
        text, version = sql_file(kind)
        c = self._conn(db)
        c.execute(f"CREATE TABLE IF NOT EXISTS public.{SCHEMA_TABLE} "
                  "(singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton), kind text, version text)")
        row = c.execute(f"SELECT kind, version FROM public.{SCHEMA_TABLE}").fetchone()
        if row == (kind, version) and c.execute("SELECT to_regnamespace('ssb') IS NOT NULL").fetchone()[0]:
            if kind == "initiator":
                c.execute("UPDATE ssb.config SET initiator = %s WHERE initiator <> %s", (num, num))
            return
        log.info("loading the embedded %s schema into %s (version %s)", kind, db, version)
        self._terminate_others(db)
        with c.transaction():
            c.execute("DROP SCHEMA IF EXISTS ssb CASCADE")
            c.execute(text.encode())
            if kind == "initiator":
                c.execute("UPDATE ssb.config SET initiator = %s", (num,))
            c.execute(f"INSERT INTO public.{SCHEMA_TABLE} (kind, version) VALUES (%s, %s) "
                      "ON CONFLICT (singleton) DO UPDATE SET kind = excluded.kind, version = excluded.version",
                      (kind, version))

    def _terminate_others(self, db: str) -> int:
        """Disconnect every other session of ``db`` (WITH ROLLBACK IMMEDIATE), ours excepted."""
        keep = [c.info.backend_pid for c in self._conns.values() if not c.closed and not c.broken]
        return len(self._query("postgres",
                               "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                               "WHERE datname = %s AND pid <> ALL (%s)", (db, keep)))

    def _require(self, initiators: int) -> None:
        if initiators > self._provisioned:
            raise UserError(f"{initiators} initiator(s) asked but only {self._provisioned} provisioned "
                            "(call provision(max_initiators) first)")
