"""The SQL Server target: the SQLCAT whitepaper's Service Broker topology on real SQL Server.

* :mod:`.topology`: the topology YAML file (instances, layout, server profiles, driver), validated
  with file/line/field errors.
* :mod:`.tsql`: identifier validation and quoting, and the renderer for the T-SQL templates
  under ``workloads/mssql/`` (no value ever reaches T-SQL unquoted or unvalidated).
* :mod:`.driver`: pyodbc connections (ODBC Driver 18 for SQL Server or FreeTDS): connection
  strings, explicit autocommit, login and per-call query timeouts, calls from any thread and
  clean error messages. pyodbc is imported lazily so the rest of ssbench works without unixODBC.
* :mod:`.session`: the connection pool and the state every concern shares.
* :mod:`.provision`: provisioning and teardown, with :mod:`.ownership` (what ssbench created,
  what it refuses to take over), :mod:`.dialog_security` (certificates, master keys, the remote
  service binding or none) and :mod:`.db_options` (the database options ssbench changes,
  recorded first and put back), :mod:`.exclusive` (what ssbench does to a database it did not
  create: nothing that reaches another session), :mod:`.platforms` (Managed Instance, Azure SQL
  Database, availability groups) and :mod:`.sender_login` (the load's login: its grants, a check
  connected as it). :mod:`.telemetry`: the DMV collectors. :mod:`.check`: the preflight check
  and the smoke test.
* :mod:`.target`: :class:`~.target.MssqlTarget`, the run-time Target (the paper's flow,
  accounting), delegating to the modules above.
* :mod:`.sender`: :class:`~.sender.MssqlSender`, one connection per Locust user.

See ``docs/sqlserver.md``.
"""
