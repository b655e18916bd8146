"""Technique axes against their baselines (harness.analysis.comparisons.technique_gains, judged by
harness.verdicts): pure Python on permutation and repetition rows shaped as the Spark tables give
them (every axis column present, null for the axis' default; one repetition row per summary,
with its number and status)."""

from __future__ import annotations

import io

import numpy as np
import pytest

from harness.analysis.comparisons import technique_gains
from harness.analysis.techniques_report import comparisons, section_html
from harness.verdicts import (NOT_EXERCISED, TECHNIQUE_AXES, Rule, judge, judge_all, key_answer,
                              permutation_rows)

AXES = ("messages_per_dialog", "fire_and_forget", "waitfor_timeout_ms", "high_priority_share",
        "max_queue_readers", "receive_top")


def row(perm_id, rates, run_id="r1", threads=4, rate=None, reps=None, **axes):
    """A permutation row and its repetition rows: ``rates`` the receive rates per repetition;
    ``reps`` other per-repetition columns (lists of the same length)."""
    base = {a: None for a in AXES}
    base.update(max_queue_readers=4, receive_top=10000, waitfor_timeout_ms=3000)
    base.update(axes)
    perm = {"run_id": run_id, "perm_id": perm_id, "server": "durable", "initiators": 1, "threads": threads,
            "total_threads": threads, "dialogs": "per_thread", "payload_bytes": 100, "rate": rate, **base}
    cols = {"receive_rate": list(rates), "e2e_p99_ms": [20.0] * len(rates), "e2e_p50_ms": [5.0] * len(rates),
            "activation_tasks_started_per_s": [0.0] * len(rates), "dialog_errors_lost": [0] * len(rates),
            "dialogs_ended_in_window": [0 if base["messages_per_dialog"] is None else 50] * len(rates),
            "activation_tasks_started_in_window": [0] * len(rates),
            "activation_tasks_ended_in_window": [0] * len(rates), **(reps or {})}
    rep_rows = [{**perm, "rep": k + 1, "status": "ok", **{c: v[k] for c, v in cols.items()}}
                for k in range(len(rates))]
    return perm, rep_rows


def judged(*rows, threshold=5.0):
    """The analysis' path: the permutation rows with their repetitions' values, every
    comparison judged under a fixed rule."""
    return judge_all(permutation_rows(r for _, rs in rows for r in rs), default=Rule(threshold_pct=threshold))


def gains(*rows, threshold=5.0):
    return technique_gains(judged(*rows, threshold=threshold))


def test_a_real_effect_is_a_loss_on_the_receive_rate_and_dialog_reuse_is_the_baseline():
    rng = np.random.default_rng(1)
    reuse = 1000 * (1 + 0.03 * rng.standard_normal(5))
    one = 200 * (1 + 0.03 * rng.standard_normal(5))
    (g,) = gains(row("a", reuse), row("b", one, messages_per_dialog=1))
    assert (g["axis"], g["value"], g["baseline_value"], g["baseline_perm_id"]) == ("messages_per_dialog", "1",
                                                                                    "unlimited", "a")
    assert (g["metric"], g["primary"], g["lower_is_better"], g["exercised"]) == ("receive_rate", True, False, True)
    assert g["verdict"] == "loss" and g["gain_ci_high_pct"] < -5 and -85 < g["gain_pct"] < -75
    assert g["engagement_value"] == 50 and g["baseline_engagement"] == 0 and g["how_to_exercise"] is None
    assert (g["n"], g["baseline_n"], g["kept_out"], g["threshold_pct"]) == (5, 5, 0, 5.0)
    assert {"context", "engagement", "shown_metric", "baseline_shown", "confidence", "look"} <= set(g)


def test_no_effect_and_one_repetition_are_never_a_gain():
    rng = np.random.default_rng(7)
    churn = {"activation_tasks_started_in_window": [3] * 5, "activation_tasks_ended_in_window": [3] * 5}
    # the same latency distribution on both sides, +-25 % noise: no verdict may claim an effect
    lat = [{"e2e_p99_ms": list(30 * (1 + 0.25 * rng.standard_normal(5)))} for _ in range(2)]
    g = gains(row("w3000", [10] * 5, reps=lat[0], waitfor_timeout_ms=3000),
              row("w50", [10] * 5, reps={**lat[1], **churn}, waitfor_timeout_ms=50))
    assert [(r["metric"], r["baseline_value"], r["verdict"]) for r in g] == [
        ("e2e_p99_ms", "3000", "inconclusive"), ("e2e_p50_ms", "3000", "no difference")]
    assert "straddles a threshold" in g[0]["reason"]
    # one repetition a side: inconclusive whatever the values say (+100 %)
    single = gains(row("r1", [1000.0], max_queue_readers=1), row("r8", [2000.0], max_queue_readers=8))
    assert [(r["value"], r["baseline_value"], r["verdict"]) for r in single] == [("8", "1", "inconclusive")] * 2
    assert single[0]["gain_ci_low_pct"] is None and single[0]["exercised"] is None   # not recorded


def test_the_waitfor_timeout_is_judged_on_latency_lower_is_better():
    churn = {"activation_tasks_started_in_window": [5, 5, 4], "activation_tasks_ended_in_window": [5, 5, 5],
             "e2e_p99_ms": [960.0, 990.0, 970.0], "e2e_p50_ms": [470.0, 420.0, 460.0],
             "activation_tasks_started_per_s": [1.0, 1.0, 0.8]}
    kept = {"e2e_p99_ms": [54.0, 56.0, 65.0], "e2e_p50_ms": [27.0, 27.0, 24.0]}
    p99, p50 = gains(row("w3000", [10] * 3, rate=10.0, reps=kept, waitfor_timeout_ms=3000),
                     row("w50", [10] * 3, rate=10.0, reps=churn, waitfor_timeout_ms=50))
    assert (p99["metric"], p99["primary"], p99["lower_is_better"]) == ("e2e_p99_ms", True, True)
    # latency rose about 17-fold: a loss, the gain (lower being better) below -90 %
    assert p99["verdict"] == p50["verdict"] == "loss" and p99["gain_ci_high_pct"] < -90
    assert (p99["baseline_median"], p99["median"]) == (56.0, 970.0)      # the metric's own medians
    assert (p99["engagement_value"], p99["baseline_engagement"]) == (10, 0)
    assert (p99["shown_metric"], p99["baseline_shown"], p99["shown"]) == ("activation_tasks_started_per_s", 0, 1.0)
    # the other way round, a fall in latency is a gain
    fall = judge([(1, 10.0), (2, 11.0), (3, 10.5)], [(1, 50.0), (2, 52.0), (3, 51.0)], Rule(), higher_is_better=False)
    assert fall.verdict == "gain" and fall.gain_pct > 300
    assert judge([(1, 10.0), (2, 11.0), (3, 10.5)], [(1, 50.0), (2, 52.0), (3, 51.0)], Rule()).verdict == "loss"


def test_a_waitfor_comparison_where_no_task_started_or_ended_is_not_exercised():
    # issue 29: closed loop at saturation, both readers started before the window and never idle
    rng = np.random.default_rng(3)
    busy = [row("w3000", 1000 * (1 + 0.05 * rng.standard_normal(3)), waitfor_timeout_ms=3000),
            row("w50", 1000 * (1 + 0.05 * rng.standard_normal(3)), waitfor_timeout_ms=50)]
    out = gains(*busy)
    assert [r["verdict"] for r in out] == [NOT_EXERCISED] * 2 and {r["exercised"] for r in out} == {False}
    assert all("rate" in r["how_to_exercise"] and "WAITFOR" in r["how_to_exercise"] for r in out)
    assert out[0]["gain_pct"] is not None        # the numbers are still there, measured
    assert "To exercise it: " in out[0]["reason"]
    # settled, not decided: the auto rounds add none for it
    (j,) = judged(*busy)
    assert j.outcome.settled and not j.outcome.decided
    # one task started in one repetition of either arm is enough for a verdict on latency
    w50 = busy[1][1]
    w50[1]["activation_tasks_started_in_window"] = 1
    assert gains(*busy)[0]["verdict"] != NOT_EXERCISED
    # a disturbed repetition is kept out of the verdict, not out of the engagement: the
    # mechanism was at work in it all the same
    w50[1]["status"] = "receive_stalled"
    (g,) = gains(*busy)[:1]
    assert g["exercised"] is True and g["engagement_value"] == 1 and g["n"] == 2
    w50[1]["status"] = "ok"
    # a repetition without the record (an older summary): engagement unknown, never "not exercised"
    w50[1]["activation_tasks_started_in_window"] = None
    assert {r["exercised"] for r in gains(*busy)} == {None}
    assert NOT_EXERCISED not in {r["verdict"] for r in gains(*busy)}


def test_lifetime_and_priority_comparisons_that_never_engaged_are_not_exercised():
    # messages_per_dialog 1000 against reuse: no dialog reached 1000 messages inside the window
    none_ended = {"dialogs_ended_in_window": [0, 0, 0]}
    (g,) = gains(row("reuse", [900, 1000, 1100]), row("mpd1000", [950, 1000, 1050], reps=none_ended,
                                                      messages_per_dialog=1000))
    assert g["verdict"] == NOT_EXERCISED and "messages_per_dialog" in g["how_to_exercise"]
    # priority (SQL Server): a share whose slots are never high with one thread (0.5: slot 2, 4, ...)
    normal = {"high_priority_sends": [0, 0, 0], "e2e_high_p99_ms": [None] * 3, "e2e_normal_p99_ms": [30.0] * 3}
    high = {"high_priority_sends": [0, 0, 0], "e2e_p99_ms": [30.0] * 3}
    out = gains(row("p0", [500] * 3, reps=high), row("p5", [500] * 3, reps=normal, high_priority_share=0.5))
    assert [r["metric"] for r in out] == ["e2e_high_p99_ms", "e2e_normal_p99_ms"]
    assert {r["verdict"] for r in out} == {NOT_EXERCISED} and "2 threads" in out[0]["how_to_exercise"]
    # with high-priority messages: judged on their latency against the baseline's (all normal)
    sent = {"high_priority_sends": [40, 41, 39], "e2e_high_p99_ms": [5.0, 6.0, 5.5], "e2e_normal_p99_ms": [31.0] * 3}
    hp, norm = gains(row("p0", [500] * 3, reps=high), row("p5", [500] * 3, reps=sent, high_priority_share=0.5))
    assert (hp["verdict"], hp["baseline_median"], hp["median"]) == ("gain", 30.0, 5.5)
    assert norm["verdict"] == "no difference"


def test_the_report_and_the_key_table_say_not_exercised_and_how_to_exercise_it():
    rng = np.random.default_rng(5)
    rows = (row("a", 1000 * (1 + 0.03 * rng.standard_normal(3))),
            row("b", 200 * (1 + 0.03 * rng.standard_normal(3)), messages_per_dialog=1),
            row("w3000", [1000] * 3, waitfor_timeout_ms=3000, threads=8),
            row("w50", [1000] * 3, waitfor_timeout_ms=50, threads=8))
    tech = gains(*rows)
    cs = comparisons(tech)
    assert [(c["axis"], c["verdict"], len(c["others"])) for c in cs] == [
        ("messages_per_dialog", "loss", 0), ("waitfor_timeout_ms", NOT_EXERCISED, 1)]
    # the terminal's answer: one key table, the technique rows in it on their primary metric
    answer = key_answer(judged(*rows), ["r1"])
    out = io.StringIO()
    answer.render(out)
    text = out.getvalue()
    assert "Key results: 1 of 2 comparisons decided, 1 not exercised" in text
    assert "messages_per_dialog=1 vs unlimited" in text and "loss" in text
    assert "e2e p99 (ms), lower is better" in text and "not exercised" in text
    assert ("not exercised: waitfor_timeout_ms=50 vs 3000 on e2e p99 (ms), lower is better at 8 threads: no "
            "activation tasks started or ended inside the window in any repetition of either arm. To exercise "
            "it: ") in text
    assert "offer a rate below saturation" in " ".join(text.split())
    (idle,) = [r for r in answer.sections[0].rows if r["verdict"] == NOT_EXERCISED]
    assert "offer a rate below saturation" in idle["how_to_exercise"]
    html = section_html(tech)
    assert "Not exercised" in html and "offer a rate below saturation" in html and "lower is better" in html
    assert section_html([]) == ""


def test_absent_axes_give_no_rows():
    assert gains(row("a", [1000] * 3), row("b", [1000] * 3, threads=8)) == []
    assert technique_gains([]) == []


@pytest.mark.parametrize("axis", sorted(TECHNIQUE_AXES))
def test_every_axis_declares_its_baseline_metrics_and_reason(axis):
    ax = TECHNIQUE_AXES[axis]
    assert ax.baseline in ("unlimited", "false", "zero", "largest", "smallest") and ax.why and ax.metrics
    # a latency is lower-is-better, a rate higher-is-better
    assert all((not m.higher_is_better) == m.name.endswith("_ms") for m in ax.metrics)
    assert ax.engagement is None or (ax.engagement.words and ax.engagement.how)
