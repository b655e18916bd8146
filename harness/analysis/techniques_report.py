"""The technique comparisons (:mod:`.techniques`) for readers: the report's section, the
terminal's table, and the rows read back from a report's ``tables/technique_gains.csv``.

One line per comparison: its primary metric's medians, change with its interval and verdict
(latencies: lower is better), what showed the mechanism at work in each arm, the axis' other
metrics in words; then, for every comparison whose mechanism never engaged, how to exercise it.
No Spark and no matplotlib here: ``ssbench analyze`` and ``ssbench bench`` print the terminal
table after the analysis from the CSV.
"""

from __future__ import annotations

import csv
import io
import shutil
import sys
from pathlib import Path
from typing import Any

from .techniques import NOT_EXERCISED, TECHNIQUE_AXES, TECHNIQUE_SCHEMA

CSV_NAME = "technique_gains.csv"


def comparisons(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows grouped per comparison (technique permutation against its baseline): the primary
    metric's row, with ``others`` (the other metrics' rows) attached, in the rows' order."""
    out: dict[tuple, dict[str, Any]] = {}
    for r in rows:
        key = (r["run_id"], r["axis"], r["perm_id"], r["baseline_perm_id"])
        if r.get("primary"):
            out[key] = {**r, "others": out.get(key, {}).get("others", [])}
        else:
            out.setdefault(key, {"others": []})["others"].append(r)
    return [c for c in out.values() if "axis" in c]


def _num(v: Any) -> str:
    if v is None:
        return "–"
    v = float(v)
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def change_text(r: dict[str, Any]) -> str:
    """``+12.3 % [-4.0, +25.1]``; ``[no interval]`` without one."""
    v, lo, hi = r.get("change_pct"), r.get("change_ci_low_pct"), r.get("change_ci_high_pct")
    if v is None:
        return "–"
    return f"{v:+.1f} % " + (f"[{lo:+.1f}, {hi:+.1f}]" if lo is not None and hi is not None else "[no interval]")


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
    parts = [f"{metric_text(o)}: {medians_text(o)}, {change_text(o)} {o['verdict']}" for o in c["others"]]
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
                   ("change_text", "change [95 % CI]", "l"), ("verdict", "verdict", "verdict"),
                   ("engagement_text", "mechanism at work (most in a repetition: baseline / technique)", "l"),
                   ("others_text", "also", "l")]


def section_html(rows: list[dict[str, Any]], threshold_pct: float) -> str:
    """The report's "Techniques against their baselines" section; empty without comparisons."""
    from html import escape

    from . import uncertainty as U
    from .report import run_label, table

    cs = comparisons(rows)
    if not cs:
        return ""
    axes = list(dict.fromkeys(c["axis"] for c in cs))
    notes = "".join(f"<li><b>{escape(a)}</b>: {escape(TECHNIQUE_AXES[a].why)}</li>" for a in axes)
    shown = [dict(c, run_label=run_label(c["run_id"], bool(c.get("synthetic"))), where=where_text(c),
                  metric_text=metric_text(c), change_text=change_text(c), engagement_text=engagement_text(c),
                  others_text=others_text(c)) for c in cs]
    missing = not_exercised_notes(cs)
    return ("<h2>Techniques against their baselines</h2>"
            "<p>Each technique value against its axis' baseline with everything else equal, judged on the metric "
            "the technique moves: the change of its median over the repetitions, its 95 % percentile-bootstrap "
            f"interval and verdict, read as the dialog strategies' (gain only where the whole interval is beyond "
            f"{threshold_pct:g} % in the better direction; for a latency lower is better; fewer than {U.MIN_REPS} "
            "repetitions on a side is inconclusive). <b>not exercised</b>: the technique's mechanism never "
            "engaged in the measured window, so the arms differ in a setting that did nothing and no verdict "
            "on the technique is possible.</p><ul>" + notes + "</ul>" + table(shown, SECTION_COLUMNS)
            + ("<div class='issues'><b>Not exercised</b><ul>"
               + "".join(f"<li>{escape(n)}</li>" for n in missing) + "</ul></div>" if missing else ""))


# --------------------------------------------------------------------------- the terminal

def terminal_text(rows: list[dict[str, Any]], width: int | None = None) -> str:
    """The comparisons as a plain-text table, then the "not exercised" notes; "" without rows.
    ``width``: the terminal's when stdout is one, else 200 columns."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    cs = comparisons(rows)
    if not cs:
        return ""
    t = Table(title="Techniques against their baselines (each judged on the metric it moves; docs/statistics.md)",
              box=box.SIMPLE, title_justify="left")
    for head, wrap in (("technique vs baseline", False), ("where", True), ("judged on", True),
                       ("baseline → technique", False), ("change [95 % CI]", False), ("verdict", False),
                       ("reps", False)):
        t.add_column(head, overflow="fold", no_wrap=not wrap, min_width={"where": 36, "judged on": 30}.get(head))
    for c in cs:
        t.add_row(f"{c['axis']} {c['value']} vs {c['baseline_value']}", where_text(c), metric_text(c),
                  medians_text(c), change_text(c), c["verdict"], f"{c['n']}/{c['baseline_n']}")
    if width is None:
        width = shutil.get_terminal_size((200, 24)).columns if sys.stdout.isatty() else 200
    buf = io.StringIO()
    console = Console(file=buf, width=width, no_color=True, highlight=False, force_terminal=False)
    console.print(t)
    for note in not_exercised_notes(cs):
        console.print(note)
    return "\n".join(line.rstrip() for line in buf.getvalue().splitlines()) + "\n"


_TYPES = {"double": float, "bigint": int, "boolean": lambda s: s == "true", "string": str}


def load_rows(index: Path) -> list[dict[str, Any]]:
    """The technique rows written next to a report (``tables/technique_gains.csv``), typed as
    :data:`~.techniques.TECHNIQUE_SCHEMA`; [] when the report has none."""
    f = Path(index).parent / "tables" / CSV_NAME
    if not f.exists():
        return []
    types = dict(part.strip().split(" ", 1) for part in TECHNIQUE_SCHEMA.split(","))
    with f.open(newline="", encoding="utf-8") as fh:
        return [{k: (None if v == "" else _TYPES[types.get(k, "string")](v)) for k, v in r.items()}
                for r in csv.DictReader(fh)]
