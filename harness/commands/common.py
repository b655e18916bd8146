"""Helpers shared by the command modules (not a command itself)."""

from __future__ import annotations

import sys
from pathlib import Path

from ..errors import UserError
from ..web.auth import HOW_TO_SET, is_loopback, load_credentials

TARGET_HELP = ("a registered target: 'embedded' (the PostgreSQL emulation, default), NAME:ARG, or a SQL "
               "Server topology YAML file (docs/targets.md)")


def add_run_options(p, resume: bool = True) -> None:
    """What run, bench and saturate share: where the run goes (``--target``, ``--out``,
    ``--resume`` (``resume``), ``--results``), the scale-out flags and the live metrics."""
    p.add_argument("--target", default="embedded", help=TARGET_HELP)
    p.add_argument("--out", type=Path, default=None, metavar="DIR",
                   help="run directory (default: results/<UTC time>-<matrix name>)")
    if resume:
        p.add_argument("--resume", action="store_true",
                       help="continue an unfinished run (--out DIR, or the newest unfinished run of this "
                            "matrix): complete repetitions are kept, partial ones redone")
    p.add_argument("--results", type=Path, default=None, metavar="DIR", help="results root (default: ./results)")
    g = p.add_argument_group("scale-out", "Several Locust worker processes per initiator, and workers on client "
                                          "hosts of their own (docs/scale-out.md).")
    g.add_argument("--workers-per-initiator", type=int, default=None, metavar="N",
                   help="Locust worker processes per initiator (default: the matrix's run.workers_per_initiator, "
                        "else 1); each takes threads/N of its initiator's users, so every threads value must be a "
                        "multiple of N")
    g.add_argument("--remote-workers", action="store_true",
                   help="start no Locust worker on this host: the master listens on --master-bind and waits for "
                        "'ssbench worker' on the client hosts (initiators x workers-per-initiator of them, for "
                        "every repetition); needs the same $SSBENCH_WORKER_TOKEN on every host. Implied by a "
                        "topology file with a client_hosts: section, whose values these flags override")
    g.add_argument("--master-bind", default=None, metavar="HOST[:PORT]",
                   help="with remote workers: the address the master listens on (default: the topology's "
                        "client_hosts.master_bind, else 0.0.0.0:5557)")
    g.add_argument("--worker-wait", type=float, default=None, metavar="SECONDS",
                   help="with remote workers: how long each repetition's master waits for every expected "
                        "worker before it fails naming the missing ones (default: the topology's "
                        "client_hosts.worker_wait_seconds, else 120)")
    add_metrics_arguments(p)


# --------------------------------------------------------------------------- the live metrics endpoint

def add_metrics_arguments(p) -> None:
    """``--metrics-*``: the live metrics endpoint of run, bench, saturate and web
    (docs/monitoring.md)."""
    g = p.add_argument_group(
        "live metrics", "A Prometheus/OpenMetrics endpoint (GET /metrics), off by default; on loopback it is open, "
                        "on any other address it needs the web UI's login ($SSBENCH_WEB_USER/"
                        "$SSBENCH_WEB_PASSWORD) as HTTP basic auth. See docs/monitoring.md.")
    g.add_argument("--metrics-port", type=int, default=None, metavar="PORT",
                   help="serve live metrics on this port (0: any free port; default: $SSBENCH_METRICS_PORT, else off)")
    g.add_argument("--metrics-host", default=None, metavar="HOST",
                   help="the endpoint's address (default: $SSBENCH_METRICS_HOST, else 127.0.0.1)")
    g.add_argument("--metrics-linger", type=float, default=30.0, metavar="SECONDS",
                   help="at the end, wait up to this long for a last scrape, so the last repetition's final "
                        "figures are collected (only if something scraped; default 30; 0: do not wait)")
    g.add_argument("--metrics-tls-cert", default=None, metavar="PEM", help="serve the endpoint over HTTPS")
    g.add_argument("--metrics-tls-key", default=None, metavar="PEM", help="the certificate's private key")


def check_tls_pair(cert: str | None, key: str | None, prefix: str) -> None:
    """A certificate and its key (``PREFIX-cert``, ``PREFIX-key``) go together, and each names a
    file: a one-line UserError naming the flag otherwise (the web UI's and the metrics')."""
    if bool(cert) != bool(key):
        raise UserError(f"{prefix}-cert and {prefix}-key go together",
                        field=f"{prefix}-key" if cert else f"{prefix}-cert")
    for flag, path in ((f"{prefix}-cert", cert), (f"{prefix}-key", key)):
        if path and not Path(path).is_file():
            raise UserError(f"{path}: no such file", field=flag)


def metrics_settings(args, env=None):
    """The endpoint's settings from the flags and the environment, or None (off). Checked
    before anything starts: a bad value is a one-line UserError naming the flag or variable."""
    from .. import environment as envvars
    from ..metrics.settings import HOST_ENV, PORT_ENV, EndpointSettings

    port, where = getattr(args, "metrics_port", None), "--metrics-port"
    text = (envvars.get(PORT_ENV, env) or "").strip()
    if port is None and text:
        where = f"${PORT_ENV}"
        try:
            port = int(text)
        except ValueError:
            raise UserError(f"not a port number: {text!r}", field=where) from None
    if port is None:
        return None
    if not 0 <= port <= 65535:
        raise UserError(f"must be 0..65535, got {port}", field=where)
    host = getattr(args, "metrics_host", None) or (envvars.get(HOST_ENV, env) or "").strip() or "127.0.0.1"
    linger = float(getattr(args, "metrics_linger", 30.0))
    if not 0 <= linger <= 3600:
        raise UserError(f"must be 0..3600 seconds, got {linger:g}", field="--metrics-linger")
    cert, key = getattr(args, "metrics_tls_cert", None), getattr(args, "metrics_tls_key", None)
    check_tls_pair(cert, key, "--metrics-tls")
    login = None
    if not is_loopback(host):
        creds = load_credentials(env)
        if creds is None:
            raise UserError(f"the metrics endpoint on {host} (not loopback) needs the web UI's login: {HOW_TO_SET}",
                            field="--metrics-host")
        login = creds.check
    return EndpointSettings(port=port, host=host, linger_seconds=linger, tls_cert=cert, tls_key=key, login=login)


class metrics_endpoint:   # noqa: N801 - a context manager used like a function
    """``with metrics_endpoint(args, "run") as live:``: the endpoint's LiveState (None when
    off), serving for the block; a port in use is a UserError before anything else starts. At
    a normal end it waits for a last scrape (``--metrics-linger``)."""

    def __init__(self, args, command: str):
        self.settings = metrics_settings(args)
        self.command = command
        self.metrics = None

    def __enter__(self):
        if self.settings is None:
            return None
        from ..metrics.live import LiveState
        from ..metrics.server import Endpoint

        s = self.settings
        try:
            self.metrics = Endpoint(LiveState(command=self.command), s).start()
        except OSError as e:
            raise UserError(f"cannot serve the metrics endpoint on {s.host}:{s.port}: {e.strerror or e}",
                            field="--metrics-port") from None
        print(f"ssbench: live metrics at {self.metrics.url}", file=sys.stderr, flush=True)
        if not s.tls_cert and s.guarded and not is_loopback(s.host):
            print(f"ssbench: warning: the metrics endpoint on {s.host} is plain HTTP: its token or login crosses the "
                  "network in clear. Use --metrics-tls-cert/--metrics-tls-key, or an SSH tunnel.", file=sys.stderr)
        return self.metrics.live

    def __exit__(self, exc_type, exc, tb):
        if self.metrics is not None:
            self.metrics.close(lambda text: print(f"ssbench: {text}", file=sys.stderr, flush=True),
                               linger=exc_type is None)
        return False
