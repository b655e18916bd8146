"""The SQL Server target: the SQLCAT whitepaper's Service Broker topology on real SQL Server.

:mod:`.topology`, :mod:`.tsql` (validated, quoted templates), :mod:`.driver` (pyodbc, lazily),
:mod:`.session`, :mod:`.provision` and its parts, :mod:`.telemetry` (DMVs), :mod:`.check`,
:mod:`.target` and :mod:`.sender`. See docs/sqlserver.md.
"""
