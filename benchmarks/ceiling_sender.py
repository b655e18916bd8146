"""Benchmark-only senders for the embedded target (loaded by Locust workers through the sender
spec's ``module``, with benchmarks/ on their PYTHONPATH: :func:`spec`).

* ``null``: the SEND statement replaced by a near-null one, ``SELECT pg_sleep(0)`` taking the
  same two parameters, so the client's cost per call is what is measured, not the broker's;
* ``slot_offset``: dialog slot k of this worker is the initiator's slot k + offset, so two
  Locust worker processes can share one initiator without sharing dialogs.
"""

from __future__ import annotations

from pathlib import Path

from harness.targets.embedded.sender import EmbeddedSender

NULL_SQL = b"SELECT pg_sleep(0) FROM (SELECT $1::uuid, $2::bytea) AS p"
PGBENCH_NULL_SQL = "SELECT pg_sleep(0);"


class CeilingSender(EmbeddedSender):
    def __init__(self, conninfo: str, initiator: int | None, *, null: bool, slot_offset: int):
        self.send_sql = NULL_SQL if null else EmbeddedSender.send_sql
        self._slot_offset = slot_offset
        super().__init__(conninfo, initiator)

    def dialog(self, slot: int) -> str:
        return super().dialog(slot + self._slot_offset)


def open_sender(spec: dict) -> CeilingSender:
    return CeilingSender(spec["conninfo"], spec.get("initiator"), null=bool(spec.get("null")),
                         slot_offset=int(spec.get("slot_offset", 0)))


def spec(embedded_spec: dict, *, null: bool = False, slot_offset: int = 0) -> dict:
    return {**embedded_spec, "module": "ceiling_sender", "null": null, "slot_offset": slot_offset}


BENCH_DIR = str(Path(__file__).resolve().parent)
