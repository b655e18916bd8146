"""harness.verdicts.auto: the rounds of ``run.repetitions: auto`` (which permutations, when to
stop), as a pure function of the repetitions so far: an interrupted run resumes exactly."""

from __future__ import annotations

import copy

import pytest

from harness.verdicts import Rule
from harness.verdicts.auto import STOP_DECIDED, STOP_MAX, STOP_NONE, plan_round, round_fits, through

IDS = ["t8-per_thread", "t8-trick150", "t8-shared"]
RULE = Rule(threshold_pct=10.0, min_reps=3, max_reps=5)
#: per_thread and trick150 alike but noisy (undecided for a while), shared a clear loss
TRUTH = {"t8-per_thread": [1000, 1150, 880, 1010, 940], "t8-trick150": [1120, 870, 1060, 930, 990],
         "t8-shared": [300, 305, 298, 302, 301]}


def rows():
    return {pid: {"run_id": "r", "perm_id": pid, "server": "durable", "initiators": 1, "threads": 8,
                  "total_threads": 8, "dialogs": pid.split("-")[1], "payload_bytes": 100,
                  "rep_numbers": [], "rep_statuses": [], "receive_rate_values": []} for pid in IDS}


def add(rs, pid, rnd, status="ok"):
    rs[pid]["rep_numbers"].append(rnd)
    rs[pid]["rep_statuses"].append(status)
    rs[pid]["receive_rate_values"].append(float(TRUTH[pid][rnd - 1]))


def run_loop(rs, rule=RULE, stop_after=None):
    """The runner's loop on pre-measured values; ``stop_after``: (round, reps) to interrupt at."""
    plans = []
    for rnd in range(1, (rule.max_reps or rule.min_reps) + 2):
        plan = plan_round(rnd, IDS, list(rs.values()), rule)
        plans.append(plan)
        if plan.stop:
            break
        for i, pid in enumerate(plan.perm_ids):
            if rnd in rs[pid]["rep_numbers"]:
                continue            # complete before the interruption
            if stop_after == (rnd, i):
                return plans
            add(rs, pid, rnd)
    return plans


def test_the_minimum_rounds_run_everything_then_only_undecided_comparisons():
    rs = rows()
    plans = run_loop(rs)
    assert [p.perm_ids for p in plans[:3]] == [IDS] * 3
    # after round 3 the shared dialog is a decided loss: round 4 runs the other comparison only
    shared = next(j for j in plans[3].judged if j.pairing.value == "shared")
    assert shared.outcome.verdict == "loss" and shared.outcome.look == 3
    assert plans[3].perm_ids == ["t8-per_thread", "t8-trick150"]
    # the 150 trick stays within noise of +-20 %: undecided at the maximum, which stops the rounds
    assert [p.perm_ids for p in plans[3:]] == [IDS[:2], IDS[:2], []] and plans[-1].stop == STOP_MAX
    assert [len(rs[pid]["rep_numbers"]) for pid in IDS] == [5, 5, 3]


def test_a_round_is_planned_from_the_rounds_before_it():
    rs = rows()
    for rnd in (1, 2, 3):
        for pid in IDS:
            add(rs, pid, rnd)
    before = plan_round(4, IDS, list(rs.values()), RULE)
    add(rs, "t8-per_thread", 4)            # round 4 half done: the plan for round 4 is unchanged
    after = plan_round(4, IDS, list(rs.values()), RULE)
    assert before.perm_ids == after.perm_ids
    assert [j.outcome for j in before.judged] == [j.outcome for j in after.judged]
    assert through(list(rs.values()), 3)[0]["rep_numbers"] == [1, 2, 3]


@pytest.mark.parametrize("stop_after", [(2, 1), (4, 0), (4, 1)])
def test_an_interrupted_run_resumes_to_the_same_repetitions(stop_after):
    whole = rows()
    run_loop(whole)
    resumed = rows()
    run_loop(resumed, stop_after=stop_after)
    assert resumed != whole
    run_loop(resumed)
    assert resumed == whole


def test_stops():
    rs = rows()
    assert plan_round(1, IDS, [], RULE).perm_ids == IDS
    # at the maximum: stop, saying so
    for rnd in range(1, 6):
        for pid in IDS[:2]:
            add(rs, pid, rnd)
    plan = plan_round(6, IDS, list(rs.values()), RULE)
    assert plan.perm_ids == [] and plan.stop == STOP_MAX and len(plan.undecided) == 2   # shared: no data
    # a matrix without comparisons: its minimum rounds, then stop
    alone = {"x": dict(rows()["t8-per_thread"], perm_id="x")}
    assert plan_round(3, ["x"], list(alone.values()), RULE).perm_ids == ["x"]
    assert plan_round(4, ["x"], list(alone.values()), RULE).stop == STOP_NONE
    # everything decided: stop
    decided = rows()
    for rnd in (1, 2, 3):
        for pid in ("t8-per_thread", "t8-shared"):
            add(decided, pid, rnd)
    del decided["t8-trick150"]
    plan = plan_round(4, IDS, list(decided.values()), RULE)
    assert plan.stop == STOP_DECIDED and plan.perm_ids == []


def test_repetitions_kept_out_make_the_round_count_less(noisy_kept_out):
    rs = rows()
    for rnd in (1, 2, 3):
        for pid in IDS:
            add(rs, pid, rnd, "noisy_host" if (pid, rnd) == ("t8-shared", 2) else "ok")
    plan = plan_round(4, IDS, list(rs.values()), RULE)
    shared = next(j for j in plan.judged if j.pairing.value == "shared")
    assert shared.outcome.verdict == "inconclusive" and shared.outcome.n_treatment == 2
    assert "t8-shared" in plan.perm_ids


def test_the_budget():
    assert round_fits(100.0, 5, None, 200.0)            # nothing timed yet
    assert round_fits(100.0, 5, 20.0, 200.0)
    assert not round_fits(100.0, 6, 20.0, 200.0)
    assert round_fits(1e9, 100, 20.0, None)              # no budget
    assert copy.deepcopy(RULE) == RULE


def test_a_technique_not_exercised_adds_no_round():
    """A WAITFOR comparison whose mechanism never engaged is settled: after the minimum rounds
    no round is added for it (the loop must not spin to the maximum on it), and the rounds stop
    as when everything is decided."""
    def waitfor(pid, timeout, values, churn):
        return {"run_id": "r", "perm_id": pid, "server": "durable", "initiators": 1, "threads": 8,
                "total_threads": 8, "dialogs": "per_thread", "payload_bytes": 100, "waitfor_timeout_ms": timeout,
                "rep_numbers": [1, 2, 3], "rep_statuses": ["ok"] * 3, "e2e_p99_ms_values": values,
                "activation_tasks_started_in_window_values": [churn] * 3,
                "activation_tasks_ended_in_window_values": [0] * 3}
    noisy = [waitfor("w3000", 3000, [50.0, 80.0, 40.0], 0), waitfor("w50", 50, [60.0, 45.0, 90.0], 0)]
    plan = plan_round(4, ["w3000", "w50"], noisy, RULE)
    (j,) = plan.judged
    assert j.outcome.verdict == "not exercised" and j.outcome.settled and not j.outcome.decided
    assert plan.stop == STOP_DECIDED and plan.perm_ids == [] and plan.undecided == [] and plan.not_exercised == [j]
    # the same values with the mechanism at work: undecided, so round 4 runs both permutations
    engaged = [waitfor("w3000", 3000, [50.0, 80.0, 40.0], 0), waitfor("w50", 50, [60.0, 45.0, 90.0], 2)]
    plan = plan_round(4, ["w3000", "w50"], engaged, RULE)
    assert plan.stop is None and plan.perm_ids == ["w3000", "w50"] and len(plan.undecided) == 1
