"""What ssbench does to a database it did not create: nothing that reaches another session.

NEW_BROKER ends every conversation in the database and changes its broker GUID; ENABLE_BROKER
and DISABLE_BROKER need an exclusive lock. On a database ssbench created they run; on any other
NEW_BROKER is refused, and the other two wait without a termination clause, cancelled after
:data:`EXCLUSIVE_WAIT_SECONDS` with a one-line refusal (docs/sqlserver.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...errors import TargetError
from . import driver, ownership, platforms

if TYPE_CHECKING:
    from .session import ServerSession
    from .topology import Instance

#: how long ENABLE_BROKER / DISABLE_BROKER wait for a database ssbench did not create
EXCLUSIVE_WAIT_SECONDS = 30.0


def created(s: "ServerSession", inst: "Instance") -> bool:
    """ssbench created this database: its dbo.ssbench_owned records it (cached per instance;
    provision marks the databases it creates as it creates them)."""
    mine: dict[str, bool] = s.__dict__.setdefault("_created_dbs", {})
    if inst.name not in mine:
        mine[inst.name] = any(c == "DATABASE" and n.lower() == inst.database.lower()
                              for c, n in ownership.owned(s, inst))
    return mine[inst.name]


def mark_created(s: "ServerSession", inst: "Instance") -> None:
    s.__dict__.setdefault("_created_dbs", {})[inst.name] = True


def new_broker_refusal(s: "ServerSession", inst: "Instance", why: str) -> str | None:
    """Why ssbench will not give this database a new broker GUID (None: it may)."""
    refusal = platforms.availability_group_refusal(s, inst, f"SET NEW_BROKER ({why})")
    if refusal or created(s, inst):
        return refusal
    return (f"{inst.where()}: {why} would run ALTER DATABASE [{inst.database}] SET NEW_BROKER, which "
            "ends every conversation in the database (not only ssbench's) and gives it a new broker "
            "GUID that the routes naming it must be re-created with; ssbench did not create this "
            "database, so it does not")


def new_broker(s: "ServerSession", inst: "Instance", why: str) -> None:
    """SET NEW_BROKER WITH ROLLBACK IMMEDIATE on a database ssbench created; refused otherwise."""
    refusal = new_broker_refusal(s, inst, why)
    if refusal:
        raise TargetError(refusal)
    s._pool.discard(inst.server_key, inst.database)
    s._run(inst, "server", "new_broker", {"database": inst.database}, database="master")
    s._broker_guid(inst, refresh=True)


def set_broker(s: "ServerSession", inst: "Instance", enable: bool) -> None:
    """ENABLE_BROKER or DISABLE_BROKER: with ROLLBACK IMMEDIATE on a database ssbench created;
    on another, waiting for the other sessions up to EXCLUSIVE_WAIT_SECONDS, then refused."""
    option = "ENABLE_BROKER" if enable else "DISABLE_BROKER"
    refusal = platforms.availability_group_refusal(s, inst, f"SET {option}")
    if refusal:
        raise TargetError(refusal)
    section = "enable_broker" if enable else "disable_broker"
    s._pool.discard(inst.server_key, inst.database)
    params = {"database": inst.database}
    if created(s, inst):
        s._run(inst, "server", section, params, database="master")
        return
    try:
        s._run(inst, "server", section + "_wait", params, database="master",
               timeout=EXCLUSIVE_WAIT_SECONDS)
    except driver.QueryTimeoutError:
        raise TargetError(
            f"{inst.where()}: SET {option} needs the database to itself and other sessions kept it "
            f"for {EXCLUSIVE_WAIT_SECONDS:g} s; ssbench rolls back nobody's transaction in a database "
            f"it did not create: run it again when the database is quiet, or run ALTER DATABASE "
            f"[{inst.database}] SET {option} yourself") from None
