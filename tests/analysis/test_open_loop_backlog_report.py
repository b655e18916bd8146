"""`ssbench analyze` shows the open-loop and backlog-drain figures of real runs (embedded
target, real Locust swarm, real Spark session); the permutation summaries carry the open-loop
and drain medians the report reads back. (A run without either shows neither: test_analysis.py.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from support.embedded import REPO

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.swarm,
              pytest.mark.untimed("the report's sections and the summaries' figures exist; their values are not judged"),
              pytest.mark.skipif(shutil.which("java") is None and not os.environ.get("JAVA_HOME"),
                                 reason="Spark needs Java 17+ (apt-get install openjdk-17-jre-headless)")]

OPEN_LOOP = """
name: ol
axes: {initiators: [1], threads: [2], dialogs: [per_thread], payload_bytes: [100], server: [durable],
       rate: [50, 200]}
run: {warmup_seconds: 1, measure_seconds: 2, repetitions: 1, drain_timeout_seconds: 60,
      sample_interval_seconds: 0.5}
broker: {max_queue_readers: 2, monitor_interval_seconds: 0.5}
"""
BACKLOG = """
name: bl
axes: {initiators: [1], threads: [2], dialogs: [per_thread], payload_bytes: [100], server: [durable],
       max_queue_readers: [1, 2]}
run: {warmup_seconds: 0, measure_seconds: 1, repetitions: 1, drain_timeout_seconds: 60,
      sample_interval_seconds: 0.5, backlog_messages: 1000}
broker: {monitor_interval_seconds: 0.5}
"""


def _run(tmp_path, name, text):
    m = tmp_path / f"{name}.yaml"
    m.write_text(text)
    out = tmp_path / name
    r = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(m), "--out", str(out)], cwd=REPO,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return out


def test_open_loop_and_backlog_figures_in_the_report(pg_server, spark, tmp_path):
    from harness.analysis.job import analyze_result

    ol, bl = _run(tmp_path, "ol", OPEN_LOOP), _run(tmp_path, "bl", BACKLOG)
    perm = json.loads((ol / "i1-t2-per_thread-p100-durable-rate200" / "summary.json").read_text())
    assert perm["median"]["offered_rate"] == 200 and perm["median"]["achieved_rate"] > 0
    assert perm["median"]["send_corrected_p99_ms"] >= perm["median"]["send_p50_ms"] > 0
    assert perm["behind"] in (0, 1)
    drained = json.loads((bl / "i1-t2-per_thread-p100-durable-r2" / "summary.json").read_text())
    assert drained["median"]["drain_rate"] > 0 and "offered_rate" not in drained["median"]

    result = analyze_result([ol, bl], out=tmp_path / "report", spark=spark)
    html = result.index.read_text()
    files = {p.title: p.file for p in result.plots if not p.skipped}
    olp = [f for t, f in files.items() if "offered" in t or "achieved throughput" in t]
    blp = [f for t, f in files.items() if "Backlog drain" in t]
    assert len(olp) == 2 and len(blp) == 1, sorted(files)
    for f in olp + blp:
        png = tmp_path / "report" / f
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
        assert f in html
    assert "Open loop: offered rate, achieved rate and latency" in html and "Backlog drain" in html
    # a closed-loop run without either shows neither section: test_analysis.py's
    # test_plots_are_pngs_referenced_by_index
