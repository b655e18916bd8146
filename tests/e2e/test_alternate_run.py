"""`ssbench run` with ``run.alternate`` end to end on the embedded target (real PostgreSQL,
broker process and Locust swarm): the strategies of a group share each window, each member's
summary covers its own slices, the members' SENDs add up to the window's, every message is
accounted for, and the verdicts judge the comparison window by window."""

from __future__ import annotations

import subprocess
import sys

import pytest

from harness.load.window import merge_workers
from harness.results import RunDir, counts_in_verdicts
from harness.verdicts import Rule, permutation_rows
from harness.verdicts.pairs import judge_all, shared_windows
from support.embedded import REPO
from support.summaries import read as read_summary

pytestmark = [pytest.mark.slow, pytest.mark.swarm]

MATRIX = """
name: alt
axes: {initiators: [1], threads: [4], dialogs: [per_thread, shared], payload_bytes: [100], server: [durable]}
run: {warmup_seconds: 1, measure_seconds: 1, repetitions: auto, min_repetitions: 3, max_repetitions: 4,
      threshold_pct: 10, alternate: true, slice_seconds: 0.5, drain_timeout_seconds: 60,
      sample_interval_seconds: 0.5}
broker: {max_queue_readers: 2, waitfor_timeout_ms: 500, monitor_interval_seconds: 0.2}
"""


@pytest.mark.untimed("windows, slices, counts and the pairing of the verdict; the gain it finds is not judged")
def test_an_alternated_run_shares_each_window_and_judges_it_paired(pg_server, tmp_path):
    m = tmp_path / "alt.yaml"
    m.write_text(MATRIX)
    out = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(m), "--out", str(out)], cwd=REPO,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    per, shared = "i1-t4-per_thread-p100-durable", "i1-t4-shared-p100-durable"
    s = {(p.parent.parent.name, int(p.parent.name[4:])): read_summary(p)
         for p in out.glob("*/rep-*/summary.json")}
    # the auto rounds: 3, and a 4th only if the comparison was still undecided; both sides alike
    reps = sorted(rep for pid, rep in s if pid == per)
    assert reps in ([1, 2, 3], [1, 2, 3, 4]) and sorted(rep for pid, rep in s if pid == shared) == reps
    # a window per round, not one per permutation: its recordings with the first member
    for rep in reps:
        assert list((out / per / f"rep-{rep:02d}").glob("worker-*.json"))
        assert not list((out / shared / f"rep-{rep:02d}").glob("worker-*.json"))
    for rep in reps:
        a, b = s[(per, rep)], s[(shared, rep)]
        assert a["window"]["measure_start"] == b["window"]["measure_start"]       # one window
        assert a["alternation"] == {"members": [per, shared], "slice_seconds": 0.5, "member": 0}
        assert b["alternation"]["member"] == 1
        for x in (a, b):
            assert x["window"]["measure_seconds"] == pytest.approx(1.0, abs=0.11)   # its own 2 slices
            assert x["send_rate"] > 0 and x["receive_rate"] > 0
            assert x["messages_lost"] == 0 and x["drained"] and x["messages_sent"] == x["messages_received"]
        # the members' SENDs are the window's, split and none counted twice
        files = sorted((out / per / f"rep-{rep:02d}").glob("worker-*.json"))
        whole = merge_workers(files, a["window"]["measure_start"], a["window"]["measure_end"])
        assert round(a["send_rate"] * a["window"]["measure_seconds"]) + \
            round(b["send_rate"] * b["window"]["measure_seconds"]) == whole.count
    rd = RunDir(out)
    rows = {r["perm_id"]: r for r in permutation_rows(s.row() for s in rd.readable_summaries())}
    assert shared_windows(rows[per], rows[shared])
    (j,) = [j for j in judge_all(list(rows.values()), default=Rule(threshold_pct=10.0))
            if j.pairing.value == "shared"]
    # the paired interval: a window per repetition that counts (a window other tests' load
    # disturbed is kept out with all its members), the same on both sides
    counted = sum(counts_in_verdicts(s[(per, rep)]["status"]) for rep in reps)
    assert all(s[(per, rep)]["status"] == s[(shared, rep)]["status"] for rep in reps)
    assert (j.outcome.n_treatment, j.outcome.n_baseline) == (counted, counted)
    assert (j.outcome.gain_pct is not None) == bool(counted), j.outcome
