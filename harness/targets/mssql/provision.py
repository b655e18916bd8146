"""Provisioning and teardown of the SQL Server topology (docs/sqlserver.md, "What gets built").

:func:`provision` creates, idempotently, what the paper's topology needs, recording what it
creates (:mod:`.ownership`) and the options it changes (:mod:`.db_options`); :func:`teardown`
removes that and puts the options back.
"""

from __future__ import annotations

import logging

from ...errors import TargetError
from . import db_options, driver, exclusive, ownership, platforms, sender_login
from .dialog_security import (binding_name, competing_certificates, dialog_cert, dialog_security,
                              install_peer_certificate, own_certificate, peer_user)
from .session import MIN_VERSION, ServerSession, random_password, version_tuple
from .topology import Instance

log = logging.getLogger(__name__)

Pair = tuple[Instance, Instance, int]

#: ENABLE_BROKER's error when another database of the instance has the same broker GUID enabled
DUPLICATE_BROKER_ID = 9772


def _check_version(s: ServerSession, inst: Instance) -> str:
    row = s._server_info(inst)
    version = row[0]
    if version_tuple(version) < MIN_VERSION:
        raise TargetError(f"{inst.server} runs SQL Server {version}; ssbench needs "
                          "SQL Server 2016 SP1 (13.0.4001) or later (CREATE OR ALTER, "
                          "DATEDIFF_BIG, CERTENCODED)")
    return version


def _ensure_database(s: ServerSession, inst: Instance, created: set[str]) -> dict[str, object]:
    """The database exists, is online and has message delivery on; returns its broker state
    before provision changed it (for :func:`.db_options.remember`)."""
    info = s._database_info(inst)
    if info is None:
        if not s.topology.broker.create_databases:
            raise TargetError(f"database {inst.database} does not exist on {inst.server} "
                              "(broker.create_databases is false)")
        log.info("creating database %s on %s", inst.database, inst.server_key)
        s._run(inst, "server", "create_database", {"database": inst.database},
               database="master")
        created.add(inst.name)
        exclusive.mark_created(s, inst)
        _size_log(s, inst)
        info = s._database_info(inst)
        if info is None:
            raise TargetError(f"database {inst.database} was not created on {inst.server_key}")
    if info[5] != "ONLINE":
        raise TargetError(f"database {inst.database} on {inst.server_key} is {info[5]}")
    before = {db_options.BROKER_ENABLED: int(bool(info[2])), db_options.BROKER_GUID: str(info[3]).lower()}
    if not info[2]:
        log.info("enabling Service Broker in %s", inst.database)
        try:
            exclusive.set_broker(s, inst, True)
        except driver.QueryError as e:
            if e.native != DUPLICATE_BROKER_ID:
                raise
            # another database of this instance has the same broker identifier enabled (a copy):
            # only a new identifier lets this one deliver (exclusive.new_broker: ssbench's only)
            exclusive.new_broker(s, inst, "ENABLE_BROKER failed with error 9772 (another database "
                                          "of this instance has the same broker identifier): a new one")
            log.warning("%s: ENABLE_BROKER failed with error 9772 (another database of this instance "
                        "has the same broker identifier): gave it a new one (SET NEW_BROKER)", inst.where())
    return before


def _size_log(s: ServerSession, inst: Instance) -> None:
    """The log of a database ssbench just created: broker.log_size_mb, growing by a quarter of
    it, instead of model's (its autogrowth would land in the first permutation as WRITELOG)."""
    size = s.topology.broker.log_size_mb
    rows = s._query(inst, "server", "log_file", [inst.database], database="master", purpose="admin") if size else []
    if rows and int(rows[0][1] or 0) < size:
        s._run(inst, "server", "log_size", {"database": inst.database, "file": str(rows[0][0]), "size_mb": size,
                                            "growth_mb": max(64, size // 4)}, database="master")


def _dedupe_guids(s: ServerSession, insts: list[Instance]) -> None:
    """Every database needs its own broker GUID (copies of a database share one): the copies
    ssbench created get a new one (a database it did not create is kept as it is; two of those
    sharing one are refused: exclusive.new_broker)."""
    seen: dict[str, Instance] = {}
    for inst in sorted(insts, key=lambda i: (exclusive.created(s, i), s.topology.role(i) != "target")):
        g = s._broker_guid(inst, refresh=True)
        if g in seen:
            exclusive.new_broker(s, inst, f"sharing broker GUID {g} with {seen[g].where()}: a new one")
            log.warning("%s shared broker GUID %s with %s; gave it a new one (NEW_BROKER)",
                        inst.where(), g, seen[g].where())
            g = s._guids[inst.name]
        seen[g] = inst


def _create_objects(s: ServerSession, inst: Instance, role: str, index: int,
                    before: ownership.State) -> None:
    """Create the database's objects and record in dbo.ssbench_owned what ssbench created
    (an existing message type or contract is used as it is and not recorded)."""
    names = s._names()
    for sec in ("message_type", "contract", "queue", "service", "config_table", "priority_objects",
                "end_conversations_procedure"):
        s._run(inst, "objects", sec, names)
    s._run(inst, "objects", "error_table",
           {"table": "messageErrors" if role == "target" else "ssbench_dialog_errors"})
    if role == "target":
        s._run(inst, "target", "tables", names)
        s._run(inst, "target", "reset_procedure", names)
        s._install_activation(inst, s._broker)
    else:
        s._run(inst, "initiator", "tables", names)
        s._install_initiator_code(inst, index)
    for key in sorted(ownership.wanted(s, role)):
        if not before.get(key, (False, False))[0]:
            ownership.record(s, inst, *key)


def broker_endpoint(s: ServerSession, inst: Instance) -> tuple[tuple | None, bool]:
    """The instance's Service Broker endpoint (its broker_endpoints row; None: it has none) and
    whether ssbench created it: master's extended property names it, or (an ssbench from before
    the record) its name has the reserved ssbench_ prefix."""
    rows = s._query(inst, "server", "broker_endpoints", database="master", purpose="admin")
    if not rows:
        return None, False
    owner = s._scalar(inst, "server", "endpoint_owner", database="master", purpose="admin")
    return rows[0], owner == rows[0][0] or rows[0][0].lower().startswith("ssbench_")


def endpoint_problems(s: ServerSession, inst: Instance, row: tuple, owned: bool) -> list[str]:
    """Why an existing Service Broker endpoint (a broker_endpoints row) cannot serve ssbench,
    one sentence each; [] when it can. ssbench re-creates the settings of its own endpoint at
    provision, so only its state matters there."""
    b = s.topology.broker
    name, port, state, auth, _, cert = row
    if owned:
        return [] if state == "STARTED" else [
            f"endpoint [{name}] is {state}: no message leaves or arrives; run provision"]
    if not b.use_existing_endpoint:
        return [f"endpoint [{name}] (port {port}, authentication {auth}) exists and ssbench did "
                "not create it; an instance has only one, and ssbench never alters an endpoint "
                "it did not create: set broker.use_existing_endpoint: true to use it as it is, "
                "or drop it"]
    out = []
    if "CERTIFICATE" not in str(auth).upper() or not cert:
        out.append(f"endpoint [{name}] authenticates with {auth}; ssbench's transport security "
                   "needs certificate authentication")
    if port != inst.broker_port:
        out.append(f"endpoint [{name}] listens on port {port}: set broker_port: {port} for "
                   f"{inst.name} in the topology")
    if state != "STARTED":
        out.append(f"endpoint [{name}] is {state}; start it (ALTER ENDPOINT [{name}] STATE = "
                   "STARTED) or let ssbench create its own")
    return out


def endpoint_encryption(desc: str | None) -> tuple[str, frozenset[str]]:
    """sys.service_broker_endpoints.encryption_algorithm_desc -> (ENCRYPTION setting, algorithms):
    NONE is DISABLED, a list with NONE is SUPPORTED, a list without it REQUIRED."""
    algos = {a.strip().upper() for a in str(desc or "NONE").replace(",", " ").split()}
    if algos <= {"NONE"}:
        return "DISABLED", frozenset()
    return ("SUPPORTED" if "NONE" in algos else "REQUIRED"), frozenset(algos - {"NONE"})


def encryption_problems(s: ServerSession, pairs: list[Pair]) -> list[str]:
    """Endpoints of the topology that cannot talk to each other: one with ENCRYPTION = REQUIRED
    accepts only SUPPORTED or REQUIRED peers, and two that encrypt need an algorithm in common
    (CREATE ENDPOINT). ssbench's own endpoints get broker.endpoint_encryption (AES, the default
    algorithm); an existing one used as it is keeps its own."""
    own = s.topology.broker.endpoint_encryption.upper()
    mine = (own, frozenset() if own == "DISABLED" else frozenset({"AES"}))
    setting: dict[str, tuple[str, str, frozenset[str]]] = {}
    for key, inst in s._servers(x for pair in pairs for x in pair[:2]).items():
        row, owned = broker_endpoint(s, inst)
        if row and not owned:
            setting[key] = (f"endpoint [{row[0]}] on {inst.server}", *endpoint_encryption(row[4]))
        else:
            setting[key] = (f"ssbench's endpoint on {inst.server}", *mine)
    out = []
    for a, b in sorted({tuple(sorted((t.server_key, i.server_key))) for t, i, _ in pairs
                        if t.server_key != i.server_key}):
        (na, ma, aa), (nb, mb, ab) = sorted((setting[a], setting[b]), key=lambda x: x[1] != "REQUIRED")
        if {ma, mb} == {"REQUIRED", "DISABLED"}:
            out.append(f"{na} has ENCRYPTION = {ma} and {nb} ENCRYPTION = {mb}: an endpoint that requires "
                       "encryption accepts only SUPPORTED or REQUIRED peers, and the messages would stay in "
                       "sys.transmission_queue; set broker.endpoint_encryption: supported")
        elif "DISABLED" not in (ma, mb) and not aa & ab:
            out.append(f"{na} encrypts with {', '.join(sorted(aa))} and {nb} with {', '.join(sorted(ab))}: "
                       "no algorithm in common")
    return out


def _foreign_endpoint(s: ServerSession, inst: Instance) -> tuple[tuple | None, bool]:
    """:func:`broker_endpoint`, raising when ssbench did not create it and it cannot be used as
    it is."""
    row, owned = broker_endpoint(s, inst)
    problems = endpoint_problems(s, inst, row, owned=False) if row and not owned else []
    if problems:
        raise TargetError(f"{inst.server}: " + "; ".join(problems))
    return row, owned


def _endpoint(s: ServerSession, inst: Instance, label: str) -> tuple[str, tuple[bytes, bytes]]:
    """The instance's Service Broker endpoint: created (and recorded) by ssbench, altered only
    when ssbench created it, or an existing one used exactly as it is with
    ``broker.use_existing_endpoint``. Returns its name and the public part of the certificate
    it authenticates with."""
    b = s.topology.broker
    row, owned = _foreign_endpoint(s, inst)
    if row and not owned:
        name, cert = row[0], row[5]
        rows2 = s._query(inst, "server", "certificate_public", [cert], database="master",
                         purpose="admin")
        if not rows2 or rows2[0][0] is None:
            raise TargetError(f"{inst.server}: certificate {cert} of endpoint [{name}] "
                              "is not readable")
        return name, (bytes(rows2[0][0]), bytes(rows2[0][1]))
    cert = transport_cert(label)
    public = own_certificate(s, inst, cert, f"ssbench transport {label}"[:64], "master")
    name = row[0] if row else b.endpoint_name
    params = {"endpoint": name, "port": inst.broker_port, "certificate": cert,
              "encryption": b.endpoint_encryption.upper()}
    s._run(inst, "server", "endpoint_alter" if row else "endpoint_create", params,
           database="master")
    s._run(inst, "server", "endpoint_owner_set", {"endpoint": name}, database="master")
    return name, public


def transport_cert(label: str) -> str:
    """The certificate in master an instance's endpoint authenticates with (by its server label)."""
    return f"ssbench_transport_{label}"


def _transport(s: ServerSession, pairs: list[Pair]) -> None:
    """Transport security between instances: the Service Broker endpoint authenticating with
    a certificate in master, and for every peer instance a login, a master user owning the
    peer's public certificate and CONNECT on the endpoint."""
    links: set[tuple[str, str]] = set()
    for t, i, _ in pairs:
        if t.server_key != i.server_key:
            links.add((t.server_key, i.server_key))
            links.add((i.server_key, t.server_key))
    if not links:
        return
    servers = s._servers(x for pair in pairs for x in pair[:2])
    publics: dict[str, tuple[bytes, bytes]] = {}
    endpoints: dict[str, str] = {}
    for key in sorted({k for link in links for k in link}):
        endpoints[key], publics[key] = _endpoint(s, servers[key], s._server_label(key))
    for a, peer in sorted(links):
        inst = servers[a]
        plabel = s._server_label(peer)
        login = user = peer_user(plabel)
        s._run(inst, "server", "peer_login",
               {"login": login, "user": user, "password": random_password()}, database="master")
        install_peer_certificate(s, inst, "master", transport_cert(plabel), user, publics[peer])
        s._run(inst, "server", "peer_grant_connect",
               {"endpoint": endpoints[a], "login": login}, database="master")


def routing(s: ServerSession, pairs: list[Pair]) -> None:
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


def _config_set(s: ServerSession, inst: Instance, name: str, value: str) -> None:
    s._query(inst, "objects", "config_set", (value, name, name, value), purpose="admin")


def provision(s: ServerSession, max_initiators: int | None = None) -> None:
    """Create everything the topology needs, idempotently (safe to run again)."""
    topo = s.topology
    pairs = topo.pairs(max_initiators)
    insts = topo.used_instances(max_initiators)
    for inst in s._servers(insts).values():
        _check_version(s, inst)
        refused = platforms.server_refusals(s, inst)
        if refused:
            raise TargetError("; ".join(refused))
    if topo.layout == "distributed":        # refuse a foreign endpoint before changing anything
        for inst in s._servers(insts).values():
            _foreign_endpoint(s, inst)
        problems = encryption_problems(s, pairs)
        if problems:
            raise TargetError("; ".join(problems))
    created: set[str] = set()
    before = {inst.name: _ensure_database(s, inst, created) for inst in insts}
    state = {}
    for inst in insts:                       # refuse foreign objects before creating any
        state[inst.name] = ownership.owned_state(s, inst)
        ownership.refuse_foreign(s, inst, topo.role(inst), state[inst.name])
        ownership.refuse_unusable(s, inst)
        competing = competing_certificates(s, inst) if topo.broker.dialog_encryption else []
        refused = sender_login.refusal(s, inst) if topo.role(inst) == "initiator" else None
        if competing or refused:
            raise TargetError("; ".join([*competing, *([refused] if refused else [])]))
    for inst in insts:
        if inst.name in created:
            ownership.record(s, inst, "DATABASE", inst.database)
    _dedupe_guids(s, insts)
    index = {i.name: idx for _, i, idx in pairs}
    for inst in insts:
        _create_objects(s, inst, topo.role(inst), index.get(inst.name, 1), state[inst.name])
        db_options.remember(s, inst, before[inst.name])
    dialog_security(s, pairs)
    for inst in insts:
        if topo.role(inst) == "initiator":
            sender_login.grant(s, inst)
    if topo.layout == "distributed":
        _transport(s, pairs)
    routing(s, pairs)
    log.info("provisioned %d database(s) on %d server(s)", len(insts),
             len(s._servers(insts)))


def _teardown_database(s: ServerSession, inst: Instance, partners: list[Instance], kept: list[str],
                       drop_databases: bool) -> bool:
    """Remove what ssbench created in one database and put its options back; returns whether
    ssbench created the database."""
    b, names = s.topology.broker, s._names()
    state = ownership.owned_state(s, inst)
    owned = ownership.owned(s, inst)
    mine = ("DATABASE", inst.database) in owned
    db_options.restore(s, inst)
    s._changed.pop(inst.name, None)
    disable, unrestorable = db_options.broker_changes(s, inst)
    kept += unrestorable
    if ("SERVICE", b.service) in owned:
        left = s._reset(inst, "teardown", "end_conversations")
        if left:
            kept.append(left)
    for p in partners:
        s._run(inst, "teardown", "route_drop", {"route": f"ssbench_to_{p.name}"})
    if s.topology.role(inst) == "initiator":
        s._run(inst, "teardown", "binding_drop", {"binding": binding_name(partners[0])})
    s._run(inst, "teardown", "priority_drop", {**names, "database": inst.database})
    for cls, sec in (("SERVICE", "service_drop"), ("QUEUE", "queue_drop"),
                     ("CONTRACT", "contract_drop"), ("MESSAGE TYPE", "message_type_drop")):
        name = names[sec.replace("_drop", "")]
        if (cls, name) in owned:
            s._run(inst, "teardown", sec, names)
        elif cls in ("SERVICE", "QUEUE") and state.get((cls, name), (False, False))[0]:
            kept.append(f"{inst.where()}: {cls.lower()} {name} (not created by ssbench)")
    for p in partners:
        s._run(inst, "teardown", "proxy_drop",
               {"certificate": dialog_cert(p), "user": peer_user(p.name)})
    s._run(inst, "teardown", "ssbench_code", names)
    if ("PROCEDURE", b.activation_procedure) in owned:
        s._run(inst, "teardown", "procedure_drop", {"procedure": b.activation_procedure})
    for cls, name in sorted(owned):
        if cls == "TABLE" and not name.lower().startswith("ssbench_"):
            s._run(inst, "teardown", "table_drop", {"table": name})
    s._run(inst, "teardown", "own_certificate_drop", {"certificate": dialog_cert(inst)})
    sender_login.drop(s, inst, owned)
    keep = mine and not drop_databases
    s._run(inst, "teardown", "owned_prune" if keep else "owned_drop")
    if disable and not (mine and drop_databases):
        try:           # last: it needs the database to itself (exclusive.set_broker)
            exclusive.set_broker(s, inst, False)
        except TargetError as e:
            kept.append(f"message delivery left enabled: {e}")
    return mine


def teardown(s: ServerSession, drop_databases: bool = False) -> list[str]:
    """Remove what provision created (all profiles), and nothing else: objects under the
    paper's or configured names only when dbo.ssbench_owned records them, the endpoint only
    when ssbench created it, databases only when asked and ssbench created them; database
    options back as they were before ssbench. Returns a line for everything left in place."""
    topo = s.topology
    pairs = topo.pairs()
    insts = topo.used_instances()
    partners: dict[str, list[Instance]] = {}
    for t, i, _ in pairs:
        partners.setdefault(t.name, []).append(i)
        partners.setdefault(i.name, []).append(t)
    kept: list[str] = []
    owned_dbs: set[str] = set()
    for inst in insts:
        if s._database_info(inst) is not None and \
                _teardown_database(s, inst, partners.get(inst.name, []), kept, drop_databases):
            owned_dbs.add(inst.name)
    if topo.layout == "distributed":
        servers = s._servers(insts)
        for key, inst in servers.items():
            for other in insts:
                if other.server_key == key:
                    s._run(inst, "server", "msdb_route_drop",
                           {"route": f"ssbench_local_{other.name}"}, database="msdb")
            row, owned = broker_endpoint(s, inst)
            if row and owned:
                s._run(inst, "server", "endpoint_drop", {"endpoint": row[0]}, database="master")
                s._run(inst, "server", "endpoint_owner_drop", database="master")
            elif row:
                kept.append(f"{inst.server}: endpoint {row[0]} (not created by "
                            "ssbench; its CONNECT grants went with ssbench's peer logins)")
            for pl in (s._server_label(peer) for peer in servers if peer != key):
                s._run(inst, "server", "peer_drop", {"certificate": transport_cert(pl), "user": peer_user(pl),
                                                     "login": peer_user(pl)}, database="master")
            s._run(inst, "server", "drop_certificate", {"certificate": transport_cert(s._server_label(key))},
                   database="master")
    if drop_databases:
        for inst in insts:
            if inst.name not in owned_dbs:
                kept.append(f"{inst.where()}: database kept (ssbench did not create it)")
                continue
            s._pool.discard(inst.server_key, inst.database)
            s._run(inst, "server", "drop_database", {"database": inst.database},
                   database="master")
    return kept
