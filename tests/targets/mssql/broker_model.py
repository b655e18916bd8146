"""The Service Broker behaviour the SQL Server target's fixes depend on, modelled for the
recording fake (mssql_fake.py): no SQL Server runs here, so each documented behaviour a test
relies on is modelled, with the document it comes from, and nothing more.

* Conversation endpoints (sys.conversation_endpoints): BEGIN DIALOG creates the initiator's
  (state SO), the first message the target's; END CONVERSATION by one side sends EndDialog to
  the other (its endpoint DI). Once both sides have ended, the initiator's endpoint is deleted
  and only the target's CLOSED (CD) endpoint lingers (END CONVERSATION; observed behaviour, as
  Dave Wentzel's "Service Broker Demystified - CLOSED conversations" shows). Its send_sequence
  goes with it.
* Transactions: a procedure's BEGIN TRANSACTION nests (@@TRANCOUNT); effects are visible at
  once and undone on rollback, messages are delivered at the outermost COMMIT. An attention
  (the client's query timeout cancels the call) does not roll back an open transaction unless
  XACT_ABORT is ON (ISSAbort::Abort, "if there is an open transaction and XACT_ABORT is ON, the
  transaction will be rolled back"); closing the connection rolls it back.
* Database options (sys.databases): DELAYED_DURABILITY, HONOR_BROKER_PRIORITY, is_broker_enabled,
  service_broker_guid, the master key and is_master_key_encrypted_by_server, as ALTER DATABASE
  and CREATE / DROP MASTER KEY change them.
* Message types (CREATE MESSAGE TYPE): with VALIDATION = WELL_FORMED_XML the target discards a
  binary body and answers with an Error.
* Activation: the target's procedure processes the queue when its activation is on; the
  initiator's reader (ssbench_initiator_end) ends the initiator's side when it is on.
* The target's procedure and its error table (workloads/mssql/target.sql; "Remove poison
  messages"): a data message without a valid header and a Service Broker Error message are
  logged in messageErrors; a failure the procedure catches while its transaction can still
  commit logs the whole batch it received (the data messages already copied to messageDrop
  included) and commits; a doomed transaction is rolled back, its messages go back to the queue
  and an error row alone is logged; the fifth rollback in a row disables the queue, and the
  running task's next RECEIVE fails (another error row alone). ``Db.faults`` says what happens
  to each next RECEIVE: ``doomed``, ``drop_fails`` (the drop-table insert fails), ``end_fails``
  (an END CONVERSATION fails after the tally). A message failing the message type's validation
  is discarded before any RECEIVE: really lost.

What an installed procedure does is read from its text (the T-SQL the target rendered): e.g. a
send procedure without ``SET XACT_ABORT ON`` leaves its transaction open after an attention, one
without ``ssbench_counts`` counts nothing. The model keeps an independent log of every committed
SEND, BEGIN DIALOG and END CONVERSATION (``committed``) for the tests' own accounting.
"""

from __future__ import annotations

import itertools
import re
import threading
import uuid
from dataclasses import dataclass, field
from typing import Callable

ERROR_TYPE = "http://schemas.microsoft.com/SQL/ServiceBroker/Error"
END_TYPE = "http://schemas.microsoft.com/SQL/ServiceBroker/EndDialog"
_SPIDS = itertools.count(51)


class BrokerError(Exception):
    """A T-SQL error the model raises (the fake turns it into the driver's QueryError)."""

    def __init__(self, native: int, message: str):
        super().__init__(message)
        self.native = native


@dataclass
class Endpoint:
    handle: str
    conv: str
    initiator: bool
    state: str = "SO"
    send_seq: int = 0
    high: bool = False


@dataclass
class Msg:
    conv: str
    kind: str                  # data | end | error
    initiator_no: int = 0
    seq: int = 0
    warmup: bool = False
    last: bool = False
    high: bool = False
    bad: bool = False          # a data message without a valid ssbench header (nobody's)

    @property
    def measured(self) -> bool:
        return self.kind == "data" and not self.warmup and not self.bad


@dataclass
class ErrorRow:
    """A row of the target's messageErrors: the message's kind (None: an error alone), its
    conversation and sequence number (None when the procedure does not record them), and
    whose measured message it is (0: none)."""

    kind: str | None
    conv: str | None = None
    seq: int | None = None
    initiator: int = 0


@dataclass
class Db:
    server: str
    name: str
    guid: str = field(default_factory=lambda: str(uuid.uuid4()))
    broker_enabled: bool = True
    delayed_durability: str = "DISABLED"
    honor: int = 0
    master_key: int = 0
    key_by_server: int = 1
    owner: str | None = "sa"
    impersonation_error: str | None = None
    message_types: dict = field(default_factory=dict)     # name -> validation_desc
    contracts: dict = field(default_factory=dict)         # name -> {message type: (by init, by target)}
    bindings: set = field(default_factory=set)
    public_send: bool = False
    config: dict = field(default_factory=dict)
    procs: dict = field(default_factory=dict)             # template section -> installed text
    endpoints: dict = field(default_factory=dict)         # handle -> Endpoint
    counts: dict = field(default_factory=dict)            # spid -> [sent, begun, ended]
    dialogs: dict = field(default_factory=dict)           # k -> (handle, high)
    dialog_errors: list = field(default_factory=list)
    queue: list = field(default_factory=list)
    activation: bool = False
    drop: list = field(default_factory=list)              # messageDrop: (initiator, conv, seq, warmup)
    errors: list = field(default_factory=list)            # the target's messageErrors (ErrorRow)
    receive_enabled: bool = True                          # the queue's STATUS (poison detection)
    rollbacks: int = 0                                    # RECEIVE transactions rolled back in a row
    faults: list = field(default_factory=list)            # what happens to each next RECEIVE
    vanishing_endpoint: bool = False                      # one is deleted while a reset walks
    stuck_endpoints: int = 0                              # a reset cannot end these (three passes)
    other_sessions: int = 0                               # sessions using it (a DBA's applications)
    recovery_model: str = "FULL"                          # sys.databases.recovery_model_desc
    in_availability_group: bool = False                   # sys.databases.replica_id IS NOT NULL
    log_mb: int = 8                                       # the log file's size (model's: 8 MB)
    backups: list = field(default_factory=list)           # msdb.dbo.backupset rows in a window
    rolled_back: int = 0                                  # their transactions ROLLBACK IMMEDIATE ended

    def proc(self, section: str) -> str:
        return self.procs.get(section, "")

    # the recording fake's older tests read and set these as a mapping
    _KEYS = {"guid": "guid", "broker": "broker_enabled"}

    def __getitem__(self, key: str):
        return getattr(self, self._KEYS[key])

    def __setitem__(self, key: str, value) -> None:
        setattr(self, self._KEYS[key], value)


class ServerSession:
    """One connection: its @@SPID and its transaction (nesting, undo, deliveries at COMMIT)."""

    def __init__(self, model: "BrokerModel"):
        self.model = model
        self.spid = next(_SPIDS)
        self.trancount = 0
        self.undo: list = []
        self.deferred: list = []

    def begin(self) -> None:
        self.trancount += 1

    def commit(self) -> None:
        self.trancount -= 1
        if self.trancount == 0:
            deferred, self.deferred, self.undo = self.deferred, [], []
            for fn in deferred:
                fn()

    def rollback(self) -> None:
        for fn in reversed(self.undo):
            fn()
        self.undo, self.deferred, self.trancount = [], [], 0

    def change(self, do, undo) -> None:
        do()
        self.undo.append(undo)

    def attention(self, proc_text: str) -> None:
        """The client cancelled the call inside the procedure's transaction."""
        if "SET XACT_ABORT ON" in proc_text:
            self.rollback()


class BrokerModel:
    """Every database of every fake server, and the procedures' semantics."""

    def __init__(self):
        self.dbs: dict[tuple[str, str], Db] = {}
        self.system: dict[tuple[str, str], Db] = {}
        self.lock = threading.RLock()
        self.committed: list[tuple] = []     # ("send", db, conv, seq, warmup) / ("begin"|"end", db, conv)
        self.delivered: list[tuple] = []     # (conv, seq, warmup): data messages the target processed
        self.poisoned: list[tuple] = []      # (conv, seq): measured ones it logged, never processed
        self.activation_spid = -1

    # ------------------------------------------------------------------ databases
    SYSTEM = ("master", "msdb")

    def db(self, server: str, name: str, create: bool = True) -> Db | None:
        """A user database (``dbs``, keyed (server, lower-case name); a test may put a plain
        {"guid", "broker"} dict there: it becomes a Db), or master / msdb (kept apart)."""
        key = (server, name.lower())
        where = self.system if name.lower() in self.SYSTEM else self.dbs
        value = where.get(key)
        if isinstance(value, dict):
            value = where[key] = Db(server, name, guid=str(value["guid"]), broker_enabled=bool(value["broker"]))
        if value is None and (create or where is self.system):
            value = where[key] = Db(server, name)
        return value

    def all(self) -> list[Db]:
        return [self.db(s, n) for s, n in list(self.dbs)]

    def by_guid(self, guid: str) -> Db | None:
        return next((d for d in self.all() if d.guid.lower() == str(guid).lower()), None)

    def target_of(self, init: Db) -> Db:
        t = self.by_guid(init.config.get("target_broker_guid", ""))
        if t is None:
            raise BrokerError(8489, "the dialog's target service cannot be found (no route)")
        return t

    # ------------------------------------------------------------------ the send procedures
    def _count(self, sess: ServerSession, db: Db, sent: int = 0, begun: int = 0, ended: int = 0) -> None:
        row = db.counts.setdefault(sess.spid, [0, 0, 0])

        def add(sign=1):
            row[0] += sign * sent
            row[1] += sign * begun
            row[2] += sign * ended
        sess.change(add, lambda: add(-1))

    def _send(self, sess: ServerSession, db: Db, ep: Endpoint, *, last=False, warmup=False) -> None:
        if ep.handle not in db.endpoints or ep.state not in ("SO", "CO"):
            raise BrokerError(8426, f"The conversation handle \"{ep.handle}\" is not found or not open")
        seq = ep.send_seq + 1
        old_state = ep.state

        def do():
            ep.send_seq, ep.state = seq, "CO"

        def undo():
            ep.send_seq, ep.state = seq - 1, old_state
        sess.change(do, undo)
        target = self.target_of(db)
        msg = Msg(ep.conv, "data", self.initiator_no(db), seq=seq, warmup=warmup, last=last, high=ep.high)
        sess.deferred.append(lambda: (target.queue.append(msg),
                                      self.committed.append(("send", db.name, ep.conv, seq, warmup))))

    def initiator_no(self, db: Db) -> int:
        m = re.search(r"0x53534231((?:3\d){3})3B", db.proc("send_procedure"))
        return int(bytes.fromhex(m.group(1)).decode()) if m else 0

    def _begin_dialog(self, sess: ServerSession, db: Db, high: bool) -> Endpoint:
        ep = Endpoint(str(uuid.uuid4()), str(uuid.uuid4()), True, high=high)
        sess.change(lambda: db.endpoints.__setitem__(ep.handle, ep), lambda: db.endpoints.pop(ep.handle, None))
        sess.deferred.append(lambda: self.committed.append(("begin", db.name, ep.conv)))
        return ep

    def _end(self, sess: ServerSession, db: Db, ep: Endpoint) -> None:
        old = ep.state
        sess.change(lambda: setattr(ep, "state", "DO"), lambda: setattr(ep, "state", old))
        target = self.target_of(db)
        sess.deferred.append(lambda: (target.queue.append(Msg(ep.conv, "end")),
                                      self.committed.append(("end", db.name, ep.conv))))

    def _in_procedure(self, sess: ServerSession, text: str, body, cancel):
        """Run a send procedure's body inside its BEGIN TRANSACTION ... COMMIT. A failing
        statement: with XACT_ABORT ON the transaction rolls back, without it only the statement
        fails (it changed nothing here) and the procedure goes on to its COMMIT. ``cancel``
        injects an attention after the SEND, before the COMMIT (see :meth:`ServerSession.attention`)."""
        sess.begin()
        try:
            out = body()
        except BrokerError:
            sess.rollback() if "SET XACT_ABORT ON" in text else sess.commit()
            raise
        if cancel is not None:
            cancel(lambda: sess.attention(text))
        sess.commit()
        return out

    def send(self, sess: ServerSession, db: Db, handle: str, cancel=None) -> list:
        """EXEC dbo.ssbench_send @dh, @payload, as the installed procedure does it."""
        text = db.proc("send_procedure")
        ep = db.endpoints.get(str(handle).lower()) or Endpoint(str(handle), "", True, state="gone")

        def body():
            self._send(sess, db, ep)
            if "ssbench_counts" in text:
                self._count(sess, db, sent=1)
            return []
        return self._in_procedure(sess, text, body, cancel)

    def send_retiring(self, sess: ServerSession, db: Db, params: tuple, cancel=None) -> list:
        """EXEC dbo.ssbench_send_retiring @dh, @payload, @last, @fire_and_forget[, @high]."""
        text = db.proc("send_retiring_procedure")
        dh, _, last, ff = params[:4]
        high = bool(params[4]) if len(params) > 4 and "@high" in text else False

        def body():
            if dh is None:
                ep = self._begin_dialog(sess, db, high)
            else:
                ep = db.endpoints.get(str(dh).lower()) or Endpoint(str(dh), "", True, state="gone")
            self._send(sess, db, ep, last=bool(last) and not ff)
            if last and ff:
                self._end(sess, db, ep)
            if "ssbench_counts" in text:
                self._count(sess, db, sent=1, begun=int(dh is None), ended=int(bool(last and ff)))
            return [(None if last else ep.handle,)]
        return self._in_procedure(sess, text, body, cancel)

    # ------------------------------------------------------------------ dialogs, warm-up, reset
    def create_dialogs(self, db: Db, usable: int, every_n: int, permille: int) -> int:
        db.dialogs.clear()
        k = 0
        for i in range(1, usable * every_n + 1):
            slot = (i + every_n - 1) // every_n
            high = slot * permille // 1000 > (slot - 1) * permille // 1000
            ep = Endpoint(str(uuid.uuid4()), str(uuid.uuid4()), True, high=high)
            db.endpoints[ep.handle] = ep
            if i % every_n == 0:
                k += 1
                db.dialogs[k] = (ep.handle, high)
        return usable * every_n

    def warm_up(self, sess: ServerSession, db: Db) -> int:
        n = 0
        for ep in [e for e in db.endpoints.values() if e.initiator and e.state in ("SO", "CO")]:
            sess.begin()
            self._send(sess, db, ep, warmup=True)
            sess.commit()
            n += 1
        return n

    def reset(self, db: Db) -> list:
        """EXEC dbo.ssbench_reset: every conversation ended WITH CLEANUP, the tables emptied;
        returns its row (conversations ended, left, END CONVERSATIONs that failed). With
        ``vanishing_endpoint`` one endpoint is deleted by the broker while the procedure walks
        its static list: an END CONVERSATION without TRY/CATCH around it fails. With
        ``stuck_endpoints`` that many stay, after three failing passes."""
        walker = db.proc("reset_procedure")
        if "ssbench_end_conversations" in walker:
            walker = db.proc("end_conversations_procedure")
        if db.vanishing_endpoint and db.endpoints and "BEGIN TRY" not in walker:
            raise BrokerError(8426, "The conversation handle is not found.")
        db.vanishing_endpoint = False
        stuck = min(db.stuck_endpoints, len(db.endpoints))
        row = (len(db.endpoints) - stuck, stuck, 3 * stuck)
        db.endpoints = dict(list(db.endpoints.items())[:stuck])
        db.queue.clear()
        for part in (db.dialogs, db.counts, db.drop):
            part.clear()
        db.dialog_errors.clear()
        db.errors.clear()
        return [row] if "conversations_left" in walker else []

    # ------------------------------------------------------------------ the broker at work
    def pump(self) -> None:
        """Deliver and process until nothing moves: the target's activation, then the
        initiators' readers (only where activation is on)."""
        with self.lock:
            for _ in range(10_000):
                moved = False
                for db in self.all():
                    if db.queue and db.activation and db.receive_enabled:
                        self._process(db)
                        moved = True
                if not moved:
                    return

    def _initiator_db(self, conv: str) -> tuple[Db, Endpoint] | tuple[None, None]:
        for db in self.all():
            for ep in db.endpoints.values():
                if ep.initiator and ep.conv == conv:
                    return db, ep
        return None, None

    def _initiators_by_conv(self) -> Callable[[str], tuple[Db, Endpoint] | tuple[None, None]]:
        """:meth:`_initiator_db` for a batch of messages: one scan, then a dict (a message per
        scan was quadratic: 13 s of the T-SQL capture). An entry whose endpoint has left its
        database since falls back to the scan; the batch adds no initiator endpoints."""
        index: dict[str, tuple[Db, Endpoint]] = {}
        for db in self.all():
            for ep in db.endpoints.values():
                if ep.initiator:
                    index.setdefault(ep.conv, (db, ep))

        def find(conv: str):
            hit = index.get(conv)
            if hit is not None and hit[0].endpoints.get(hit[1].handle) is hit[1]:
                return hit
            return self._initiator_db(conv)
        return find

    @staticmethod
    def _endpoints_by_conv(db: Db) -> Callable[[str], Endpoint | None]:
        """The first endpoint of ``db`` on a conversation, as a scan of ``db.endpoints`` finds it,
        from a dict built once per batch (``find.add`` records one the batch creates; the
        batch's loop adds endpoints to ``db`` only through it)."""
        index: dict[str, Endpoint] = {}
        for ep in db.endpoints.values():
            index.setdefault(ep.conv, ep)

        def find(conv: str) -> Endpoint | None:
            ep = index.get(conv)
            if ep is None:      # none at the start, and the batch added none (find.add)
                return None
            if db.endpoints.get(ep.handle) is ep:
                return ep
            ep = next((e for e in db.endpoints.values() if e.conv == conv), None)
            if ep is not None:
                index[conv] = ep
            return ep
        find.add = lambda ep: index.setdefault(ep.conv, ep)  # type: ignore[attr-defined]
        return find

    def _process(self, db: Db) -> None:
        msgs, db.queue = db.queue, []
        if db.proc("initiator_end_procedure"):
            self._initiator_end(db, msgs)
        else:
            self._target_receive(db, msgs)

    def _target_receive(self, db: Db, msgs: list) -> None:
        """One RECEIVE of the target's procedure, and what ``db.faults`` makes of it."""
        fault = db.faults.pop(0) if db.faults else None
        if fault == "doomed":                   # rolled back: back to the queue, an error alone
            db.queue[:0] = msgs
            db.errors.append(ErrorRow(None))
            db.rollbacks += 1
            if db.rollbacks >= 5:               # poison message detection; the task's next RECEIVE fails
                db.receive_enabled = False
                db.errors.append(ErrorRow(None))
            return
        db.rollbacks = 0
        xml = db.message_types.get(self._message_type(db), "NONE") != "NONE"
        keeps_seq = "message_sequence_number" in db.proc("activation_procedure")
        endpoint, initiator = self._endpoints_by_conv(db), self._initiators_by_conv()
        kept = []
        for m in msgs:
            ep = endpoint(m.conv)
            if ep is None:
                ep = Endpoint(str(uuid.uuid4()), m.conv, False, state="CO")
                db.endpoints[ep.handle] = ep
                endpoint.add(ep)
            idb, iep = initiator(m.conv)
            if m.kind == "data" and xml:       # the body is not XML: discarded, an Error back
                ep.state = "CD"
                if idb is not None:
                    idb.queue.append(Msg(m.conv, "error"))
                    iep.state = "DI" if iep.state != "DO" else iep.state
                continue
            kept.append(m)
            if fault == "drop_fails":           # nothing processed: the CATCH logs the batch
                continue
            if m.kind == "data" and m.bad:
                db.errors.append(self._error_row(m, keeps_seq))
            elif m.kind == "data":
                db.drop.append((m.initiator_no, m.conv, m.seq, m.warmup))
                self.delivered.append((m.conv, m.seq, m.warmup))
                if m.last:                      # 'SSBL': the target ends the dialog
                    ep.state = "CD"
                    if idb is not None:
                        idb.queue.append(Msg(m.conv, "end"))
                        iep.state = "DI"
            elif m.kind == "error":             # logged; the target ends its side
                db.errors.append(self._error_row(m, keeps_seq))
                ep.state = "CD"
            elif m.kind == "end":               # the initiator ended first (fire and forget)
                ep.state = "CD"
                if idb is not None:
                    idb.endpoints.pop(iep.handle, None)     # both sides ended: deleted
        if fault in ("drop_fails", "end_fails"):   # caught, the transaction can commit: the
            db.errors += [self._error_row(m, keeps_seq) for m in kept]   # whole batch logged
        if fault == "drop_fails":
            self.poisoned += [(m.conv, m.seq) for m in kept if m.measured]

    @staticmethod
    def _error_row(m: Msg, keeps_seq: bool) -> ErrorRow:
        return ErrorRow(m.kind, m.conv if keeps_seq else None, m.seq if keeps_seq else None,
                        m.initiator_no if m.measured else 0)

    # ------------------------------------------------------------------ what the target's tables say
    def tallied(self, db: Db) -> dict[int, list[int]]:
        """initiator -> [measured, warm-up] data messages in messageDrop (= the tally)."""
        out: dict[int, list[int]] = {}
        for i, _, _, warm in db.drop:
            out.setdefault(i, [0, 0])[1 if warm else 0] += 1
        return out

    def gaps(self, db: Db) -> list[tuple[int, int]]:
        """(initiator, numbers missing inside its dialogs' received sequences): messageDrop's rows
        and messageErrors' that name their message, per conversation from its first to its last."""
        seqs: dict[str, set] = {}
        owner: dict[str, int] = {}
        for i, conv, seq, _ in db.drop:
            seqs.setdefault(conv, set()).add(seq)
            owner[conv] = min(owner.get(conv, i), i)
        for e in db.errors:
            if e.conv is not None and e.seq is not None:
                seqs.setdefault(e.conv, set()).add(e.seq)
                if e.initiator:
                    owner[e.conv] = min(owner.get(e.conv, e.initiator), e.initiator)
        out: dict[int, int] = {}
        for conv, found in seqs.items():
            if conv in owner:
                out[owner[conv]] = out.get(owner[conv], 0) + max(found) - min(found) + 1 - len(found)
        return sorted(out.items())

    def poison(self, db: Db) -> set[tuple[int, str, int]]:
        """(initiator, conv, seq) of measured data messages in messageErrors never in messageDrop."""
        dropped = {(c, q) for _, c, q, _ in db.drop}
        return {(e.initiator, e.conv, e.seq) for e in db.errors
                if e.kind == "data" and e.initiator and e.conv is not None and (e.conv, e.seq) not in dropped}

    def _initiator_end(self, db: Db, msgs: list) -> None:
        """ssbench_initiator_end: record the Error messages, END each dialog, count them. With
        the fault ``end_fails`` the last END CONVERSATION fails: the CATCH commits the dialogs
        ended before it, counted only when its text updates ssbench_counts."""
        text = db.proc("initiator_end_procedure")
        fails = (db.faults.pop(0) if db.faults else None) == "end_fails"
        ended = 0
        endpoint = self._endpoints_by_conv(db)
        for k, m in enumerate(msgs):
            ep = endpoint(m.conv)
            if m.kind == "error" and "ssbench_dialog_errors" in text:
                db.dialog_errors.append(("Service Broker error message", m.conv))
            if fails and k == len(msgs) - 1:
                db.dialog_errors.append(("error 8426", m.conv))
                break
            if ep is not None:
                db.endpoints.pop(ep.handle)          # both sides ended: deleted
                self.committed.append(("end", db.name, m.conv))
                ended += 1
        counts = text[text.index("BEGIN CATCH"):] if fails and "BEGIN CATCH" in text else text
        if "ssbench_counts" in counts:
            row = db.counts.setdefault(self.activation_spid, [0, 0, 0])
            row[2] += ended

    @staticmethod
    def _message_type(db: Db) -> str:
        m = re.search(r"WHERE r\.message_type = N'([^']+)'", db.proc("activation_procedure"))
        return m.group(1) if m else "//MySSB.com/Lab/M_Test"


__all__ = ["BrokerModel", "BrokerError", "Db", "Endpoint", "ErrorRow", "Msg", "ServerSession", "ERROR_TYPE", "END_TYPE"]
