"""A Sender whose SEND is a server-side sleep (``SELECT pg_sleep(s)``) on PostgreSQL.

Used to prove that the Locust workers really run N users concurrently: N users against a
fixed server-side delay must reach close to N times one user's rate. Test-only: registered as
the sender ``sleep`` by the test plugins' entry points (tests/plugins), which a swarm finds with
tests/ and tests/plugins on the workers' PYTHONPATH (:func:`support.pythonpath_env`).
"""

from __future__ import annotations

import psycopg

from harness.targets.base import Sender


class SleepSender(Sender):
    """Blocking only: each user's SENDs run on an OS thread of its own."""

    def __init__(self, conninfo: str, seconds: float):
        self.conn = psycopg.connect(conninfo, autocommit=True)
        self.seconds = seconds

    @classmethod
    def from_spec(cls, spec: dict) -> "SleepSender":
        return cls(spec["conninfo"], float(spec["seconds"]))

    def dialog(self, slot: int) -> str:
        return f"sleep-{slot}"

    def send(self, dialog: str, payload: bytes) -> None:
        self.conn.execute("SELECT pg_sleep(%s)", (self.seconds,))

    def close(self) -> None:
        self.conn.close()


def spec(conninfo: str, seconds: float) -> dict:
    """A sender spec of this sender (registered as ``sleep``)."""
    return {"sender": "sleep", "conninfo": conninfo, "seconds": seconds}
