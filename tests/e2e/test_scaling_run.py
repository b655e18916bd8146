"""A small thread sweep end to end on the embedded target (real PostgreSQL, broker process and
Locust swarm, alternated windows as matrices/scaling.yaml has them): ``ssbench bench
--no-analysis --json`` ends with the scalability model of each strategy's sweep. The whole
scaling.yaml, too long for the suite, is benchmarks/scaling_runs.py."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from support.embedded import REPO

# alone: on a loaded host a thread count's windows can be kept out, which leaves its sweep short
pytestmark = [pytest.mark.slow, pytest.mark.swarm, pytest.mark.timing]

MATRIX = """
name: sweep
axes: {initiators: [1], threads: [1, 2, 3, 4], dialogs: [per_thread, shared], payload_bytes: [100], server: [durable]}
run: {warmup_seconds: 0.5, measure_seconds: 1, repetitions: 2, alternate: true, slice_seconds: 0.5,
      drain_timeout_seconds: 30, sample_interval_seconds: 0.5}
broker: {max_queue_readers: 2, waitfor_timeout_ms: 300, monitor_interval_seconds: 0.2}
"""


def test_a_thread_sweep_ends_with_each_strategys_model(pg_server, tmp_path):
    m = tmp_path / "sweep.yaml"
    m.write_text(MATRIX)
    r = subprocess.run([sys.executable, "-m", "harness.cli", "bench", "--matrix", str(m), "--out",
                        str(tmp_path / "run"), "--no-analysis", "--json"], cwd=REPO, capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    sections = {s["key"]: s for s in json.loads(r.stdout)["sections"]}
    sweeps = {row["dialogs"]: row for row in sections["scaling"]["rows"]}
    assert set(sweeps) == {"per_thread", "shared"}
    for row in sweeps.values():
        # a window other tests' load disturbed counts (noisy_host is shown, not kept out)
        assert row["thread_counts"] == [1, 2, 3, 4] and row["threads_text"] == "1-4 (4)"
        assert row["status"] in ("fitted", "does not fit"), row
        if row["status"] == "fitted":
            assert 0 < row["lambda_ci_low"] <= row["lambda"] <= row["lambda_ci_high"]
            assert 0 <= row["sigma_ci_low"] <= row["sigma"] <= row["sigma_ci_high"] <= 1
            assert row["sigma_text"].startswith(f"{row['sigma']:.3f} [")
        else:
            assert row["sigma"] is None and "lack of fit" in row["reason"]
    if all(row["status"] == "fitted" for row in sweeps.values()):
        (move,) = sections["scaling_moves"]["rows"]
        assert move["comparison_text"] == "shared vs per_thread"
