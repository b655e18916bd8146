"""The activation-task-lifetime axis (``waitfor_timeout_ms``, the paper's recommendation 3) run
for real on the embedded target: real PostgreSQL, real broker process and queue monitor, real
Locust. A WAITFOR timeout shorter than the gap between messages ends the activation task, and
the queue monitor starts another at most once per monitor period: tasks started per second goes
up and, bounded by the monitor, stays under one per period. A long timeout keeps the task."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.summaries import read as read_summary

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

MONITOR_S = 0.25
MATRIX = f"""\
name: waitfor
axes:
  initiators: [1]
  threads: [2]
  dialogs: [per_thread]
  payload_bytes: [100]
  server: [durable]
  waitfor_timeout_ms: [50, 3000]
  rate: [5]           # 5 SENDs/s: 200 ms between messages, so a 50 ms WAITFOR times out in every gap
run:
  warmup_seconds: 1
  measure_seconds: 6
  drain_timeout_seconds: 30
  sample_interval_seconds: 0.25
broker:
  max_queue_readers: 1   # one task: a long WAITFOR keeps it for the whole window
  monitor_interval_seconds: {MONITOR_S}
"""


def test_short_waitfor_churns_activation_tasks(pg_server, tmp_path):
    matrix = tmp_path / "waitfor.yaml"
    matrix.write_text(MATRIX)
    out = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(matrix), "--out", str(out)],
                       cwd=REPO, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    s = {p.parent.parent.name: read_summary(p) for p in out.glob("*/rep-*/summary.json")}
    short = s["i1-t2-per_thread-p100-durable-wf50-rate5"]
    long_ = s["i1-t2-per_thread-p100-durable-wf3000-rate5"]
    for d, ms in ((short, 50), (long_, 3000)):
        assert d["permutation"]["broker"]["waitfor_timeout_ms"] == ms
        # every message accounted for: sent counted by the initiator's endpoints, received by
        # the target's tally, independently of each other and of the client's count
        assert d["messages_sent"] > 20 and d["messages_sent"] == d["messages_received"], d
        assert d["messages_lost"] == 0 and d["messages_sent_client"] > 0
    for name, d in (("50 ms", short), ("3000 ms", long_)):
        print(f"WAITFOR {name}: {d['activation_tasks_started_per_s']:.2f} tasks started/s, "
              f"{d['receive_rate']} msg/s received, e2e p99 {d['e2e_latency_ms']['p99']} ms")
    # the short timeout ends a task at (nearly) every gap: the monitor starts them as fast as
    # its period allows, and no faster
    assert 1.0 <= short["activation_tasks_started_per_s"] <= 1.2 / MONITOR_S, short
    # the long one keeps its task(s) the whole window
    assert long_["activation_tasks_started_per_s"] <= 2 / 6, long_
    assert short["activation_tasks_started_per_s"] >= long_["activation_tasks_started_per_s"] + 1.0
