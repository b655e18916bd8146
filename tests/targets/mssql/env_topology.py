"""A single-instance topology from ``<prefix>*`` environment variables, for the integration
tests (docs/sqlserver.md, "Integration tests"): written as a topology file and read by
:func:`~harness.targets.mssql.topology.load_topology`, so its values are checked as a user's."""

from __future__ import annotations

import json
import os
from pathlib import Path

from harness.errors import UserError
from harness.targets.mssql.topology import Topology, load_topology


def env_topology(directory: Path, prefix: str = "SSBENCH_MSSQL_", initiators: int = 1,
                 database_prefix: str | None = None) -> Topology:
    """``<prefix>HOST`` (required; ``HOST\\INSTANCE`` for a named instance), ``PORT``, ``USER``
    (unset: integrated authentication), ``PASSWORD`` (named, never copied), ``DRIVER``
    (``FreeTDS`` selects FreeTDS), ``TRUST_CERT`` (1/yes), ``ENCRYPT``, ``DATABASE_PREFIX``."""
    env = os.environ
    if not env.get(prefix + "HOST"):
        raise UserError(f"{prefix}HOST is not set")
    user = env.get(prefix + "USER")
    name = env.get(prefix + "DRIVER") or "ODBC Driver 18 for SQL Server"
    driver = {"kind": "freetds", "name": name} if "freetds" in name.lower() else {
        "kind": "msodbc", "name": name, "encrypt": (env.get(prefix + "ENCRYPT") or "mandatory").lower(),
        "trust_server_certificate": (env.get(prefix + "TRUST_CERT") or "").lower() in ("1", "yes", "true", "on")}
    dbp = database_prefix or env.get(prefix + "DATABASE_PREFIX") or "ssbench_"
    names = [f"init{i}" for i in range(1, initiators + 1)]
    server = {"host": env[prefix + "HOST"]}
    if env.get(prefix + "PORT"):
        server["port"] = int(env[prefix + "PORT"])
    doc = {"name": "env", "description": f"from {prefix}* environment variables", "layout": "single",
           "driver": driver, "auth": {"kind": "sql", "user": user, "password_env": prefix + "PASSWORD"} if user
           else {"kind": "integrated"},
           "instances": {n: {**server, "database": f"{dbp}{n}"} for n in ("target", *names)},
           "target": "target", "initiators": names}
    path = Path(directory) / "env-topology.yaml"
    path.write_text(json.dumps(doc, indent=1))     # JSON is YAML
    return load_topology(path)
