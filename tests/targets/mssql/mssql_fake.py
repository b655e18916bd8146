"""A recording fake of SQL Server for the SQL Server target's tests (no SQL Server exists on
the machines this project runs on): every batch the target sends is logged with the server,
the database and the template section, and the fake keeps just enough state (databases, broker
GUIDs, certificates, endpoints, routes, the tally) for the target's logic to run. The T-SQL
parser check (test_mssql_tsql_parsers.py) parses what it records.

The Service Broker behaviour the target's accounting and cleanup depend on (conversation
endpoints, transactions and attentions, database options, activation) is modelled in
broker_model.py, each behaviour with the document it comes from. Admin connections
(:class:`FakeConn`) stand in for :class:`harness.targets.mssql.driver.Connection`; senders can
instead run the real driver over a fake pyodbc (:func:`install_raw_senders`), so the driver's
own query timeouts and cancels are exercised."""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import threading
import uuid
from collections import Counter

from broker_model import BrokerError, BrokerModel, ServerSession

from harness.targets.mssql import driver as driver_mod, session as session_mod, tsql

#: MssqlSender names its calls for its error messages; these are their template sections.
SENDER_CALLS = {"send": "initiator.sql call_send", "dialog lookup": "initiator.sql dialog_handle",
                "send retiring": "initiator.sql call_send_retiring",
                "initiator reader on": "initiator.sql call_initiator_reader_on",
                "check as the sender": "initiator.sql check_sender"}
#: template sections whose batch installs a procedure the model reads (broker_model.py)
PROCEDURES = ("send_procedure", "send_retiring_procedure", "initiator_end_procedure", "reset_procedure",
              "end_conversations_procedure", "activation_procedure", "initiator_reader_procedure")


class FakeServer:
    """The state of every fake SQL Server instance plus a log of what ran where."""

    def __init__(self):
        self.log: list[tuple[str, str, str, str, tuple]] = []   # (server, db, what, sql, params)
        self.model = BrokerModel()
        self.dbs = self.model.dbs                                 # (server, db) -> broker_model.Db
        self.certs: dict[tuple[str, str, str], bytes] = {}      # (server, db, name) -> DER bytes
        self.endpoints: dict[str, list] = {}
        self.tally: dict[str, list] = {}       # server -> received_by_initiator rows (overrides the model)
        self.clock: dict[str, float] = {}                         # server -> offset seconds
        self.waits: list[tuple] = []
        self.routes: dict[tuple[str, str], list] = {}
        # ownership: (server, db) -> {(class, name)}; objects that existed before ssbench
        self.owned: dict[tuple[str, str], set] = {}
        self.owned_tables: set[tuple[str, str]] = set()          # dbo.ssbench_owned exists
        self.preexisting: dict[tuple[str, str], set] = {}
        self.endpoint_owner: dict[str, str] = {}                  # server -> extended property
        self.perms: dict[str, tuple] = {}      # server -> server.permissions row (default: all)
        self.db_perms: dict[tuple[str, str], tuple] = {}   # (server, db) -> (db_owner, ALTER)
        self.provisioned: set[tuple[str, str]] = set()     # (server, db): objects present
        self.enable_broker_error: dict[tuple[str, str], int] = {}   # (server, db) -> native error
        self.created_broker_enabled = True     # is_broker_enabled of a database CREATE DATABASE makes
        # (server, db) -> [(name, expiry date)]: certificates dbo owns besides ssbench's, valid,
        # ACTIVE FOR BEGIN_DIALOG, their private key protected by the master key
        self.foreign_certs: dict[tuple[str, str], list] = {}
        # the sender login (sender_auth): logins missing from the server, each database's users by
        # login, the users granted the sender's permissions; the admin login is db_owner
        self.missing_logins: set[str] = set()
        self.db_users: dict[tuple[str, str], dict[str, str]] = {}
        self.grants: dict[tuple[str, str], set[str]] = {}
        self.admin_logins = {"sa", "ssbench"}        # the example topologies' auth
        # the diagnosis' evidence (docs/diagnosis.md): the product version server_info reports,
        # tasks waiting on page latches (wait type, 'db:file:page', tasks), the objects
        # sys.dm_db_page_info maps pages to ((db, file, page) -> row), and Service Broker's waits
        self.version = "16.0.4135.4"
        self.engine_edition: dict[str, int] = {}   # server -> SERVERPROPERTY('EngineEdition') (3 by default)
        self.page_waiters: list[tuple] = [("PAGELATCH_EX", "7:1:1234", 3), ("PAGELATCH_SH", "7:1:1234", 1),
                                          ("PAGELATCH_EX", "7:1:88", 1)]
        self.pages: dict[tuple[int, int, int], tuple] = {(7, 1, 1234): ("ssb_init1", "sys", "sysdesend", 1, "DATA_PAGE")}
        self.broker_waits = [("BROKER_RECEIVE_WAITFOR", 12, 24000.0), ("BROKER_TASK_STOP", 2, 40.0)]
        self.broker_latches = [("SERVICE_BROKER_WAITFOR_MANAGER", 9, 310.0)]
        # requests waiting now by role (session_waits): (role, wait type, requests), per server
        self.session_waiters: list[tuple] = [("sender", "LCK_M_X", 5), ("sender", "WRITELOG", 2),
                                             ("reader", "WRITELOG", 1), ("reader", "BROKER_RECEIVE_WAITFOR", 3)]

    def batches(self, what: str | None = None, server: str | None = None, db: str | None = None):
        return [(s, d, w, q) for s, d, w, q, _ in self.log
                if (what is None or w == what) and (server is None or s == server)
                and (db is None or d.lower() == db.lower())]

    def sql(self, **kw) -> str:
        return "\n".join(q for *_, q in self.batches(**kw))

    def db(self, server: str, name: str):
        return self.model.db(server, name)

    def add_sent(self, server: str, name: str, n: int) -> None:
        """``n`` measured SENDs committed on an initiator database (its ssbench_counts)."""
        self.db(server, name).counts.setdefault(0, [0, 0, 0])[0] += n

    # ------------------------------------------------------------------ one batch
    def execute(self, sess: ServerSession, s: str, d: str, what: str, sql: str, params: tuple, cancel=None):
        assert "{{" not in sql and "}}" not in sql
        self.log.append((s, d, what, sql, tuple(params)))
        sec = SENDER_CALLS.get(what, what).replace(".sql ", ".")
        try:
            with self.model.lock:
                return self._execute(sess, s, d, sec, sql, tuple(params), cancel)
        except BrokerError as e:
            raise driver_mod.QueryError(f"{d}: {e} [SQLSTATE 42000, error {e.native}]", sqlstate="42000",
                                        native=e.native) from None

    def _execute(self, sess, s, d, sec, sql, params, cancel):  # noqa: C901 - one branch per section
        m = self.model
        k = (s, d.lower())
        name = sec.split(".", 1)[1] if "." in sec else sec
        if name in PROCEDURES:
            m.db(s, d).procs[name] = sql
            return []
        for handler in (self._sender, self._options, self._ownership, self._server, self._collectors):
            out = handler(sess, s, d, k, sec, sql, params, cancel)
            if out is not None:
                return out
        return []

    def _sender(self, sess, s, d, k, sec, sql, params, cancel):  # noqa: C901
        m = self.model
        if sec == "server.login_exists":
            return [(int(params[0] not in self.missing_logins),)]
        if sec == "initiator.sender_user_of":
            user = self.db_users.get(k, {}).get(params[0])
            return [(user,)] if user else []
        if sec == "initiator.sender_user":
            login = re.search(r"FOR LOGIN \[([^\]]+)\]", sql).group(1)
            self.db_users.setdefault(k, {})[login] = re.search(r"CREATE USER \[([^\]]+)\]", sql).group(1)
            return []
        if sec == "initiator.sender_grants":
            self.grants.setdefault(k, set()).add(re.search(r"TO \[([^\]]+)\];", sql).group(1))
            return []
        if sec == "initiator.sender_user_drop":
            name = re.search(r"name = N'([^']+)'", sql).group(1)
            self.db_users[k] = {lg: u for lg, u in self.db_users.get(k, {}).items() if u != name}
            return []
        if sec == "initiator.check_sender":
            login = getattr(sess, "login", None)
            if login in self.admin_logins or self.db_users.get(k, {}).get(login) in self.grants.get(k, set()):
                return [(None, 1)]
            return [("error 229: The EXECUTE permission was denied on the object 'ssbench_send_retiring', "
                     f"database '{d}', schema 'dbo'.", 0)]
        if sec == "initiator.dialog_handle":
            handle, high = m.db(s, d).dialogs.get(params[0], (str(uuid.UUID(int=params[0])), False))
            return [(handle, int(high))] if ", high" in sql else [(handle,)]
        if sec == "initiator.call_send":
            return m.send(sess, m.db(s, d), params[0], cancel)
        if sec == "initiator.call_send_retiring":
            return m.send_retiring(sess, m.db(s, d), params, cancel)
        if sec in ("initiator.call_initiator_reader_on", "initiator.initiator_end_on"):
            m.db(s, d).activation = True
            return []
        if sec == "initiator.initiator_end_off":
            m.db(s, d).activation = False
            return []
        if sec == "initiator.call_create_dialogs":
            return [(m.create_dialogs(m.db(s, d), *params),)]
        if sec == "initiator.call_warm_up":
            return [(m.warm_up(sess, m.db(s, d)),)]
        if sec == "objects.call_reset":
            return m.reset(m.db(s, d))
        if sec == "teardown.end_conversations":
            return m.reset(m.db(s, d)) if m.db(s, d).procs else []
        if sec in ("initiator.truncate_tables", "initiator.truncate_dialogs", "target.truncate_tables"):
            db = m.db(s, d)
            db.dialogs.clear(), db.counts.clear(), db.drop.clear(), db.dialog_errors.clear()
            db.errors.clear()
            return []
        if sec == "initiator.sent_counts":
            m.pump()
            rows = list(m.db(s, d).counts.values())
            return [tuple(sum(r[i] for r in rows) for i in range(3))]
        if sec == "initiator.sent_sequence":            # an older ssbench's accounting
            m.pump()
            eps = [e for e in m.db(s, d).endpoints.values() if e.initiator]
            return [(sum(e.send_seq for e in eps), len(eps))]
        if sec == "initiator.dialog_errors_received":
            return [(len(m.db(s, d).dialog_errors),)]
        return None

    def _options(self, sess, s, d, k, sec, sql, params, cancel):
        m = self.model
        if sec == "server.delayed_durability":
            db = m.db(s, re.search(r"ALTER DATABASE \[([^\]]+)\]", sql).group(1))
            db.delayed_durability = re.search(r"DELAYED_DURABILITY = (\w+);", sql).group(1)
            return []
        if sec == "objects.honor_priority":
            m.db(s, d).honor = int(re.search(r"HONOR_BROKER_PRIORITY (ON|OFF)", sql).group(1) == "ON")
            return []
        if sec == "objects.database_options":
            db = m.db(s, d)
            return [(db.delayed_durability, db.honor, int(db.broker_enabled), db.guid, db.master_key,
                     db.key_by_server)]
        if sec in ("server.enable_broker", "server.new_broker", "server.disable_broker",
                   "server.enable_broker_wait", "server.disable_broker_wait"):
            db = m.db(s, re.search(r"ALTER DATABASE \[([^\]]+)\]", sql).group(1))
            native = self.enable_broker_error.pop((s, db.name.lower()), None)
            if sec.startswith("server.enable_broker") and native:
                raise BrokerError(native, "ENABLE_BROKER failed")
            if db.other_sessions and "ROLLBACK IMMEDIATE" not in sql:   # waits for them
                raise driver_mod.QueryTimeoutError(f"{d}: the call exceeded its query timeout",
                                                   sqlstate="HYT00")
            if "ROLLBACK IMMEDIATE" in sql:
                db.rolled_back += db.other_sessions
            db.broker_enabled = not sec.startswith("server.disable_broker")
            if sec == "server.new_broker":
                db.guid = str(uuid.uuid4()).upper()
                db.endpoints.clear()
            return []
        if sec == "server.master_key":
            db = m.db(s, d)
            created = int(not db.master_key)
            db.master_key, db.key_by_server = 1, (1 if created else db.key_by_server)
            return [(created,)]
        if sec == "server.master_key_drop":
            m.db(s, d).master_key = 0
            return []
        if sec in ("objects.config_set", "objects.config_keep"):
            value, key = (params[0], params[1]) if sec.endswith("set") else (params[1], params[0])
            cfg = m.db(s, d).config
            if sec.endswith("set") or key not in cfg:
                cfg[key] = value
            return []
        if sec == "objects.config_list":
            return sorted(m.db(s, d).config.items())
        if sec == "objects.message_type":
            m.db(s, d).message_types.setdefault(re.search(r"name = N'([^']+)'", sql).group(1), "NONE")
        if sec == "objects.contract":
            c, mt = re.search(r"name = N'([^']+)'.*\(\[([^\]]+)\] SENT BY ANY\)", sql, re.S).groups()
            m.db(s, d).contracts.setdefault(c, {mt: (1, 1)})
        if sec == "objects.contract_check":
            db, (c1, _, _, mt) = m.db(s, d), params
            usage = db.contracts.get(c1, {}).get(mt)
            return [(db.message_types.get(mt), int(c1 in db.contracts),
                     usage[0] if usage else None, usage[1] if usage else None)]
        if sec == "objects.dialog_certificates":     # dbo's other valid, active, MK-protected ones
            return [(n, e) for n, e in self.foreign_certs.get(k, []) if e >= params[2]]
        if sec == "objects.impersonate_owner":
            return [(m.db(s, d).impersonation_error,)]
        if sec == "objects.remote_service_binding":
            mm = re.search(r"CREATE REMOTE SERVICE BINDING \[([^\]]+)\]", sql)
            if mm:
                m.db(s, d).bindings.add(mm.group(1))
            return []
        if sec == "teardown.binding_drop":
            m.db(s, d).bindings.discard(re.search(r"name = N'([^']+)'", sql).group(1))
            return []
        if sec in ("objects.grant_send_public", "objects.revoke_send_public"):
            m.db(s, d).public_send = sec.endswith("grant_send_public")
            return []
        if sec in ("target.activation_on", "target.activation_off"):
            m.db(s, d).activation = sec.endswith("on")
            return []
        if sec == "target.queue_enable":
            db = m.db(s, d)
            db.receive_enabled, db.rollbacks = True, 0
            return []
        return None

    def _ownership(self, sess, s, d, k, sec, sql, params, cancel):
        f = self
        if sec == "objects.owned_table":
            fresh = k not in f.owned_tables
            f.owned_tables.add(k)
            return [(1 if fresh else 0,)]
        if sec == "objects.owned_record":
            f.owned.setdefault(k, set()).add((params[0], params[1]))
            return []
        if sec == "objects.ownership":
            assert k in f.owned_tables, "ownership read before dbo.ssbench_owned exists"
            mt, contract, queue, service, proc = params
            objs = [("MESSAGE TYPE", mt), ("CONTRACT", contract), ("QUEUE", queue), ("SERVICE", service),
                    ("PROCEDURE", proc), ("TABLE", "messageDrop"), ("TABLE", "receiveTally"),
                    ("TABLE", "messageErrors"), ("TABLE", "dialogs"), ("TABLE", "ssbench_config")]
            mine, old = f.owned.get(k, set()), f.preexisting.get(k, set())
            return [(c, n, int((c, n) in mine or (c, n) in old), int((c, n) in mine)) for c, n in objs]
        if sec == "objects.owned_list":
            return sorted(f.owned.get(k, set())) if k in f.owned_tables else []
        if sec == "teardown.owned_prune":
            f.owned[k] = {o for o in f.owned.get(k, set()) if o[0] == "DATABASE"}
            return []
        if sec == "teardown.owned_drop":
            f.owned_tables.discard(k)
            f.owned.pop(k, None)
            return []
        return None

    def _server(self, sess, s, d, k, sec, sql, params, cancel):  # noqa: C901
        f, m = self, self.model
        if sec == "server.endpoint_owner":
            return [(f.endpoint_owner[s],)] if s in f.endpoint_owner else []
        if sec == "server.endpoint_owner_set":
            f.endpoint_owner[s] = re.search(r"@value = N'([^']+)'", sql).group(1)
            return []
        if sec == "server.endpoint_owner_drop":
            f.endpoint_owner.pop(s, None)
            return []
        if sec == "server.endpoint_drop":
            f.endpoints.pop(s, None)
            return []
        if sec == "server.server_info":
            return [(f.version, "Developer Edition", s, "RTM", "ssbench", f.engine_edition.get(s, 3))]
        if sec == "collectors.page_latch_waiters":
            return list(f.page_waiters)
        if sec == "collectors.session_waits":
            f.session_waits_app = params
            return list(f.session_waiters)
        if sec == "collectors.page_info":
            row = f.pages.get(tuple(params))
            return [row] if row else [(None, None, None, None, None)]
        if sec == "collectors.broker_waits":
            return list(f.broker_waits)
        if sec == "collectors.broker_latches":
            return list(f.broker_latches)
        if sec == "target.procedure_time":
            return [(950_000, 1_000_000, 1000, 10)]
        if sec == "server.permissions":
            return [f.perms.get(s, (1, 1, 1, 1, 1, 1, 1))]
        if sec == "server.utc_now":
            return [(dt.datetime.utcnow() + dt.timedelta(seconds=f.clock.get(s, 0.0)),)]
        if sec == "server.database_info":
            db = m.db(s, params[0], create=False)
            if db is None:
                return []
            return [(params[0], 5, db.broker_enabled, db.guid, db.delayed_durability, "ONLINE", db.owner,
                     "MULTI_USER", db.recovery_model, int(db.in_availability_group))]
        if sec == "server.log_file":
            db = m.db(s, params[0], create=False)
            return [(f"{params[0]}_log", db.log_mb)] if db else []
        if sec == "server.log_size":
            m.db(s, re.search(r"ALTER DATABASE \[([^\]]+)\]", sql).group(1)).log_mb = int(
                re.search(r"SIZE = (\d+)MB", sql).group(1))
            return []
        if sec == "collectors.log_sizes":
            return [(db.name, float(db.log_mb)) for (srv, _), db in list(m.dbs.items()) if srv == s and not isinstance(db, dict)]
        if sec == "collectors.backups_between":
            return list(m.db(s, params[0]).backups)
        if sec == "server.drop_database":
            name = re.search(r"DROP DATABASE \[([^\]]+)\]", sql).group(1).lower()
            m.dbs.pop((s, name), None)
            f.owned_tables.discard((s, name))
            f.owned.pop((s, name), None)
            f.provisioned.discard((s, name))
            return []
        if sec == "server.create_database":
            name = re.search(r"CREATE DATABASE \[([^\]]+)\]", sql).group(1)
            m.db(s, name).guid = str(uuid.uuid4()).upper()
            m.db(s, name).broker_enabled = f.created_broker_enabled
            return []
        if sec == "server.own_certificate":
            name = re.search(r"CERT_ID\(N'([^']+)'\)", sql).group(1)
            f.certs.setdefault((s, d.lower(), name), hashlib.sha256(f"{s}/{d}/{name}/{uuid.uuid4()}".encode()).digest())
            return []
        if sec in ("server.certificate_public", "server.certificate_thumbprint"):
            data = f.certs.get((s, d.lower(), params[0]))
            if data is None:
                return []
            thumb = hashlib.sha1(data).digest()
            return [(data, thumb)] if sec.endswith("public") else [(thumb,)]
        if sec == "server.drop_certificate":
            f.certs.pop((s, d.lower(), re.search(r"CERT_ID\(N'([^']+)'\)", sql).group(1)), None)
            return []
        if sec == "server.peer_certificate":
            mm = re.search(r"CREATE CERTIFICATE \[([^\]]+)\]\s+AUTHORIZATION \[[^\]]+\]\s+FROM BINARY = 0x([0-9A-F]+);", sql)
            f.certs[(s, d.lower(), mm.group(1))] = bytes.fromhex(mm.group(2))
            return []
        if sec == "server.broker_endpoints":
            return f.endpoints.get(s, [])
        if sec == "server.endpoint_create":
            name = re.search(r"CREATE ENDPOINT \[([^\]]+)\]", sql).group(1)
            port = int(re.search(r"LISTENER_PORT = (\d+)", sql).group(1))
            enc = re.search(r"ENCRYPTION = (\w+)", sql).group(1)
            desc = {"DISABLED": "NONE", "SUPPORTED": "NONE, AES", "REQUIRED": "AES"}[enc]
            f.endpoints[s] = [(name, port, "STARTED", "CERTIFICATE", desc, "cert")]
            return []
        if sec == "objects.objects_present":
            objs = 1 if k in f.provisioned else 0
            return [(objs, objs, objs, objs, 1, 1, *f.db_perms.get(k, (1, 1)))]
        if sec == "objects.service":
            f.provisioned.add(k)
        if sec == "objects.routes":
            return f.routes.get((s, d.lower()), [])
        if sec == "objects.route":
            mm = re.search(r"CREATE ROUTE \[([^\]]+)\].*BROKER_INSTANCE = N'([^']+)',\s+ADDRESS = N'([^']+)'", sql, re.S)
            if mm:
                rs = [r for r in f.routes.get((s, d.lower()), []) if r[0] != mm.group(1)]
                rs.append((mm.group(1), "svc", mm.group(2), mm.group(3)))
                f.routes[(s, d.lower())] = rs
            return []
        return None

    def _collectors(self, sess, s, d, k, sec, sql, params, cancel):
        f, m = self, self.model
        if sec in ("collectors.queue_fast", "target.queue_exact"):
            m.pump()
            return [(len(m.db(s, d).queue),)]
        if sec == "target.received_by_initiator":
            m.pump()
            if s in f.tally:
                return f.tally[s]
            return [(i, r[0], r[1]) for i, r in sorted(m.tallied(m.db(s, d)).items())]
        if sec == "target.distinct_by_initiator":
            if s in f.tally:
                return [(i, n, n) for i, n, _ in f.tally[s]]
            rows: dict[int, list] = {}
            for i, conv, seq, warm in m.db(s, d).drop:
                if not warm:
                    rows.setdefault(i, []).append((conv, seq))
            return [(i, len(v), len(set(v))) for i, v in sorted(rows.items())]
        if sec == "target.gaps_by_initiator":
            return [] if s in f.tally else m.gaps(m.db(s, d))
        if sec == "target.poison_by_initiator":
            return sorted(Counter(i for i, _, _ in m.poison(m.db(s, d))).items())
        if sec == "target.queued_by_initiator":
            m.pump()
            return sorted(Counter(x.initiator_no for x in m.db(s, d).queue if x.measured).items())
        if sec == "initiator.xmitq_data":
            return [(0,)]
        if sec == "target.processed_total":
            return [(sum(r[0] for r in m.tallied(m.db(s, d)).values()),)]
        if sec == "collectors.endpoint_states":
            m.pump()
            states: dict[str, list] = {}
            for e in m.db(s, d).endpoints.values():
                row = states.setdefault(e.state, [0, 0])
                row[0] += 1
                row[1] += int(e.initiator)
            return [(st, n, i) for st, (n, i) in sorted(states.items())]
        if sec == "collectors.xmitq_fast":
            return [(0, 1)]
        if sec in ("collectors.activated_tasks", "collectors.xmitq_exact"):
            return [(0,)]
        if sec == "collectors.queue_state":
            return [(int(m.db(s, d).receive_enabled), 1, 1, 16, "dbo.SRPerf_Queue_LabTest")]
        if sec == "collectors.wait_stats":
            return f.waits
        if sec == "collectors.server_cpu":             # CPU ms so far, schedulers
            return [(45000.0, 4)]
        if sec == "target.e2e_latencies":
            return [(1, 5000), (2, 7000)]
        if sec == "target.e2e_latencies_by_priority":
            return [(1, 5000, 1), (2, 7000, 0), (1, 9000, 0)]
        if sec == "target.e2e_sent_latencies":   # sent 1500.000 s and 1500.010 s (initiators' clocks)
            return [(1, 5000, 1_500_000_000_000), (2, 7000, 1_500_010_000_000)]
        return None


class FakeConn:
    """An admin connection (in place of driver.Connection): one session, every call logged."""

    def __init__(self, fake: FakeServer, server: str, db: str):
        self.fake, self.server, self.db = fake, server, db
        self.session = ServerSession(fake.model)

    def close(self):
        if self.session.trancount:
            self.session.rollback()

    def run_batches(self, batches, timeout=..., what=""):
        for b in batches:
            self.execute(b, (), timeout=timeout, what=what)

    def scalar(self, sql, params=(), **kw):
        rows = self.execute(sql, params, **kw)
        return rows[0][0] if rows else None

    def execute(self, sql, params=(), timeout=..., what=""):
        return self.fake.execute(self.session, self.server, self.db, what, sql, tuple(params))


_REAL_CONNECT = driver_mod.ConnSpec.connect


def install(monkeypatch) -> "FakeServer":
    """Route every connection of every MssqlTarget to a new FakeServer (the admin pool's, and a
    spec's own connection, as check's connection as the sender)."""
    f = FakeServer()

    def get(pool, inst, database=None, purpose="admin"):
        return FakeConn(f, inst.server_key, database or inst.database)

    def connect(spec, *, autocommit=True, query_timeout=...):
        conn = FakeConn(f, f"{spec.host.lower()}:{spec.port}", spec.database)
        conn.session.login = spec.user
        return conn

    monkeypatch.setattr(session_mod.Pool, "get", get)
    monkeypatch.setattr(driver_mod.ConnSpec, "connect", connect)
    return f


def install_senders(monkeypatch, f: "FakeServer") -> None:
    """MssqlSender connections (ConnSpec.connect, which install routes to ``f``) need neither
    pyodbc nor an installed driver."""
    monkeypatch.setattr(driver_mod, "pyodbc_module", lambda: None)
    monkeypatch.setattr(driver_mod, "drivers", lambda: ["ODBC Driver 18 for SQL Server", "FreeTDS"])


# --------------------------------------------------------------------------- the real driver on a fake pyodbc

class FakeOdbcError(Exception):
    """pyodbc.Error's shape: args = (SQLSTATE, message)."""


class FakePyodbc:
    """What harness.targets.mssql.driver uses of pyodbc, connected to a FakeServer: the
    driver's own per-call timeouts (its watchdog's SQLCancel) and error mapping run for real."""

    Error = FakeOdbcError
    pooling = False

    def __init__(self, fake: FakeServer):
        self.fake = fake
        self.connections: list["FakeRaw"] = []
        self.hang_next: dict[str, int] = {}       # statement section -> calls to hang until cancelled

    def connect(self, conn_str: str, autocommit: bool = True, timeout: int = 0) -> "FakeRaw":
        host, port = re.search(r"Server=tcp:([^,;]+),(\d+);", conn_str).groups()
        db = re.search(r"Database=([^;]+);", conn_str).group(1)
        raw = FakeRaw(self, f"{host.lower()}:{port}", db, autocommit)
        self.connections.append(raw)
        return raw

    @staticmethod
    def drivers() -> list[str]:
        return ["ODBC Driver 18 for SQL Server"]


class FakeRaw:
    def __init__(self, odbc: FakePyodbc, server: str, db: str, autocommit: bool):
        self.odbc, self.server, self.db, self.autocommit = odbc, server, db, autocommit
        self.session = ServerSession(odbc.fake.model)
        self.closed = False

    def cursor(self) -> "FakeCursor":
        return FakeCursor(self)

    def close(self) -> None:
        """Closing a connection rolls back the transaction it left open."""
        if not self.closed and self.session.trancount:
            with self.odbc.fake.model.lock:
                self.session.rollback()
        self.closed = True


class FakeCursor:
    SECTIONS = ("call_send", "call_send_retiring", "dialog_handle", "call_initiator_reader_on")

    def __init__(self, raw: FakeRaw):
        self.raw = raw
        self.description = None
        self._rows: list = []
        self._cancelled = threading.Event()

    def execute(self, sql: str, *params):
        sec = self._section(sql)
        cancel = None
        if self.raw.odbc.hang_next.get(sec):
            self.raw.odbc.hang_next[sec] -= 1
            cancel = self._hang
        rows = self.raw.odbc.fake.execute(self.raw.session, self.raw.server, self.raw.db,
                                          f"initiator.sql {sec}", sql, params, cancel)
        self._rows = list(rows or [])
        self.description = [("c",)] if rows else None
        return self

    def _hang(self, attention) -> None:
        """Block until the driver's watchdog cancels the call (SQLCancel), then the attention.
        Other connections go on meanwhile (the model's lock is let go while this one waits)."""
        lock = self.raw.odbc.fake.model.lock
        lock.release()
        try:
            assert self._cancelled.wait(10), "the driver never cancelled the call"
        finally:
            lock.acquire()
        attention()
        raise FakeOdbcError("HY008", "[HY008] [Microsoft][ODBC Driver 18 for SQL Server]Operation "
                                     "canceled (0) (SQLExecDirectW)")

    @staticmethod
    def _section(sql: str) -> str:
        for sec in FakeCursor.SECTIONS:
            try:
                if tsql.statement("initiator", sec) == sql:
                    return sec
            except tsql.TemplateError:
                continue
        raise AssertionError(f"the fake pyodbc does not know this statement: {sql}")

    def fetchall(self):
        return self._rows

    def nextset(self):
        return False

    def cancel(self):
        self._cancelled.set()

    def close(self):
        pass


def install_raw_senders(monkeypatch, f: "FakeServer") -> FakePyodbc:
    """MssqlSender connections run the real driver (harness.targets.mssql.driver: connect,
    Connection, watchdog, error mapping) over :class:`FakePyodbc`."""
    odbc = FakePyodbc(f)
    monkeypatch.setattr(driver_mod, "pyodbc_module", lambda: odbc)
    monkeypatch.setattr(driver_mod.ConnSpec, "connect", _REAL_CONNECT)
    monkeypatch.setenv("SSBENCH_MSSQL_PASSWORD", "not-a-real-password")
    return odbc


def whats(fake: FakeServer) -> list[str]:
    return [w for _, _, w, _, _ in fake.log]
