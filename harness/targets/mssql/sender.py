"""The SQL Server sender: one pyodbc connection per Locust user (client thread).

Built from :meth:`MssqlTarget.sender_spec` in any process (the spec names the password's
environment variable, never the password). Autocommit: each ``EXEC dbo.ssbench_send`` is its
own transaction, as the paper's clients did. A timed-out call discards its connection
(:mod:`.driver`). pyodbc releases the GIL, so calls run on real threads, one at a time.
"""

from __future__ import annotations

from typing import Any

from ...errors import TargetError
from ..base import Sender
from . import driver, tsql


class MssqlSender(Sender):
    """Blocking (pyodbc): the load layer SENDs from an OS thread per user."""

    def __init__(self, spec: dict[str, Any]):
        if spec.get("sender") != "mssql":
            raise ValueError(f"not an mssql sender spec: {spec.get('sender')!r}")
        self.initiator = int(spec.get("initiator", 0))
        self.conn_spec = driver.ConnSpec.from_dict(dict(spec["connection"]))
        self._conn = self.conn_spec.connect(autocommit=True)
        self._handles: dict[int, str] = {}
        self._send_sql = tsql.statement("initiator", "call_send")
        self._dialog_sql = tsql.statement("initiator", "dialog_handle")
        self._retiring_sql = tsql.statement("initiator", "call_send_retiring")
        self._reader_sql = tsql.statement("initiator", "call_initiator_reader_on")
        self._per_dialog, self._ff = 0, False
        self._live: dict[str, list] = {}     # slot handle -> [current handle or None, messages on it]
        self._high: dict[str, bool] = {}     # slot handle -> begun at high priority (dbo.dialogs.high)
        self.dialogs_begun = self.dialogs_ended = 0   # counted by this sender

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> "MssqlSender":
        return cls(spec)

    @classmethod
    def preload(cls) -> None:
        """Import pyodbc now (see :meth:`harness.targets.sender.Sender.preload`)."""
        driver.pyodbc_module()

    def dialog(self, slot: int) -> str:
        handle = self._handles.get(slot)
        if handle is None:
            rows = self._conn.execute(self._dialog_sql, (int(slot),), what="dialog lookup")
            if not rows or rows[0][0] is None:
                raise TargetError(f"{self.conn_spec.where}: no dialog {slot} in dbo.dialogs "
                                  "(create_dialogs has not run for this permutation)")
            handle = str(rows[0][0])
            self._handles[slot] = handle
            self._high[handle] = bool(rows[0][1])
        return handle

    def send(self, dialog: str, payload: bytes) -> None:
        if self._per_dialog:
            self._send_retiring(dialog, payload)
            return
        self._conn.execute(self._send_sql, (dialog, bytes(payload)), what="send")

    def set_dialog_lifetime(self, messages_per_dialog: int | None, fire_and_forget: bool = False) -> None:
        """Retire each dialog after ``messages_per_dialog`` messages (None: reuse the slot's for
        ever); one ``EXEC dbo.ssbench_send_retiring`` per SEND, which begins a dialog when the
        slot has none (on the high-priority contract when the slot's dialog was begun there)
        and ENDs it (fire and forget) or marks its last message for the target. A finite
        lifetime first turns on the initiator queue's reader, which ends the initiator's side
        of each dialog the target ends (ssbench_initiator_reader_on)."""
        self._per_dialog = int(messages_per_dialog or 0)
        self._ff = bool(fire_and_forget)
        self._live.clear()
        if self._per_dialog:
            self._conn.execute(self._reader_sql, what="initiator reader on")

    def _send_retiring(self, dialog: str, payload: bytes) -> None:
        live = self._live.setdefault(dialog, [None, 0])
        last = live[1] + 1 >= self._per_dialog
        try:
            nxt = self._conn.scalar(self._retiring_sql, (live[0], bytes(payload), int(last), int(self._ff),
                                                         int(self._high.get(dialog, False))),
                                    what="send retiring")
        except TargetError:
            # the slot's dialog may be unusable now (a cancel that landed after COMMIT, an Error
            # from the target that ended it): the next SEND begins a new one (the old is left to
            # the next reset)
            live[0], live[1] = None, 0
            raise
        if live[0] is None:
            self.dialogs_begun += 1
        if last:
            live[0], live[1] = None, 0
            self.dialogs_ended += self._ff
        else:
            live[0], live[1] = str(nxt), live[1] + 1

    def close(self) -> None:
        self._conn.close()
