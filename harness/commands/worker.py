"""``ssbench worker --master HOST[:PORT] [--initiator K] [--worker W]``: a Locust worker on a
client host, for ``ssbench run --remote-workers`` on the controller (docs/scale-out.md).

A run keeps one Locust master for all its repetitions; this command keeps a Locust worker
connected to the master's address, one worker process per master (a run, or a web UI's
lifetime; a new one when a failed swarm took its master with it), until ``--runs`` masters have
ended or Ctrl-C. The worker proves the run's token (``$SSBENCH_WORKER_TOKEN``, the same as the
controller's), gets each swarm's spec from the master and streams its recorder's deltas back
over Locust's messages: nothing is shared on disk."""

from __future__ import annotations

import subprocess
import sys
import time

from ..errors import UserError
from ..load.hosts import MASTER_PORT

#: a worker refused by the master (wrong token) or that refused the master exits with this
REFUSED_EXIT = 2


def register(sub) -> None:
    p = sub.add_parser(
        "worker", help="run Locust workers on a client host for 'ssbench run --remote-workers'",
        description="Connect Locust workers to the master of 'ssbench run --remote-workers' on the controller, "
                    "one worker process per master (a run keeps one master for all its repetitions), until "
                    "--runs masters have ended or Ctrl-C. Needs the run's token in $SSBENCH_WORKER_TOKEN (the same value "
                    "on the controller and every client host); the swarm spec comes from the master and the "
                    "recording goes back to it over Locust's messages. The SEND connections go from this host "
                    "to the target's initiators: the target must be reachable from here. See docs/scale-out.md.")
    p.add_argument("--master", required=True, metavar="HOST[:PORT]",
                   help=f"the controller's address, and the port of its --master-bind (default {MASTER_PORT})")
    p.add_argument("--initiator", type=int, default=None, metavar="K",
                   help="the initiator this worker drives (default: the master picks one that is short of workers)")
    p.add_argument("--worker", type=int, default=None, metavar="W",
                   help="this worker's index among its initiator's workers, 1..N (default: the master picks)")
    p.add_argument("--runs", type=int, default=0, metavar="N",
                   help="stop after N masters ended (one per run, unless a failed swarm took the run's master "
                        "with it: the run starts a new one; default 0: until Ctrl-C)")
    p.add_argument("--retry-seconds", type=float, default=2.0, metavar="S",
                   help="pause before reconnecting after a master ended or was unreachable (default 2)")
    p.set_defaults(func=cmd_worker)


def cmd_worker(args) -> int:
    from .run import parse_host_port

    host, port = parse_host_port(args.master, "--master")
    for flag, value in (("--initiator", args.initiator), ("--worker", args.worker)):
        if value is not None and value < 1:
            raise UserError(f"must be 1 or more, got {value}", field=flag)
    if args.worker is not None and args.initiator is None:
        raise UserError("--worker needs --initiator", field="--worker")
    if args.runs < 0 or args.retry_seconds < 0:
        raise UserError("must not be negative", field="--runs" if args.runs < 0 else "--retry-seconds")
    return run_workers(host, port, args.initiator, args.worker, args.runs, args.retry_seconds)


def run_workers(host: str, port: int, initiator: int | None, worker: int | None, runs: int = 0,
                retry_seconds: float = 2.0) -> int:
    """One Locust worker process after the other for the master at ``host:port`` (each built by
    harness.load.swarm.worker_cmd, each lasting as long as its master), until ``runs`` of them
    ended (0: until Ctrl-C)."""
    from ..load.auth import TOKEN_ENV, token_from_env, token_problem
    from ..load.swarm import child_env, die_with_parent, worker_cmd

    token = token_from_env()
    problem = token_problem(token)
    if problem:
        raise UserError(f"{problem} (use the controller's token; export {TOKEN_ENV}=..., never on the command line)",
                        field=f"${TOKEN_ENV}")
    # the web UI's secrets are none of a worker's business
    env = child_env(token, drop=("SSBENCH_WEB_PASSWORD", "SSBENCH_WEB_CREDENTIALS_FILE", "SSBENCH_WEB_LOGIN"))
    who = f"initiator {initiator}" if initiator else "an initiator the master picks"
    done = 0
    print(f"ssbench worker: {who}; master {host}:{port}; Ctrl-C to stop", file=sys.stderr)
    while True:
        proc = subprocess.Popen(worker_cmd(host, port, initiator, worker), env=env, stdin=subprocess.DEVNULL,
                                preexec_fn=die_with_parent)
        try:
            rc = proc.wait()
        except KeyboardInterrupt:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
            print("ssbench worker: stopped", file=sys.stderr)
            return 130
        if rc == REFUSED_EXIT:
            print("ssbench worker: error: the master and this worker do not share the run token "
                  f"(${TOKEN_ENV}); stopping", file=sys.stderr)
            return REFUSED_EXIT
        if rc == 0:
            done += 1
            print(f"ssbench worker: master {done} ended", file=sys.stderr)
            if runs and done >= runs:
                return 0
        else:
            print(f"ssbench worker: the Locust worker exited with code {rc}; reconnecting", file=sys.stderr)
        time.sleep(retry_seconds)     # Ctrl-C here: ssbench's exit 130 (harness.cli)
