"""Techniques against their baselines: one generic comparison for every technique axis.

A technique axis is a matrix axis whose values are "a technique" and "what you would do
without it" (docs/matrices.md, docs/statistics.md). Which permutation is compared with which
is :func:`harness.verdicts.pairs.technique_pairings` (every value against its axis' baseline,
:data:`~harness.verdicts.pairs.TECHNIQUE_AXES`, everything else equal: run, server, initiators,
threads, dialog strategy, payload, offered rate and the other technique axes), part of the one
list of a run's comparisons that the auto-repetition loop and the key table use too. Each is
judged by the same stopping rule as the dialog strategies (:func:`harness.verdicts.judge_all`)
on its axis' metric; the medians of the end-to-end p99 and of the axis' own secondary metric go
next to it, without a verdict.

Pure Python on the driver's permutation rows (no Spark): its table schema is a DDL string.
"""

from __future__ import annotations

from typing import Any

from ..verdicts import TECHNIQUE_AXES, Judged
from ..verdicts.pairs import kept_out

TECHNIQUE_SCHEMA = ("run_id string, synthetic boolean, axis string, value string, baseline_value string, "
                    "server string, initiators bigint, threads bigint, dialogs string, payload_bytes bigint, "
                    "context string, perm_id string, baseline_perm_id string, n bigint, baseline_n bigint, "
                    "baseline_receive_rate double, receive_rate double, gain_pct double, gain_ci_low_pct double, "
                    "gain_ci_high_pct double, verdict string, baseline_e2e_p99_ms double, e2e_p99_ms double, "
                    "secondary_metric string, baseline_secondary double, secondary double, metric string, "
                    "confidence double, look bigint, kept_out bigint, reason string, threshold_pct double")


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def technique_gains(judged: list[Judged]) -> list[dict[str, Any]]:
    """Rows of :data:`TECHNIQUE_SCHEMA` from the judged technique comparisons (in the order of
    :func:`~harness.verdicts.pairs.technique_pairings`). Axes absent from the runs (or with one
    value) give no rows."""
    rows: list[dict[str, Any]] = []
    for j in judged:
        if j.pairing.kind != "technique":
            continue
        pair, c = j.pairing, j.outcome
        p, base = pair.treatment, pair.baseline
        secondary = TECHNIQUE_AXES[pair.axis].secondary
        rows.append({
            "run_id": p["run_id"], "synthetic": bool(p.get("synthetic")), "axis": pair.axis,
            "value": pair.value, "baseline_value": pair.baseline_value, "server": p.get("server"),
            "initiators": p.get("initiators"), "threads": p.get("threads"), "dialogs": p.get("dialogs"),
            "payload_bytes": p.get("payload_bytes"), "context": pair.context, "perm_id": p["perm_id"],
            "baseline_perm_id": base["perm_id"], "n": c.n_treatment, "baseline_n": c.n_baseline,
            "baseline_receive_rate": base.get("receive_rate_median"),
            "receive_rate": p.get("receive_rate_median"), "gain_pct": c.gain_pct,
            "gain_ci_low_pct": c.ci_low_pct, "gain_ci_high_pct": c.ci_high_pct, "verdict": c.verdict,
            "baseline_e2e_p99_ms": base.get("e2e_p99_ms_median"), "e2e_p99_ms": p.get("e2e_p99_ms_median"),
            "secondary_metric": secondary,
            "baseline_secondary": _num(base.get(secondary)) if secondary else None,
            "secondary": _num(p.get(secondary)) if secondary else None,
            "metric": pair.metric.name, "confidence": c.confidence, "look": c.look,
            "kept_out": len(kept_out(p)) + len(kept_out(base)), "reason": c.reason or None,
            "threshold_pct": j.rule.threshold_pct,
        })
    return rows


def axis_note(axis: str) -> str:
    return TECHNIQUE_AXES[axis].note
