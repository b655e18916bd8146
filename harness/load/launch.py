"""A Locust process, master or worker: ``python -m harness.load.launch ARGS`` runs Locust as
``python -m locust ARGS`` does (its own ``main``, the same arguments), at less CPU.

``import locust`` monkey-patches the standard library with gevent, and gevent announces each
of its patches (25 of them) to the plugins of an entry-point group: each announcement reads
every installed distribution's entry points again, about 0.25 CPU-s of a Locust process's
start where ssbench is installed (some 120 distributions; measured in
docs/findings/test-suite-slow-machine.md). Here they are read once for that import, and the
standard ``importlib.metadata.entry_points`` is back before Locust runs: gevent finds the same
plugins (nothing is installed while a process imports), and Locust runs unchanged. Nor does
anything move before the patching: gevent imports ``importlib.metadata`` (and with it socket,
selectors, tempfile...) for its first announcement, before its first patch, as this does.
"""

from __future__ import annotations

import importlib.metadata as metadata
import sys
from pathlib import Path


def import_locust() -> None:
    """``import locust``, reading the installed entry points once for all of gevent's patches."""
    read = metadata.entry_points
    everything = read()
    metadata.entry_points = lambda **select: everything.select(**select) if select else everything
    try:
        import locust  # noqa: F401  (gevent's monkey-patching happens here)
    finally:
        metadata.entry_points = read


def main() -> None:
    import_locust()
    import locust
    from locust.main import main as locust_main

    sys.argv[0] = str(Path(locust.__file__).with_name("__main__.py"))    # as python -m locust has it
    locust_main()


if __name__ == "__main__":
    main()
