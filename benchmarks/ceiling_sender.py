"""Benchmark-only senders for the embedded target, named in a sender spec by their import path
(``ceiling_sender:CeilingSender``: :func:`spec`), found by Locust workers with benchmarks/ on
their PYTHONPATH (benchmarks/loadbench.py puts it there).

* ``null``: the SEND statement replaced by a near-null one, ``SELECT pg_sleep(0)`` taking the
  same two parameters, so the client's cost per call is what is measured, not the broker's;
* ``slot_offset``: dialog slot k of this worker is the initiator's slot k + offset, so two
  Locust worker processes can share one initiator without sharing dialogs;
* ``odbc``: the SQL Server sender's driver layer (:mod:`harness.targets.mssql.driver`: pyodbc,
  one reused cursor, a watchdog-enforced query timeout per call) talking to the embedded
  server through psqlODBC, so the pyodbc path is measured here without a SQL Server. Its SEND
  is ``SELECT ssb.send(?, ?)`` (or the null statement) with the same two parameters as the
  SQL Server sender's ``EXEC dbo.ssbench_send ?, ?``.
"""

from __future__ import annotations

from harness.targets.base import SendPaths
from harness.targets.embedded.sender import EmbeddedSender

NULL_SQL = b"SELECT pg_sleep(0) FROM (SELECT $1::uuid, $2::bytea) AS p"
PGBENCH_NULL_SQL = "SELECT pg_sleep(0);"


class CeilingSender(EmbeddedSender):
    def __init__(self, conninfo: str, initiator: int | None, *, null: bool, slot_offset: int):
        self.send_sql = NULL_SQL if null else EmbeddedSender.send_sql
        self._slot_offset = slot_offset
        super().__init__(conninfo, initiator)

    @classmethod
    def from_spec(cls, spec: dict) -> "CeilingSender":
        if spec.get("odbc"):
            return OdbcSender(spec["conninfo"], spec.get("initiator"), null=bool(spec.get("null")),
                              slot_offset=int(spec.get("slot_offset", 0)), odbc=spec["odbc"])
        return cls(spec["conninfo"], spec.get("initiator"), null=bool(spec.get("null")),
                   slot_offset=int(spec.get("slot_offset", 0)))

    def dialog(self, slot: int) -> str:
        return super().dialog(slot + self._slot_offset)


ODBC_DRIVER = "PostgreSQL Unicode"
ODBC_SEND_SQL = "SELECT ssb.send(CAST(? AS uuid), CAST(? AS bytea))"
ODBC_NULL_SQL = "SELECT pg_sleep(0) FROM (SELECT CAST(? AS uuid), CAST(? AS bytea)) AS p"


class OdbcSender(CeilingSender):
    """Dialog handles through libpq (as the embedded sender); SENDs through pyodbc."""

    def __init__(self, conninfo: str, initiator, *, null: bool, slot_offset: int, odbc: dict):
        super().__init__(conninfo, initiator, null=null, slot_offset=slot_offset)
        from harness.targets.mssql import driver

        cs = (f"Driver={{{ODBC_DRIVER}}};Servername={odbc['host']};Port={odbc['port']};"
              f"Database={odbc['database']};Uid={odbc['user']};")
        self._odbc = driver.connect(cs, autocommit=True, query_timeout=60, where="psqlodbc")
        self._odbc_sql = ODBC_NULL_SQL if null else ODBC_SEND_SQL

    paths = SendPaths()     # a blocking driver: the thread path

    def send(self, dialog: str, payload: bytes) -> None:
        self._odbc.execute(self._odbc_sql, (dialog, bytes(payload)), what="send")

    def close(self) -> None:
        self._odbc.close()
        super().close()


def odbc_available() -> bool:
    try:
        import pyodbc
    except ImportError:
        return False
    return ODBC_DRIVER in pyodbc.drivers()


def spec(embedded_spec: dict, *, null: bool = False, slot_offset: int = 0, odbc: dict | None = None) -> dict:
    return {**embedded_spec, "sender": f"{__name__}:CeilingSender", "null": null, "slot_offset": slot_offset,
            **({"odbc": odbc} if odbc else {})}
