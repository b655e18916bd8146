"""Helpers shared by the tests (importable as ``support``: pytest puts tests/ on sys.path
through tests/conftest.py; subprocesses such as Locust workers get it from
:func:`support.pythonpath_env`)."""

from __future__ import annotations

import os
from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parent.parent
#: the test plugins: a distribution's metadata (entry points: the in-memory target, the
#: test-only senders) and its package; registered wherever this directory is on the path
PLUGINS_DIR = TESTS_DIR / "plugins"


def pythonpath_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: os.environ) with the tests directory and the test plugins added to
    PYTHONPATH, for child processes that use test-only plugins (e.g. a Locust worker opening
    the sleep sender, ``ssbench run --target memory``)."""
    env = dict(os.environ if env is None else env)
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    for d in (TESTS_DIR, PLUGINS_DIR):
        if str(d) not in parts:
            parts.append(str(d))
    env["PYTHONPATH"] = os.pathsep.join(parts)
    return env
