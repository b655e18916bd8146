"""The scalability model over a run's permutation rows (harness.verdicts.scaling and
scaling_answer): sweeps found, fitted, said not to fit or without a model and why; what a
comparison moves across thread counts; one terminal line per sweep; the no-Spark answer."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest

from harness.verdicts import scaling as S
from harness.verdicts import usl
from harness.verdicts.answer import Answer
from harness.verdicts.scaling_answer import MOVES, SCALING, add_sections

THREADS = (1, 2, 4, 8, 16, 32, 48)
PER_THREAD, SHARED = (2400.0, 0.2, 2e-4), (2400.0, 0.6, 0.03)


def _rows(laws, threads=THREADS, reps=3, spread=0.03, seed=1, run_id="r1", payload=100, statuses=None):
    """Permutation rows as the runner and the analysis give them: per strategy (a law, or a
    function of the thread count), every thread count with ``reps`` receive rates."""
    rng = np.random.default_rng(seed)
    out = []
    for d, law in laws.items():
        for n in threads:
            mean = law(n) if callable(law) else float(usl.rate(n, *law))
            vals = list(mean * np.exp(rng.normal(0.0, spread, reps)))
            out.append({"run_id": run_id, "perm_id": f"i1-t{n}-{d}-p{payload}", "server": "durable", "initiators": 1,
                        "threads": n, "total_threads": n, "payload_bytes": payload, "dialogs": d,
                        "receive_rate_values": vals, "rep_numbers": list(range(1, reps + 1)),
                        "rep_statuses": statuses or ["ok"] * reps})
    return out


def _by_dialogs(sweeps):
    return {s.first["dialogs"]: s for s in sweeps}


def test_each_strategy_is_one_sweep_and_its_known_coefficients_lie_in_their_intervals():
    sweeps = _by_dialogs(S.sweeps(_rows({"per_thread": PER_THREAD, "shared": SHARED})))
    assert set(sweeps) == {"per_thread", "shared"}
    for d, law in (("per_thread", PER_THREAD), ("shared", SHARED)):
        s = sweeps[d]
        assert s.status == S.FITTED and s.threads == THREADS and s.data.n == 21
        lam, sigma, kappa = law
        assert s.ci["sigma"][0] <= sigma <= s.ci["sigma"][1], (d, s.ci["sigma"])
        assert s.ci["kappa"][0] <= kappa <= s.ci["kappa"][1], (d, s.ci["kappa"])
        assert s.ci["log_lam"][0] <= math.log(lam) <= s.ci["log_lam"][1]
    assert sweeps["shared"].ci["sigma"][0] > sweeps["per_thread"].ci["sigma"][1]   # far apart


def test_a_sweep_the_law_does_not_describe_says_so_and_gives_no_coefficient():
    """Linear to 8 threads, flat beyond, a third lower at 48: the lack-of-fit test refuses it;
    its table row and its line carry no coefficient, and its note says why."""
    cliff = (lambda n: 2400.0 * min(n, 8) * (0.67 if n >= 48 else 1.0))
    rows = _rows({"per_thread": PER_THREAD, "shared": cliff})
    sweeps = _by_dialogs(S.sweeps(rows))
    bad = sweeps["shared"]
    assert bad.status == S.NO_FIT and bad.lack[3] < S.FIT_ALPHA and "does not fit" in bad.reason
    row = next(r for r in S.table_rows(sweeps.values()) if r["dialogs"] == "shared")
    assert row["status"] == "does not fit" and row["sigma"] is None and row["lambda"] is None
    answer = Answer(["r1"])
    add_sections(answer, rows)
    line = next(r for r in answer.section(SCALING).rows if r["dialogs"] == "shared")
    assert line.get("sigma_text") is None and line["status"] == "does not fit"
    assert any(n.startswith("does not fit: shared") for n in answer.section(SCALING).notes)
    # the comparison across thread counts has no change computed, and says why
    moves = answer.section(MOVES)
    assert not moves.rows and any("does not fit" in n for n in moves.notes)


def test_a_group_with_fewer_than_four_thread_counts_says_why_it_has_no_model():
    rows = _rows({"per_thread": PER_THREAD, "shared": SHARED}, threads=(1, 8, 32))
    sweeps = S.sweeps(rows)
    assert {s.status for s in sweeps} == {S.NO_MODEL}
    assert "3 thread counts (1, 8, 32)" in sweeps[0].reason and "at least 4" in sweeps[0].reason
    answer = Answer(["r1"])
    add_sections(answer, rows)
    sec = answer.section(SCALING)
    assert [n for n in sec.notes if n.startswith("no model: per_thread, shared: 3 thread counts")]
    assert answer.section(MOVES) is None          # nothing fitted: no shifts section


def test_a_thread_count_whose_repetitions_are_kept_out_does_not_count():
    """Repetitions kept out of verdicts (harness.results.counts_in_verdicts: a disturbed
    window) are left out of the fit too: four measured thread counts with one kept out
    entirely is no model."""
    rows = _rows({"per_thread": PER_THREAD}, threads=(1, 2, 4, 8))
    rows[3]["rep_statuses"] = ["noisy_storage"] * 3
    (s,) = S.sweeps(rows)
    assert s.status == S.NO_MODEL and s.threads == (1, 2, 4)
    assert "no repetition that counts at 8" in s.reason


def test_one_shared_dialog_raises_sigma_and_a_copy_of_the_baseline_moves_nothing():
    rows = _rows({"per_thread": PER_THREAD, "trick150": PER_THREAD, "shared": SHARED}, seed=4)
    sweeps = S.sweeps(rows)
    shifts = {sh.value: sh for sh in S.shifts(rows, sweeps)}
    assert set(shifts) == {"trick150", "shared"}
    shared = shifts["shared"]
    assert shared.baseline_value == "per_thread" and "sigma" in shared.moved()
    d, lo, hi = shared.moves["sigma"]
    assert lo <= 0.4 <= hi and lo > 0                  # the true difference, and it excludes none
    assert shifts["trick150"].moved() == []
    answer = Answer(["r1"])
    add_sections(answer, rows)
    lines = {r["comparison"]: r for r in answer.section(MOVES).rows}
    assert lines["shared"]["moves_text"].startswith("raises σ") and lines["trick150"]["moves_text"] == "none shown"
    assert lines["shared"]["moves"][:1] == ["sigma"] and lines["shared"]["sigma_change_low"] > 0


def test_the_terminal_has_one_line_per_sweep():
    rows = _rows({"per_thread": PER_THREAD, "shared": SHARED}) + _rows({"per_thread": PER_THREAD}, payload=8192)
    answer = Answer(["r1"])
    add_sections(answer, rows)
    out = io.StringIO()
    answer.section(SCALING).text(out)
    lines = out.getvalue().splitlines()
    body = lines[lines.index(next(x for x in lines if x.startswith("---"))) + 1:]
    table = [x for x in body if not x.startswith("  ")]
    assert len(table) == 3, out.getvalue()
    assert all("fitted" in x for x in table)
    doc = answer.to_json()
    assert [s["key"] for s in doc["sections"]] == [SCALING, MOVES]


def test_no_sweep_no_section():
    answer = Answer(["r1"])
    assert add_sections(answer, _rows({"per_thread": PER_THREAD, "shared": SHARED}, threads=(8,))) == []
    assert answer.sections == []


@pytest.mark.parametrize("kind", ["kappa", "sigma"])
def test_the_band_holds_the_curve_and_widens_beyond_the_sweep(kind):
    (s,) = S.sweeps(_rows({"per_thread": PER_THREAD if kind == "sigma" else SHARED}))
    band = S.curve(s)
    assert [p["threads"] for p in band][0] == 1.0 and band[-1]["threads"] == pytest.approx(60.0)
    assert all(p["low"] < p["rate"] < p["high"] for p in band)
    width = {p["threads"]: (p["high"] - p["low"]) / p["rate"] for p in band}
    assert width[60.0] > width[16.0]


def test_the_answer_of_a_run_directory_carries_the_model(tmp_path):
    """``ssbench bench --no-analysis`` (harness.verdicts.answer.run_answer, no Spark): a synthetic
    run whose strategies follow the law gets its sections."""
    from harness.verdicts.answer import run_answer
    from support import synth

    spec = synth.SynthSpec(name="sweep", initiators=(1,), threads=THREADS, dialogs=("per_thread", "shared"),
                           payloads=(100,), servers=("durable",), repetitions=3, warmup_seconds=1, measure_seconds=4,
                           drain_seconds=1, usl=(("per_thread", PER_THREAD), ("shared", SHARED)))
    answer = run_answer(synth.synthesize(tmp_path, spec))
    rows = {r["dialogs"]: r for r in answer.section(SCALING).rows}
    assert rows["shared"]["status"] == "fitted"
    assert rows["shared"]["sigma_ci_low"] <= 0.6 <= rows["shared"]["sigma_ci_high"]
    assert answer.section(MOVES).rows[0]["moves"][:1] == ["sigma"]


def test_the_scaling_matrix_is_three_sweeps_of_seven_thread_counts_across_its_cases():
    """matrices/scaling.yaml measures one and two threads in a case of their own (longer
    windows): the sweeps join the cases, one per dialog strategy, alternated."""
    from harness.matrix import load_matrix
    from harness.results.fields import flat_axes
    from support.embedded import REPO

    m = load_matrix(REPO / "matrices" / "scaling.yaml")
    assert m.run.alternate and m.run.planned_repetitions == 3
    rows = [dict(flat_axes(p.values()), run_id="r") for p in m.permutations()]
    found = S.groups(rows)
    assert sorted(k[S.SWEEP_KEYS.index("dialogs")] for k in found) == ["per_thread", "shared", "trick150"]
    assert all([r["total_threads"] for r in g] == list(THREADS) for g in found.values())
