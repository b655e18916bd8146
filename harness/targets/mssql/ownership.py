"""What provisioning owns in a database, and what it refuses to take over.

``dbo.ssbench_owned`` records what ssbench created; teardown drops that and nothing else.
Provision refuses an existing queue, service, procedure or table it did not create, and a
message type or contract unlike its own (:func:`refuse_unusable`).
"""

from __future__ import annotations

from ...errors import TargetError
from .session import ServerSession
from .topology import Instance

#: Objects provisioning creates under the paper's or configured names, by class. ssbench
#: refuses to take over an existing one of the STRICT classes (it empties, alters or replaces
#: them); an existing message type or contract is used as it is and left in place.
STRICT = ("QUEUE", "SERVICE", "PROCEDURE", "TABLE")
ROLE_TABLES = {"target": ("messageDrop", "receiveTally", "messageErrors"), "initiator": ("dialogs",)}
#: ssbench_owned's record of a database master key ssbench created
MASTER_KEY = ("MASTER KEY", "##MS_DatabaseMasterKey##")

State = dict[tuple[str, str], tuple[bool, bool]]


def ownership(s: ServerSession, inst: Instance) -> State:
    """(class, name) -> (present, recorded as ssbench's) for the named objects of ``inst``."""
    b = s.topology.broker
    rows = s._query(inst, "objects", "ownership",
                    [b.message_type, b.contract, b.queue, b.service, b.activation_procedure],
                    purpose="admin")
    return {(str(r[0]), str(r[1])): (bool(r[2]), bool(r[3])) for r in rows}


def owned_state(s: ServerSession, inst: Instance) -> State:
    """Create dbo.ssbench_owned if needed and return :func:`ownership`. A database an ssbench
    from before ownership records provisioned (dbo.ssbench_config, no dbo.ssbench_owned) has
    its objects recorded as ssbench's."""
    fresh = bool(s._scalar(inst, "objects", "owned_table", purpose="admin"))
    state = ownership(s, inst)
    if fresh and state.get(("TABLE", "ssbench_config"), (False, False))[0]:
        for key, (present, _) in state.items():
            if present:
                record(s, inst, *key)
        state = ownership(s, inst)
    return state


def owned(s: ServerSession, inst: Instance) -> set[tuple[str, str]]:
    """Everything dbo.ssbench_owned records (empty when provisioning never ran here)."""
    return {(str(c), str(n)) for c, n in s._query(inst, "objects", "owned_list", purpose="admin")}


def record(s: ServerSession, inst: Instance, cls: str, name: str) -> None:
    s._query(inst, "objects", "owned_record", (cls, name, cls, name), purpose="admin")


def wanted(s: ServerSession, role: str) -> set[tuple[str, str]]:
    b = s.topology.broker
    out = {("MESSAGE TYPE", b.message_type), ("CONTRACT", b.contract), ("QUEUE", b.queue),
           ("SERVICE", b.service)} | {("TABLE", t) for t in ROLE_TABLES[role]}
    if role == "target":
        out.add(("PROCEDURE", b.activation_procedure))
    return out


def refuse_foreign(s: ServerSession, inst: Instance, role: str, state: State) -> None:
    """Existing queues, services, the activation procedure and the paper's tables that ssbench
    did not create are not taken over (it would empty, alter or replace them)."""
    foreign = sorted(k for k in wanted(s, role)
                     if k[0] in STRICT and state.get(k, (False, False)) == (True, False))
    if foreign:
        what = ", ".join(f"{c.lower()} {n}" for c, n in foreign)
        raise TargetError(
            f"{inst.where()}: {what} already exist(s) and ssbench did not create them (it would "
            "empty, alter or replace them): drop or rename them, or give ssbench other names "
            "under broker: in the topology")


def refuse_unusable(s: ServerSession, inst: Instance) -> None:
    """An existing message type must validate nothing and an existing contract must carry it
    SENT BY ANY, as ssbench creates them (objects.sql contract_check): with VALIDATION =
    WELL_FORMED_XML the target discards every binary message ssbench sends and answers with
    an Error. One line naming what differs."""
    b = s.topology.broker
    rows = s._query(inst, "objects", "contract_check",
                    [b.contract, b.contract, b.contract, b.message_type], purpose="admin")
    validation, contract, by_initiator, by_target = rows[0] if rows else (None, 0, None, None)
    problems = []
    if validation is not None and str(validation).upper() != "NONE":
        problems.append(f"message type {b.message_type} exists with VALIDATION = {validation} "
                        "(ssbench's bodies are binary: it needs VALIDATION = NONE)")
    if contract and not (by_initiator and by_target):
        problems.append(f"contract {b.contract} exists but does not carry {b.message_type} SENT "
                        "BY ANY")
    if problems:
        raise TargetError(f"{inst.where()}: " + "; ".join(problems) + ": ssbench uses an existing "
                          "message type and contract as they are; fix or drop them, or give "
                          "ssbench other names under broker: in the topology")
