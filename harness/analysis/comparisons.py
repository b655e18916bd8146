"""Dialog-strategy comparisons with their uncertainty, on the driver (plain Python rows).

From the permutations table's repetitions and rates: :func:`rate_intervals` (each throughput
point's geometric mean with its t interval), :func:`dialog_gains` (the judged dialog-strategy
comparisons, docs/statistics.md) and :func:`crossover` (the thread count from which a strategy
pays, as the key table's "pays from").
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import Any

from ..verdicts import VERDICTS, Judged, pays_from
from ..verdicts.pairs import GAIN_KEYS
from ..verdicts import MIN_REPS
from ..verdicts.estimate import mean_interval
from ..verdicts.comparison_metrics import METRIC_BY_NAME
from ..verdicts.pairs import samples

#: a strategy's crossover is found along the thread counts of everything else equal
CROSS_KEYS = tuple(k for k in GAIN_KEYS if k != "threads") + ("strategy",)


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


def dialog_gains(judged: list[Judged]) -> list[dict[str, Any]]:
    """Rows of the ``dialog_gains`` table from the judged comparisons: the dialog strategies' (each
    against one dialog per thread with everything else equal). ``n``/``baseline_n`` are the
    repetitions the verdict rests on, ``kept_out`` those left out of it (both sides)."""
    from ..verdicts.pairs import kept_out

    rows = []
    for j in judged:
        if j.pairing.family != "strategy":
            continue
        p, b, c = j.pairing.treatment, j.pairing.baseline, j.outcome
        bs, s = b.get("send_rate_median"), p.get("send_rate_median")
        rows.append({
            **{k: p.get(k) for k in GAIN_KEYS}, "synthetic": bool(p.get("synthetic")),
            "strategy": p["dialogs"], "total_threads": p["total_threads"], "perm_id": p["perm_id"],
            "baseline_perm_id": b["perm_id"], "n": c.n_treatment, "baseline_n": c.n_baseline,
            "baseline_receive_rate": b.get("receive_rate_median"), "receive_rate": p.get("receive_rate_median"),
            "gain_pct": c.gain_pct, "gain_ci_low_pct": c.ci_low_pct, "gain_ci_high_pct": c.ci_high_pct,
            "verdict": c.verdict, "baseline_send_rate": bs, "send_rate": s,
            "send_gain_pct": 100.0 * (s / bs - 1.0) if s is not None and bs else None,
            "confidence": c.confidence, "look": c.look, "kept_out": len(kept_out(p)) + len(kept_out(b)),
            "reason": c.reason or None, "threshold_pct": j.rule.threshold_pct,
        })
    return rows


def crossover(gains: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per strategy and everything but the thread count (:data:`CROSS_KEYS`): rows of the
    ``crossover`` table.

    ``crossover_total_threads``: the first total thread count from which the verdict is
    ``gain`` at that and every larger thread count measured (None: never). ``verdict``: the
    verdict at the most threads measured. ``max_gain_*``: the largest median gain, with its
    interval and verdict (a large median gain can still be inconclusive)."""
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for g in gains:
        groups[tuple(g.get(k) for k in CROSS_KEYS)].append(g)
    out = []
    for key, pts in groups.items():
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
