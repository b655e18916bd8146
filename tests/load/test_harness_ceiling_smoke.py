"""benchmarks/harness_ceiling.py runs end to end with tiny durations (real Locust swarms and
pgbench on the session's embedded server) and ends with its JSON line. A smoke test: the
figures themselves are the benchmark's business, run by hand."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
KEYS = {"hub_cpu_us_per_send", "thread_cpu_us_per_send", "hub_send_per_s", "thread_send_per_s",
        "pgbench_send_per_s", "two_process_ratio", "hub_vs_pgbench", "thread_vs_pgbench"}

pytestmark = [pytest.mark.slow, pytest.mark.swarm,
              pytest.mark.untimed("the JSON line's keys, and figures above zero")]


def test_harness_ceiling_prints_its_json(pg_server):
    env = {**os.environ, "PYTHONPATH": str(REPO)}      # SSBENCH_PGDATA: the session's server
    out = subprocess.run([sys.executable, str(REPO / "benchmarks" / "harness_ceiling.py"),
                          "--clients", "2", "--seconds", "1", "--warmup", "0.5", "--rounds", "1",
                          "--sends", "null"], env=env, capture_output=True, text=True, timeout=150)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    last = json.loads(out.stdout.strip().splitlines()[-1])
    assert KEYS <= set(last), sorted(last)
    assert all(last[k] > 0 for k in ("hub_send_per_s", "two_send_per_s", "thread_send_per_s", "pgbench_send_per_s"))
    assert all(last[f"{v}_cpu_us_per_send"] > 0 for v in ("hub", "two", "thread"))


def test_harness_ceiling_with_the_metrics_endpoint(pg_server):
    """``--metrics``: hub and hub+metrics alternate; the endpoint's live SEND total is checked
    against the recordings inside the benchmark; the cost ratio is printed and in the JSON."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, str(REPO / "benchmarks" / "harness_ceiling.py"),
                          "--clients", "2", "--seconds", "1", "--warmup", "0.5", "--rounds", "1",
                          "--sends", "null", "--variants", "hub", "--metrics", "--metrics-interval", "0.2"],
                         env=env, capture_output=True, text=True, timeout=150)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    last = json.loads(out.stdout.strip().splitlines()[-1])
    assert last["hub+metrics_send_per_s"] > 0 and last["hub_metrics_cpu_ratio"] > 0, last
    assert "client CPU per SEND with the metrics endpoint / without" in out.stdout
