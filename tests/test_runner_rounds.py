"""harness.runner's auto rounds with the repetitions faked (synthetic summaries, a fake clock):
a round that does not fit the time budget runs the comparisons that do, run.json records the
round when it begins, a run interrupted inside that round finishes it as it began however the
clock moved, and the comparisons left out say it was the budget. The real loop on the embedded
target: tests/e2e/test_runner_auto.py."""

from __future__ import annotations

import threading
import types

import pytest

from harness import runner as runner_mod
from harness.matrix import load_matrix
from harness.progress import Progress
from harness.repetition import Interrupted
from harness.results import RunDir
from harness.runner import Runner
from harness.verdicts import Rule, permutation_rows
from harness.verdicts.answer import key_row
from harness.verdicts.auto import plan_round
from harness.verdicts.pairs import judge_all
from support import synth

MATRIX = """name: rounds
axes:
  initiators: [1]
  threads: [1, 8]
  dialogs: [per_thread, trick150, shared]
  payload_bytes: [100]
  server: [durable]
run:
  warmup_seconds: 2
  measure_seconds: 6
  repetitions: auto
  min_repetitions: 3
  max_repetitions: 5
  budget_minutes: {budget}
  threshold_pct: 10
"""
#: what a repetition takes on the fake clock: its warm-up and window, and 4 s more
REP_SECONDS = 12.0
#: the strategies alike and noisy: every comparison undecided after 3 rounds
SPEC = synth.SynthSpec(name="rounds", initiators=(1,), threads=(1, 8), dialogs=("per_thread", "trick150", "shared"),
                       payloads=(100,), servers=("durable",), noise=0.25, measure_seconds=6, warmup_seconds=2,
                       drain_seconds=1, same_as=(("trick150", "per_thread"), ("shared", "per_thread")))


class FakeRunner(Runner):
    """Runner whose repetitions are synthetic summaries, each taking REP_SECONDS on ``clock``;
    ``stop_after``: the number of repetitions after which it is interrupted (Ctrl-C)."""

    def __init__(self, matrix, run_dir, clock, stop_after=None):
        super().__init__(matrix, target=None, run_dir=run_dir, progress=Progress(total=1, force_plain=True),
                         stop_event=threading.Event())
        self.clock, self.stop_after, self.ran, self.lasts = clock, stop_after, [], []

    def run_window(self, window, last=False):
        (perm,), rep = window.members, window.rep
        values = next(v for v in synth.iter_permutations(SPEC) if v["id"].startswith(f"i1-t{perm.threads}-"
                                                                                     f"{perm.dialogs.token}-"))
        summary = synth.write_repetition(self.run_dir.path / perm.id, dict(values, id=perm.id), rep, SPEC,
                                         self.run_dir.run_id)
        self.clock.now += REP_SECONDS
        self.ran.append((perm.id, rep))
        self.lasts.append(last)
        if self.stop_after is not None and len(self.ran) >= self.stop_after:
            self.stop_event.set()
        return [summary]


@pytest.fixture
def setup(tmp_path, monkeypatch):
    clock = types.SimpleNamespace(now=0.0)
    monkeypatch.setattr(runner_mod, "time", types.SimpleNamespace(monotonic=lambda: clock.now))

    def make(budget_s):
        path = tmp_path / "rounds.yaml"
        path.write_text(MATRIX.format(budget=budget_s / 60.0))
        matrix = load_matrix(path)
        rd = RunDir.create(tmp_path / "results", matrix.name, tmp_path / "run")
        rd.begin_record(matrix.to_dict(), {"kind": "fake"}, total=len(matrix) * 3)
        return matrix, rd
    return clock, make


def judged_through(rd, matrix, rnd):
    rows = permutation_rows(s.row() for s in rd.readable_summaries())
    return plan_round(rnd, [p.id for p in matrix.permutations()], rows, Rule.of_run(rd.record().matrix["run"]))


def test_a_round_that_does_not_fit_runs_the_comparisons_that_do(setup):
    """Three rounds of 6 repetitions take 216 s; 40 s more fit one thread count's comparisons
    (3 permutations, 36 s), not both: round 4 runs the 1-thread ones (first in the matrix),
    and the 8-thread ones say the budget left them out."""
    clock, make = setup
    matrix, rd = make(216 + 40)
    runner = FakeRunner(matrix, rd, clock)
    runner.run_auto()
    plan4 = judged_through(rd, matrix, 4)
    assert len(plan4.undecided) == 4, [j.outcome for j in plan4.judged]
    round4 = [pid for pid, rep in runner.ran if rep == 4]
    assert round4 == [p for p in plan4.perm_ids if "-t1-" in p] and len(round4) == 3
    auto = rd.record().auto
    assert auto["round_plan"]["round"] == 4 and auto["round_plan"]["perm_ids"] == round4
    assert auto["rounds"] == 4 and auto["stopped"] == "budget" and auto["window_seconds"] == 8.0 * 21
    left = {(x["perm_id"], x["baseline_perm_id"]) for x in auto["round_plan"]["left_out"]}
    assert left == {(j.pairing.perm_ids) for j in plan4.undecided if "-t8-" in j.pairing.perm_ids[0]}
    rows = {(r["comparison"], r["total_threads"]): r for r in
            (key_row(j, auto) for j in judge_all(permutation_rows(s.row() for s in rd.readable_summaries()),
                                                  default=Rule.of_run(rd.record().matrix["run"])))}
    assert "left no room for it in round 4" in rows[("trick150", 8)]["reason"]
    assert "left no room for round 5" in rows[("trick150", 1)]["reason"] or rows[("trick150", 1)]["verdict"] != "inconclusive"


def test_only_a_runs_last_window_closes_its_swarm_series_early(setup):
    """A run of fixed repetitions knows its last window (its swarm series then closes once its
    drain is over, harness.repetition); an auto run's rounds never do (its series closes at the
    run's end)."""
    clock, make = setup
    matrix, rd = make(216 + 40)
    runner = FakeRunner(matrix, rd, clock)
    runner._execute([(p, 1) for p in matrix.permutations()][:3])
    assert runner.lasts == [False, False, True]
    runner = FakeRunner(matrix, rd, clock)
    runner.run_auto()
    assert len(runner.lasts) > 3 and not any(runner.lasts)


def test_a_round_interrupted_is_finished_as_it_began(setup):
    """Interrupted after the first repetition of the partial round 4, resumed after the clock
    ran far past the budget: the rest of round 4 runs as recorded (the comparisons it began),
    and no other round."""
    clock, make = setup
    matrix, rd = make(216 + 40)
    with pytest.raises(Interrupted):
        FakeRunner(matrix, rd, clock, stop_after=19).run_auto()
    begun = rd.record().auto["round_plan"]
    assert begun["round"] == 4 and len(begun["perm_ids"]) == 3
    clock.now += 3600.0                          # a long pause: the budget is spent
    again = FakeRunner(matrix, rd, clock)
    again.run_auto()
    assert again.ran == [(pid, 4) for pid in begun["perm_ids"][1:]]
    assert rd.record().auto["stopped"] == "budget"
