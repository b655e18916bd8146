"""A recording fake of SQL Server for the SQL Server target's tests (no SQL Server exists on
the machines this project runs on): every batch the target sends is logged with the server,
the database and the template section, and the fake keeps just enough state (databases, broker
GUIDs, certificates, endpoints, routes, send sequences, the tally) for the target's logic to
run. The T-SQL parser check (test_mssql_tsql_parsers.py) parses what it records."""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import uuid

from harness.targets.mssql import session as session_mod


class FakeServer:
    """The state of every fake SQL Server instance plus a log of what ran where."""

    def __init__(self):
        self.log: list[tuple[str, str, str, str, tuple]] = []   # (server, db, what, sql, params)
        self.dbs: dict[tuple[str, str], dict] = {}
        self.certs: dict[tuple[str, str, str], bytes] = {}      # (server, db, name) -> DER bytes
        self.endpoints: dict[str, list] = {}
        self.send_seq: dict[tuple[str, str], int] = {}
        self.tally: dict[str, list] = {}
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
        # the diagnosis' evidence (docs/diagnosis.md): the product version server_info reports,
        # tasks waiting on page latches (wait type, 'db:file:page', tasks), the objects
        # sys.dm_db_page_info maps pages to ((db, file, page) -> row), and Service Broker's waits
        self.version = "16.0.4135.4"
        self.page_waiters: list[tuple] = [("PAGELATCH_EX", "7:1:1234", 3), ("PAGELATCH_SH", "7:1:1234", 1),
                                          ("PAGELATCH_EX", "7:1:88", 1)]
        self.pages: dict[tuple[int, int, int], tuple] = {(7, 1, 1234): ("ssb_init1", "sys", "sysdesend", 1, "DATA_PAGE")}
        self.broker_waits = [("BROKER_RECEIVE_WAITFOR", 12, 24000.0), ("BROKER_TASK_STOP", 2, 40.0)]
        self.broker_latches = [("SERVICE_BROKER_WAITFOR_MANAGER", 9, 310.0)]

    def batches(self, what: str | None = None, server: str | None = None, db: str | None = None):
        return [(s, d, w, q) for s, d, w, q, _ in self.log
                if (what is None or w == what) and (server is None or s == server)
                and (db is None or d.lower() == db.lower())]

    def sql(self, **kw) -> str:
        return "\n".join(q for *_, q in self.batches(**kw))


class FakeConn:
    def __init__(self, fake: FakeServer, server: str, db: str):
        self.fake, self.server, self.db = fake, server, db

    def close(self):
        pass

    def run_batches(self, batches, timeout=..., what=""):
        for b in batches:
            self.execute(b, (), timeout=timeout, what=what)

    def scalar(self, sql, params=(), **kw):
        rows = self.execute(sql, params, **kw)
        return rows[0][0] if rows else None

    def execute(self, sql, params=(), timeout=..., what=""):
        f, s, d = self.fake, self.server, self.db
        assert "{{" not in sql and "}}" not in sql
        f.log.append((s, d, what, sql, tuple(params)))
        sec = what.replace(".sql ", ".")
        if what == "dialog lookup":                       # MssqlSender.dialog
            return [(str(uuid.UUID(int=params[0])),)]
        if what == "send retiring":                       # MssqlSender, a finite dialog lifetime
            return [(None if params[2] else str(params[0] or uuid.uuid4()),)]
        if sec == "collectors.endpoint_states":
            return [("CD", 3, 3), ("CO", 5, 5)] if "init" in d.lower() else [("CD", 3, 0)]
        k = (s, d.lower())
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
            return [(f.version, "Developer Edition", s, "RTM", "ssbench")]
        if sec == "collectors.page_latch_waiters":
            return list(f.page_waiters)
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
            info = f.dbs.get((s, params[0].lower()))
            if not info:
                return []
            return [(params[0], 5, info["broker"], info["guid"], "DISABLED", "ONLINE", "sa", "MULTI_USER")]
        if sec == "server.create_database":
            name = re.search(r"CREATE DATABASE \[([^\]]+)\]", sql).group(1)
            f.dbs[(s, name.lower())] = {"guid": str(uuid.uuid4()).upper(), "broker": True}
            return []
        if sec == "server.enable_broker":
            name = re.search(r"ALTER DATABASE \[([^\]]+)\]", sql).group(1)
            f.dbs[(s, name.lower())]["broker"] = True
            return []
        if sec == "server.new_broker":
            name = re.search(r"ALTER DATABASE \[([^\]]+)\]", sql).group(1)
            f.dbs[(s, name.lower())]["guid"] = str(uuid.uuid4()).upper()
            return []
        if sec == "server.own_certificate":
            name = re.search(r"CERT_ID\(N'([^']+)'\)", sql).group(1)
            f.certs.setdefault((s, d.lower(), name), hashlib.sha256(f"{s}/{d}/{name}".encode()).digest())
            return []
        if sec in ("server.certificate_public", "server.certificate_thumbprint"):
            data = f.certs.get((s, d.lower(), params[0]))
            if data is None:
                return []
            thumb = hashlib.sha1(data).digest()
            return [(data, thumb)] if sec.endswith("public") else [(thumb,)]
        if sec == "server.drop_certificate":
            name = re.search(r"CERT_ID\(N'([^']+)'\)", sql).group(1)
            f.certs.pop((s, d.lower(), name), None)
            return []
        if sec == "server.peer_certificate":
            m = re.search(r"CREATE CERTIFICATE \[([^\]]+)\]\s+AUTHORIZATION \[[^\]]+\]\s+FROM BINARY = 0x([0-9A-F]+);", sql)
            f.certs[(s, d.lower(), m.group(1))] = bytes.fromhex(m.group(2))
            return []
        if sec == "server.broker_endpoints":
            return f.endpoints.get(s, [])
        if sec == "server.endpoint_create":
            name = re.search(r"CREATE ENDPOINT \[([^\]]+)\]", sql).group(1)
            port = int(re.search(r"LISTENER_PORT = (\d+)", sql).group(1))
            f.endpoints[s] = [(name, port, "STARTED", "CERTIFICATE", "NONE", "cert")]
            return []
        if sec == "initiator.sent_sequence":
            return [(f.send_seq.get((s, d), 0), 10)]
        if sec == "initiator.call_create_dialogs":
            return [(params[0] * params[1],)]
        if sec == "initiator.call_warm_up":
            f.send_seq[(s, d)] = f.send_seq.get((s, d), 0) + 4
            return [(4,)]
        if sec == "target.received_by_initiator":
            return f.tally.get(s, [])
        if sec == "collectors.xmitq_fast":
            return [(0, 1)]
        if sec in ("collectors.activated_tasks", "collectors.xmitq_exact",
                   "collectors.queue_fast", "target.queue_exact", "target.error_count",
                   "target.processed_total"):
            return [(0,)]
        if sec == "collectors.queue_state":
            return [(1, 1, 1, 16, "dbo.SRPerf_Queue_LabTest")]
        if sec == "objects.objects_present":
            objs = 1 if k in f.provisioned else 0
            return [(objs, objs, objs, objs, 1, 1, *f.db_perms.get(k, (1, 1)))]
        if sec == "objects.service":
            f.provisioned.add(k)
        if sec == "objects.routes":
            return f.routes.get((s, d.lower()), [])
        if sec == "objects.route":
            m = re.search(r"CREATE ROUTE \[([^\]]+)\].*BROKER_INSTANCE = N'([^']+)',\s+ADDRESS = N'([^']+)'", sql, re.S)
            if m:
                rs = [r for r in f.routes.get((s, d.lower()), []) if r[0] != m.group(1)]
                rs.append((m.group(1), "svc", m.group(2), m.group(3)))
                f.routes[(s, d.lower())] = rs
            return []
        if sec == "collectors.wait_stats":
            return f.waits
        if sec == "collectors.server_cpu":
            return [(45, 50)]
        if sec == "target.e2e_latencies":
            return [(1, 5000), (2, 7000)]
        if sec == "target.e2e_latencies_by_priority":
            return [(1, 5000, 1), (2, 7000, 0), (1, 9000, 0)]
        return []


def install(monkeypatch) -> "FakeServer":
    """Route every connection of every MssqlTarget to a new FakeServer."""
    f = FakeServer()

    def get(pool, inst, database=None, purpose="admin"):
        return FakeConn(f, inst.server_key, database or inst.database)

    monkeypatch.setattr(session_mod.Pool, "get", get)
    return f


def install_senders(monkeypatch, f: "FakeServer") -> None:
    """MssqlSender connections (ConnSpec.connect) go to ``f`` too; pyodbc is not needed."""
    from harness.targets.mssql import driver

    def connect(spec, *, autocommit=True, query_timeout=...):
        return FakeConn(f, f"{spec.host.lower()}:{spec.port}", spec.database)

    monkeypatch.setattr(driver.ConnSpec, "connect", connect)
    monkeypatch.setattr(driver, "pyodbc_module", lambda: None)
    monkeypatch.setattr(driver, "drivers", lambda: ["ODBC Driver 18 for SQL Server", "FreeTDS"])


def whats(fake: FakeServer) -> list[str]:
    return [w for _, _, w, _, _ in fake.log]


