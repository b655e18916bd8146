"""Every environment variable ssbench reads, declared once: its name, what it does, its default.

Precedence, later wins: built-in defaults, the matrix, the target's file, environment
variables, command-line flags. Each command resolves them once, before anything starts; Locust
processes get settings through the swarm protocol, never from here. Code reads a variable with
:func:`get` or :func:`flag` and a constant of this module, so docs/environment.md (checked
against :data:`VARIABLES` by a test) lists them all.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Variable:
    name: str
    doc: str
    default: str | None = None
    secret: bool = False          # never echoed, logged or written into a result


VARIABLES: dict[str, Variable] = {v.name: v for v in (
    Variable("SSBENCH_HOME", "the checkout whose workloads/ ssbench reads (the gate's baseline side sets it)"),
    Variable("SSBENCH_RESULTS", "the results root (default: <checkout>/results; --results overrides)"),
    Variable("SSBENCH_CACHE", "ssbench's cache directory (default: $XDG_CACHE_HOME/ssbench or ~/.cache/ssbench)"),
    Variable("SSBENCH_PGDATA", "the embedded PostgreSQL server's data directory (default: <cache>/pg<major>; "
                               "/var/tmp/ssbench/pg<major> as root)"),
    Variable("SSBENCH_SEND_MODE", "the SEND path, overriding the matrix's run.send_mode: auto or thread", "auto"),
    Variable("SSBENCH_EMBEDDED_SEND_DELAY_MS", "a server-side delay in each embedded SEND, in ms (to build a "
                                               "slow-SEND case; recorded in run.json)"),
    Variable("SSBENCH_EMBEDDED_LOCK_SAMPLE_MS", "diagnostic: sample the embedded server's blocking chains every "
                                               "this many ms (locks in samples.jsonl; the broker's --lock-sample-ms)"),
    Variable("SSBENCH_WORKER_TOKEN", "the run's token every Locust worker proves (HMAC; never on a command line)",
             secret=True),
    Variable("SSBENCH_CONTROL", "set by ssbench for its Locust master: the controller's loopback address",
             secret=True),
    Variable("SSBENCH_WEB_USER", "the web UI's login user name"),
    Variable("SSBENCH_WEB_PASSWORD", "the web UI's login password", secret=True),
    Variable("SSBENCH_WEB_CREDENTIALS_FILE", "a file of mode 0600 holding USER:PASSWORD for the web UI's login"),
    Variable("SSBENCH_WEB_LOGIN", "set by ssbench web for its master: the user name and a password hash",
             secret=True),
    Variable("SSBENCH_WEB_SESSION_MINUTES", "set by ssbench web for its master: how long a login lasts", "480"),
    Variable("SSBENCH_METRICS_PORT", "serve the live metrics endpoint on this port (run, bench, saturate, web; "
                                     "0: any free port; --metrics-port overrides; docs/monitoring.md)"),
    Variable("SSBENCH_METRICS_HOST", "the live metrics endpoint's address (--metrics-host overrides)", "127.0.0.1"),
    Variable("SSBENCH_SPARK_DRIVER_MEMORY", "the Spark driver's memory for the analysis", "2g"),
    Variable("SSBENCH_SPARK_JAVA_OPTS", "the analysis JVM's options (replaces ssbench's own)"),
    Variable("SSBENCH_SPARK_CDS", "0: no class-data-sharing archive for the analysis JVM", "1"),
    Variable("SSBENCH_SPARK_CODEGEN", "1: Spark generates code for a local analysis of small inputs too "
                                      "(by default their expressions are interpreted)", "0"),
    Variable("SSBENCH_PLOT_HELPER", "0: draw the report's plots in the analysis process itself (by default a "
                                    "helper process draws some of them when a CPU is idle)", "1"),
    Variable("SSBENCH_MSSQL_HOST", "the SQL Server integration tests' server (and _PORT, _USER, _PASSWORD, "
                                   "_DRIVER, _TRUST_CERT); a topology names its own password variables"),
)}

OFF = ("0", "false", "no", "off")


def get(name: str, env=None) -> str | None:
    """The value of declared variable ``name`` (its default when unset or empty)."""
    var = VARIABLES[name]          # KeyError: a variable nobody declared
    value = (os.environ if env is None else env).get(name)
    return value if value else var.default


def flag(name: str, env=None) -> bool:
    """A declared on/off variable: anything but 0/false/no/off (or empty) is on."""
    return (get(name, env) or "").strip().lower() not in OFF
