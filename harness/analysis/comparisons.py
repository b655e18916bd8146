"""Dialog-strategy comparisons with their uncertainty, on the driver (plain Python rows).

The permutations table (Spark, :func:`harness.analysis.transforms.permutation_stats`) carries
each permutation's per-repetition rates (``receive_rate_values``, ``send_rate_values``); from
those this module computes, with :mod:`.uncertainty`:

* :func:`rate_intervals`: the interval of each permutation's median rates (throughput points);
* :func:`dialog_gains`: every strategy against one dialog per thread with everything else
  equal: the gain of the median receive rate in percent, its interval and verdict;
* :func:`crossover`: per (run, server, strategy, initiators, payload) where the strategy pays:
  the first total thread count from which every point's verdict is ``gain``, and the verdict
  at the most threads measured (the same verdicts as the gains).

The tables' Spark schemas (for Parquet) are here as DDL strings, so this module needs no Spark.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from . import uncertainty as U

BASELINE_STRATEGY = "per_thread"
#: the technique axes and the offered rate are part of "everything else equal" (a matrix that
#: crosses dialog strategies with, say, receive_top compares strategies at each receive_top)
OTHER_AXES = ("rate", "messages_per_dialog", "fire_and_forget", "waitfor_timeout_ms", "high_priority_share",
              "max_queue_readers", "receive_top")
GAIN_KEYS = ("run_id", "server", "initiators", "threads", "payload_bytes") + OTHER_AXES
CROSS_KEYS = ("run_id", "server", "strategy", "initiators", "payload_bytes")

INTERVAL_SCHEMA = ("run_id string, perm_id string, synthetic boolean, receive_rate_ci_low double, "
                   "receive_rate_ci_high double, send_rate_ci_low double, send_rate_ci_high double")
GAINS_SCHEMA = ("run_id string, synthetic boolean, server string, strategy string, initiators bigint, "
                "threads bigint, total_threads bigint, payload_bytes bigint, perm_id string, "
                "baseline_perm_id string, n bigint, baseline_n bigint, baseline_receive_rate double, "
                "receive_rate double, gain_pct double, gain_ci_low_pct double, gain_ci_high_pct double, "
                "verdict string, baseline_send_rate double, send_rate double, send_gain_pct double")
CROSSOVER_SCHEMA = ("run_id string, synthetic boolean, server string, strategy string, initiators bigint, "
                    "payload_bytes bigint, verdict string, crossover_total_threads bigint, "
                    "gain_at_max_threads_pct double, gain_at_max_threads_ci_low_pct double, "
                    "gain_at_max_threads_ci_high_pct double, max_total_threads bigint, max_gain_pct double, "
                    "max_gain_ci_low_pct double, max_gain_ci_high_pct double, max_gain_verdict string, "
                    "max_gain_total_threads bigint, points bigint, min_reps bigint, verdicts string, "
                    "threshold_pct double")


def columns(ddl: str) -> list[str]:
    return [part.strip().split(" ", 1)[0] for part in ddl.split(",")]


def _values(row: dict[str, Any], key: str) -> list[float]:
    return [v for v in (row.get(key) or []) if v is not None]


def rate_intervals(perms: list[dict[str, Any]], synthetic_runs: set[str]) -> list[dict[str, Any]]:
    """Adds ``receive_rate_ci_low/high``, ``send_rate_ci_low/high`` (None below
    :data:`~.uncertainty.MIN_REPS` repetitions) and ``synthetic`` to each permutation row, in
    place; returns the rows of :data:`INTERVAL_SCHEMA`."""
    out = []
    for p in perms:
        p["synthetic"] = p["run_id"] in synthetic_runs
        for m in ("receive_rate", "send_rate"):
            ci = U.bootstrap_median(_values(p, f"{m}_values"))
            p[f"{m}_ci_low"], p[f"{m}_ci_high"] = ci if ci else (None, None)
        out.append({k: p[k] for k in columns(INTERVAL_SCHEMA)})
    return out


def dialog_gains(perms: list[dict[str, Any]], threshold_pct: float,
                 baseline: str = BASELINE_STRATEGY) -> list[dict[str, Any]]:
    """Every strategy other than ``baseline`` against ``baseline`` at the same (run, server,
    initiators, threads, payload): rows of :data:`GAINS_SCHEMA`."""
    base = {tuple(p.get(k) for k in GAIN_KEYS): p for p in perms if p["dialogs"] == baseline}
    rows = []
    for p in perms:
        if p["dialogs"] == baseline:
            continue
        b = base.get(tuple(p.get(k) for k in GAIN_KEYS))
        if b is None:
            continue
        c = U.compare(_values(p, "receive_rate_values"), _values(b, "receive_rate_values"), threshold_pct)
        bs, s = b.get("send_rate_median"), p.get("send_rate_median")
        rows.append({
            "run_id": p["run_id"], "synthetic": bool(p.get("synthetic")), "server": p["server"],
            "strategy": p["dialogs"], "initiators": p["initiators"], "threads": p["threads"],
            "total_threads": p["total_threads"], "payload_bytes": p["payload_bytes"], "perm_id": p["perm_id"],
            "baseline_perm_id": b["perm_id"], "n": c.n_treatment, "baseline_n": c.n_baseline,
            "baseline_receive_rate": b.get("receive_rate_median"), "receive_rate": p.get("receive_rate_median"),
            "gain_pct": c.gain_pct, "gain_ci_low_pct": c.ci_low_pct, "gain_ci_high_pct": c.ci_high_pct,
            "verdict": c.verdict, "baseline_send_rate": bs, "send_rate": s,
            "send_gain_pct": 100.0 * (s / bs - 1.0) if s is not None and bs else None,
            **{k: p.get(k) for k in OTHER_AXES},
        })
    return rows


def crossover(gains: list[dict[str, Any]], threshold_pct: float) -> list[dict[str, Any]]:
    """Per (run, server, strategy, initiators, payload): rows of :data:`CROSSOVER_SCHEMA`.

    ``crossover_total_threads``: the first total thread count from which the verdict is
    ``gain`` at that and every larger thread count measured (None: never). ``verdict``: the
    verdict at the most threads measured. ``max_gain_*``: the largest median gain, with its
    interval and verdict (a large median gain can still be inconclusive)."""
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for g in gains:
        groups[tuple(g[k] for k in CROSS_KEYS) + tuple(g.get(k) for k in OTHER_AXES)].append(g)
    out = []
    for key, pts in groups.items():
        pts.sort(key=lambda g: g["total_threads"])
        cross = None
        for g in reversed(pts):
            if g["verdict"] != U.GAIN:
                break
            cross = g["total_threads"]
        last = pts[-1]
        with_gain = [g for g in pts if g["gain_pct"] is not None]
        best = max(with_gain, key=lambda g: (g["gain_pct"], -g["total_threads"])) if with_gain else None
        counts = defaultdict(int)
        for g in pts:
            counts[g["verdict"]] += 1
        out.append({
            **dict(zip(CROSS_KEYS + OTHER_AXES, key)), "synthetic": last["synthetic"], "verdict": last["verdict"],
            "crossover_total_threads": cross, "gain_at_max_threads_pct": last["gain_pct"],
            "gain_at_max_threads_ci_low_pct": last["gain_ci_low_pct"],
            "gain_at_max_threads_ci_high_pct": last["gain_ci_high_pct"], "max_total_threads": last["total_threads"],
            "max_gain_pct": best["gain_pct"] if best else None,
            "max_gain_ci_low_pct": best["gain_ci_low_pct"] if best else None,
            "max_gain_ci_high_pct": best["gain_ci_high_pct"] if best else None,
            "max_gain_verdict": best["verdict"] if best else None,
            "max_gain_total_threads": best["total_threads"] if best else None,
            "points": len(pts), "min_reps": min(min(g["n"], g["baseline_n"]) for g in pts),
            "verdicts": ", ".join(f"{v} {counts[v]}" for v in U.VERDICTS if counts[v]),
            "threshold_pct": float(threshold_pct),
        })
    return out


def as_tuples(rows: list[dict[str, Any]], ddl: str) -> list[tuple]:
    """Rows in the column order of ``ddl`` (for spark.createDataFrame)."""
    cols = columns(ddl)
    return [tuple(r.get(c) for c in cols) for r in rows]
