"""Techniques against their baselines: each judged on the metrics it moves, or "not exercised".

The axes are declared in :data:`harness.verdicts.techniques.TECHNIQUE_AXES` and paired by
:func:`harness.verdicts.pairs.technique_pairings`; every metric of an axis is judged by the
stopping rule (:func:`harness.verdicts.judge_metric`) on the repetitions that count. Pure
Python on the driver's permutation rows: one row per comparison and metric, ``primary`` marking
the key table's row.
"""

from __future__ import annotations

from typing import Any

from ..results import median, number
from ..verdicts import TECHNIQUE_AXES, Judged, engaged, judge_metric
from ..verdicts.comparison_metrics import Metric
from ..verdicts.pairs import kept_out, samples
from ..verdicts.techniques import VALUE_BY_NAME, repetitions

def _median_of(row: dict[str, Any], metric: Metric) -> float | None:
    return median([v for _, v in samples(row, metric)])


def _shown(row: dict[str, Any], name: str) -> float | None:
    return median([v for v in (number(r.get(name)) for r in repetitions(row)) if v is not None])


def _metric_rows(j: Judged) -> list[dict[str, Any]]:
    """One row per metric of the comparison's axis: the primary's outcome is the judged one
    (the key table's), the others judged alike."""
    pair = j.pairing
    ax = TECHNIQUE_AXES[pair.axis]
    spec = ax.engagement
    ok, t_amount, b_amount = engaged(pair.axis, pair.treatment, pair.baseline, pair.base_raw)
    kept = len(kept_out(pair.treatment)) + len(kept_out(pair.baseline))
    rows = []
    for k, m in enumerate(ax.metrics):
        o = j.outcome if k == 0 else judge_metric(pair, m, j.rule)
        rows.append({
            "metric": m.name, "metric_label": m.text, "primary": k == 0, "lower_is_better": not m.higher_is_better,
            "n": o.n_treatment, "baseline_n": o.n_baseline,
            "baseline_median": _median_of(pair.baseline, VALUE_BY_NAME.get(m.baseline or "", m)),
            "median": _median_of(pair.treatment, m), "gain_pct": o.gain_pct, "gain_ci_low_pct": o.ci_low_pct,
            "gain_ci_high_pct": o.ci_high_pct, "verdict": o.verdict, "confidence": o.confidence, "look": o.look,
            "kept_out": kept, "reason": o.reason or None, "threshold_pct": j.rule.threshold_pct, "exercised": ok,
            "engagement": spec.words if spec else None, "engagement_value": t_amount,
            "baseline_engagement": b_amount, "how_to_exercise": spec.how if spec and ok is False else None,
            "shown_metric": ax.shown, "baseline_shown": _shown(pair.baseline, ax.shown) if ax.shown else None,
            "shown": _shown(pair.treatment, ax.shown) if ax.shown else None,
        })
    return rows


def technique_gains(judged: list[Judged]) -> list[dict[str, Any]]:
    """Rows of the ``technique_gains`` table from the judged technique comparisons (in the order of
    :func:`~harness.verdicts.pairs.technique_pairings`), one per metric the axis moves, primary
    first. ``judged``: :func:`harness.verdicts.judge_all` on permutation rows carrying their
    repetitions' values (:func:`harness.verdicts.permutation_rows`). Axes absent from the runs
    (or with one value) give no rows."""
    rows: list[dict[str, Any]] = []
    for j in judged:
        if j.pairing.family != "technique":
            continue
        pair = j.pairing
        p, base = pair.treatment, pair.baseline
        head = {"run_id": p["run_id"], "synthetic": bool(p.get("synthetic")), "axis": pair.axis,
                "value": pair.value, "baseline_value": pair.baseline_value, "server": p.get("server"),
                "initiators": p.get("initiators"), "threads": p.get("threads"), "dialogs": p.get("dialogs"),
                "payload_bytes": p.get("payload_bytes"), "rate": number(p.get("rate")), "context": pair.context,
                "perm_id": p["perm_id"], "baseline_perm_id": base["perm_id"]}
        rows += [{**head, **r} for r in _metric_rows(j)]
    return rows
