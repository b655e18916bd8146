"""Where Service Broker runs differently: Azure SQL, Managed Instance, availability groups.

What cannot work is refused with one line before anything changes: Azure SQL Database has no
Service Broker; Managed Instance has no remote service binding and routes only through a Server
Trust Group (``layout: single``, no dialog security); in an availability group message delivery
and the broker identifier cannot change (docs/sqlserver.md, "Managed Instance and availability
groups").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .session import ServerSession
    from .topology import Instance

AZURE_SQL_DATABASE, MANAGED_INSTANCE = 5, 8


def server_refusals(s: "ServerSession", inst: "Instance") -> list[str]:
    """What this SQL Server cannot do for the topology, one line each (empty: nothing)."""
    row = s._server_info(inst)
    edition = int(row[5]) if len(row) > 5 and row[5] is not None else None
    if edition == AZURE_SQL_DATABASE:
        return [f"{inst.server} is Azure SQL Database, which has no Service Broker: use SQL Server or "
                "Azure SQL Managed Instance"]
    if edition != MANAGED_INSTANCE:
        return []
    out = []
    if s.topology.layout == "distributed":
        out.append(f"{inst.server} is Azure SQL Managed Instance: messages between instances go through a "
                   "Server Trust Group (trust scope ServiceBroker) with routes to port 4022, not ssbench's "
                   "endpoint and transport certificates: use layout: single")
    if s.topology.broker.dialog_encryption:
        out.append(f"{inst.server} is Azure SQL Managed Instance, which does not support CREATE REMOTE "
                   "SERVICE BINDING (no dialog security): set broker.dialog_encryption: false")
    return out


def availability_group_refusal(s: "ServerSession", inst: "Instance", what: str) -> str | None:
    """Why ``what`` (SET ENABLE_BROKER, NEW_BROKER, ...) cannot run on this database: it is in an
    availability group (None: it is not)."""
    info = s._database_info(inst)
    if not (info and len(info) > 9 and info[9]):
        return None
    return (f"{inst.where()}: the database is in an availability group, where {what} cannot run: set it "
            "before adding the database to the group (or remove it), or use another database")
