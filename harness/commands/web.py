"""``ssbench web [--target embedded|TOPOLOGY.yaml] [--port N] [--initiators N]``: the Locust web
UI for interactive runs, with live broker metrics (docs/web.md).

``ssbench web --worker --master-host HOST [--master-port 5557] [--initiator N]`` is
``ssbench worker --master HOST:5557 --initiator N --runs 1``: a worker on another host for a
master started by ``ssbench web`` (with the run's token in ``$SSBENCH_WORKER_TOKEN``), until that
master quits.

A web UI on any interface but loopback needs a login: credentials in ``$SSBENCH_WEB_USER`` and
``$SSBENCH_WEB_PASSWORD``, or a 0600 file named by ``$SSBENCH_WEB_CREDENTIALS_FILE``."""

from __future__ import annotations

import sys
from dataclasses import fields
from pathlib import Path

from ..errors import UserError
from ..load.hosts import MASTER_PORT
from ..web.auth import DEFAULT_SESSION_MINUTES, HOW_TO_SET, is_loopback, load_credentials
from .common import TARGET_HELP, add_metrics_arguments, check_tls_pair, metrics_endpoint


def register(sub) -> None:
    from ..web.form import (DEFAULT_DIALOGS, DEFAULT_PAYLOAD_BYTES, DEFAULT_RATE, DEFAULT_SPAWN_RATE, DEFAULT_USERS,
                            DEFAULT_WEB_PORT, DIALOG_CHOICES)

    p = sub.add_parser(
        "web", help="Locust web UI for interactive runs, with live broker metrics",
        description="Provision the target, start a Locust master with the ssbench users and one worker per "
                    "initiator, and serve Locust's web UI (127.0.0.1 by default; the URL is printed). The start "
                    "form carries ssbench's parameters (initiators in use, payload bytes, dialog strategy, offered "
                    "rate; the user count is the total number of client threads); a 'Broker metrics' tab shows live "
                    "broker metrics. Every swarm start..stop is saved as a run under results/. Ctrl-C stops "
                    "everything. See docs/web.md.")
    p.add_argument("--target", default="embedded",
                   help=TARGET_HELP)
    p.add_argument("--port", type=int, default=DEFAULT_WEB_PORT,
                   help=f"web UI port (default {DEFAULT_WEB_PORT}; another free port if busy; 0 = any free port)")
    p.add_argument("--initiators", type=int, default=1,
                   help="initiators to provision, one Locust worker each (default 1); the form picks how many to use")
    p.add_argument("--web-host", default="127.0.0.1",
                   help="interface the web UI listens on (default 127.0.0.1; 0.0.0.0 to reach it from other hosts)")
    p.add_argument("--master-bind-host", default="127.0.0.1",
                   help="interface the Locust master listens on for workers (default 127.0.0.1; "
                        "0.0.0.0 when workers run on other hosts)")
    p.add_argument("--master-port", type=int, default=MASTER_PORT,
                   help=f"Locust master port for workers (default {MASTER_PORT})")
    p.add_argument("--local-workers", type=int, default=None,
                   help="workers to start on this host, for initiators 1..N (default: all); the others "
                        "are started on other hosts with 'ssbench worker --master HOST:PORT --initiator K'")
    p.add_argument("--users", type=int, default=DEFAULT_USERS,
                   help=f"user count pre-filled in the form (default {DEFAULT_USERS})")
    p.add_argument("--spawn-rate", type=float, default=DEFAULT_SPAWN_RATE,
                   help=f"spawn rate pre-filled in the form (default {DEFAULT_SPAWN_RATE:g})")
    p.add_argument("--payload-bytes", type=int, default=DEFAULT_PAYLOAD_BYTES,
                   help=f"payload pre-filled in the form (default {DEFAULT_PAYLOAD_BYTES})")
    p.add_argument("--dialogs", default=DEFAULT_DIALOGS, choices=list(DIALOG_CHOICES),
                   help=f"dialog strategy pre-selected in the form (default {DEFAULT_DIALOGS})")
    p.add_argument("--rate", type=float, default=DEFAULT_RATE,
                   help="offered SENDs/s per initiator pre-filled in the form: an open loop on a fixed schedule "
                        f"(default {DEFAULT_RATE:g}: a closed loop, each user SENDs as fast as it can)")
    p.add_argument("--profile", default=None,
                   help="server profile (embedded: durable or delayed; default durable)")
    p.add_argument("--max-queue-readers", type=int, default=None,
                   help="MAX_QUEUE_READERS of the target queue (default: 2 per core)")
    p.add_argument("--results", type=Path, default=None, help="results root (default: ./results)")
    a = p.add_argument_group(
        "security", "A web UI on any interface other than loopback asks for a login; the credentials come "
                    "from $SSBENCH_WEB_USER and $SSBENCH_WEB_PASSWORD, or from a file of mode 0600 named by "
                    "$SSBENCH_WEB_CREDENTIALS_FILE (one line USER:PASSWORD), never from the command line. Workers "
                    "must prove the run's token ($SSBENCH_WORKER_TOKEN; made by ssbench web when unset, and printed "
                    "when workers from other hosts are expected).")
    a.add_argument("--require-login", action="store_true",
                   help="ask for a login on loopback too (always on for any other interface)")
    a.add_argument("--login-minutes", type=float, default=DEFAULT_SESSION_MINUTES, dest="session_minutes",
                   metavar="MINUTES",
                   help=f"a login expires after this many minutes (default {DEFAULT_SESSION_MINUTES})")
    a.add_argument("--tls-cert", default=None, help="serve the web UI over HTTPS with this certificate (PEM)")
    a.add_argument("--tls-key", default=None, help="the certificate's private key (PEM; mode 0600)")
    add_metrics_arguments(p)
    g = p.add_argument_group("worker mode (on another host)")
    g.add_argument("--worker", action="store_true",
                   help="run one Locust worker for a master started by 'ssbench web' on another host; "
                        "needs the run's token in $SSBENCH_WORKER_TOKEN")
    g.add_argument("--master-host", default=None, help="the master's host (worker mode)")
    g.add_argument("--initiator", type=int, default=None,
                   help="the initiator this worker drives (worker mode; default 1)")
    p.set_defaults(func=cmd_web)


def cmd_web(args) -> int:
    if args.worker:   # ssbench worker's own code: one worker command for every swarm
        from .worker import run_workers

        if not args.master_host:
            raise UserError("--worker needs --master-host (the host running 'ssbench web')", field="--master-host")
        if args.initiator is not None and args.initiator < 1:
            raise UserError(f"must be 1 or more, got {args.initiator}", field="--initiator")
        return run_workers(args.master_host, args.master_port, args.initiator or 1, None, runs=1)

    if args.initiators < 1:
        raise UserError("must be at least 1", field="--initiators")
    if args.users < 1 or args.spawn_rate <= 0:
        raise UserError("--users must be at least 1 and --spawn-rate above 0")
    from ..web.session import offered_rate

    offered_rate(args.rate, field="--rate")
    creds = _web_credentials(args)

    from ..targets.factory import make_target
    from ..web.launcher import WebOptions, serve

    endpoint = metrics_endpoint(args, "web")   # checked before anything starts
    target = make_target(args.target)   # a --target that names none: UserError, nothing started
    # each option is its flag's value but those set here (a new option without a flag fails here)
    flags = {f.name: getattr(args, f.name) for f in fields(WebOptions)
             if f.name not in ("ready_timeout", "credentials", "metrics")}
    with endpoint as live:
        return serve(target, WebOptions(**flags, credentials=creds, metrics=live))


def _web_credentials(args):
    """The web UI's credentials, when it needs a login (checked before anything starts)."""
    from ..load.auth import TOKEN_ENV, token_from_env, token_problem

    token = token_from_env()
    if token is not None and token_problem(token):
        raise UserError(token_problem(token), field=TOKEN_ENV)
    check_tls_pair(args.tls_cert, args.tls_key, "--tls")
    if args.session_minutes <= 0:
        raise UserError("must be above 0", field="--login-minutes")
    exposed = not is_loopback(args.web_host)
    creds = load_credentials()
    if not (exposed or args.require_login):
        return None
    if creds is None:
        why = (f"the web UI on {args.web_host} (not loopback) needs a login" if exposed
               else "--require-login needs credentials")
        raise UserError(f"{why}: {HOW_TO_SET}", field="--web-host" if exposed else "--require-login")
    if exposed and not args.tls_cert:
        print(f"ssbench web: warning: the web UI on {args.web_host} is plain HTTP: the login crosses the network "
              "in clear. Use --tls-cert/--tls-key, or keep it on 127.0.0.1 behind an SSH tunnel.", file=sys.stderr)
    return creds
