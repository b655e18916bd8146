"""``ssbench server start|stop|status|destroy``: the embedded PostgreSQL server."""

from __future__ import annotations

import os
from .. import environment


def data_dir_help() -> str:
    """Where the data directory is, for the user running ssbench (from the code that picks it)."""
    from ..targets.embedded.server import data_base_dir

    if environment.get("SSBENCH_PGDATA"):
        return f"Data directory: $SSBENCH_PGDATA ({environment.get('SSBENCH_PGDATA')})."
    where = f"{data_base_dir()}/pg<major>"
    if os.geteuid() == 0:
        return (f"Data directory: $SSBENCH_PGDATA if set, else {where} (as root: the server runs as "
                "the unprivileged user 'ssbench', which cannot reach root's home; as another user: "
                "~/.cache/ssbench/pg<major>).")
    return (f"Data directory: $SSBENCH_PGDATA if set, else {where} "
            "(as root: /var/tmp/ssbench/pg<major>).")


def register(sub) -> None:
    p = sub.add_parser("server", help="start, stop or inspect the embedded PostgreSQL server",
                       description="Manage the private PostgreSQL server of the embedded target. "
                                   + data_dir_help())
    p.add_argument("action", choices=["start", "stop", "status", "destroy"])
    p.set_defaults(func=cmd_server)


def cmd_server(args) -> int:
    from ..targets.embedded.server import EmbeddedServer

    srv = EmbeddedServer()
    if args.action == "start":
        info = srv.start()
        print(f"embedded PostgreSQL {srv.version()} running: pid {info.pid}, 127.0.0.1:{info.port}, "
              f"socket {info.socket_dir}, data {info.data_dir}")
    elif args.action == "stop":
        print("stopped" if srv.stop() else "not running")
    elif args.action == "destroy":
        srv.destroy()
        print(f"removed {srv.data_dir}")
    else:
        info = srv.info()
        if info:
            print(f"running: pid {info.pid}, 127.0.0.1:{info.port}, data {info.data_dir}")
        else:
            print(f"not running (data {srv.data_dir})")
            return 1
    return 0
