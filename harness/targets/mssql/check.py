"""``ssbench mssql check`` and ``smoke``: what the servers look like, and a tiny end-to-end flow.

:func:`check` is a preflight: ``[(status, what, detail)]`` with status ``ok``, ``warn`` or
``fail``, one line per finding. :func:`smoke` prepares a permutation, creates dialogs, warms
up, sends a few messages through real senders and drains.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...errors import TargetError
from ...matrix import BrokerSettings
from ..base import Counts
from . import db_options, driver, exclusive, platforms
from .session import MIN_VERSION, ServerSession, version_tuple

if TYPE_CHECKING:
    from .target import MssqlTarget


def check(s: ServerSession, max_initiators: int | None = None) -> list[tuple[str, str, str]]:
    """Preflight: ``[(status, what, detail)]`` with status ``ok``, ``warn`` or ``fail``.
    Connection failures raise (they are the first thing to fix)."""
    topo = s.topology
    out: list[tuple[str, str, str]] = []
    driver.pyodbc_module()          # no unixODBC at all: PyodbcUnavailable names the package
    have = driver.drivers()
    if topo.driver.name in have:
        out.append(("ok", "ODBC driver", f"{topo.driver.name} (unixODBC has: {', '.join(have)})"))
    else:
        out.append(("fail", "ODBC driver", f"{topo.driver.name!r} is not installed; unixODBC "
                                           f"has: {', '.join(have) or 'none'}"))
        return out
    insts = topo.used_instances(max_initiators)
    pairs = topo.pairs(max_initiators)
    infos = {inst.name: s._database_info(inst) for inst in insts}
    for key, inst in s._servers(insts).items():
        label = f"server {s._server_label(key)} ({key})"
        row = s._server_info(inst)
        ok = version_tuple(row[0]) >= MIN_VERSION
        out.append(("ok" if ok else "fail", label,
                    f"SQL Server {row[0]} {row[1]}, logged in as {row[4]}"
                    + ("" if ok else "; needs 2016 SP1 (13.0.4001) or later")))
        out += [("fail", label, line) for line in platforms.server_refusals(s, inst)]
        missing = [i.database for i in insts if i.server_key == key and infos[i.name] is None]
        out += _permission_lines(s, inst, label, missing)
        if topo.layout == "distributed":
            out += _endpoint_lines(s, inst, label)
    guids: dict[str, str] = {}
    for inst in insts:
        label = f"database {inst.where()}"
        info = infos[inst.name]
        if info is None:
            status = "warn" if topo.broker.create_databases else "fail"
            out.append((status, label, "does not exist"
                        + (" (provision creates it)" if status == "warn" else "")))
            continue
        guid = str(info[3]).lower()
        s._guids[inst.name] = guid
        dup = [n for n, g in guids.items() if g == guid]
        guids[inst.name] = guid
        out.append(("ok" if info[5] == "ONLINE" else "fail", label,
                    f"{info[5]}, GUID {guid}, DELAYED_DURABILITY {info[4]}, owner {info[6]}"))
        if info[6] is None:
            out.append(("fail", label, "the database owner's login does not exist on this "
                                       "server (a restored database?): EXECUTE AS OWNER fails; "
                                       f"run ALTER AUTHORIZATION ON DATABASE::[{inst.database}] "
                                       "TO [sa]"))
        else:
            out += _impersonation_lines(s, inst, label)
        out += _broker_identity_lines(s, inst, label, info, dup)
        lines = _database_lines(s, inst, label, info)
        out += lines
        if topo.role(inst) == "initiator" and ("ok", label, "Service Broker objects present") in lines:
            from .sender_login import check_lines  # noqa: PLC0415

            out += check_lines(s, inst, label)
    if topo.layout == "distributed":
        from .provision import encryption_problems  # noqa: PLC0415

        out += [("fail", "endpoint encryption", p) for p in encryption_problems(s, pairs)]
    for t, i, _ in pairs:
        if t.name not in guids or i.name not in guids:
            continue
        routes = {r[0]: r for r in s._query(i, "objects", "routes", purpose="admin")}
        r = routes.get(f"ssbench_to_{t.name}")
        if r is None:
            out.append(("warn", f"route {i.name} -> {t.name}", "missing (run provision)"))
        elif str(r[2]).lower() != guids[t.name]:
            out.append(("warn", f"route {i.name} -> {t.name}",
                        f"names broker {r[2]} but {t.name} has {guids[t.name]} (run provision)"))
        else:
            out.append(("ok", f"route {i.name} -> {t.name}", f"{r[3]}"))
    return out


def _broker_identity_lines(s: ServerSession, inst, label: str, info: tuple, dup: list[str]) -> list[tuple]:
    """An availability group's database, a broker GUID shared with another database of the
    topology, and NEW_BROKER where ssbench would refuse it."""
    out = []
    if len(info) > 9 and info[9]:
        out.append(("warn", label, "in an availability group: message delivery and the broker identifier "
                                   "cannot change there; route to its listener (broker_host) and put the "
                                   "Service Broker endpoint on every replica (docs/sqlserver.md)"))
    if dup:
        out.append(("warn", label, f"same broker GUID as {', '.join(dup)} (provision gives a copy "
                                   "ssbench created a new one, and refuses when it created neither)"))
    if s.topology.broker.reset == "new_broker":
        refusal = exclusive.new_broker_refusal(s, inst, "broker.reset: new_broker")
        if refusal:
            out.append(("fail", label, refusal.split(": ", 1)[1] + ": use broker.reset: cleanup"))
    return out


def _database_lines(s: ServerSession, inst, label: str, info: tuple) -> list[tuple]:
    """Message delivery, the login's rights, ssbench's objects and stuck messages in a database."""
    b = s.topology.broker
    out = []
    rows = s._query(inst, "objects", "objects_present",
                    [b.message_type, b.contract, b.queue, b.service], purpose="admin")
    pres = rows[0] if rows else (0,) * 8
    objs = all(pres[:4])
    if info[2]:
        out.append(("ok", label, "Service Broker enabled (is_broker_enabled = 1)"))
    elif objs:
        out.append(("fail", label, "Service Broker is disabled (is_broker_enabled = 0): "
                                   "messages to and from this database stay in "
                                   "sys.transmission_queue; run provision (ENABLE_BROKER)"))
    else:
        out.append(("warn", label, "Service Broker is disabled (is_broker_enabled = 0); "
                                   "provision enables it"))
    if not pres[6]:
        out.append(("fail", label, "the login is not db_owner here: provision creates the "
                                   "queue, service, certificates, users, routes, tables and "
                                   "procedures in this database"))
    if not pres[7]:
        out.append(("fail", label, "no ALTER permission on the database: prepare runs ALTER "
                                   "DATABASE (DELAYED_DURABILITY, HONOR_BROKER_PRIORITY, NEW_BROKER)"))
    opts = db_options.current(s, inst)
    if opts["master_key"] and not opts["master_key_by_server"]:
        out.append(("warn", label, "the master key is not encrypted by this instance's service "
                                   "master key (is_master_key_encrypted_by_server = 0: restored "
                                   "or attached from another instance?): dialogs stall on session "
                                   "keys; provision creates ssbench's again"))
    if b.dialog_encryption:
        from .dialog_security import competing_certificates  # noqa: PLC0415

        out += [("fail", label, line.split(": ", 1)[1]) for line in competing_certificates(s, inst)]
    out.append(("ok" if objs else "warn", label,
                "Service Broker objects present" if objs else "not provisioned yet"))
    if objs:
        stuck = s._query(inst, "objects", "transmission_status", purpose="admin")
        for to_service, to_broker, status, n in stuck:
            if status:
                out.append(("warn", label, f"{n} message(s) to {to_service} ({to_broker}) "
                                           f"stuck in sys.transmission_queue: {status}"))
    return out


def _impersonation_lines(s: ServerSession, inst, label: str) -> list[tuple]:
    """Activation runs its procedures EXECUTE AS OWNER, which fails (with a line in the
    ERRORLOG only) when the database owner cannot be impersonated, e.g. a login the server
    cannot resolve although sys.databases names one: EXECUTE AS USER = 'dbo'; REVERT; tells."""
    err = s._scalar(inst, "objects", "impersonate_owner", purpose="admin")
    if not err:
        return []
    return [("fail", label, f"EXECUTE AS USER = 'dbo' fails here ({err}): the activation "
                            "procedures (EXECUTE AS OWNER) would fail too, saying so only in the "
                            f"ERRORLOG; run ALTER AUTHORIZATION ON DATABASE::[{inst.database}] TO "
                            "a login this server has")]


def _permission_lines(s: ServerSession, inst, label: str, missing_dbs: list[str]) -> list[tuple]:
    """One line per permission a step needs on this instance (CONTROL SERVER covers all)."""
    topo = s.topology
    cols = ("control_server", "view_server_state", "create_endpoint", "alter_any_login",
            "create_any_database", "control_master", "create_route_msdb")
    perms = dict(zip(cols, (bool(x) for x in s._query(inst, "server", "permissions",
                                                      database="master", purpose="admin")[0])))
    need = [("view_server_state", "VIEW SERVER STATE", "the collectors read DMVs")]
    if missing_dbs and topo.broker.create_databases:
        need.append(("create_any_database", "CREATE ANY DATABASE",
                     f"provision creates {', '.join(missing_dbs)}"))
    if topo.layout == "distributed":
        need += [("create_endpoint", "CREATE ENDPOINT", "provision creates the Service Broker "
                                                        "endpoint"),
                 ("alter_any_login", "ALTER ANY LOGIN", "provision creates a login per peer "
                                                        "instance"),
                 ("control_master", "CONTROL on master", "provision creates the master key, the "
                                                         "transport certificate and peer users "
                                                         "there"),
                 ("create_route_msdb", "CREATE ROUTE in msdb", "provision creates local delivery "
                                                               "routes there")]
    out = []
    for col, perm, why in need:
        good = perms[col] or perms["control_server"]
        out.append(("ok" if good else "fail", label,
                    f"{perm} ({why})" if good else f"{perm} missing: {why}"))
    return out


def _endpoint_lines(s: ServerSession, inst, label: str) -> list[tuple]:
    """The Service Broker endpoint: absent, ssbench's, or another one; its state."""
    from .provision import broker_endpoint, endpoint_problems  # noqa: PLC0415

    row, owned = broker_endpoint(s, inst)
    if row is None:
        return [("warn", label, "no Service Broker endpoint yet (provision creates "
                                f"[{s.topology.broker.endpoint_name}] on port {inst.broker_port})")]
    out = [("fail", label, p) for p in endpoint_problems(s, inst, row, owned)]
    if not out:
        out.append(("ok", label, f"endpoint [{row[0]}] {'(ssbench) ' if owned else ''}port "
                                 f"{row[1]} {row[2]}, authentication {row[3]}, certificate {row[5]}"))
    return out


def smoke(s: "MssqlTarget", messages: int = 10, usable: int = 2, every_n: int = 1, timeout: float = 60.0,
          profile: str | None = None) -> Counts:
    """Prepare, create dialogs, warm up, send ``messages`` per initiator through real
    senders, drain; raises TargetError unless every message arrived."""
    from .sender import MssqlSender

    prof = s.topology.profile(profile)
    n = len(prof.initiators)
    s.prepare(n, prof.name, BrokerSettings(max_queue_readers=2, receive_top=1000,
                                           waitfor_timeout_ms=1000))
    for i in range(1, n + 1):
        s.create_dialogs(i, usable, every_n)
        s.warm_up(i)
    for i in range(1, n + 1):
        sender = MssqlSender(s.sender_spec(i))
        try:
            handles = [sender.dialog(k) for k in range(1, usable + 1)]
            for m in range(messages):
                sender.send(handles[m % usable], bytes(100))
        finally:
            sender.close()
    c = s.drain(timeout)
    if c.sent != n * messages or c.received != c.sent or c.in_flight:
        detail = [f"i{x.initiator}: sent {x.sent}, received {x.received}, xmitq {x.xmitq}"
                  for x in c.initiators]
        target, inits = s._active()
        stuck = [f"{inst.name}: {row[2]}" for inst in [target, *inits]
                 for row in s._query(inst, "objects", "transmission_status", purpose="admin") if row[2]]
        raise TargetError("smoke test failed: " + "; ".join(detail)
                          + f"; target queue {c.target_queue}, errors {c.poison}"
                          + (f"; transmission_status: {' | '.join(stuck)}" if stuck else ""))
    return c


