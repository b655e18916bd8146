"""``run.repetitions: auto`` end to end on the embedded target (real PostgreSQL, real Locust):
the minimum rounds run every permutation, later rounds only the permutations of comparisons
still undecided, the rounds stop at a decision, the maximum or the time budget, the run says
which comparisons stayed inconclusive and why, an interrupted run resumes where it was, and the
key table of ``ssbench bench`` matches what the runner decided.

The verdicts themselves depend on this machine's noise (a busy host keeps its repetitions out
of verdicts), so the tests check the loop against a replay of the rule on the repetitions the
run wrote, not particular verdicts."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.results import RunReader
from harness.verdicts import Rule, permutation_rows
from harness.verdicts.auto import plan_round
from support.embedded import REPO
pytestmark = pytest.mark.slow

MATRIX = """name: autotiny
axes:
  initiators: [1]
  threads: [2]
  dialogs: [per_thread, shared]
  payload_bytes: [100]
  server: [durable]
  rate: [50]                     # open loop: the rounds need repetitions, not a saturated host (23 CPU-s less)
run:
  warmup_seconds: 1
  measure_seconds: 1.5           # a busy host's swarm still completes SENDs in it (1 s once did not)
  repetitions: auto
  max_repetitions: 4
{extra}  drain_timeout_seconds: 30
  sample_interval_seconds: 0.25
broker:
  max_queue_readers: 2
  waitfor_timeout_ms: 300
  monitor_interval_seconds: 0.2
"""
IDS = ["i1-t2-per_thread-p100-durable-rate50", "i1-t2-shared-p100-durable-rate50"]


def ssbench(*args, **kw):
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=900, **kw)


def reps_of(out: Path) -> dict[str, list[int]]:
    return {pid: sorted(int(p.parent.name[4:]) for p in (out / pid).glob("rep-*/summary.json")) for pid in IDS}


def check_rounds(out: Path) -> dict:
    """Every round ran exactly what the rule, replayed on the repetitions on disk, planned."""
    reader = RunReader(out)
    record = reader.record().to_json()
    rule = Rule.of_run(record["matrix"]["run"])
    rows = permutation_rows(s.row() for s in reader.summaries())
    got = reps_of(out)
    auto = record["auto"]
    for rnd in range(1, auto["rounds"] + 1):
        plan = plan_round(rnd, IDS, rows, rule)
        assert [pid for pid in IDS if rnd in got[pid]] == plan.perm_ids, (rnd, got)
    final = plan_round(auto["rounds"] + 1, IDS, rows, rule)
    assert all(max(r, default=0) <= auto["rounds"] for r in got.values())
    assert auto["comparisons"] == 1 and auto["decided"] == 1 - len(final.undecided)
    if auto["stopped"] != "budget":
        assert final.stop == auto["stopped"]
    assert record["permutations_done"] == record["permutations_total"] == sum(map(len, got.values()))
    return auto


@pytest.mark.swarm
@pytest.mark.untimed("the rounds are checked against the rule replayed on the repetitions the run wrote, and the "
                     "budget's stop against the seconds the run recorded, not against this machine's speed")
def test_auto_rounds_resume_the_budget_and_the_answer(pg_server, tmp_path):
    """A run interrupted in its second round, resumed by ``ssbench bench``: every round ran what
    the rule planned; the minimum rounds always run and a fourth does not fit in the 6 s budget
    (budget_minutes 0.1, or the comparison was decided first); the bench's key table is the
    runner's decision."""
    matrix = tmp_path / "auto.yaml"
    matrix.write_text(MATRIX.format(extra="  budget_minutes: 0.1\n"))
    out = tmp_path / "run"
    p = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", str(matrix), "--out", str(out)],
                         cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    second = out / IDS[0] / "rep-02" / "summary.json"
    deadline = time.monotonic() + 600
    while not second.exists() and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.2)
    assert second.exists(), p.communicate()[1][-3000:]
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=300)
    assert p.returncode == 130, err[-3000:]
    record = json.loads((out / "run.json").read_text())
    assert record["status"] == "interrupted" and record["auto"]["rounds"] == 2
    spent = record["auto"]["spent_seconds"]
    assert spent > 0 and record["auto"]["timed_repetitions"] == 3

    r = ssbench("bench", "--matrix", str(matrix), "--out", str(out), "--resume", "--no-analysis", "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    auto = check_rounds(out)
    assert auto["spent_seconds"] > spent
    # the minimum rounds always run; a fourth does not fit in 6 seconds
    assert auto["rounds"] == 3 and auto["stopped"] in ("budget", "decided")
    assert reps_of(out) == {IDS[0]: [1, 2, 3], IDS[1]: [1, 2, 3]}
    if auto["stopped"] == "budget":
        assert "the time budget (0.1 min) left no room for round 4" in r.stderr
    assert "auto repetitions: " in r.stderr and "round(s)" in r.stderr
    # the key table the bench prints (JSON, alone on stdout) is the runner's decision
    doc = json.loads(r.stdout)
    (key,) = doc["sections"]
    # beside it, each permutation's diagnosis (the terminal's may be a grouped summary)
    assert {d["perm_id"] for d in doc["diagnosis"]} == set(IDS) and all(d["confidence"] for d in doc["diagnosis"])
    (row,) = key["rows"]
    assert (row["comparison"], row["baseline"], row["total_threads"]) == ("shared", "per_thread", 2)
    assert (row["verdict"] == "inconclusive") == (auto["decided"] == 0)
    if auto["undecided"]:
        (u,) = auto["undecided"]
        assert u["reason"] == row["reason"] and (u["n"], u["baseline_n"]) == (row["n"], row["baseline_n"])
        assert f"inconclusive: shared vs per_thread at 2 threads: {row['gain_text']}" in r.stderr
