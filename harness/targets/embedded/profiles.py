"""Server profiles of the embedded target (the matrix's ``server`` axis).

Each profile is a set of PostgreSQL settings applied to the emulation's databases
(``ALTER DATABASE ... SET``), so one cluster serves both. A matrix may map its own server
names to these (``embedded_profiles:`` in the matrix file).
"""

EMBEDDED_PROFILES: dict[str, dict[str, str]] = {
    # Every commit waits for its WAL flush: SQL Server's default (full durability).
    "durable": {"synchronous_commit": "on"},
    # Commits return before the WAL flush: the analogue of SQL Server's DELAYED_DURABILITY = FORCED.
    "delayed": {"synchronous_commit": "off"},
}
