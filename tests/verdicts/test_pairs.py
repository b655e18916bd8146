"""harness.verdicts.pairs: the one list of a run's comparisons, the repetitions that count, and
the rows the runner builds from summaries (the same shape as the analysis' table)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.matrix import load_matrix
from harness.results import KEPT_OUT_OF_VERDICTS, RepetitionSummary, counts_in_verdicts
from harness.results.fields import flat_axes
from harness.verdicts import RECEIVE_RATE, Rule, judge_all, permutation_rows, run_comparisons, samples
from harness.verdicts.comparison_metrics import METRIC_BY_NAME
from harness.verdicts.pairs import kept_out, pays_from

REPO = Path(__file__).resolve().parents[2]
GATE_RUN = REPO / "tests" / "gate" / "data" / "run-2aae5f3"


def row(pid, dialogs, threads, values=(), statuses=None, run_id="r", **axes):
    return {"run_id": run_id, "perm_id": pid, "server": "durable", "initiators": 1, "threads": threads,
            "total_threads": threads, "dialogs": dialogs, "payload_bytes": 100, "rate": None,
            "messages_per_dialog": None, "fire_and_forget": None, "waitfor_timeout_ms": 1000,
            "high_priority_share": 0.0, "max_queue_readers": 4, "receive_top": 10000,
            "rep_numbers": list(range(1, len(values) + 1)), "rep_statuses": statuses or ["ok"] * len(values),
            "receive_rate_values": list(values), **axes}


def test_strategies_against_one_dialog_per_thread_everything_else_equal():
    rows = [row("a1", "per_thread", 1), row("b1", "trick150", 1), row("c1", "shared", 1),
            row("a8", "per_thread", 8), row("b8", "trick150", 8),
            row("b8-r8", "trick150", 8, max_queue_readers=8)]          # no baseline with 8 readers
    got = [(p.family, p.label, p.baseline_value, *p.perm_ids) for p in run_comparisons(rows)]
    assert got == [("strategy", "trick150", "per_thread", "b1", "a1"), ("strategy", "shared", "per_thread", "c1", "a1"),
                   ("strategy", "trick150", "per_thread", "b8", "a8"),
                   ("technique", "max_queue_readers=8", "4", "b8-r8", "b8")]
    assert all(p.metric is RECEIVE_RATE for p in run_comparisons(rows))


def test_technique_axes_pair_each_value_with_its_baseline():
    rows = [row("reuse", "per_thread", 4), row("one", "per_thread", 4, messages_per_dialog=1),
            row("ff", "per_thread", 4, messages_per_dialog=1, fire_and_forget=True)]
    got = [(p.axis, p.value, p.baseline_value, *p.perm_ids, p.context) for p in run_comparisons(rows)]
    assert got == [("messages_per_dialog", "1", "unlimited", "one", "reuse", "fire_and_forget=false"),
                   ("fire_and_forget", "true", "false", "ff", "one", "messages_per_dialog=1")]


def test_only_disturbed_windows_are_kept_out():
    from harness.results import DISTURBED_STATUSES

    assert KEPT_OUT_OF_VERDICTS == frozenset(DISTURBED_STATUSES)
    assert all(counts_in_verdicts(s) for s in ("ok", "noisy_host", "client_bound", "users_idle", None))
    r = row("a", "per_thread", 1, [100.0, 50.0], ["ok", "noisy_host"])
    assert samples(r, RECEIVE_RATE) == [(1, 100.0), (2, 50.0)] and kept_out(r) == []


def test_repetitions_kept_out_of_verdicts_do_not_count(noisy_kept_out):
    assert not counts_in_verdicts("noisy_host")
    assert counts_in_verdicts("ok") and counts_in_verdicts("client_bound") and counts_in_verdicts(None)
    r = row("a", "per_thread", 1, [100.0, 50.0, 101.0, 99.0], ["ok", "noisy_host", "ok", "ok"])
    assert samples(r, RECEIVE_RATE) == [(1, 100.0), (3, 101.0), (4, 99.0)]
    assert kept_out(r) == [(2, "noisy_host")]
    # a noisy repetition that would have decided a loss is not counted
    b = row("b", "trick150", 1, [100.0, 30.0, 100.5, 99.5], ["ok", "noisy_host", "ok", "ok"])
    (j,) = judge_all([r, b], default=Rule())
    assert (j.outcome.n_treatment, j.outcome.n_baseline) == (3, 3) and j.outcome.verdict == "no difference"
    # rows without repetition numbers (older tables) count their values in order
    assert samples({"receive_rate_values": [5.0, None, 7.0]}, RECEIVE_RATE) == [(1, 5.0), (3, 7.0)]


def test_permutation_rows_from_stored_summaries():
    summaries = [RepetitionSummary.from_json(json.loads(p.read_text()))
                 for p in sorted(GATE_RUN.glob("*/rep-*/summary.json"))]
    rows = permutation_rows(s.row() for s in summaries)
    assert [r["perm_id"] for r in rows] == ["i2-t2-per_thread-p100-durable", "i2-t2-trick150-p100-durable"]
    r = rows[0]
    assert (r["initiators"], r["threads"], r["total_threads"], r["dialogs"]) == (2, 2, 4, "per_thread")
    assert r["rep_numbers"] == [1] and r["rep_statuses"] == [summaries[0].status]
    assert r["receive_rate_values"] == [summaries[0].receive_rate]
    assert r["send_p99_ms_values"] == [summaries[0].send_latency_ms.p99]
    # the technique axes' metrics and what shows their mechanism at work ride along too
    assert r["e2e_p50_ms_values"] == [summaries[0].e2e_latency_ms.p50]
    assert {"e2e_high_p99_ms_values", "dialogs_ended_in_window_values", "activation_tasks_started_in_window_values",
            "high_priority_sends_values", "activation_tasks_max_running_values"} <= set(r)
    assert {"max_queue_readers", "receive_top", "waitfor_timeout_ms", "high_priority_share", "rate",
            "messages_per_dialog", "fire_and_forget"} <= set(r)
    (p,) = run_comparisons(rows)
    assert p.perm_ids == ("i2-t2-trick150-p100-durable", "i2-t2-per_thread-p100-durable")


def test_a_matrix_permutation_flattens_as_the_analysis_reads_it():
    m = load_matrix(REPO / "matrices" / "techniques.yaml")
    rows = [{"run_id": "x", "perm_id": p.id, **flat_axes(p.values())} for p in m.permutations()]
    axes = {p.axis for p in run_comparisons(rows)}
    assert {"messages_per_dialog", "waitfor_timeout_ms"} <= axes


def test_permutation_rows_from_repetition_rows_in_repetition_order():
    reps = [{"run_id": "r", "perm_id": "a", "dialogs": "per_thread", "rep": 2, "status": "noisy_host",
             "receive_rate": 90, "e2e_p99_ms": 7.0},
            {"run_id": "r", "perm_id": "a", "dialogs": "per_thread", "rep": 1, "status": "ok", "receive_rate": 100,
             "e2e_p99_ms": None},
            {"run_id": "r", "perm_id": "b", "rep": 1, "status": "ok", "receive_rate": 5}]
    r, b = permutation_rows(reps)
    assert (r["perm_id"], r["dialogs"], b["perm_id"]) == ("a", "per_thread", "b")
    assert (r["rep_numbers"], r["rep_statuses"]) == ([1, 2], ["ok", "noisy_host"])
    assert r["receive_rate_values"] == [100.0, 90.0] and r["e2e_p99_ms_values"] == [None, 7.0]
    assert r["dialogs_ended_in_window_values"] == [None, None]


def test_latency_metrics_read_lower_as_better():
    assert METRIC_BY_NAME["e2e_p99_ms"].higher_is_better is False
    assert METRIC_BY_NAME["receive_rate"].higher_is_better is True


@pytest.mark.parametrize("points,expected", [
    ([(1, "gain"), (8, "gain"), (32, "gain")], 1), ([(1, "inconclusive"), (8, "gain"), (32, "gain")], 8),
    ([(1, "gain"), (8, "loss"), (32, "gain")], 32), ([(1, "gain"), (32, "no difference")], None), ([], None),
])
def test_pays_from(points, expected):
    assert pays_from(points) == expected
