"""harness.load.launch: the Locust processes' start. It imports Locust (gevent's monkey-patching
with it) reading the installed entry points once, puts the standard ``entry_points`` back, and
runs Locust's own main with the same arguments as ``python -m locust``."""

from __future__ import annotations

import subprocess
import sys

from harness.load.swarm import LOCUST_CMD, worker_cmd

CHECK = """
import importlib.metadata as metadata
from harness.load import launch
calls = []
read = metadata.entry_points
def counted(**select):
    calls.append(select)
    return read(**select)
metadata.entry_points = counted
launch.import_locust()
from gevent import monkey
assert metadata.entry_points is counted, "the standard entry_points is not back"
assert len(calls) == 1 and calls == [{}], calls            # read once, for every patch
assert all(monkey.is_module_patched(m) for m in ("socket", "ssl", "threading", "time", "select")), "not patched"
import locust, sys
print(locust.__version__)
"""


def test_locust_is_imported_patched_with_the_entry_points_read_once_and_runs_as_python_m_locust():
    r = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    import importlib.metadata

    assert r.stdout.strip() == importlib.metadata.version("locust")
    # every Locust process of a swarm starts through it (the master's command is built in Swarm.start)
    assert worker_cmd("127.0.0.1", 5557)[:3] == LOCUST_CMD == [sys.executable, "-m", "harness.load.launch"]
    version = subprocess.run([*LOCUST_CMD, "--version"], capture_output=True, text=True, timeout=120)
    assert version.returncode == 0 and version.stdout.startswith(f"locust {r.stdout.strip()} "), version
