"""``ssbench`` in the test's own process: :func:`ssbench_here`."""

from __future__ import annotations

import signal


def ssbench_here(capsys, *args: str) -> tuple[int, str, str]:
    """``ssbench ARGS`` in this process: its exit code, stdout and stderr (``capsys``, the
    test's fixture). For what ends before anything starts (a refusal, a count): a subprocess
    would pay an interpreter and ssbench's imports, about a CPU-second each time. Not for what
    comes after ``run`` or ``saturate`` installed their SIGINT and SIGTERM handlers (a resume's
    checks): those stayed in the test's process, and a later module's run on the same xdist
    worker failed (docs/findings/test-suite-slow-machine.md); they are put back here anyway."""
    from harness.cli import main

    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        code = main(list(args))
    except SystemExit as e:        # argparse's own refusals
        code = e.code
    finally:
        for s, h in handlers.items():
            signal.signal(s, h)
    out = capsys.readouterr()
    return code, out.out, out.err
