"""``ssbench run MATRIX [--target embedded|TOPOLOGY.yaml] [--out DIR] [--resume]``."""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path

from .common import TARGET_HELP


def register(sub) -> None:
    p = sub.add_parser("run", help="run a test matrix against a target and write results/",
                       description="Run every permutation of a matrix: provision, Locust load (one "
                                   "worker per initiator, one user per client thread), collectors, "
                                   "drain and verify, results written atomically under results/<run-id>/. "
                                   "Ctrl-C stops cleanly and leaves the run resumable.")
    add_run_arguments(p)
    p.set_defaults(func=cmd_run)


def add_run_arguments(p) -> None:
    p.add_argument("matrix", help="matrix YAML file, e.g. matrices/bench.yaml")
    p.add_argument("--target", default="embedded", help=TARGET_HELP)
    p.add_argument("--out", type=Path, default=None,
                   help="run directory (default: results/<UTC time>-<matrix name>)")
    p.add_argument("--resume", action="store_true",
                   help="continue an unfinished run (--out DIR, or the newest unfinished run of this "
                        "matrix): complete repetitions are kept, partial ones redone")
    p.add_argument("--results", type=Path, default=None, help="results root (default: ./results)")


def install_sigint(stop: threading.Event) -> None:
    """First Ctrl-C: stop cleanly after tidying up. Second: abort at once."""
    def handler(signum, frame):
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        print("\nssbench: stopping (Ctrl-C again to abort)...", file=sys.stderr)

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)


def execute(args) -> tuple[int, "object"]:
    """Run the matrix; returns (exit code, RunDir)."""
    from ..errors import TargetError
    from ..matrix import load_matrix
    from ..paths import RESULTS
    from ..runner import Interrupted, Progress, Runner, finish_run, start_run
    from ..targets.base import make_target
    from .common import check_target

    check_target(args.target)
    matrix = load_matrix(args.matrix)
    target = make_target(args.target)
    results_root = args.results or RESULTS
    stop = threading.Event()
    install_sigint(stop)
    rd = start_run(matrix, target, results_root, args.out, args.resume)
    print(f"ssbench: run {rd.run_id}: {len(matrix)} permutations x {matrix.run.repetitions} repetition(s) "
          f"on {target.label}\nssbench: results in {rd.path}", file=sys.stderr)
    progress = Progress(total=len(matrix) * matrix.run.repetitions)
    runner = Runner(matrix, target, rd, progress=progress, stop_event=stop)
    try:
        lost = runner.run()
    except Interrupted:
        finish_run(rd, "interrupted", runner.lost_total)
        print(f"ssbench: interrupted; resume with: ssbench run {args.matrix} --resume --out {rd.path}",
              file=sys.stderr)
        return 130, rd
    except (TargetError, Exception):
        finish_run(rd, "failed", runner.lost_total)
        raise
    finally:
        target.close()
    finish_run(rd, "complete", lost)
    if lost:
        print(f"ssbench: !!! {lost} MESSAGES LOST in this run: see messages_lost in the summaries !!!",
              file=sys.stderr)
        return 4, rd
    return 0, rd


def cmd_run(args) -> int:
    code, _ = execute(args)
    return code
