"""The load's login (``sender_auth``): what it needs in each initiator database, and a check.

Provision grants it what its calls need (a user for an existing SQL login, recorded for
teardown; a missing login is refused; for an integrated login the exact script is printed).
``ssbench mssql check`` runs its calls as it in a rolled-back transaction, so a missing grant
shows there, not mid-run.
"""

from __future__ import annotations

import logging

from . import driver, ownership, tsql
from .session import ServerSession
from .topology import Instance

log = logging.getLogger(__name__)

#: ssbench_owned's class for the sender's user ssbench created
USER = "USER"


def separate(inst: Instance) -> bool:
    """The load connects with a login of its own (not the admin login, which owns everything)."""
    return inst.sender_auth != inst.auth


def script(s: ServerSession, inst: Instance, user: str) -> str:
    """The grants, as the DBA would run them in the initiator database."""
    return " ".join(tsql.batches("initiator", "sender_grants", s._names(user=user)))


def refusal(s: ServerSession, inst: Instance) -> str | None:
    """Why provision cannot grant the sender what it needs (before it changes anything)."""
    auth = inst.sender_auth
    if not separate(inst) or auth.kind != "sql":
        return None
    try:
        tsql.validate_name(auth.user, "sender_auth.user")
    except ValueError as e:
        return f"{inst.where()}: {e}: grant by hand, for its user: {script(s, inst, 'SENDER_USER')}"
    if not s._scalar(inst, "server", "login_exists", [auth.user], database="master", purpose="admin"):
        return (f"{inst.where()}: the sender login {auth.user} (sender_auth) does not exist on "
                f"{inst.server}: create it (CREATE LOGIN), then run provision again")
    return None


def grant(s: ServerSession, inst: Instance) -> None:
    """The sender's user and grants in an initiator database (see the module)."""
    if not separate(inst):
        return
    if inst.sender_auth.kind != "sql":
        log.warning("%s: the sender connects with integrated authentication: ssbench cannot name its "
                    "Windows principal; in database %s run, for its user: %s", inst.where(), inst.database,
                    script(s, inst, "DOMAIN_USER").replace("[DOMAIN_USER]", "[<DOMAIN\\user>]"))
        return
    login = inst.sender_auth.user or ""
    user = s._scalar(inst, "initiator", "sender_user_of", [login], purpose="admin")
    if user is None:
        user = login
        s._run(inst, "initiator", "sender_user", {"user": user, "login": login})
        ownership.record(s, inst, USER, user)
    s._run(inst, "initiator", "sender_grants", s._names(user=str(user)))


def drop(s: ServerSession, inst: Instance, owned: set[tuple[str, str]]) -> None:
    """teardown: the sender's users ssbench created in this database."""
    for cls, name in sorted(owned):
        if cls == USER:
            s._run(inst, "initiator", "sender_user_drop", {"user": name})


def check_lines(s: ServerSession, inst: Instance, label: str, dialog_lifetime: bool = True) -> list[tuple]:
    """Connect as the sender and run its calls in a transaction rolled back: one line."""
    who = inst.sender_auth.describe()
    spec = driver.spec_for(inst, s.topology.driver, sender=True, label=f"{inst.name} as the sender")
    try:
        conn = spec.connect(autocommit=True)
    except driver.OdbcError as e:
        return [("fail", label, f"the sender ({who}) cannot connect: {e}")]
    try:
        err, reader = conn.execute(tsql.statement("initiator", "check_sender"), what="check as the sender")[0]
    except driver.OdbcError as e:
        err, reader = str(e), 1
    finally:
        conn.close()
    if err:
        return [("fail", label, f"the sender ({who}) cannot SEND: {err} (provision grants what it needs)")]
    if not reader and dialog_lifetime:
        return [("warn", label, f"the sender ({who}) may not EXECUTE dbo.ssbench_initiator_reader_on: "
                                "a finite messages_per_dialog would fail")]
    return [("ok", label, f"the sender ({who}) SENDs (checked in a transaction rolled back)")]
