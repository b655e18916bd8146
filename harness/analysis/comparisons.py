"""The judged comparisons' tables, on the driver (plain Python rows).

From the permutations table's repetitions and rates: :func:`rate_intervals` (each throughput
point's geometric mean with its t interval), :func:`dialog_gains` (the judged dialog-strategy
comparisons, docs/statistics.md), :func:`crossover` (the thread count from which a strategy
pays, as the key table's "pays from") and :func:`technique_gains` (each technique against its
baseline on every metric its axis moves, or "not exercised": the axes are
:data:`harness.verdicts.techniques.TECHNIQUE_AXES`, each metric judged by the stopping rule).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from ..results import median, number
from ..verdicts import MIN_REPS, TECHNIQUE_AXES, VERDICTS, Judged, engaged, judge_metric, pays_from
from ..verdicts.comparison_metrics import METRIC_BY_NAME, Metric
from ..verdicts.estimate import mean_interval
from ..verdicts.pairs import GAIN_KEYS, kept_out, samples
from ..verdicts.techniques import VALUE_BY_NAME, repetitions
from .tables import CROSS_KEYS, group_by


def rate_intervals(perms: list[dict[str, Any]], synthetic_runs: set[str], confidence: float = 0.95) -> None:
    """Adds to each permutation row ``synthetic`` and, for the receive and send rates, the
    geometric mean of the repetitions that count (``<rate>_mean``) and its interval
    (``<rate>_ci_low/high``; None below :data:`~harness.verdicts.MIN_REPS` repetitions)."""
    for p in perms:
        p["synthetic"] = p["run_id"] in synthetic_runs
        for m in ("receive_rate", "send_rate"):
            v = [x for _, x in samples(p, METRIC_BY_NAME[m]) if x > 0]
            p[f"{m}_mean"] = math.exp(math.fsum(map(math.log, v)) / len(v)) if v else None
            ci = mean_interval(v, confidence) if len(v) >= MIN_REPS else None
            p[f"{m}_ci_low"], p[f"{m}_ci_high"] = ci if ci else (None, None)


def outcome_columns(j: Judged, o=None) -> dict[str, Any]:
    """A judged comparison's columns: its outcome (``o``: another metric's, judged alike) with
    ``n``/``baseline_n``, the repetitions the verdict rests on, and ``kept_out``, those left out
    of it (both sides)."""
    o = o or j.outcome
    return {"n": o.n_treatment, "baseline_n": o.n_baseline, "gain_pct": o.gain_pct, "gain_ci_low_pct": o.ci_low_pct,
            "gain_ci_high_pct": o.ci_high_pct, "verdict": o.verdict, "confidence": o.confidence, "look": o.look,
            "kept_out": len(kept_out(j.pairing.treatment)) + len(kept_out(j.pairing.baseline)),
            "reason": o.reason or None, "threshold_pct": j.rule.threshold_pct}


def dialog_gains(judged: list[Judged]) -> list[dict[str, Any]]:
    """Rows of the ``dialog_gains`` table from the judged comparisons: the dialog strategies' (each
    against one dialog per thread with everything else equal)."""
    rows = []
    for j in judged:
        if j.pairing.family != "strategy":
            continue
        p, b = j.pairing.treatment, j.pairing.baseline
        bs, s = b.get("send_rate_median"), p.get("send_rate_median")
        rows.append({
            **{k: p.get(k) for k in GAIN_KEYS}, "synthetic": bool(p.get("synthetic")),
            "strategy": p["dialogs"], "total_threads": p["total_threads"], "perm_id": p["perm_id"],
            "baseline_perm_id": b["perm_id"], **outcome_columns(j),
            "baseline_receive_rate": b.get("receive_rate_median"), "receive_rate": p.get("receive_rate_median"),
            "baseline_send_rate": bs, "send_rate": s,
            "send_gain_pct": 100.0 * (s / bs - 1.0) if s is not None and bs else None,
        })
    return rows


def crossover(gains: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per strategy and everything but the thread count (:data:`CROSS_KEYS`): rows of the
    ``crossover`` table.

    ``crossover_total_threads``: the first total thread count from which the verdict is
    ``gain`` at that and every larger thread count measured (None: never). ``verdict``: the
    verdict at the most threads measured. ``max_gain_*``: the largest median gain, with its
    interval and verdict (a large median gain can still be inconclusive)."""
    out = []
    for key, pts in group_by(gains, *CROSS_KEYS).items():
        pts.sort(key=lambda g: g["total_threads"])
        cross = pays_from((g["total_threads"], g["verdict"]) for g in pts)
        last = pts[-1]
        with_gain = [g for g in pts if g["gain_pct"] is not None]
        best = max(with_gain, key=lambda g: (g["gain_pct"], -g["total_threads"])) if with_gain else None
        counts = Counter(g["verdict"] for g in pts)
        out.append({
            **dict(zip(CROSS_KEYS, key)), "synthetic": last["synthetic"], "verdict": last["verdict"],
            "crossover_total_threads": cross, "gain_at_max_threads_pct": last["gain_pct"],
            "gain_at_max_threads_ci_low_pct": last["gain_ci_low_pct"],
            "gain_at_max_threads_ci_high_pct": last["gain_ci_high_pct"], "max_total_threads": last["total_threads"],
            **{f"max_{k}": best and best[k] for k in ("gain_pct", "gain_ci_low_pct", "gain_ci_high_pct")},
            **{f"max_gain_{k}": best and best[k] for k in ("verdict", "total_threads")},
            "points": len(pts), "min_reps": min(min(g["n"], g["baseline_n"]) for g in pts),
            "verdicts": ", ".join(f"{v} {counts[v]}" for v in VERDICTS if counts[v]),
            "threshold_pct": last["threshold_pct"],
        })
    return out


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
    rows = []
    for k, m in enumerate(ax.metrics):
        rows.append({
            "metric": m.name, "metric_label": m.text, "primary": k == 0, "lower_is_better": not m.higher_is_better,
            **outcome_columns(j, j.outcome if k == 0 else judge_metric(pair, m, j.rule)),
            "baseline_median": _median_of(pair.baseline, VALUE_BY_NAME.get(m.baseline or "", m)),
            "median": _median_of(pair.treatment, m), "exercised": ok,
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
