"""The activation-lifetime block of matrices/techniques.yaml, end to end on the embedded target
(issue 29): `ssbench bench` runs it for real (PostgreSQL, broker process, queue monitor, Locust
in open loop, then the Spark analysis). A WAITFOR timeout shorter than the gaps between
messages ends the activation task and the queue monitor starts another inside the window;
the 3000 ms baseline keeps its reader, starting and ending none there; the comparison is
judged on end-to-end latency (lower is better), and the short timeout loses."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from harness.analysis.techniques_report import load_rows
from support.embedded import REPO
from support.summaries import read as read_summary

pytestmark = pytest.mark.slow


def activation_block(tmp_path):
    """matrices/techniques.yaml with only its WAITFOR block (same axes, settings and windows)."""
    doc = yaml.safe_load((REPO / "matrices" / "techniques.yaml").read_text())
    doc["blocks"] = [b for b in doc["blocks"] if "waitfor_timeout_ms" in b]
    assert len(doc["blocks"]) == 1 and doc["blocks"][0].get("rate")
    path = tmp_path / "activation.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_the_short_waitfor_churns_tasks_inside_the_window_and_is_judged_on_latency(pg_server, tmp_path):
    out = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "harness.cli", "bench", "--matrix", str(activation_block(tmp_path)),
                        "--out", str(out)], cwd=REPO, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    reps: dict[int, list[dict]] = {50: [], 3000: []}
    for p in sorted(out.glob("*/rep-*/summary.json")):
        s = read_summary(p)
        reps[s["permutation"]["broker"]["waitfor_timeout_ms"]].append(s)
        assert s["messages_sent"] > 20 and s["messages_sent"] == s["messages_received"] and not s["messages_lost"]
    # interleaved rounds: 3, then more while the comparison is undecided (a busy host's tail)
    assert 3 <= len(reps[50]) == len(reps[3000]) <= 5
    for s in reps[50]:
        # the monitor restarts the task inside the window, after the 50 ms WAITFOR ended it
        assert s["activation_tasks_started_in_window"] >= 1 and s["activation_tasks_ended_in_window"] >= 1, s
        assert s["activation_tasks_started_per_s"] > 0
    for s in reps[3000]:
        # its reader started in the warm-up and lives on: nothing starts or ends in the window
        assert s["activation_tasks_started_in_window"] == s["activation_tasks_ended_in_window"] == 0, s
    rows = [x for x in load_rows(out / "report" / "index.html") if x["axis"] == "waitfor_timeout_ms"]
    primary = [x for x in rows if x["primary"]]
    assert len(primary) == 1, rows
    (g,) = primary
    assert (g["value"], g["baseline_value"], g["metric"], g["lower_is_better"]) == ("50", "3000", "e2e_p99_ms", True)
    assert g["exercised"] is True and g["engagement_value"] >= 1 and g["baseline_engagement"] == 0
    # the next message waits for the monitor (1 s here): the tail more than doubles (a gain, lower
    # being better, below -50 %), and the rounds stop at the first look whose interval lies wholly
    # beyond the threshold (CI-equivalent run, busy host: -92.5 % [-99.1, -37.6] after 4 a side)
    assert g["verdict"] == "loss" and g["gain_pct"] < -50 and g["gain_ci_high_pct"] < -g["threshold_pct"], g
    assert {x["metric"] for x in rows} == {"e2e_p99_ms", "e2e_p50_ms"}
    # the key table says it too, on latency
    assert "waitfor_timeout_ms=50 vs 3000" in r.stdout and "e2e p99 (ms), lower is better" in r.stdout
