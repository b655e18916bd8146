"""``ssbench`` in the test's own process: :func:`ssbench_here`."""

from __future__ import annotations


def ssbench_here(capsys, *args: str) -> tuple[int, str, str]:
    """``ssbench ARGS`` in this process: its exit code, stdout and stderr (``capsys``, the
    test's fixture). For what ends before anything starts (a refusal, a count): a subprocess
    would pay an interpreter and ssbench's imports, about a CPU-second each time. The signal
    handlers ``run`` or ``saturate`` install do not outlast it (``harness.cli.main`` puts the
    process's own back)."""
    from harness.cli import main

    try:
        code = main(list(args))
    except SystemExit as e:        # argparse's own refusals
        code = e.code
    out = capsys.readouterr()
    return code, out.out, out.err
