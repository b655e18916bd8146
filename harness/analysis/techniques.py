"""Techniques against their baselines: one generic comparison for every technique axis.

A technique axis is a matrix axis whose values are "a technique" and "what you would do
without it" (docs/matrices.md, docs/statistics.md). For each axis present in a run with more
than one value, every permutation whose value is not the baseline is compared with the
permutation that has the baseline value and everything else equal (run, server, initiators,
threads, dialog strategy, payload, offered rate and the other technique axes): the gain of the
median receive rate with its bootstrap interval and verdict, computed exactly as the dialog
strategies' gains (:func:`harness.analysis.uncertainty.compare`: fewer than 3 repetitions on
either side or an interval that crosses the threshold is ``inconclusive``). The medians of the
end-to-end p99 and of the axis' own secondary metric go next to it, without a verdict.

Pure Python on the driver's permutation rows (no Spark): its table schema is a DDL string.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Callable

from . import uncertainty as U

#: axis -> (how its baseline is chosen, the secondary metric shown next to the gain, why).
#: ``None`` in a row means the axis' default (absent from the matrix or the permutation values).
TECHNIQUE_AXES: dict[str, tuple[str, str | None, str]] = {
    "messages_per_dialog": ("unlimited", None, "dialog reuse (unlimited) is the baseline; 1 = a new "
                            "dialog per message, N = recycle after N"),
    "fire_and_forget": ("false", "dialog_errors_lost", "the target ending first is the baseline"),
    "waitfor_timeout_ms": ("largest", "activation_tasks_started_per_s", "the longest WAITFOR timeout is "
                           "the baseline (the paper's advice: long enough that activated tasks live on)"),
    "high_priority_share": ("zero", None, "no high-priority dialogs is the baseline"),
    "max_queue_readers": ("smallest", None, "the fewest queue readers is the baseline"),
    "receive_top": ("smallest", None, "the smallest RECEIVE TOP (n) is the baseline"),
}
#: what else must be equal for two permutations to be compared
CONTEXT_KEYS = ("run_id", "server", "initiators", "threads", "dialogs", "payload_bytes", "rate")

TECHNIQUE_SCHEMA = ("run_id string, synthetic boolean, axis string, value string, baseline_value string, "
                    "server string, initiators bigint, threads bigint, dialogs string, payload_bytes bigint, "
                    "context string, perm_id string, baseline_perm_id string, n bigint, baseline_n bigint, "
                    "baseline_receive_rate double, receive_rate double, gain_pct double, gain_ci_low_pct double, "
                    "gain_ci_high_pct double, verdict string, baseline_e2e_p99_ms double, e2e_p99_ms double, "
                    "secondary_metric string, baseline_secondary double, secondary double")


def _norm(axis: str, v: Any) -> Any:
    """The axis' value with its default made explicit (None: unlimited / false / 0)."""
    if axis == "fire_and_forget":
        return bool(v)
    if axis == "high_priority_share":
        return float(v or 0.0)
    return v


def _text(axis: str, v: Any) -> str:
    if v is None and axis == "messages_per_dialog":
        return "unlimited"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def _baseline(rule: str, values: list[Any]) -> Any:
    pick: dict[str, Callable[[list[Any]], Any]] = {
        "unlimited": lambda vs: None if None in vs else max(vs),
        "false": lambda vs: False,
        "zero": lambda vs: 0.0,
        "largest": max, "smallest": min,
    }
    return pick[rule](values)


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def technique_gains(perms: list[dict[str, Any]], threshold_pct: float) -> list[dict[str, Any]]:
    """Rows of :data:`TECHNIQUE_SCHEMA`: every technique value against its axis' baseline,
    everything else equal. Axes absent from the rows (or with one value) give no rows."""
    rows: list[dict[str, Any]] = []
    for axis, (rule, secondary, _why) in TECHNIQUE_AXES.items():
        present = [p for p in perms if axis in p]
        if len({_norm(axis, p.get(axis)) for p in present}) < 2:
            continue
        others = [a for a in TECHNIQUE_AXES if a != axis]
        groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
        for p in present:
            key = tuple(p.get(k) for k in CONTEXT_KEYS) + tuple(_norm(a, p.get(a)) for a in others)
            groups[key].append(p)
        for key, members in groups.items():
            values = [_norm(axis, p.get(axis)) for p in members]
            if len(set(values)) < 2:
                continue
            base_value = _baseline(rule, values)
            base = next((p for p, v in zip(members, values) if v == base_value), None)
            if base is None:
                continue
            context = ", ".join(f"{a}={_text(a, _norm(a, base.get(a)))}" for a in others
                                if len({_norm(a, p.get(a)) for p in present}) > 1)
            for p, v in zip(members, values):
                if p is base:
                    continue
                c = U.compare([x for x in (p.get("receive_rate_values") or []) if x is not None],
                              [x for x in (base.get("receive_rate_values") or []) if x is not None], threshold_pct)
                rows.append({
                    "run_id": p["run_id"], "synthetic": bool(p.get("synthetic")), "axis": axis,
                    "value": _text(axis, v), "baseline_value": _text(axis, base_value), "server": p.get("server"),
                    "initiators": p.get("initiators"), "threads": p.get("threads"), "dialogs": p.get("dialogs"),
                    "payload_bytes": p.get("payload_bytes"), "context": context, "perm_id": p["perm_id"],
                    "baseline_perm_id": base["perm_id"], "n": c.n_treatment, "baseline_n": c.n_baseline,
                    "baseline_receive_rate": base.get("receive_rate_median"),
                    "receive_rate": p.get("receive_rate_median"), "gain_pct": c.gain_pct,
                    "gain_ci_low_pct": c.ci_low_pct, "gain_ci_high_pct": c.ci_high_pct, "verdict": c.verdict,
                    "baseline_e2e_p99_ms": base.get("e2e_p99_ms_median"), "e2e_p99_ms": p.get("e2e_p99_ms_median"),
                    "secondary_metric": secondary,
                    "baseline_secondary": _num(base.get(secondary)) if secondary else None,
                    "secondary": _num(p.get(secondary)) if secondary else None,
                })
    rows.sort(key=lambda r: (r["run_id"], list(TECHNIQUE_AXES).index(r["axis"]), r["context"], r["server"] or "",
                             r["initiators"] or 0, r["threads"] or 0, r["value"]))
    return rows


def axis_note(axis: str) -> str:
    return TECHNIQUE_AXES[axis][2]
