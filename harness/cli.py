"""The ``ssbench`` command line: one module per subcommand under :mod:`harness.commands`.

Each command module defines ``register(subparsers)`` (arguments only: cheap imports) and a
``cmd_<name>(args) -> int`` function. User errors exit 2 with a one-line message, no traceback;
target (server) errors exit 3; anything else is a bug: its traceback (redacted) and exit 70,
never the gate's 1 (docs/results.md, "Exit codes").
"""

from __future__ import annotations

import argparse
import importlib
import logging
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from . import __version__
from .errors import TargetError, Terminated, UserError

#: an unexpected exception (a bug), sysexits.h's EX_SOFTWARE: never 1, the gate's "regression"
INTERNAL_ERROR_EXIT = 70

COMMANDS = ("matrix", "run", "bench", "worker", "analyze", "gate", "web", "server", "mssql", "saturate")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ssbench",
        description="Load-testing and benchmarking harness for SQL Server Service Broker "
                    "(embedded default: a PostgreSQL emulation; its numbers are PostgreSQL's).")
    parser.add_argument("--version", action="version", version=f"ssbench {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"harness.commands.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"harness.commands.{name}":
                raise
            continue
        module.register(sub)
    return parser


def _terminate(signum, frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)     # once: the clean-up is not cut short
    raise Terminated


@contextmanager
def sigterm_as_ctrl_c() -> Iterator[None]:
    """SIGTERM (kill, systemd, a CI timeout) stops what runs inside as Ctrl-C does: it raises
    :class:`~harness.errors.Terminated`, a KeyboardInterrupt (``run`` and ``saturate`` install
    their own pair). SIGINT's and SIGTERM's handlers are put back at the end: a caller of
    :func:`main` in its own process keeps its own."""
    if threading.current_thread() is not threading.main_thread():   # only it takes signals
        yield
        return
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        for s, h in saved.items():
            signal.signal(s, h)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=(logging.WARNING, logging.INFO, logging.DEBUG)[min(args.verbose, 2)],
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    with sigterm_as_ctrl_c():
        return _dispatch(args)


def _dispatch(args) -> int:
    """The command's exit code: its own, or that of what it raised (the module's docstring)."""
    try:
        return int(args.func(args) or 0)
    except UserError as e:
        print(f"ssbench: error: {e}", file=sys.stderr)
        return e.exit_code
    except TargetError as e:
        print(f"ssbench: target error: {e}", file=sys.stderr)
        return TargetError.exit_code
    except KeyboardInterrupt:
        print("ssbench: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `ssbench matrix ... | head`
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception:   # a bug: the traceback to report it with, its secrets redacted
        import traceback

        from .redact import redact_string

        print(redact_string(traceback.format_exc()).rstrip(), file=sys.stderr)
        print(f"ssbench: internal error (a bug; the traceback above says where): exit {INTERNAL_ERROR_EXIT}",
              file=sys.stderr)
        return INTERNAL_ERROR_EXIT


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
