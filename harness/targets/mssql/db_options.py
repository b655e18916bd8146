"""The database options ssbench changes: recorded before the first change, put back after.

DELAYED_DURABILITY, HONOR_BROKER_PRIORITY and message delivery; each one's value before
ssbench first changed it is kept in ``dbo.ssbench_config`` (recorded once, so a rerun never
records ssbench's own value). :func:`restore` puts the first two back after every run and at
teardown; :func:`broker_changes` says what teardown must undo (a new broker GUID cannot be).
"""

from __future__ import annotations

import logging

from .session import ServerSession
from .topology import Instance

log = logging.getLogger(__name__)

#: ssbench_config names of the recorded values
DURABILITY, HONOR = "original.delayed_durability", "original.honor_broker_priority"
BROKER_ENABLED, BROKER_GUID = "original.broker_enabled", "original.broker_guid"


def current(s: ServerSession, inst: Instance) -> dict[str, object]:
    """The database's options now (objects.sql database_options), and its master key's state."""
    rows = s._query(inst, "objects", "database_options", purpose="admin")
    dd, honor, enabled, guid, key, by_server = rows[0]
    return {DURABILITY: str(dd).upper(), HONOR: int(honor or 0), BROKER_ENABLED: int(enabled or 0),
            BROKER_GUID: str(guid).lower(), "master_key": int(key or 0),
            "master_key_by_server": int(by_server or 0)}


def remember(s: ServerSession, inst: Instance, before: dict[str, object] | None = None) -> None:
    """Record the options as they are now (``before``: values read before provision changed
    the broker's) unless a value is recorded already. Needs dbo.ssbench_config."""
    values = {**current(s, inst), **(before or {})}
    for name in (DURABILITY, HONOR, BROKER_ENABLED, BROKER_GUID):
        s._query(inst, "objects", "config_keep", (name, str(values[name]), name), purpose="admin")


def recorded(s: ServerSession, inst: Instance) -> dict[str, str]:
    return {str(n): str(v) for n, v in s._query(inst, "objects", "config_list", purpose="admin")
            if str(n).startswith("original.")}


def restore(s: ServerSession, inst: Instance) -> list[str]:
    """DELAYED_DURABILITY and HONOR_BROKER_PRIORITY back to their recorded values (each only
    when it differs); returns what was changed, for the log."""
    rec, cur = recorded(s, inst), current(s, inst)
    done = []
    dd = rec.get(DURABILITY)
    if dd and dd.upper() != cur[DURABILITY]:
        s._run(inst, "server", "delayed_durability",
               {"database": inst.database, "delayed_durability": dd.upper()}, database="master")
        done.append(f"DELAYED_DURABILITY = {dd.upper()}")
    honor = rec.get(HONOR)
    if honor in ("0", "1") and int(honor) != cur[HONOR]:
        s._run(inst, "objects", "honor_priority",
               {"database": inst.database, "honor": int(honor), "honor_kw": "ON" if honor == "1" else "OFF"})
        done.append(f"HONOR_BROKER_PRIORITY {'ON' if honor == '1' else 'OFF'}")
    if done:
        log.info("%s: restored %s", inst.where(), ", ".join(done))
    return done


def broker_changes(s: ServerSession, inst: Instance) -> tuple[bool, list[str]]:
    """At teardown: (turn message delivery off again, lines for what cannot be given back)."""
    rec, cur = recorded(s, inst), current(s, inst)
    kept = []
    guid = rec.get(BROKER_GUID)
    if guid and guid.lower() != cur[BROKER_GUID]:
        kept.append(f"{inst.where()}: broker GUID {cur[BROKER_GUID]} (NEW_BROKER replaced {guid.lower()}; "
                    "a broker identifier cannot be given back)")
    return rec.get(BROKER_ENABLED) == "0" and cur[BROKER_ENABLED] == 1, kept
