"""Helpers shared by the tests (importable as ``support``: pytest puts tests/ on sys.path
through tests/conftest.py; subprocesses such as Locust workers get it from
:func:`support.pythonpath_env`)."""

from __future__ import annotations

import os
from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parent.parent


def pythonpath_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: os.environ) with the tests directory added to PYTHONPATH, for child
    processes that import test-only modules (e.g. a Locust worker loading the sleep sender)."""
    env = dict(os.environ if env is None else env)
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(TESTS_DIR) not in parts:
        parts.append(str(TESTS_DIR))
    env["PYTHONPATH"] = os.pathsep.join(parts)
    return env
