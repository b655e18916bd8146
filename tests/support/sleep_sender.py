"""A Sender whose SEND is a server-side sleep (``SELECT pg_sleep(s)``) on PostgreSQL.

Used to prove that the Locust workers really run N users concurrently: N users against a
fixed server-side delay must reach close to N times one user's rate. Test-only: a swarm loads
it through the sender spec's plugin hook (:func:`spec`), with the tests directory on the
workers' PYTHONPATH (:func:`support.pythonpath_env`).
"""

from __future__ import annotations

import psycopg

from harness.targets.base import Sender


class SleepSender(Sender):
    def __init__(self, conninfo: str, seconds: float):
        self.conn = psycopg.connect(conninfo, autocommit=True)
        self.seconds = seconds
        self._green = None

    def dialog(self, slot: int) -> str:
        return f"sleep-{slot}"

    def send(self, dialog: str, payload: bytes) -> None:
        self.conn.execute("SELECT pg_sleep(%s)", (self.seconds,))

    def send_green(self, dialog: str, payload: bytes) -> None:
        if self._green is None:
            from harness.targets.embedded.green import GreenConn

            self._green = GreenConn(self.conn.pgconn)
        pg = self._green.pg
        res = self._green.execute(lambda: pg.send_query(f"SELECT pg_sleep({self.seconds:f})".encode()))
        if res is None or res.error_message:
            raise RuntimeError(f"sleep failed: {pg.error_message.decode(errors='replace')}")

    def close(self) -> None:
        if self._green is not None:
            self._green.close()
        self.conn.close()


def open_sender(spec: dict) -> SleepSender:
    return SleepSender(spec["conninfo"], float(spec["seconds"]))


def spec(conninfo: str, seconds: float) -> dict:
    """A sender spec that loads this module in any process that can import ``support``."""
    return {"kind": "sleep", "module": __name__, "conninfo": conninfo, "seconds": seconds}
