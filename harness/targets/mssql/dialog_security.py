"""Dialog security and the certificates provisioning exchanges.

Each database's dbo owns a certificate; each side installs the other's public part for a user
without login. ``broker.dialog_encryption: true`` adds a remote service binding (full dialog
security); ``false`` has none, and public gets SEND. :func:`usable_master_key` recreates a master
key ssbench created that this instance cannot open; another is refused.
"""

from __future__ import annotations

import datetime as dt
import logging

from ...errors import TargetError
from . import db_options, exclusive, ownership
from .session import ServerSession, random_password
from .topology import Instance

log = logging.getLogger(__name__)

Pair = tuple[Instance, Instance, int]


def cert_dates(s: ServerSession) -> dict[str, dt.date]:
    today = dt.datetime.now(dt.timezone.utc).date()
    # a day back, so a peer whose clock runs behind does not see a not-yet-valid certificate
    years = s.topology.broker.certificate_years
    try:
        expiry = today.replace(year=today.year + years)
    except ValueError:  # 29 February
        expiry = today.replace(year=today.year + years, day=28)
    return {"start_date": today - dt.timedelta(days=1), "expiry_date": expiry}


def usable_master_key(s: ServerSession, inst: Instance, cert: str) -> None:
    """A user database's master key must be one this instance can open (see the module)."""
    opts = db_options.current(s, inst)
    if not opts["master_key"] or opts["master_key_by_server"]:
        return
    if ownership.MASTER_KEY not in ownership.owned(s, inst) and not exclusive.created(s, inst):
        raise TargetError(
            f"{inst.where()}: the database master key is not encrypted by this instance's service "
            "master key (is_master_key_encrypted_by_server = 0: restored or attached from another "
            "instance?) and ssbench did not create it: OPEN MASTER KEY with its password and ALTER "
            "MASTER KEY ADD ENCRYPTION BY SERVICE MASTER KEY, then run provision again")
    log.warning("%s: ssbench's master key cannot be opened on this instance (restored or attached "
                "from another one?): creating it and certificate %s again", inst.where(), cert)
    s._run(inst, "server", "drop_certificate", {"certificate": cert}, database=inst.database)
    s._run(inst, "server", "master_key_drop", database=inst.database)


def competing_certificates(s: ServerSession, inst: Instance) -> list[str]:
    """A certificate dbo owns that Service Broker would sign this database's dialogs with
    instead of ssbench's (the owner's valid, active certificate that expires last: "Certificates
    for Dialog Security"): the peers have only ssbench's, so its dialogs would fail. One line each."""
    cert, expiry = dialog_cert(inst), cert_dates(s)["expiry_date"]
    rows = s._query(inst, "objects", "dialog_certificates", [cert, cert, expiry], purpose="admin")
    return [f"{inst.where()}: certificate [{name}] owned by dbo expires {str(until)[:10]}, no earlier than "
            f"ssbench's [{cert}]: Service Broker signs the dialogs of dbo's services with dbo's valid "
            "certificate that expires last, and the peers do not have that one; set ACTIVE FOR "
            f"BEGIN_DIALOG = OFF on it (ALTER CERTIFICATE [{name}]), or broker.certificate_years beyond it"
            for name, until in rows]


def own_certificate(s: ServerSession, inst: Instance, cert: str, subject: str,
                    database: str) -> tuple[bytes, bytes]:
    """ssbench's certificate in ``database`` (master: transport security; the instance's own
    database: dialog security), with a master key; returns its public part and thumbprint."""
    if database == inst.database:
        usable_master_key(s, inst, cert)
    created = s._scalar(inst, "server", "master_key", params={"password": random_password()},
                        database=database, purpose="admin")
    if created and database == inst.database:
        ownership.record(s, inst, *ownership.MASTER_KEY)
    s._run(inst, "server", "own_certificate",
           {"certificate": cert, "subject": subject, **cert_dates(s)}, database=database)
    rows = s._query(inst, "server", "certificate_public", [cert], database=database,
                    purpose="admin")
    if not rows or rows[0][0] is None:
        raise TargetError(f"{inst.where()}: certificate {cert} has no public key")
    return bytes(rows[0][0]), bytes(rows[0][1])


def install_peer_certificate(s: ServerSession, inst: Instance, database: str, cert: str, user: str,
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


def binding_name(target: Instance) -> str:
    return f"ssbench_rsb_{target.name}"


def dialog_security(s: ServerSession, pairs: list[Pair]) -> None:
    """Certificates and users on both sides; the remote service binding (encryption on) or
    SEND for public (encryption off): see the module."""
    publics: dict[str, tuple[bytes, bytes]] = {}
    insts = {i.name: i for pair in pairs for i in pair[:2]}
    for inst in insts.values():
        publics[inst.name] = own_certificate(
            s, inst, dialog_cert(inst), f"ssbench dialog security {inst.name}"[:64], inst.database)
    encrypted = s.topology.broker.dialog_encryption
    for t, i, _ in pairs:
        names = s._names()
        # target: the initiator's service owner, allowed to connect and send
        tu = peer_user(i.name)
        s._run(t, "objects", "proxy_user", {"user": tu})
        install_peer_certificate(s, t, t.database, dialog_cert(i), tu, publics[i.name])
        s._run(t, "objects", "grant_send", {**names, "user": tu})
        # initiator: the target's service owner, named by the remote service binding
        iu = peer_user(t.name)
        s._run(i, "objects", "proxy_user", {"user": iu})
        install_peer_certificate(s, i, i.database, dialog_cert(t), iu, publics[t.name])
        if encrypted:
            s._run(i, "objects", "remote_service_binding",
                   {**names, "binding": binding_name(t), "user": iu})
        else:
            s._run(i, "teardown", "binding_drop", {"binding": binding_name(t)})
        # messages the target sends back (EndDialog, Error) arrive as that user
        s._run(i, "objects", "grant_send", {**names, "user": iu})
        for inst in (t, i):
            s._run(inst, "objects", "revoke_send_public" if encrypted else "grant_send_public", names)
