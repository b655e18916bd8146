"""Provisioning and teardown of the SQL Server topology.

:func:`provision` creates (idempotently) the databases, the paper's message type, contract,
queues and services, the tables and procedures, dialog security (a certificate per database,
exchanged with CERTENCODED / CREATE CERTIFICATE FROM BINARY, users without login, GRANT SEND,
remote service bindings with ANONYMOUS = OFF), and for the distributed layout transport
security (a certificate per instance in master, a certificate-authenticated Service Broker
endpoint, a login per peer instance with CONNECT on the endpoint), then the routes with
BROKER_INSTANCE both ways (and msdb routes for local delivery). :func:`teardown` removes it.
Every function takes the :class:`~.session.Session` of the target.
"""

from __future__ import annotations

import datetime as dt
import logging

from ...errors import TargetError
from . import driver, tsql
from .session import MIN_VERSION, Session, random_password, version_tuple
from .topology import Instance

log = logging.getLogger(__name__)

Pair = tuple[Instance, Instance, int]


def _check_version(s: Session, inst: Instance) -> str:
    row = s._server_info(inst)
    version = row[0]
    if version_tuple(version) < MIN_VERSION:
        raise TargetError(f"{inst.host}:{inst.port} runs SQL Server {version}; ssbench needs "
                          "SQL Server 2016 SP1 (13.0.4001) or later (CREATE OR ALTER, "
                          "DATEDIFF_BIG, CERTENCODED)")
    return version

def _ensure_database(s: Session, inst: Instance) -> None:
    info = s._database_info(inst)
    if info is None:
        if not s.topology.broker.create_databases:
            raise TargetError(f"database {inst.database} does not exist on {inst.host}:"
                              f"{inst.port} (broker.create_databases is false)")
        log.info("creating database %s on %s", inst.database, inst.server_key)
        s._run(inst, "server", "create_database", {"database": inst.database},
                  database="master")
        info = s._database_info(inst)
        if info is None:
            raise TargetError(f"database {inst.database} was not created on {inst.server_key}")
    if info[5] != "ONLINE":
        raise TargetError(f"database {inst.database} on {inst.server_key} is {info[5]}")
    if not info[2]:
        log.info("enabling Service Broker in %s", inst.database)
        s._pool.discard(inst.server_key, inst.database)
        try:
            s._run(inst, "server", "enable_broker", {"database": inst.database},
                      database="master")
        except driver.QueryError as e:
            log.warning("ENABLE_BROKER failed in %s (%s); using NEW_BROKER", inst.database, e)
            s._run(inst, "server", "new_broker", {"database": inst.database},
                      database="master")

def _dedupe_guids(s: Session, insts: list[Instance]) -> None:
    """Every database needs its own broker GUID (copies of a database share one)."""
    seen: dict[str, Instance] = {}
    for inst in sorted(insts, key=lambda i: s.topology.role(i) != "target"):
        g = s._broker_guid(inst, refresh=True)
        if g in seen:
            log.warning("%s shares broker GUID %s with %s; giving it a new one (NEW_BROKER)",
                        inst.where(), g, seen[g].where())
            s._new_broker(inst)
            g = s._guids[inst.name]
        seen[g] = inst

def _create_objects(s: Session, inst: Instance, role: str, index: int = 1) -> None:
    names = s._names()
    for sec in ("message_type", "contract", "queue", "service", "config_table"):
        s._run(inst, "objects", sec, names)
    if role == "target":
        s._run(inst, "target", "tables", names)
        s._run(inst, "target", "reset_procedure", names)
        s._install_activation(inst, s._broker)
    else:
        s._run(inst, "initiator", "tables", names)
        s._install_initiator_code(inst, index)

def _cert_dates(s: Session) -> dict[str, dt.date]:
    today = dt.datetime.now(dt.timezone.utc).date()
    # a day back, so a peer whose clock runs behind does not see a not-yet-valid certificate
    years = s.topology.broker.certificate_years
    try:
        expiry = today.replace(year=today.year + years)
    except ValueError:  # 29 February
        expiry = today.replace(year=today.year + years, day=28)
    return {"start_date": today - dt.timedelta(days=1), "expiry_date": expiry}

def _own_certificate(s: Session, inst: Instance, cert: str, subject: str, database: str) -> tuple[bytes, bytes]:
    s._run(inst, "server", "master_key", {"password": random_password()}, database=database)
    s._run(inst, "server", "own_certificate",
              {"certificate": cert, "subject": subject, **_cert_dates(s)}, database=database)
    rows = s._query(inst, "server", "certificate_public", [cert], database=database,
                       purpose="admin")
    if not rows or rows[0][0] is None:
        raise TargetError(f"{inst.where()}: certificate {cert} has no public key")
    return bytes(rows[0][0]), bytes(rows[0][1])

def _install_peer_certificate(s: Session, inst: Instance, database: str, cert: str, user: str,
                              public: tuple[bytes, bytes]) -> None:
    """Install (or replace, if the peer's certificate changed) a peer's public certificate
    owned by ``user``."""
    data, thumbprint = public
    rows = s._query(inst, "server", "certificate_thumbprint", [cert], database=database,
                       purpose="admin")
    if rows and rows[0][0] is not None and bytes(rows[0][0]) == thumbprint:
        return
    if rows:
        s._run(inst, "server", "drop_certificate", {"certificate": cert}, database=database)
    s._run(inst, "server", "peer_certificate",
              {"certificate": cert, "user": user, "certificate_bytes": data}, database=database)

def dialog_cert(inst: Instance) -> str:
    return f"ssbench_dialog_{inst.name}"

def peer_user(name: str) -> str:
    return f"ssbench_peer_{name}"

def _dialog_security(s: Session, pairs: list[Pair]) -> None:
    """Full dialog security, as the paper (BEGIN DIALOG ... WITH ENCRYPTION = ON and a
    remote service binding with ANONYMOUS = OFF): each database's dbo owns a certificate;
    each side installs the other's public certificate for a user without login."""
    publics: dict[str, tuple[bytes, bytes]] = {}
    insts = {i.name: i for pair in pairs for i in pair[:2]}
    for inst in insts.values():
        publics[inst.name] = _own_certificate(s, 
            inst, dialog_cert(inst), f"ssbench dialog security {inst.name}"[:64],
            inst.database)
    for t, i, _ in pairs:
        names = s._names()
        # target: the initiator's service owner, allowed to connect and send
        tu = peer_user(i.name)
        s._run(t, "objects", "proxy_user", {"user": tu})
        _install_peer_certificate(s, t, t.database, dialog_cert(i), tu, publics[i.name])
        s._run(t, "objects", "grant_send", {**names, "user": tu})
        # initiator: the target's service owner, named by the remote service binding
        iu = peer_user(t.name)
        s._run(i, "objects", "proxy_user", {"user": iu})
        _install_peer_certificate(s, i, i.database, dialog_cert(t), iu, publics[t.name])
        s._run(i, "objects", "remote_service_binding",
                  {**names, "binding": f"ssbench_rsb_{t.name}", "user": iu})
        # messages the target sends back (EndDialog, Error) arrive as that user
        s._run(i, "objects", "grant_send", {**names, "user": iu})

def _transport(s: Session, pairs: list[Pair]) -> None:
    """Transport security between instances: a certificate per instance in master, the
    Service Broker endpoint authenticating with it, and for every peer instance a login,
    a master user owning the peer's public certificate and CONNECT on the endpoint."""
    b = s.topology.broker
    links: set[tuple[str, str]] = set()
    for t, i, _ in pairs:
        if t.server_key != i.server_key:
            links.add((t.server_key, i.server_key))
            links.add((i.server_key, t.server_key))
    if not links:
        return
    servers = s._servers(x for pair in pairs for x in pair[:2])
    publics: dict[str, tuple[bytes, bytes]] = {}
    for key in sorted({k for link in links for k in link}):
        inst = servers[key]
        label = s._server_label(key)
        cert = f"ssbench_transport_{label}"
        publics[key] = _own_certificate(s, inst, cert, f"ssbench transport {label}"[:64], "master")
        rows = s._query(inst, "server", "broker_endpoints", database="master", purpose="admin")
        params = {"endpoint": b.endpoint_name, "port": inst.broker_port, "certificate": cert,
                  "encryption": b.endpoint_encryption.upper()}
        if rows and rows[0][0] != b.endpoint_name:
            raise TargetError(
                f"{inst.host}:{inst.port} already has a Service Broker endpoint [{rows[0][0]}] "
                f"(port {rows[0][1]}); an instance has only one. Set broker.endpoint_name: "
                f"{rows[0][0]} in the topology to let ssbench reconfigure it for certificate "
                "authentication, or drop it")
        s._run(inst, "server", "endpoint_alter" if rows else "endpoint_create", params,
                  database="master")
    for a, peer in sorted(links):
        inst = servers[a]
        plabel = s._server_label(peer)
        login = user = f"ssbench_peer_{plabel}"
        s._run(inst, "server", "peer_login",
                  {"login": login, "user": user, "password": random_password()}, database="master")
        _install_peer_certificate(s, inst, "master", f"ssbench_transport_{plabel}", user,
                                       publics[peer])
        s._run(inst, "server", "peer_grant_connect",
                  {"endpoint": b.endpoint_name, "login": login}, database="master")

def routing(s: Session, pairs: list[Pair]) -> None:
    """Routes with BROKER_INSTANCE both ways (TCP to the far endpoint, or LOCAL), msdb
    routes for local delivery (distributed layout), and the target's GUID for BEGIN DIALOG."""
    service = s.topology.broker.service
    local_done: set[str] = set()
    for t, i, _ in pairs:
        same = t.server_key == i.server_key
        gt, gi = s._broker_guid(t), s._broker_guid(i)
        s._run(i, "objects", "route", {"service": service, "route": f"ssbench_to_{t.name}",
                                          "broker_instance": gt,
                                          "address": "LOCAL" if same else t.broker_address})
        s._run(t, "objects", "route", {"service": service, "route": f"ssbench_to_{i.name}",
                                          "broker_instance": gi,
                                          "address": "LOCAL" if same else i.broker_address})
        _config_set(s, i, "target_broker_guid", gt)
        _config_set(s, i, "target_instance", t.name)
        if not same:
            for inst in (t, i):
                if inst.name not in local_done:
                    s._run(inst, "server", "msdb_route",
                              {"service": service, "route": f"ssbench_local_{inst.name}",
                               "broker_instance": s._broker_guid(inst)}, database="msdb")
                    local_done.add(inst.name)

def _config_set(s: Session, inst: Instance, name: str, value: str) -> None:
    sql = tsql.statement("objects", "config_set")
    s._retrying(inst, None, "admin", lambda c: c.execute(sql, (value, name, name, value),
                                        what="objects.sql config_set"))

def provision(s: Session, max_initiators: int | None = None) -> None:
    """Create everything the topology needs, idempotently (safe to run again)."""
    topo = s.topology
    pairs = topo.pairs(max_initiators)
    insts = topo.used_instances(max_initiators)
    for inst in s._servers(insts).values():
        _check_version(s, inst)
    for inst in insts:
        _ensure_database(s, inst)
    _dedupe_guids(s, insts)
    index = {i.name: idx for _, i, idx in pairs}
    for inst in insts:
        _create_objects(s, inst, topo.role(inst), index.get(inst.name, 1))
    _dialog_security(s, pairs)
    if topo.layout == "distributed":
        _transport(s, pairs)
    routing(s, pairs)
    log.info("provisioned %d database(s) on %d server(s)", len(insts),
             len(s._servers(insts)))


def teardown(s: Session, drop_databases: bool = False) -> None:
    """Remove what provision created (all profiles). Databases stay unless asked."""
    topo = s.topology
    pairs = topo.pairs()
    insts = topo.used_instances()
    partners: dict[str, list[Instance]] = {}
    for t, i, _ in pairs:
        partners.setdefault(t.name, []).append(i)
        partners.setdefault(i.name, []).append(t)
    for inst in insts:
        if s._database_info(inst) is None:
            continue
        names = s._names()
        s._run(inst, "teardown", "end_conversations", names)
        for p in partners.get(inst.name, []):
            s._run(inst, "teardown", "route_drop", {"route": f"ssbench_to_{p.name}"})
        binding = f"ssbench_rsb_{partners[inst.name][0].name}" if topo.role(inst) == "initiator" \
            else "ssbench_rsb_none"
        s._run(inst, "teardown", "broker_objects", {**names, "binding": binding})
        for p in partners.get(inst.name, []):
            s._run(inst, "teardown", "proxy_drop",
                      {"certificate": dialog_cert(p), "user": peer_user(p.name)})
        s._run(inst, "teardown", "code_and_tables", names)
        s._run(inst, "teardown", "own_certificate_drop", {"certificate": dialog_cert(inst)})
    if topo.layout == "distributed":
        servers = s._servers(insts)
        for key, inst in servers.items():
            for other in insts:
                if other.server_key == key:
                    s._run(inst, "server", "msdb_route_drop",
                              {"route": f"ssbench_local_{other.name}"}, database="msdb")
            s._run(inst, "server", "endpoint_drop", {"endpoint": topo.broker.endpoint_name},
                      database="master")
            for peer in servers:
                if peer != key:
                    pl = s._server_label(peer)
                    s._run(inst, "server", "peer_drop",
                              {"certificate": f"ssbench_transport_{pl}",
                               "user": f"ssbench_peer_{pl}", "login": f"ssbench_peer_{pl}"},
                              database="master")
            s._run(inst, "server", "drop_certificate",
                      {"certificate": f"ssbench_transport_{s._server_label(key)}"},
                      database="master")
    if drop_databases:
        for inst in insts:
            s._pool.discard(inst.server_key, inst.database)
            s._run(inst, "server", "drop_database", {"database": inst.database},
                      database="master")

