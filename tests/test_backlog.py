"""Backlog drain (``run.backlog_messages``): fill the target queue with activation off, turn it
on, measure the drain. For real on the embedded target (real PostgreSQL, broker process and
Locust swarm); the SQL Server rendering is in tests/targets/mssql/test_mssql_target.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.targets.base import Target
from support.summaries import read as read_summary

REPO = Path(__file__).resolve().parents[1]

MATRIX = """name: backlog
axes:
  initiators: [1]
  threads: [4]
  dialogs: [per_thread]
  payload_bytes: [100]
  server: [durable]
  max_queue_readers: [1, 4]
  receive_top: [50]
run:
  warmup_seconds: 0
  measure_seconds: 20            # the fill's cap; the count is reached long before
  drain_timeout_seconds: 60
  sample_interval_seconds: 0.25
  backlog_messages: 1500
broker:
  waitfor_timeout_ms: 300
  monitor_interval_seconds: 0.2
"""


def test_backlog_set_activation_is_part_of_the_target_interface():
    assert "set_activation" in Target.__dict__
    with pytest.raises(NotImplementedError, match="cannot turn activation off"):
        Target.set_activation(type("T", (), {"kind": "x"})(), False)


def test_the_fill_counts_no_receipt_after_activation_came_on():
    """The fill's window is whole recording buckets and can end after activation came on; its
    receipts stop at that moment (seen once in CI: the drain's first receipts gave a fill with
    activation off a receive rate of 272.7 msg/s)."""
    from harness.backlog import BacklogRepetition, DrainRecord
    from harness.results.summary import ClientRecord

    asked = []
    telemetry = type("Tm", (), {"e2e_latencies_us": lambda self, a, b: asked.append((a, b)) or []})()
    rep = BacklogRepetition.__new__(BacklogRepetition)
    rep.target = type("T", (), {"telemetry": telemetry})()
    rep.drain = DrainRecord(backlog=10, t_on=1000.4)
    rep._e2e_latencies(ClientRecord(start=990.0, end=1001.0), None)
    rep.drain = None
    rep._e2e_latencies(ClientRecord(start=990.0, end=1001.0), None)
    assert asked == [(990.0, 1000.4), (990.0, 1001.0)]


@pytest.mark.slow
@pytest.mark.swarm
@pytest.mark.untimed("the backlog's counts and the drain's figures exist; no rate is judged")
def test_backlog_drain_is_measured(pg_server, tmp_path):
    m = tmp_path / "backlog.yaml"
    m.write_text(MATRIX)
    out = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(m), "--out", str(out)], cwd=REPO,
                       env=dict(os.environ), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    s = {p.parent.parent.name: read_summary(p) for p in out.glob("*/rep-*/summary.json")}
    assert set(s) == {"i1-t4-per_thread-p100-durable-r1-top50", "i1-t4-per_thread-p100-durable-r4-top50"}
    for pid, d in s.items():
        # the whole backlog sat in the target queue, then every message was processed
        assert d["backlog_messages"] >= 1500 and d["messages_lost"] == 0, d
        assert d["messages_received"] == d["messages_sent"] >= d["backlog_messages"], d
        assert d["drain_seconds"] > 0 and d["drain_rate"] == pytest.approx(
            d["backlog_messages"] / d["drain_seconds"], rel=1e-3), d
        # the fill: SENDs measured, nothing received while activation was off
        assert d["send_latency_ms"]["count"] > 0 and d["receive_rate"] == 0, d
        # the drained messages' end-to-end latency includes their wait in the backlog
        assert d["e2e_latency_ms"]["count"] == d["backlog_messages"], d
        assert d["e2e_latency_ms"]["max"] / 1000 >= d["drain_seconds"] * 0.5, d
        rep = out / pid / "rep-01"
        drain = [json.loads(x) for x in (rep / "samples.jsonl").read_text().splitlines()
                 if json.loads(x)["family"] == "drain"]
        processed = [x["value"] for x in drain if x["metric"] == "processed"]
        assert processed == sorted(processed) and processed[-1] >= d["backlog_messages"]
        assert any(x["metric"] == "rate_per_s" and x["value"] > 0 for x in drain)
        assert {x["phase"] for x in drain} == {"drain"}
    assert "drained in" in r.stderr
