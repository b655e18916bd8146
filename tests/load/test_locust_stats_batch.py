"""Locust's statistics fed from the workers' deltas (harness.load.locust_stats) equal Locust's own
per-request path: the cases in locust_stats_cases.py, run in a pytest process of their own
(importing locust monkey-patches a process with gevent; this one must stay unpatched)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def test_batches_equal_locusts_one_by_one_in_a_process_of_their_own():
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        str(HERE / "locust_stats_cases.py")], cwd=HERE.parent.parent,
                       env={**os.environ, "SSBENCH_TEST_GEVENT_PROCESS": "1"},   # patched on purpose
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "2 passed" in r.stdout, r.stdout[-1000:]
