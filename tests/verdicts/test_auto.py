"""harness.verdicts.auto: the rounds of ``run.repetitions: auto`` (which permutations, when to
stop), as a pure function of the repetitions so far: an interrupted run resumes exactly."""

from __future__ import annotations


import pytest

from harness.verdicts import Rule
from harness.verdicts.auto import STOP_BUDGET, STOP_DECIDED, STOP_MAX, STOP_NONE, fit_round, plan_round, through

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


#: bench.yaml's family after 3 rounds: every comparison undecided (the strategies alike, noisy)
#: but one shared dialog at 8 threads, a clear loss
BENCH_IDS = [f"t{t}-{d}" for t in (1, 8, 32) for d in ("per_thread", "trick150", "shared")]
NOISY = [[1000, 1150, 880], [1120, 870, 1060], [940, 1080, 1010]]
COST = {pid: 20.0 if pid.startswith("t1-") else 10.0 for pid in BENCH_IDS}   # 16 or 6 s windows + 4 s


def bench_rows():
    out = []
    for i, pid in enumerate(BENCH_IDS):
        t, d = pid.split("-")
        values = [300, 305, 298] if pid == "t8-shared" else NOISY[i % 3]
        out.append({"run_id": "r", "perm_id": pid, "server": "durable", "initiators": 1, "threads": int(t[1:]),
                    "total_threads": int(t[1:]), "dialogs": d, "payload_bytes": 100, "rep_numbers": [1, 2, 3],
                    "rep_statuses": ["ok"] * 3, "receive_rate_values": [float(v) for v in values]})
    return out


def fitted(room, cost=COST):
    plan = plan_round(4, BENCH_IDS, bench_rows(), RULE)
    assert len(plan.undecided) == 5 and "t8-shared" not in plan.perm_ids
    return fit_round(plan, 500.0, cost, 500.0 + room)


def compared(plan):
    return sorted((j.pairing.value, j.pairing.treatment["threads"]) for j in plan.undecided
                  if j not in plan.left_out)


RUN = [p for p in BENCH_IDS if p != "t8-shared"]   # round 4's permutations


def test_a_round_that_fits_runs_whole():
    for room in (110.0, 1000.0):
        plan = fitted(room)
        assert plan.perm_ids == RUN and plan.left_out == [] and plan.stop is None
    plan = plan_round(4, BENCH_IDS, bench_rows(), RULE)
    assert fit_round(plan, 1e9, COST, None).perm_ids == RUN       # no budget
    assert fit_round(plan, 1e9, None, 10.0).perm_ids == RUN       # nothing timed yet


def test_a_round_that_does_not_fit_runs_the_most_comparisons_that_do():
    """Comparisons that share a baseline go together or not at all, so no comparison gets a
    repetition on one side only: 1 thread (2 comparisons, 60 s), 8 threads (1, 20 s), 32
    threads (2, 30 s). The most comparisons that fit, then the cheapest."""
    plan = fitted(90.0)                                   # 1 and 32 threads: 4 comparisons
    assert plan.perm_ids == RUN[:3] + RUN[5:] and plan.stop is None
    assert compared(plan) == [("shared", 1), ("shared", 32), ("trick150", 1), ("trick150", 32)]
    assert [j.pairing.perm_ids for j in plan.left_out] == [("t8-trick150", "t8-per_thread")]
    assert fitted(80.0).perm_ids == RUN[3:]               # 3 comparisons: 8 and 32 (50 s), not 1 and 8 (80 s)
    plan = fitted(45.0)                                   # 2 comparisons (32 threads) over 1 (8 threads)
    assert plan.perm_ids == RUN[5:] and len(plan.left_out) == 3
    assert fitted(25.0).perm_ids == RUN[3:5]
    plan = fitted(15.0)                                   # nothing fits: the rounds stop
    assert plan.stop == STOP_BUDGET and plan.perm_ids == [] and len(plan.left_out) == 5


def test_a_permutation_already_run_in_the_round_costs_nothing():
    """Resumed mid-round, what ran before the interruption is not paid again: with the
    1-thread baseline and 150 trick run, the 1-thread group costs 20 s."""
    cost = {p: c for p, c in COST.items() if p not in ("t1-per_thread", "t1-trick150")}
    plan = fitted(25.0, cost)
    assert plan.perm_ids == RUN[:3] and compared(plan) == [("shared", 1), ("trick150", 1)]


def test_the_family_is_grouped_by_the_permutations_it_shares():
    """Comparisons chained through a baseline form one group; the greedy choice (past
    EXHAUSTIVE_GROUPS) never splits a group either."""
    from harness.verdicts import auto

    groups = auto._groups(plan_round(4, BENCH_IDS, bench_rows(), RULE))
    assert [(ids, len(c)) for ids, c in groups] == [(RUN[:3], 2), (RUN[3:5], 1), (RUN[5:], 2)]
    saved = auto.EXHAUSTIVE_GROUPS
    auto.EXHAUSTIVE_GROUPS = 1
    try:
        plan = fitted(55.0)                   # by cost per comparison: 32 threads (15), 8 (20), 1 (30)
    finally:
        auto.EXHAUSTIVE_GROUPS = saved
    assert plan.perm_ids == RUN[3:] and [j.pairing.perm_ids[0] for j in plan.left_out] == ["t1-trick150", "t1-shared"]


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
