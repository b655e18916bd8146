"""The analysis' tables from the repetitions' flat rows and the samples' aggregates: plain Python.

Quantiles across repetitions interpolate between order statistics (as ``statistics.quantiles``
with ``method="inclusive"`` and Spark's ``percentile``). A wait type's rate is its wait time
per second of the measured window, averaged over the repetitions with wait data (falling back to
the summary's ``top_waits``; an alternated member uses its sampled session waits). Idle waits
are left out by each target's ``wait_stats()``.
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from typing import Any, Callable, Iterable

from ..results import median
from ..results.summary import MEDIAN_FIELDS
from ..verdicts import permutation_rows
from ..verdicts.pairs import GAIN_KEYS

#: a strategy's crossover is found along the thread counts of everything else equal
CROSS_KEYS = tuple(k for k in GAIN_KEYS if k != "threads") + ("strategy",)
#: how each output table is sorted when written
SORT_KEYS = {
    "permutations": ("run_id", "perm_index", "perm_id"),
    "repetitions": ("run_id", "perm_index", "perm_id", "rep"),
    "dialog_gains": ("run_id", "strategy", *GAIN_KEYS[1:]),
    "crossover": ("run_id", "strategy", *CROSS_KEYS[1:]),
    "wait_profile": ("run_id", "perm_id", "rank", "wait_type"),
    "top_waits": ("run_id", "perm_id", "rank"),
    "queue_timeseries": ("run_id", "perm_id", "rep", "key", "elapsed_s"),
}
#: wait categories (first match wins): SQL Server wait types (what both targets report; the
#: embedded one maps PostgreSQL's wait events to them) and raw PostgreSQL events
WAIT_CATEGORIES = tuple((name, re.compile(p, re.I)) for name, p in (
    ("page latch", r"^(PAGELATCH_.*|LWLock:(BufferContent|buffer_content|BufferMapping|buffer_mapping)"
                   r"|BufferPin.*)$"),
    ("log flush", r"^(WRITELOG|LOGBUFFER|IO:WAL.*|LWLock:(WALWrite|WALInsert|WALBufMapping|WALWriteLock)"
                  r"|WALWrite.*|WALSync.*)$"),
    ("lock", r"^(LCK_M_.*|Lock:.*)$"),
    ("client", r"^(ASYNC_NETWORK_IO|Client:.*)$"),
    ("io", r"^(PAGEIOLATCH_.*|IO_COMPLETION|IO:.*)$"),
    ("cpu", r"^(SOS_SCHEDULER_YIELD|CPU.*|RUNNABLE)$"),   # RUNNABLE: signal wait (waiting for a CPU)
))
#: the wait categories whose share of the wait time the permutations table shows
SHARE_CATEGORIES = ("page latch", "log flush", "lock")


def category(wait_type: str) -> str:
    return next((name for name, rx in WAIT_CATEGORIES if rx.match(wait_type or "")), "other")


def quartiles(values: list[float]) -> tuple[float, float, float] | tuple[None, None, None]:
    """Q1, median, Q3 by linear interpolation between order statistics."""
    v = sorted(values)
    if not v:
        return None, None, None
    if len(v) == 1:
        return v[0], v[0], v[0]
    return tuple(statistics.quantiles(v, n=4, method="inclusive"))


def group_by(rows: Iterable[Any], *keys: str, key: Callable[[Any], Any] | None = None) -> dict[Any, list[Any]]:
    """``rows`` grouped in first-seen order: by their values of ``keys`` (a tuple, a missing key
    None), or by ``key(row)``."""
    out: dict[Any, list[Any]] = defaultdict(list)
    for r in rows:
        out[key(r) if key else tuple(r.get(k) for k in keys)].append(r)
    return out


def _sum(values: Iterable[Any]) -> float | None:
    v = [x for x in values if x is not None]
    return sum(v) if v else None


def permutation_stats(reps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per permutation across its repetitions: its row of the verdicts (harness.verdicts.
    permutation_rows: the axes, the repetitions' numbers, statuses, windows and values); for
    each of :data:`MEDIAN_FIELDS` the median, Q1, Q3, IQR, min and max; n; lost messages, errors,
    client-bound and disturbed repetitions, the summaries' largest queue depths, median CPU,
    the statuses and repetitions."""
    by = group_by(reps, "run_id", "perm_id")
    out = []
    for row in permutation_rows(reps):
        mine = sorted(by[(row["run_id"], row["perm_id"])], key=lambda r: r["rep"])
        row.update(n=len(mine), **{k: mine[0].get(k) for k in ("target_kind", "target_label", "target_profile")})
        for m in MEDIAN_FIELDS:
            vals = [r[m] for r in mine if r.get(m) is not None]
            q1, med, q3 = quartiles(vals)
            row.update({f"{m}_median": med, f"{m}_q1": q1, f"{m}_q3": q3,
                        f"{m}_iqr": None if q1 is None else q3 - q1,
                        f"{m}_min": min(vals, default=None), f"{m}_max": max(vals, default=None)})
        row.update(
            messages_lost=sum(r.get("messages_lost") or 0 for r in mine), errors=sum(r.get("errors") or 0 for r in mine),
            client_bound_reps=sum(bool(r.get("client_bound")) for r in mine),
            disturbed_reps=sum(bool(r.get("disturbed")) for r in mine),
            **{k: max((r[k] for r in mine if r.get(k) is not None), default=None)
               for k in ("max_xmitq_depth", "max_queue_depth")},
            **{k: median(r.get(k) for r in mine)
               for k in ("client_cpu_percent", "server_cpu_percent", "activation_tasks_started_per_s")},
            dialog_errors_lost=_sum(r.get("dialog_errors_lost") for r in mine),
            statuses=",".join(sorted({r["status"] for r in mine})),
            reps=",".join(str(r["rep"]) for r in mine))
        out.append(row)
    return out


def sample_extras(metrics: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Per permutation from the samples' measured-window statistics (``tables/sample_metrics``:
    a row per repetition and series): the largest queue depths, mean client and server CPU
    (percent of one core), most activation tasks running, task-limit hits per second, the
    repetitions with samples. (Each of these series has one key a repetition but the
    transmission queues: a mean over the rows is one over the repetitions.)"""
    out = {}
    for key, mine in group_by(metrics, "run_id", "perm_id").items():
        def pick(stat, family, metric, keep=lambda _k: True):
            return [m[stat] for m in mine if m["family"] == family and m["metric"] == metric and keep(m["key"])]

        def mean(v):
            return sum(v) / len(v) if v else None

        out[key] = {"xmitq_depth_max_measured": max(pick("max", "queues", "depth", lambda k: k.startswith("xmitq")),
                                                    default=None),
                    "queue_depth_max_measured": max(pick("max", "queues", "depth", "queue".__eq__), default=None),
                    "client_cpu_mean": mean(pick("mean", "host", "cpu_percent", "client".__eq__)),
                    "server_cpu_mean": mean(pick("mean", "host", "cpu_percent", "server".__eq__)),
                    "activation_tasks_max": max(pick("max", "activation", "tasks_running"), default=None),
                    "activation_limit_per_s": mean(pick("mean", "activation", "task_limit_reached_per_s")),
                    "sample_reps": len({m["rep"] for m in mine})}
    return out


def rep_wait_rates(reps: list[dict[str, Any]], metrics: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (run_id, perm_id, rep, wait_type): wait_ms_per_s and waiting_tasks_per_s over the
    measured window with its ``source``: ``sessions`` (an alternated member's sampled sessions),
    ``samples`` (the server's wait samples, ``metrics`` as :func:`sample_extras`: their sums
    over the window's ticks, the most samples any one series of the repetition has there) or
    ``summary`` (its top_waits, where it has no wait samples)."""
    from_samples: dict[tuple, list[dict[str, Any]]] = {}
    for key, mine in group_by(metrics, "run_id", "perm_id", "rep").items():
        ticks, rates = max(m["n"] for m in mine), defaultdict(dict)
        for m in mine:
            if m["family"] == "waits" and m["metric"] in ("wait_ms_per_s", "waiting_tasks_per_s"):
                rates[m["key"]][m["metric"]] = m["sum"] / ticks
        if rates:
            from_samples[key] = [{"wait_type": wt, "wait_ms_per_s": w.get("wait_ms_per_s", 0.0),
                                  "waiting_tasks_per_s": w.get("waiting_tasks_per_s", 0.0), "source": "samples"}
                                 for wt, w in rates.items()]
    out = []
    for r in reps:
        key = (r["run_id"], r["perm_id"], r["rep"])
        if r.get("alternated") and r.get("session_waits"):
            per: dict[str, float] = defaultdict(float)
            for waits in r["session_waits"].values():
                for wt, waiting in (waits or {}).items():
                    per[wt] += 1000.0 * (waiting or 0.0)
            rows = [{"wait_type": wt, "wait_ms_per_s": ms, "waiting_tasks_per_s": None, "source": "sessions"}
                    for wt, ms in per.items()]
        elif key in from_samples:
            rows = from_samples[key]
        else:
            span = r.get("span_seconds") or 0.0
            rows = [{"wait_type": w["wait_type"], "wait_ms_per_s": w["wait_time_ms"] / span,
                     "waiting_tasks_per_s": w["waiting_tasks"] / span, "source": "summary"}
                    for w in (r.get("top_waits") or []) if span > 0]
        out += [{"run_id": key[0], "perm_id": key[1], "rep": key[2], **w} for w in rows]
    return out


def wait_profile(rep_waits: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (run_id, perm_id, wait_type): mean wait_ms_per_s over the repetitions with wait data,
    category, share of the permutation's wait time and rank (1 = top)."""
    out = []
    for (run_id, perm_id), mine in group_by(rep_waits, "run_id", "perm_id").items():
        n = len({w["rep"] for w in mine})
        per: dict[str, dict[str, Any]] = {}
        for w in mine:
            p = per.setdefault(w["wait_type"], {"ms": 0.0, "tasks": None, "sources": set()})
            p["ms"] += w["wait_ms_per_s"] or 0.0
            if w["waiting_tasks_per_s"] is not None:
                p["tasks"] = (p["tasks"] or 0.0) + w["waiting_tasks_per_s"]
            p["sources"].add(w["source"])
        total = sum(p["ms"] for p in per.values()) / n
        ranked = sorted(per.items(), key=lambda kv: (-kv[1]["ms"], kv[0]))
        for rank, (wt, p) in enumerate(ranked, start=1):
            ms = p["ms"] / n
            out.append({"run_id": run_id, "perm_id": perm_id, "wait_type": wt, "wait_ms_per_s": ms,
                        "waiting_tasks_per_s": None if p["tasks"] is None else p["tasks"] / n,
                        "source": ",".join(sorted(p["sources"])), "reps": n, "category": category(wt),
                        "share": ms / total if total > 0 else None, "rank": rank})
    return out


def wait_shares(profile: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Per permutation: the shares of page-latch, log-flush and lock waits in its wait time, the
    top wait and its share, and the wait time per second. What limits throughput is the
    diagnosis' (these shares alone cannot say it; docs/diagnosis.md)."""
    out = {}
    for key, mine in group_by(profile, "run_id", "perm_id").items():
        top = min(mine, key=lambda w: w["rank"])
        shares = {c.replace(" ", "_") + "_share": sum(w["share"] or 0.0 for w in mine if w["category"] == c)
                  for c in SHARE_CATEGORIES}
        out[key] = {**shares, "top_wait": top["wait_type"], "top_wait_share": top["share"],
                    "wait_ms_per_s_total": sum(w["wait_ms_per_s"] for w in mine)}
    return out


def permutations_table(reps: list[dict[str, Any]], metrics: list[dict[str, Any]],
                       profile: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The permutations table: :func:`permutation_stats` with the samples' extras
    (:func:`sample_extras`) and the wait shares (the job adds the intervals and the diagnosis'
    columns)."""
    extras, shares = sample_extras(metrics), wait_shares(profile)
    blank_extras = dict.fromkeys(next(iter(extras.values()), {}), None)
    blank_shares = dict.fromkeys(("page_latch_share", "log_flush_share", "lock_share", "top_wait",
                                  "top_wait_share", "wait_ms_per_s_total"), None)
    out = []
    for row in permutation_stats(reps):
        key = (row["run_id"], row["perm_id"])
        out.append({**row, **extras.get(key, blank_extras), **shares.get(key, blank_shares)})
    return out


def sort_rows(rows: list[dict[str, Any]], table: str) -> list[dict[str, Any]]:
    """``rows`` in the table's :data:`SORT_KEYS` order (nulls last)."""
    keys = [k for k in SORT_KEYS.get(table, ()) if rows and k in rows[0]]
    return sorted(rows, key=lambda r: tuple((r[k] is None, r[k] if r[k] is not None else 0) for k in keys))
