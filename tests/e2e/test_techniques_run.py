"""`ssbench run` of the dialog-lifetime axes end to end on the embedded target (real PostgreSQL,
broker process and Locust swarm): every message accounted for, and for messages_per_dialog 1
one dialog begun and ended per message, counted by the database; the summary and the samples
carry the axes' values and the dialog counts."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.matrix import load_matrix
from support.embedded import REPO
from support.summaries import read as read_summary

pytestmark = pytest.mark.slow

MATRIX = """
name: dl
axes: {initiators: [1], threads: [2], dialogs: [per_thread], payload_bytes: [100], server: [durable],
       messages_per_dialog: [1, 5, unlimited], fire_and_forget: [false, true], rate: [100]}
run: {warmup_seconds: 1, measure_seconds: 1, repetitions: 1, drain_timeout_seconds: 60,
      sample_interval_seconds: 0.5}
broker: {max_queue_readers: 2, waitfor_timeout_ms: 500, monitor_interval_seconds: 0.2}
"""


def test_techniques_matrix_is_small_and_shows_each_technique_against_its_baseline():
    m = load_matrix(REPO / "matrices" / "techniques.yaml")
    perms = list(m.permutations())
    assert len(m) == len(perms) == 7 and m.run.planned_repetitions >= 3 and m.run.order == "interleaved"
    # every dialog-lifetime technique and its baseline, closed loop (judged on the rate) ...
    lifetime = [p for p in perms if p.rate is None]
    assert {p.id.split("-", 5)[-1] for p in lifetime} == {"mpd1", "mpd1-ff", "mpd100", "mpd100-ff", "mpdunlimited"}
    # ... and the WAITFOR timeout in open loop, with gaps between messages (1 / rate) longer than
    # the short timeout and shorter than the baseline's, so that tasks end and restart there only
    churn = [p for p in perms if p.rate is not None]
    assert sorted(p.broker.waitfor_timeout_ms for p in churn) == [50, 3000]
    assert all(50 < 1000 / (p.rate * p.initiators) < 3000 and p.messages_per_dialog is None for p in churn)
    assert all(p.initiators == 1 and p.threads <= 4 for p in perms)
    # a few minutes: 21 repetitions of (warm-up + window) plus setup and drain, at most 35 in a
    # time budget (auto rounds until every comparison is decided)
    assert len(m) * m.run.planned_repetitions * (m.run.warmup_seconds + m.run.measure_seconds) <= 240
    assert m.run.auto and m.run.most_repetitions <= 5 and m.run.budget_minutes <= 8


@pytest.mark.swarm
@pytest.mark.untimed("counts of messages and dialogs")
def test_run_accounts_for_every_message_and_dialog(pg_server, tmp_path):
    m = tmp_path / "dl.yaml"
    m.write_text(MATRIX)
    out = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(m), "--out", str(out)], cwd=REPO,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    s = {p.parent.parent.name: read_summary(p) for p in out.glob("*/rep-*/summary.json")}
    base = "i1-t2-per_thread-p100-durable-rate100"     # open loop at 100 SENDs/s
    assert sorted(s) == sorted(f"{base}-{t}" for t in ("mpd1", "mpd1-ff", "mpd5", "mpd5-ff", "mpdunlimited"))
    for pid, x in s.items():
        assert x["messages_sent"] > 0 and x["messages_sent"] == x["messages_received"], (pid, x)
        assert x["messages_lost"] == 0 and x["drained"], (pid, x)
        assert x["dialog_errors_lost"] == x["dialog_errors_received"] == 0
    for ff in ("", "-ff"):
        one = s[f"{base}-mpd1{ff}"]
        assert one["permutation"]["messages_per_dialog"] == 1
        assert one["permutation"]["fire_and_forget"] is bool(ff)
        # one BEGIN DIALOG and one END per message; every dialog closed on both sides
        assert one["dialogs_begun"] == one["dialogs_ended"] == one["messages_sent"], one
        assert one["endpoints"]["initiator.CD"] == one["endpoints"]["target.CD"] == one["messages_sent"]
        five = s[f"{base}-mpd5{ff}"]
        # each user's last dialog may be open when the swarm stops (fewer than 5 messages)
        assert five["messages_sent"] / 5 <= five["dialogs_begun"] <= five["messages_sent"] / 5 + 2, five
        assert five["dialogs_ended"] == five["endpoints"]["initiator.CD"] >= five["dialogs_begun"] - 2, five
    reuse = s[f"{base}-mpdunlimited"]
    assert "messages_per_dialog" not in reuse["permutation"] and reuse["dialogs_begun"] == 0
    assert reuse["endpoints"] == {"initiator.CO": 2, "target.CO": 2}
    samples = [json.loads(line) for line in
               (out / f"{base}-mpd1" / "rep-01" / "samples.jsonl").read_text().splitlines()]
    begun = [x["value"] for x in samples if x["family"] == "dialogs" and x["metric"] == "dialogs_begun"]
    assert begun and begun[-1] > 0 and begun == sorted(begun)
