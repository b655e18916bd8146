"""Technique axes against their baselines (harness.analysis.techniques): pure Python on
permutation rows shaped as the Spark permutations table gives them (every axis column present,
null for the axis' default)."""

from __future__ import annotations

import numpy as np
import pytest

from harness.analysis.comparisons import columns
from harness.analysis.techniques import TECHNIQUE_SCHEMA
from harness.analysis.techniques import technique_gains as _technique_gains
from harness.verdicts import TECHNIQUE_AXES, Rule, judge_all


def technique_gains(rows, threshold_pct):
    """The analysis' path: every comparison judged under a fixed rule, the technique rows."""
    return _technique_gains(judge_all(rows, default=Rule(threshold_pct=threshold_pct)))

AXES = ("messages_per_dialog", "fire_and_forget", "waitfor_timeout_ms", "high_priority_share",
        "max_queue_readers", "receive_top")


def row(perm_id, rates, run_id="r1", threads=4, **axes):
    base = {a: None for a in AXES}
    base.update(max_queue_readers=4, receive_top=10000, waitfor_timeout_ms=3000)
    base.update(axes)
    return {"run_id": run_id, "perm_id": perm_id, "server": "durable", "initiators": 1, "threads": threads,
            "dialogs": "per_thread", "payload_bytes": 100, "rate": None, "receive_rate_values": list(rates),
            "receive_rate_median": float(np.median(rates)), "e2e_p99_ms_median": 20.0,
            "activation_tasks_started_per_s": 0.1, "dialog_errors_lost": 0, **base}


def by(rows, axis, value):
    return [r for r in rows if r["axis"] == axis and r["value"] == value]


def test_a_real_effect_is_a_loss_and_dialog_reuse_is_the_baseline():
    rng = np.random.default_rng(1)
    reuse = 1000 * (1 + 0.03 * rng.standard_normal(5))
    one = 200 * (1 + 0.03 * rng.standard_normal(5))
    rows = technique_gains([row("a", reuse), row("b", one, messages_per_dialog=1)], 5.0)
    (g,) = rows
    assert (g["axis"], g["value"], g["baseline_value"], g["baseline_perm_id"]) == ("messages_per_dialog", "1",
                                                                                    "unlimited", "a")
    assert g["verdict"] == "loss" and g["gain_ci_high_pct"] < -5 and -85 < g["gain_pct"] < -75
    assert set(g) == set(columns(TECHNIQUE_SCHEMA))


def test_no_effect_and_one_repetition_are_never_a_gain():
    rng = np.random.default_rng(7)
    # the same distribution on both sides, +-25 % noise: no verdict may claim an effect
    same = [row("w3000", 1000 * (1 + 0.25 * rng.standard_normal(5)), waitfor_timeout_ms=3000),
            row("w50", 1000 * (1 + 0.25 * rng.standard_normal(5)), waitfor_timeout_ms=50)]
    (g,) = technique_gains(same, 5.0)
    assert g["baseline_value"] == "3000" and g["verdict"] == "inconclusive"
    # one repetition a side: inconclusive whatever the medians say (+100 %)
    single = [row("r1", [1000.0], max_queue_readers=1), row("r8", [2000.0], max_queue_readers=8)]
    (g,) = technique_gains(single, 5.0)
    assert (g["value"], g["baseline_value"], g["verdict"]) == ("8", "1", "inconclusive")
    assert g["gain_ci_low_pct"] is None


def test_only_permutations_equal_in_everything_else_are_paired():
    rows = [row("a4", [1000] * 3, threads=4), row("b4", [1500] * 3, threads=4, fire_and_forget=True),
            row("a8", [900] * 3, threads=8), row("b8", [700] * 3, threads=8, fire_and_forget=True),
            row("x", [5000] * 3, run_id="r2", threads=4, fire_and_forget=True)]   # no baseline in r2
    out = technique_gains(rows, 5.0)
    assert [(g["perm_id"], g["baseline_perm_id"]) for g in out] == [("b4", "a4"), ("b8", "a8")]
    assert [g["verdict"] for g in out] == ["gain", "loss"]
    assert out[0]["secondary_metric"] == "dialog_errors_lost"


def test_absent_axes_give_no_rows():
    rows = [row("a", [1000] * 3), row("b", [1000] * 3, threads=8)]
    assert technique_gains(rows, 5.0) == []
    assert technique_gains([], 5.0) == []


@pytest.mark.parametrize("axis", sorted(TECHNIQUE_AXES))
def test_every_axis_has_a_baseline_rule_and_a_reason(axis):
    spec = TECHNIQUE_AXES[axis]
    rule, why = spec.baseline, spec.note
    assert rule in ("unlimited", "false", "zero", "largest", "smallest") and why
