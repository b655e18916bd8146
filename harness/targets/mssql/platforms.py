"""Where Service Broker runs differently: Azure SQL Database, Azure SQL Managed Instance and
databases in an Always On availability group. What cannot work is refused with one line before
anything changes (docs/sqlserver.md, "Managed Instance and availability groups").

* Azure SQL Database (``SERVERPROPERTY('EngineEdition')`` 5) has no Service Broker.
* Managed Instance (8): ``CREATE REMOTE SERVICE BINDING`` is not supported (no dialog security:
  ``broker.dialog_encryption: false``), and messages between instances go through a Server
  Trust Group with routes to port 4022, not ssbench's endpoint and transport certificates (only
  ``layout: single``). Service Broker is always on there (ENABLE_BROKER is not supported, and
  ssbench only runs it when delivery is off).
* A database in an availability group (``sys.databases.replica_id``): message delivery cannot be
  turned on or off, nor the broker identifier renewed, once it is in the group.
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


def in_availability_group(s: "ServerSession", inst: "Instance") -> bool:
    info = s._database_info(inst)
    return bool(info and len(info) > 9 and info[9])


def availability_group_refusal(s: "ServerSession", inst: "Instance", what: str) -> str | None:
    """Why ``what`` (SET ENABLE_BROKER, NEW_BROKER, ...) cannot run on this database: it is in an
    availability group (None: it is not)."""
    if not in_availability_group(s, inst):
        return None
    return (f"{inst.where()}: the database is in an availability group, where {what} cannot run: set it "
            "before adding the database to the group (or remove it), or use another database")


__all__ = ["AZURE_SQL_DATABASE", "MANAGED_INSTANCE", "server_refusals", "in_availability_group",
           "availability_group_refusal"]
