"""The report's "Techniques against their baselines" section (:func:`.comparisons.technique_gains`).

One line per comparison (primary metric's medians, gain, interval, verdict, what showed the
mechanism at work), then how to exercise those not exercised. No Spark and no matplotlib here.
"""

from __future__ import annotations

from typing import Any

from .markup import run_label, table, thresholds
from .tables import group_by
from ..verdicts import NOT_EXERCISED, TECHNIQUE_AXES



def comparisons(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows grouped per comparison (technique permutation against its baseline): the primary
    metric's row, with ``others`` (the other metrics' rows) attached, in the rows' order."""
    out = []
    for group in group_by(rows, "run_id", "axis", "perm_id", "baseline_perm_id").values():
        primary = [r for r in group if r.get("primary")]
        if primary:
            out.append({**primary[0], "others": [r for r in group if not r.get("primary")]})
    return out


def _num(v: Any) -> str:
    if v is None:
        return "–"
    v = float(v)
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def gain_text(r: dict[str, Any]) -> str:
    """``+12.3 % [-4.0, +25.1]``; ``[no interval]`` without one."""
    from ..verdicts.answer import pct_interval

    return pct_interval(r.get("gain_pct"), r.get("gain_ci_low_pct"), r.get("gain_ci_high_pct"))


def metric_text(r: dict[str, Any]) -> str:
    return r["metric_label"] + (", lower is better" if r.get("lower_is_better") else "")


def medians_text(r: dict[str, Any]) -> str:
    return f"{_num(r.get('baseline_median'))} → {_num(r.get('median'))}"


def engagement_text(r: dict[str, Any]) -> str:
    """``activation tasks started or ended inside the window: 0 / 12`` (baseline / technique,
    the most in one repetition); ``–`` when the axis has no such measure or it was not recorded."""
    if not r.get("engagement") or r.get("exercised") is None:
        return "–" if not r.get("engagement") else f"{r['engagement']}: not recorded"
    return f"{r['engagement']}: {_num(r.get('baseline_engagement'))} / {_num(r.get('engagement_value'))}"


def others_text(c: dict[str, Any]) -> str:
    parts = [f"{metric_text(o)}: {medians_text(o)}, {gain_text(o)} {o['verdict']}" for o in c["others"]]
    if c.get("shown_metric"):
        parts.append(f"{c['shown_metric']}: {_num(c.get('baseline_shown'))} → {_num(c.get('shown'))}")
    return "; ".join(parts) or "–"


def where_text(c: dict[str, Any]) -> str:
    rate = c.get("rate")
    parts = [f"{c.get('threads')} thr", f"rate {float(rate):g}/s" if rate else "closed loop"]
    return ", ".join(parts + ([c["context"]] if c.get("context") else []))


def not_exercised_notes(cs: list[dict[str, Any]]) -> list[str]:
    """One sentence per comparison whose mechanism never engaged: what was missing, and how to
    exercise it."""
    return [f"{c['axis']} = {c['value']} against {c['baseline_value']} ({where_text(c)}): not exercised, "
            f"no {c['engagement']} in any repetition "
            + ("of the technique" if TECHNIQUE_AXES[c["axis"]].engagement.treatment_only else "of either arm")
            + f". To exercise it: {c['how_to_exercise']}."
            for c in cs if c["verdict"] == NOT_EXERCISED]


# --------------------------------------------------------------------------- the report

SECTION_COLUMNS = [("run_label", "run", "l"), ("axis", "technique axis", "l"), ("value", "value", "l"),
                   ("baseline_value", "baseline", "l"), ("where", "where", "l"), ("n", "n", ""),
                   ("baseline_n", "n base", ""), ("metric_text", "judged on", "l"),
                   ("baseline_median", "baseline", ""), ("median", "technique", ""),
                   ("gain_text", "gain [interval]", "l"), ("verdict", "verdict", "verdict"),
                   ("engagement_text", "mechanism at work (most in a repetition: baseline / technique)", "l"),
                   ("others_text", "also", "l")]


def section_html(rows: list[dict[str, Any]]) -> str:
    """The report's "Techniques against their baselines" section; empty without comparisons."""
    from html import escape

    from ..verdicts import MIN_REPS

    cs = comparisons(rows)
    if not cs:
        return ""
    axes = list(dict.fromkeys(c["axis"] for c in cs))
    notes = "".join(f"<li><b>{escape(a)}</b>: {escape(TECHNIQUE_AXES[a].why)}</li>" for a in axes)
    shown = [dict(c, run_label=run_label(c["run_id"], bool(c.get("synthetic"))), where=where_text(c),
                  metric_text=metric_text(c), gain_text=gain_text(c), engagement_text=engagement_text(c),
                  others_text=others_text(c)) for c in cs]
    missing = not_exercised_notes(cs)
    return ("<h2>Techniques against their baselines</h2>"
            "<p>Each technique value against its axis' baseline with everything else equal, judged on the metric "
            "the technique moves exactly as the dialog strategies are (the stopping rule, docs/statistics.md): the "
            "gain of its geometric mean over the repetitions that count, in the metric's better direction (for a "
            "latency lower is better, so a fall is a gain), its repeated confidence interval and verdict (gain only "
            f"where the whole interval is above +{thresholds(cs)} %; fewer than {MIN_REPS} repetitions on a side is "
            "inconclusive). The medians are the metric's own. <b>not exercised</b>: the technique's mechanism never "
            "engaged in the measured window, so the arms differ in a setting that did nothing and no verdict on the "
            "technique is possible. The key results above show each comparison on its primary metric.</p><ul>"
            + notes + "</ul>" + table(shown, SECTION_COLUMNS)
            + ("<div class='issues'><b>Not exercised</b><ul>"
               + "".join(f"<li>{escape(n)}</li>" for n in missing) + "</ul></div>" if missing else ""))
