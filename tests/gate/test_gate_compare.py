"""harness.gate.compare and ``ssbench gate --baseline/--candidate``: verdicts, files, exit codes,
and the statistical acceptance tests (false alarms and detection rates on synthetic runs)."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from harness.cli import main
from harness.errors import UserError
from harness.gate import GateSettings, compare_runs, compare_samples, load_run, write_report
from harness.gate.compare import FAIL, IMPROVED, NO_DATA, PASS, REGRESSION, WARNING

PERM = "i1-t4-per_thread-p100-durable"
PERM2 = "i1-t4-shared-p100-durable"
HOST = {"hostname": "ci-1", "platform": "Linux-6.1-x86_64", "cpu_model": "Xeon", "cpu_count": 2,
        "memory_bytes": 8 * 2 ** 30}
SOFTWARE = {"python": "3.11.7", "locust": "2.47.0", "psycopg": "3.3.9"}
BASE = {"receive_rate": 3000.0, "send_rate": 3000.0, "send_p50_ms": 2.0, "send_p99_ms": 8.0, "e2e_p99_ms": 30.0}


# --------------------------------------------------------------------------- synthetic runs

def make_summary(perm: str, rep: int, receive_rate: float = 3000.0, send_rate: float | None = None,
                 send_p50: float | None = 2.0, send_p99: float | None = 8.0, e2e_p99: float | None = 30.0,
                 lost: int = 0, errors: int = 0, queue_disabled: bool = False, client_bound: bool = False,
                 measure_seconds: float = 3.0, status: str | None = None) -> dict:
    """A rep-NN/summary.json in the documented schema (docs/results.md)."""
    send_rate = receive_rate if send_rate is None else send_rate
    return {
        "schema": "ssbench.summary/1", "run_id": "synthetic", "permutation_id": perm, "repetition": rep,
        "permutation": {"id": perm, "index": 1, "initiators": 1, "threads": 4, "total_threads": 4,
                        "dialogs": "per_thread", "payload_bytes": 100, "server": "durable"},
        "target": {"kind": "embedded", "profile": "durable"},
        "window": {"warmup_seconds": 1, "measure_seconds": measure_seconds},
        "messages_sent": int(send_rate * measure_seconds), "messages_received": int(receive_rate * measure_seconds),
        "messages_lost": lost, "drained": lost == 0,
        "send_rate": send_rate, "receive_rate": receive_rate,
        "send_latency_ms": {"count": 100, "p50": send_p50, "p95": None, "p99": send_p99},
        "e2e_latency_ms": {"count": 100, "p50": None, "p95": None, "p99": e2e_p99},
        "client_bound": client_bound, "errors": errors, "error_samples": [],
        "poison_messages": 0, "queue_disabled": queue_disabled,
        "status": status or ("lost" if lost else "errors" if errors else "ok"),
    }


def write_run(path: Path, perms: dict[str, list[dict]], *, host: dict | None = None,
              software: dict | None = None, status: str = "complete", commit: str = "abc123") -> Path:
    """Write a run directory: ``perms`` maps a permutation id to its repetitions' summaries
    (dicts from :func:`make_summary`, or keyword dicts for it)."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "run.json").write_text(json.dumps({
        "schema": "ssbench.run/1", "run_id": path.name, "status": status,
        "ssbench": {"version": "0.1.0", "git_commit": commit, "git_dirty": False},
        "matrix": {"name": "gate", "run": {"warmup_seconds": 1, "measure_seconds": 3, "repetitions": 4},
                   "broker": {"max_queue_readers": 2}},
        "target": {"kind": "embedded", "label": "PostgreSQL emulation", "versions": {"postgresql": "18.6"}},
        "software": dict(SOFTWARE if software is None else software),
        "host": dict(HOST if host is None else host),
    }))
    for perm, reps in perms.items():
        for i, rep in enumerate(reps, start=1):
            d = path / perm / f"rep-{i:02d}"
            d.mkdir(parents=True)
            doc = rep if "schema" in rep else make_summary(perm, i, **rep)
            (d / "summary.json").write_text(json.dumps(doc))
    return path


def reps_of(rates: list[float], **kw) -> list[dict]:
    return [dict(receive_rate=r, **kw) for r in rates]


def run_gate(*args: str) -> int:
    return main(["gate", *args])


# --------------------------------------------------------------------------- verdict rules

def test_regression_needs_effect_and_significance(tmp_path):
    base = write_run(tmp_path / "b", {PERM: reps_of([3000, 3010, 2990, 3005, 2995])})
    cand = write_run(tmp_path / "c", {PERM: reps_of([2700, 2710, 2690, 2705, 2695])})
    rep = compare_runs(load_run(base), load_run(cand))
    by = {r.metric: r for r in rep.rows}
    assert by["receive_rate"].verdict == REGRESSION
    assert by["receive_rate"].r == pytest.approx(2700 / 3000)
    assert by["receive_rate"].threshold == pytest.approx(0.05)          # 5 % floor: baseline spread is tiny
    assert by["receive_rate"].p == pytest.approx(1 / 252)
    assert by["send_p99_ms"].verdict == PASS                          # identical latencies
    assert rep.verdict == REGRESSION and rep.exit_code == 1


def test_effect_without_significance_is_a_warning(tmp_path):
    # 10 % lower median but the samples overlap: p is large
    base = write_run(tmp_path / "b", {PERM: reps_of([3000, 2500, 3400, 2600, 3300])})
    cand = write_run(tmp_path / "c", {PERM: reps_of([2700, 3350, 2550, 2650, 3250])})
    settings = GateSettings(k=0.0)   # isolate the rule: the threshold is the 5 % floor
    row = next(r for r in compare_runs(load_run(base), load_run(cand), settings).rows if r.metric == "receive_rate")
    assert row.effect_beyond and not row.significant
    assert row.verdict == WARNING


def test_significance_without_effect_is_a_warning(tmp_path):
    base = write_run(tmp_path / "b", {PERM: reps_of([3000, 3001, 3002, 3003, 3004])})
    cand = write_run(tmp_path / "c", {PERM: reps_of([2940, 2941, 2942, 2943, 2944])})  # 2 % worse, clean
    rep = compare_runs(load_run(base), load_run(cand))
    rows = {r.metric: r for r in rep.rows}
    for m in ("receive_rate", "send_rate"):
        assert rows[m].significant and not rows[m].effect_beyond
        assert rows[m].verdict == WARNING
    assert rep.verdict == WARNING and rep.exit_code == 0


def test_threshold_grows_with_baseline_noise(tmp_path):
    noisy = [3000, 2700, 3300, 2850, 3150]      # MAD 150 -> spread 222 = 7.4 %
    base = write_run(tmp_path / "b", {PERM: reps_of(noisy)})
    cand = write_run(tmp_path / "c", {PERM: reps_of([x * 0.92 for x in noisy])})
    row = next(r for r in compare_runs(load_run(base), load_run(cand)).rows if r.metric == "receive_rate")
    assert row.baseline_spread == pytest.approx(150 * 1.4826 / 3000)
    assert row.threshold == pytest.approx(2 * 150 * 1.4826 / 3000)   # k = 2
    assert not row.effect_beyond and row.verdict == PASS
    iqr = compare_runs(load_run(base), load_run(cand), GateSettings(spread="iqr")).rows[0]
    assert iqr.baseline_spread == pytest.approx(300 / 1.349 / 3000)


def test_latency_effect_is_inverted(tmp_path):
    base = write_run(tmp_path / "b", {PERM: [dict(send_p99=8.0 + i * 0.01) for i in range(5)]})
    cand = write_run(tmp_path / "c", {PERM: [dict(send_p99=10.0 + i * 0.01) for i in range(5)]})
    row = next(r for r in compare_runs(load_run(base), load_run(cand)).rows if r.metric == "send_p99_ms")
    assert row.r == pytest.approx(8.02 / 10.02)   # baseline / candidate: < 1 is worse
    assert row.verdict == REGRESSION
    # and the other way round it is an improvement, exit 0
    rep = compare_runs(load_run(cand), load_run(base))
    assert next(r for r in rep.rows if r.metric == "send_p99_ms").verdict == IMPROVED
    assert rep.exit_code == 0


def test_fewer_than_min_reps_judges_effect_only(tmp_path):
    base = write_run(tmp_path / "b", {PERM: reps_of([3000, 3010, 2990])})
    cand = write_run(tmp_path / "c", {PERM: reps_of([2700, 2710, 2690])})
    rep = compare_runs(load_run(base), load_run(cand))
    row = next(r for r in rep.rows if r.metric == "receive_rate")
    assert row.p is None and row.significance_judged is False and row.significant is None
    assert row.verdict == REGRESSION and "effect-only" in row.reason
    table = rep.format_table()
    assert "REGRESSION (effect-only)" in table and "significance not judged" in table
    small = write_run(tmp_path / "c2", {PERM: reps_of([2950, 2960, 2940])})
    assert compare_runs(load_run(base), load_run(small)).exit_code == 0


def test_bh_across_permutations_and_metrics(tmp_path):
    """A lone 8 % drop in one metric of one permutation with 4 reps a side cannot pass BH
    across 10 tests (smallest p is 1/70): a warning, not a regression. A drop that hits every
    metric (what a slower SEND does) is a regression."""
    base = write_run(tmp_path / "b", {PERM: reps_of([3000, 3010, 2990, 3005]),
                                      PERM2: reps_of([3000, 3010, 2990, 3005])})
    lone = [dict(receive_rate=r, send_rate=3000 + i) for i, r in enumerate([2760, 2770, 2750, 2765])]
    cand = write_run(tmp_path / "c", {PERM: lone, PERM2: reps_of([3000, 3010, 2990, 3005])})
    rep = compare_runs(load_run(base), load_run(cand))
    row = next(r for r in rep.rows if r.metric == "receive_rate" and r.permutation == PERM)
    assert row.p == pytest.approx(1 / 70) and row.q > 0.05
    assert row.verdict == WARNING and rep.exit_code == 0
    slow = [dict(receive_rate=2700 + i, send_rate=2700 + i, send_p50=2.5 + i / 100, send_p99=10 + i / 100,
                 e2e_p99=38 + i / 100) for i in range(4)]
    base2 = write_run(tmp_path / "b2", {PERM: [dict(receive_rate=3000 + i, send_rate=3000 + i, send_p50=2 + i / 100,
                                                    send_p99=8 + i / 100, e2e_p99=30 + i / 100) for i in range(4)],
                                        PERM2: reps_of([3000, 3010, 2990, 3005])})
    cand2 = write_run(tmp_path / "c2", {PERM: slow, PERM2: reps_of([3000, 3010, 2990, 3005])})
    rep2 = compare_runs(load_run(base2), load_run(cand2))
    assert {r.metric for r in rep2.rows if r.verdict == REGRESSION} == {
        "receive_rate", "send_rate", "send_p50_ms", "send_p99_ms", "e2e_p99_ms"}
    assert rep2.permutation_verdicts == {PERM: REGRESSION, PERM2: PASS}


# --------------------------------------------------------------------------- integrity

def test_lost_messages_fail_whatever_the_throughput(tmp_path):
    base = write_run(tmp_path / "b", {PERM: reps_of([3000] * 4)})
    cand = write_run(tmp_path / "c", {PERM: [dict(receive_rate=4000), dict(receive_rate=4000, lost=3),
                                             dict(receive_rate=4000), dict(receive_rate=4000)]})
    rep = compare_runs(load_run(base), load_run(cand))
    assert rep.integrity[0].verdict == FAIL and "lost 3 message" in rep.integrity[0].reasons[0]
    assert rep.verdict == FAIL and rep.exit_code == 1
    assert "FAIL: " + PERM in rep.format_table()


def test_errors_rising_fail_and_same_errors_pass(tmp_path):
    base = write_run(tmp_path / "b", {PERM: reps_of([3000] * 4, errors=2)})
    same = write_run(tmp_path / "same", {PERM: reps_of([3000] * 4, errors=2)})
    more = write_run(tmp_path / "more", {PERM: reps_of([3000] * 3, errors=2) + reps_of([3000], errors=3)})
    assert compare_runs(load_run(base), load_run(same)).exit_code == 0
    rep = compare_runs(load_run(base), load_run(more))
    assert rep.exit_code == 1 and "errors rose" in rep.integrity[0].reasons[0]


def test_disabled_queue_fails(tmp_path):
    base = write_run(tmp_path / "b", {PERM: reps_of([3000] * 4)})
    cand = write_run(tmp_path / "c", {PERM: reps_of([3000] * 3) + reps_of([3000], queue_disabled=True)})
    assert compare_runs(load_run(base), load_run(cand)).verdict == FAIL


def test_notes_for_client_bound_and_baseline_losses(tmp_path):
    base = write_run(tmp_path / "b", {PERM: reps_of([3000] * 3) + reps_of([3000], lost=1)})
    cand = write_run(tmp_path / "c", {PERM: reps_of([3000] * 3) + reps_of([3000], client_bound=True)})
    rep = compare_runs(load_run(base), load_run(cand))
    text = "\n".join(rep.notes)
    assert "baseline lost messages" in text and "client-bound" in text
    assert rep.exit_code == 0


def test_note_for_users_that_were_not_sending(tmp_path):
    base = write_run(tmp_path / "b", {PERM: reps_of([3000] * 4)})
    cand = write_run(tmp_path / "c", {PERM: reps_of([3000] * 3) + reps_of([3000], status="users_idle")})
    text = "\n".join(compare_runs(load_run(base), load_run(cand)).notes)
    assert "candidate repetition(s) 4 had Locust users that were not sending" in text


# --------------------------------------------------------------------------- files and provenance

def test_missing_latency_is_no_data_not_an_error(tmp_path):
    base = write_run(tmp_path / "b", {PERM: reps_of([3000] * 4, e2e_p99=None)})
    cand = write_run(tmp_path / "c", {PERM: reps_of([3000] * 4)})
    row = next(r for r in compare_runs(load_run(base), load_run(cand)).rows if r.metric == "e2e_p99_ms")
    assert row.verdict == NO_DATA and "baseline" in row.reason


def test_partial_and_incomplete_reps_are_ignored(tmp_path):
    base = write_run(tmp_path / "b", {PERM: reps_of([3000] * 4)})
    (base / PERM / ".rep-05.partial").mkdir()
    (base / PERM / "rep-06").mkdir()          # no summary.json
    (base / "report").mkdir()
    run = load_run(base)
    assert len(run.perms[PERM].reps) == 4
    assert any("rep-06" in n for n in run.notes)


def test_provenance_differences_are_warned(tmp_path):
    base = write_run(tmp_path / "b", {PERM: reps_of([3000] * 4)}, commit="aaa")
    same = write_run(tmp_path / "s", {PERM: reps_of([3000] * 4)}, commit="bbb")
    other = write_run(tmp_path / "o", {PERM: reps_of([3000] * 4)},
                      host={**HOST, "hostname": "laptop", "cpu_count": 8},
                      software={**SOFTWARE, "psycopg": "3.2.0"})
    assert compare_runs(load_run(base), load_run(same)).provenance_warnings == []   # commits may differ
    warns = compare_runs(load_run(base), load_run(other)).provenance_warnings
    assert any(w.startswith("host.hostname: 'ci-1'") for w in warns)
    assert any(w.startswith("host.cpu_count") for w in warns)
    assert any(w.startswith("software.psycopg") for w in warns)


def test_cli_table_json_and_exit_codes(tmp_path, capsys):
    base = write_run(tmp_path / "b", {PERM: reps_of([3000, 3010, 2990, 3005, 2995])})
    cand = write_run(tmp_path / "c", {PERM: reps_of([2700, 2710, 2690, 2705, 2695])},
                     host={**HOST, "hostname": "other"})
    assert run_gate("--baseline", str(base), "--candidate", str(cand)) == 1
    out = capsys.readouterr().out
    for col in ("permutation", "metric", "baseline", "candidate", "r", "threshold", "p", "q", "verdict"):
        assert col in out.splitlines()[0].split()
    assert "REGRESSION" in out and "Benjamini-Hochberg" in out
    assert "threshold = max(5%, k=2" in out
    assert "warning: provenance differs: host.hostname" in out
    doc = json.loads((cand / "gate.json").read_text())
    assert doc["schema"] == "ssbench.gate/1" and doc["verdict"] == "regression" and doc["exit_code"] == 1
    assert doc["settings"]["correction"] == "benjamini-hochberg" and doc["settings"]["k"] == 2.0
    assert doc["permutations"] == {PERM: "regression"}
    row = next(r for r in doc["rows"] if r["metric"] == "receive_rate")
    assert row["threshold"] == pytest.approx(0.05) and row["p"] == pytest.approx(1 / 252)
    # same run against itself: pass
    assert run_gate("--baseline", str(base), "--candidate", str(base), "--no-report") == 0
    assert not (base / "gate.json").exists()
    # --report elsewhere
    assert run_gate("--baseline", str(base), "--candidate", str(cand), "--report", str(tmp_path / "g.json")) == 1
    assert json.loads((tmp_path / "g.json").read_text())["verdict"] == "regression"


def test_cli_strict_and_metric_subset(tmp_path):
    base = write_run(tmp_path / "b", {PERM: reps_of([3000, 3001, 3002, 3003, 3004])})
    cand = write_run(tmp_path / "c", {PERM: reps_of([2940, 2941, 2942, 2943, 2944])})   # warning only
    assert run_gate("--baseline", str(base), "--candidate", str(cand), "--no-report") == 0
    assert run_gate("--baseline", str(base), "--candidate", str(cand), "--no-report", "--strict") == 1
    assert run_gate("--baseline", str(base), "--candidate", str(cand), "--no-report",
                    "--metrics", "send_p99_ms,e2e_p99_ms", "--strict") == 0


@pytest.mark.parametrize("case", ["missing_dir", "no_run_json", "bad_run_json", "bad_summary", "missing_field",
                                  "not_number", "no_common", "no_reps", "usage", "bad_metric", "bad_k"])
def test_cli_input_errors_exit_2_and_name_the_file(tmp_path, capsys, case):
    base = write_run(tmp_path / "b", {PERM: reps_of([3000] * 4)})
    cand = write_run(tmp_path / "c", {PERM: reps_of([3000] * 4)})
    args = ["--baseline", str(base), "--candidate", str(cand)]
    expect = None
    if case == "missing_dir":
        args[3] = str(tmp_path / "nope")
        expect = str(tmp_path / "nope")
    elif case == "no_run_json":
        (cand / "run.json").unlink()
        expect = "no run.json"
    elif case == "bad_run_json":
        (cand / "run.json").write_text("{not json")
        expect = str(cand / "run.json")
    elif case == "bad_summary":
        (cand / PERM / "rep-02" / "summary.json").write_text('{"send_rate": 1,')
        expect = str(cand / PERM / "rep-02" / "summary.json")
    elif case == "missing_field":
        doc = make_summary(PERM, 3)
        del doc["receive_rate"]
        (cand / PERM / "rep-03" / "summary.json").write_text(json.dumps(doc))
        expect = "rep-03/summary.json: receive_rate: missing field"
    elif case == "not_number":
        doc = make_summary(PERM, 1)
        doc["send_rate"] = "fast"
        (base / PERM / "rep-01" / "summary.json").write_text(json.dumps(doc))
        expect = "send_rate: must be a finite number"
    elif case == "no_common":
        cand = write_run(tmp_path / "c2", {PERM2: reps_of([3000] * 4)})
        args[3] = str(cand)
        expect = "no common permutations"
    elif case == "no_reps":
        empty = tmp_path / "empty"
        empty.mkdir()
        (empty / "run.json").write_text("{}")
        args[3] = str(empty)
        expect = "no complete repetition"
    elif case == "usage":
        args = ["--baseline", str(base)]
        expect = "--candidate"
    elif case == "bad_metric":
        args += ["--metrics", "throughput"]
        expect = "unknown metric"
    elif case == "bad_k":
        args += ["--k", "-1"]
        expect = "--k"
    assert run_gate(*args) == 2
    err = capsys.readouterr().err
    assert err.startswith("ssbench: error:") and expect in err, err


def test_status_not_complete_is_noted(tmp_path):
    base = write_run(tmp_path / "b", {PERM: reps_of([3000] * 4)})
    cand = write_run(tmp_path / "c", {PERM: reps_of([3000] * 2)}, status="interrupted")
    rep = compare_runs(load_run(base), load_run(cand))
    assert any("'interrupted'" in n for n in rep.notes)
    assert all(not r.significance_judged for r in rep.rows)


def test_gate_json_is_strict_json(tmp_path):
    base = write_run(tmp_path / "b", {PERM: reps_of([0.0] * 4)})        # rates 0: r = 1, spread 0
    cand = write_run(tmp_path / "c", {PERM: reps_of([5.0] * 4)})
    rep = compare_runs(load_run(base), load_run(cand))
    path = write_report(rep)
    json.loads(path.read_text(), parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))


def test_files_and_memory_paths_agree(tmp_path):
    rng = random.Random(7)
    b = {PERM: {m: [v * (1 + rng.gauss(0, 0.03)) for _ in range(5)] for m, v in BASE.items()}}
    c = {PERM: {m: [v * 0.9 * (1 + rng.gauss(0, 0.03)) for _ in range(5)] for m, v in BASE.items()}}
    mem = compare_samples(b, c)

    def reps(side):
        vals = side[PERM]
        return [dict(receive_rate=vals["receive_rate"][i], send_rate=vals["send_rate"][i],
                     send_p50=vals["send_p50_ms"][i], send_p99=vals["send_p99_ms"][i],
                     e2e_p99=vals["e2e_p99_ms"][i]) for i in range(5)]
    files = compare_runs(load_run(write_run(tmp_path / "b", {PERM: reps(b)})),
                         load_run(write_run(tmp_path / "c", {PERM: reps(c)}))).rows
    assert [(r.metric, r.verdict, r.p, r.q) for r in mem] == [(r.metric, r.verdict, r.p, r.q) for r in files]


def test_settings_validation():
    for bad in (dict(k=-1), dict(min_effect=1.5), dict(min_reps=1), dict(alpha=0), dict(spread="sd"),
                dict(metrics=("nope",)), dict(metrics=())):
        with pytest.raises(UserError):
            GateSettings(**bad).validate()


# --------------------------------------------------------------------------- acceptance: simulations

TRIALS = 400


def _noise(rng: random.Random, cv: float, kind: str) -> float:
    if kind == "normal":
        return 1 + rng.gauss(0, cv)
    if kind == "lognormal":
        return math.exp(rng.gauss(0, cv))
    if kind == "outliers":          # one repetition in ten is four times as noisy
        return 1 + rng.gauss(0, cv * (4 if rng.random() < 0.1 else 1))
    raise ValueError(kind)


def _side(rng, reps, perms, cv, kind="normal", rate_drop=0.0, latency_rise=0.0):
    out = {}
    for p in range(perms):
        out[f"perm{p}"] = {
            m: [v * ((1 - rate_drop) if m.endswith("rate") else (1 + latency_rise)) * _noise(rng, cv, kind)
                for _ in range(reps)]
            for m, v in BASE.items()}
    return out


def _alarm_rate(seed, reps, perms, cv, kind="normal", rate_drop=0.0, latency_rise=0.0, trials=TRIALS):
    """Fraction of trials in which the gate exits 1 (some row is a regression)."""
    rng = random.Random(seed)
    settings = GateSettings()
    alarms = 0
    for _ in range(trials):
        rows = compare_samples(_side(rng, reps, perms, cv, kind),
                               _side(rng, reps, perms, cv, kind, rate_drop, latency_rise), settings)
        alarms += any(r.verdict == REGRESSION for r in rows)
    return alarms / trials


@pytest.mark.parametrize("reps,perms,cv,kind", [
    (5, 2, 0.03, "normal"),       # matrices/gate.yaml's shape, 5 repetitions
    (4, 2, 0.03, "normal"),       # the minimum for significance
    (5, 18, 0.03, "normal"),      # a bench-sized matrix: 90 tests
    (5, 2, 0.03, "lognormal"),
    (5, 2, 0.03, "outliers"),
    (5, 2, 0.10, "normal"),       # a noisy machine: the threshold grows to ~20 %
])
def test_noise_only_passes_at_least_95_percent(reps, perms, cv, kind):
    pass_rate = 1 - _alarm_rate(1000 + reps * 7 + perms, reps, perms, cv, kind)
    assert pass_rate >= 0.95, f"noise-only pass rate {pass_rate:.3f} ({reps} reps, {perms} perms, {cv:.0%} {kind})"


def test_ten_percent_throughput_drop_is_caught_90_percent():
    """The acceptance criterion: 5 repetitions a side, 3 % noise, a 10 % drop of the rates."""
    caught = _alarm_rate(2024, reps=5, perms=1, cv=0.03, rate_drop=0.10)
    assert caught >= 0.90, f"detection rate {caught:.3f}"


def test_twenty_percent_latency_rise_is_caught():
    caught = _alarm_rate(2025, reps=5, perms=1, cv=0.03, latency_rise=0.20)
    assert caught >= 0.95, f"detection rate {caught:.3f}"
