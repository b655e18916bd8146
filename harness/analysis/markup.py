"""The report's HTML building blocks: its style sheet, escaping, number formats, a table, a run's
label. Every section of the report (harness.analysis.report, diagnosis_view, techniques_report)
builds on these, so none of them imports another."""

from __future__ import annotations

import html
from typing import Any

CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:1.5em auto;max-width:1250px;
 padding:0 1em;color:#222;line-height:1.4}
h1{font-size:1.5em;margin-bottom:.2em} h2{border-bottom:2px solid #ddd;padding-bottom:.2em;margin-top:1.8em}
h3{font-size:1.05em;margin:1.2em 0 .4em}
table{border-collapse:collapse;font-size:.82em;margin:.5em 0}
.tw{overflow-x:auto;max-width:100%}
th,td{border:1px solid #ccc;padding:2px 6px;text-align:right;white-space:nowrap}
th{background:#f2f2f2;position:sticky;top:0;white-space:normal;vertical-align:bottom} td.l,th.l{text-align:left}
tr:nth-child(even) td{background:#fafafa}
.meta td{text-align:left;white-space:normal}
.issues{background:#fff4e5;border-left:5px solid #f0a030;padding:.6em 1em}
.alarm{background:#fdecea;border-left:5px solid #d93025;padding:.6em 1em;font-weight:bold}
.note{color:#666;font-style:italic}
.plot{margin:1em 0 2em} .plot img{max-width:100%;border:1px solid #e4e4e4}
.pos{color:#0a7d32} .neg{color:#b3261e}
td.v-gain{background:#e3f4e8!important;color:#0a5d26;font-weight:bold;text-align:left}
td.v-loss{background:#fbe3e1!important;color:#8c1d18;font-weight:bold;text-align:left}
td.v-nodiff{color:#333;text-align:left} td.v-inconclusive{color:#777;font-style:italic;text-align:left}
.synthetic{background:#fdecea;border:3px solid #d93025;padding:.6em 1em;font-weight:bold;color:#8c1d18}
.about{background:#f3f6fb;border-left:5px solid #5b7fbf;padding:.4em 1em;margin:.6em 0}
details summary{cursor:pointer;font-weight:bold;margin:.6em 0}
code{background:#f4f4f4;padding:0 3px}
"""


def blank(v: Any) -> Any:
    """``v``, or "" where it is missing (None)."""
    return "" if v is None else v


def _e(v: Any) -> str:
    return html.escape(str(blank(v)))


def fmt(v: Any, kind: str = "") -> str:
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if v != v:
            return "–"
        if kind == "pct":
            return f"{v:+.1f} %"
        if kind == "share":
            return f"{100 * v:.0f} %"
        if kind == "rate":
            return f"{v:,.0f}"
        if kind == "ms":
            return f"{v:.3g}"
        return f"{v:,.1f}" if abs(v) >= 100 else f"{v:.3g}"
    if isinstance(v, int):
        return f"{v:,}" if kind == "rate" else str(v)
    return str(v)


VERDICT_CLASS = {"gain": "v-gain", "loss": "v-loss", "no difference": "v-nodiff", "inconclusive": "v-inconclusive",
                 "not exercised": "v-inconclusive"}


def table(rows: list[dict[str, Any]], columns: list[tuple[str, str, str]], limit: int | None = None,
          table_class: str = "") -> str:
    """``columns``: (key, header, kind); kind 'l' left-aligns text, 'verdict' colours a
    verdict (green only for ``gain``); ``table_class``: ``meta`` makes its cells wrap."""
    head = "".join(f'<th class="{"l" if k == "l" else ""}">{_e(h)}</th>' for _, h, k in columns)
    body = []
    for r in rows[:limit] if limit else rows:
        cells = []
        for key, _, kind in columns:
            v = r.get(key)
            cls = "l" if kind == "l" else ""
            if kind == "verdict":
                cls = VERDICT_CLASS.get(v, "l")
            cells.append(f'<td class="{cls}">{_e(fmt(v, kind))}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    more = f'<p class="note">{len(rows) - limit} more rows in the CSV.</p>' if limit and len(rows) > limit else ""
    # a wide table scrolls inside its own box: the page itself never scrolls sideways
    return (f"<div class='tw'><table class='{table_class}'><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table></div>{more}")


def run_label(run_id: str, synthetic: bool) -> str:
    return f"{run_id} (SYNTHETIC)" if synthetic else run_id


def thresholds(rows: list[dict[str, Any]]) -> str:
    """The rows' verdict thresholds (``5``, ``5/10``): 5, the default, when none has one."""
    given = {r["threshold_pct"] for r in rows if r.get("threshold_pct") is not None}
    return "/".join(f"{t:g}" for t in sorted(given)) or "5"
