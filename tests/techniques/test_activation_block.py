"""The activation-lifetime block of matrices/techniques.yaml, end to end on the embedded target
(issue 29), for real: PostgreSQL, the broker process and its queue monitor, Locust in open loop.
A WAITFOR timeout shorter than the gaps between messages ends the activation task and the queue
monitor starts another inside the window, at most once per monitor period; the 3000 ms baseline
keeps its reader, starting and ending none there. The comparison is judged on end-to-end
latency (lower is better), and the short timeout loses.

Two tests: one repetition of the block as committed, its counts and the Spark report's
technique rows (the parallel part: nothing judged depends on the host's speed); and the verdict
itself, judged by ``ssbench bench``'s interleaved rounds on real latencies (the alone part)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from support.embedded import REPO
from support.summaries import read as read_summary

pytestmark = [pytest.mark.slow, pytest.mark.swarm]


def activation_block(tmp_path, **run):
    """matrices/techniques.yaml with only its WAITFOR block (same axes and settings; the windows
    and repetitions as committed unless ``run`` says otherwise)."""
    doc = yaml.safe_load((REPO / "matrices" / "techniques.yaml").read_text())
    doc["blocks"] = [b for b in doc["blocks"] if "waitfor_timeout_ms" in b]
    assert len(doc["blocks"]) == 1 and doc["blocks"][0].get("rate")
    if run.get("repetitions", "auto") != "auto":      # a fixed number: the auto rounds' settings go
        for k in ("min_repetitions", "max_repetitions", "budget_minutes"):
            doc["run"].pop(k, None)
    doc["run"].update(run)
    path = tmp_path / "activation.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return doc, path


def _ssbench(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=900)


@pytest.mark.untimed("counts of the tasks started and ended inside the window (the monitor's period bounds them "
                     "4-fold apart) and the report's rows; no verdict is judged on one repetition")
def test_the_short_waitfor_churns_tasks_inside_the_window_and_the_report_judges_latency(pg_server, spark, tmp_path):
    from harness.analysis.job import analyze_result

    doc, matrix = activation_block(tmp_path, repetitions=1)
    monitor_s = doc["broker"]["monitor_interval_seconds"]
    window = doc["run"]["measure_seconds"]
    out = tmp_path / "run"
    r = _ssbench("run", str(matrix), "--out", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    by_timeout: dict[int, dict] = {}
    for p in sorted(out.glob("*/rep-*/summary.json")):
        s = read_summary(p)
        by_timeout[s["permutation"]["broker"]["waitfor_timeout_ms"]] = s
        # every message accounted for: sent counted by the initiator's endpoints, received by the
        # target's tally, independently of each other and of the client's count
        assert s["messages_sent"] > 20 and s["messages_sent"] == s["messages_received"] and not s["messages_lost"]
        assert s["messages_sent_client"] > 0
    short, long_ = by_timeout[50], by_timeout[3000]
    # the monitor restarts the task inside the window, after the 50 ms WAITFOR ended it: as often
    # as its period allows, and no more often
    assert short["activation_tasks_started_in_window"] >= 1 and short["activation_tasks_ended_in_window"] >= 1, short
    assert 0 < short["activation_tasks_started_per_s"] <= 1.2 / monitor_s, short
    # the 3000 ms reader started in the warm-up and lives on: nothing starts or ends in the window
    assert long_["activation_tasks_started_in_window"] == long_["activation_tasks_ended_in_window"] == 0, long_
    assert long_["activation_tasks_started_per_s"] <= 2 / window, long_
    assert short["activation_tasks_started_per_s"] > long_["activation_tasks_started_per_s"]

    # the Spark analysis reads the engagement and judges the block on latency, lower is better
    result = analyze_result([out], out=tmp_path / "report", spark=spark)
    rows = [x for x in result.techniques if x["axis"] == "waitfor_timeout_ms"]
    primary = [x for x in rows if x["primary"]]
    assert len(primary) == 1, rows
    (g,) = primary
    assert (g["value"], g["baseline_value"], g["metric"], g["lower_is_better"]) == ("50", "3000", "e2e_p99_ms", True)
    assert g["exercised"] is True and g["engagement_value"] >= 1 and g["baseline_engagement"] == 0
    assert {x["metric"] for x in rows} == {"e2e_p99_ms", "e2e_p50_ms"}


@pytest.mark.timing   # a verdict on real latencies
def test_the_short_waitfor_loses_on_latency(pg_server, tmp_path):
    """The block's interleaved rounds (3, then more while the comparison is undecided), windows
    of 1 s + 2 s (20 messages an arm at 10/s; the tail is the monitor's period, 20-fold the
    baseline's): the 50 ms timeout is a loss on the end-to-end p99, decided."""
    _, matrix = activation_block(tmp_path, warmup_seconds=1, measure_seconds=2)
    out = tmp_path / "run"
    r = _ssbench("bench", "--matrix", str(matrix), "--out", str(out), "--no-analysis", "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    reps = {ms: [read_summary(p) for p in sorted(out.glob(f"*-wf{ms}-*/rep-*/summary.json"))]
            for ms in (50, 3000)}
    assert 3 <= len(reps[50]) == len(reps[3000]) <= 5, {k: len(v) for k, v in reps.items()}
    rows = [x for s in json.loads(r.stdout)["sections"] for x in s["rows"] if x["waitfor_timeout_ms"] is not None]
    (g,) = [x for x in rows if x["metric"] == "e2e_p99_ms"]
    assert (g["comparison_text"], g["judged_on"]) == ("waitfor_timeout_ms=50 vs 3000", "e2e p99 (ms), lower is better")
    # the next message waits for the monitor (1 s here): the tail more than doubles (a gain, lower
    # being better, below -50 %), and the rounds stop at the first look whose interval lies wholly
    # beyond the threshold (CI-equivalent run, busy host: -92.5 % [-99.1, -37.6] after 4 a side)
    assert g["verdict"] == "loss" and g["gain_pct"] < -50 and g["ci_high_pct"] < -g["threshold_pct"], g
