"""``index.html``: one self-contained page (inline CSS, relative links to ``plots/*.png`` and
``tables/*``) readable without Spark or Python."""

from __future__ import annotations

import datetime as _dt
import html
from pathlib import Path
from typing import Any, Iterable

from ..results import write_atomic
from .discovery import Discovery
from .plots import STRATEGY_ORDER, Plot, strategy_label

CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:1.5em auto;max-width:1250px;
 padding:0 1em;color:#222;line-height:1.4}
h1{font-size:1.5em;margin-bottom:.2em} h2{border-bottom:2px solid #ddd;padding-bottom:.2em;margin-top:1.8em}
h3{font-size:1.05em;margin:1.2em 0 .4em}
table{border-collapse:collapse;font-size:.82em;margin:.5em 0}
th,td{border:1px solid #ccc;padding:2px 6px;text-align:right;white-space:nowrap}
th{background:#f2f2f2;position:sticky;top:0;white-space:normal;vertical-align:bottom} td.l,th.l{text-align:left}
tr:nth-child(even) td{background:#fafafa}
.meta td{text-align:left;white-space:normal}
.issues{background:#fff4e5;border-left:5px solid #f0a030;padding:.6em 1em}
.alarm{background:#fdecea;border-left:5px solid #d93025;padding:.6em 1em;font-weight:bold}
.note{color:#666;font-style:italic}
.plot{margin:1em 0 2em} .plot img{max-width:100%;border:1px solid #e4e4e4}
.pos{color:#0a7d32} .neg{color:#b3261e}
details summary{cursor:pointer;font-weight:bold;margin:.6em 0}
code{background:#f4f4f4;padding:0 3px}
"""


def _e(v: Any) -> str:
    return html.escape("" if v is None else str(v))


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


def table(rows: list[dict[str, Any]], columns: list[tuple[str, str, str]], limit: int | None = None) -> str:
    """``columns``: (key, header, kind); kind 'l' left-aligns text."""
    head = "".join(f'<th class="{"l" if k == "l" else ""}">{_e(h)}</th>' for _, h, k in columns)
    body = []
    for r in rows[:limit] if limit else rows:
        cells = []
        for key, _, kind in columns:
            v = r.get(key)
            cls = "l" if kind == "l" else ""
            if kind == "pct" and isinstance(v, float):
                cls = "pos" if v > 0 else "neg"
            cells.append(f'<td class="{cls}">{_e(fmt(v, kind))}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    more = f'<p class="note">{len(rows) - limit} more rows in the CSV.</p>' if limit and len(rows) > limit else ""
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>{more}"


def _provenance(disc: Discovery, targets: dict[str, str]) -> str:
    rows = []
    for run in disc.runs:
        m = run.meta
        mx = m.get("matrix") or {}
        sw = m.get("ssbench") or {}
        host = m.get("host") or {}
        rows.append(
            f"<tr><td class='l'><b>{_e(run.run_id)}</b></td><td class='l'>{_e(targets.get(run.run_id))}</td>"
            f"<td class='l'>{_e(m.get('status', 'unknown (no run.json)'))}</td>"
            f"<td class='l'>{_e(mx.get('name'))} ({_e(m.get('permutations_done'))}/{_e(m.get('permutations_total'))}"
            f" permutations)</td><td class='l'>{_e(m.get('started'))} → {_e(m.get('ended'))}</td>"
            f"<td class='l'>{_e(sw.get('version'))} {_e((sw.get('git_commit') or '')[:10])}"
            f"{' (dirty)' if sw.get('git_dirty') else ''}</td>"
            f"<td class='l'>{_e(host.get('cpu_count'))} CPUs {_e(host.get('cpu_model') or '')}</td></tr>")
    return ("<table class='meta'><thead><tr><th class='l'>run</th><th class='l'>target</th><th class='l'>status</th>"
            "<th class='l'>matrix</th><th class='l'>time (UTC)</th><th class='l'>ssbench</th><th class='l'>host</th>"
            "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def _plots_html(plots: Iterable[Plot]) -> str:
    parts = []
    section = None
    for p in plots:
        if p.section != section:
            section = p.section
            parts.append(f"<h2>{_e(section)}</h2>")
        if p.skipped:
            parts.append(f"<p class='note'>{_e(p.title)}{' (run ' + _e(p.run_id) + ')' if p.run_id else ''}: "
                         f"{_e(p.note)}</p>")
        else:
            parts.append(f"<div class='plot'><h3>{_e(p.title)}</h3><a href='{_e(p.file)}'>"
                         f"<img src='{_e(p.file)}' alt='{_e(p.title)}'></a>"
                         + (f"<p class='note'>{_e(p.note)}</p>" if p.note else "") + "</div>")
    return "\n".join(parts)


PERM_COLUMNS = [
    ("run_id", "run", "l"), ("perm_id", "permutation", "l"), ("n", "reps", ""),
    ("receive_rate_median", "receive msg/s (median)", "rate"), ("receive_rate_iqr", "IQR", "rate"),
    ("receive_rate_min", "min", "rate"), ("receive_rate_max", "max", "rate"),
    ("send_rate_median", "send msg/s (median)", "rate"), ("send_rate_iqr", "IQR", "rate"),
    ("send_p50_ms_median", "SEND p50 ms", "ms"), ("send_p99_ms_median", "SEND p99 ms", "ms"),
    ("e2e_p50_ms_median", "e2e p50 ms", "ms"), ("e2e_p99_ms_median", "e2e p99 ms", "ms"),
    ("max_xmitq_depth", "max xmitq", ""), ("top_wait", "top wait", "l"), ("top_wait_share", "share", "share"),
    ("verdict", "bottleneck", "l"), ("messages_lost", "lost", ""),
]
CROSS_COLUMNS = [
    ("run_id", "run", "l"), ("server_label", "server", "l"), ("strategy_label", "strategy vs one dialog per thread", "l"),
    ("initiators", "initiators", ""), ("payload_bytes", "payload (B)", ""),
    ("crossover_total_threads", "pays from (total threads)", ""), ("max_gain_pct", "max gain", "pct"),
    ("max_gain_total_threads", "at threads", ""), ("gain_at_max_threads_pct", "gain at most threads", "pct"),
    ("peak_receive_rate", "peak msg/s (strategy)", "rate"),
]
TABLE_FILES = [
    ("permutations", "per permutation across repetitions: median, Q1, Q3, IQR, min, max, n of rates and "
                     "latencies; queue depths; CPU; top wait and bottleneck verdict"),
    ("repetitions", "one row per repetition (from summary.json)"),
    ("dialog_gains", "gain in % of each dialog strategy over one dialog per thread"),
    ("crossover", "where each strategy starts to pay (gain above the threshold from there on)"),
    ("top_waits", "top waits per permutation"),
    ("wait_profile", "every wait type per permutation (idle waits are left out by the targets)"),
    ("queue_timeseries", "queue depths over time of the plotted permutations"),
    ("sample_metrics", "measured-window aggregates of every sample series per repetition (Parquet only)"),
    ("issues", "missing or corrupt files (CSV only)"),
]


def key_rows(perms: list[dict], cross: list[dict], server_labels: dict[tuple[str, str], str]) -> list[dict]:
    """The key table: the crossover rows with display labels and the strategy's peak receive
    rate (median) over the thread counts."""
    peak: dict[tuple, float] = {}
    for p in perms:
        k = (p["run_id"], p["server"], p["dialogs"], p["initiators"], p["payload_bytes"])
        peak[k] = max(peak.get(k, 0.0), p.get("receive_rate_median") or 0.0)
    rows = []
    for c in cross:
        d = dict(c)
        d["server_label"] = server_labels.get((c["run_id"], c["server"]), c["server"])
        d["strategy_label"] = strategy_label(c["strategy"])
        d["peak_receive_rate"] = peak.get((c["run_id"], c["server"], c["strategy"], c["initiators"], c["payload_bytes"]))
        rows.append(d)
    rows.sort(key=lambda d: (d["run_id"], d["server"], STRATEGY_ORDER.get(d["strategy"], 9), d["strategy"],
                             d["payload_bytes"], d["initiators"]))
    return rows


def key_table(rows: list[dict]) -> str:
    """The key table as an HTML fragment (the notebook displays it too)."""
    return table(rows, CROSS_COLUMNS)


def write_index(out_dir: Path, disc: Discovery, targets: dict[str, str], perms: list[dict], cross_rows: list[dict],
                plots: list[Plot], threshold_pct: float, written: dict[str, list[str]], elapsed_s: float) -> Path:
    runs = ", ".join(r.run_id for r in disc.runs)
    lost = [p for p in perms if (p.get("messages_lost") or 0) > 0]
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
             f"<title>ssbench report — {_e(runs)}</title><style>{CSS}</style></head><body>",
             f"<h1>ssbench report — {_e(runs)}</h1>",
             f"<p>Service Broker load test analysis: {_e('; '.join(sorted(set(targets.values()))))}. "
             f"Generated {_dt.datetime.now(_dt.timezone.utc).strftime('%Y-%m-%d %H:%M:%S UTC')} "
             f"in {elapsed_s:.1f} s. Rates are messages per second over each repetition's measured window; "
             f"statistics are across repetitions (median, IQR = Q3 − Q1, min, max, n).</p>",
             _provenance(disc, targets)]
    if lost:
        parts.append(f"<div class='alarm'>MESSAGES LOST in {len(lost)} permutation(s): "
                     + ", ".join(_e(f"{p['perm_id']} ({int(p['messages_lost'])})") for p in lost[:20])
                     + ("…" if len(lost) > 20 else "") + "</div>")
    if disc.issues:
        parts.append(f"<div class='issues'><b>{len(disc.issues)} problem(s) with the input</b> (the rest was "
                     "analyzed):<ul>" + "".join(f"<li><code>{_e(i.path)}</code>: {_e(i.problem)}</li>"
                                                for i in disc.issues[:200])
                     + ("<li>… see tables/issues.csv</li>" if len(disc.issues) > 200 else "") + "</ul></div>")
    parts.append("<h2>Key results: where a dialog strategy pays</h2>")
    if cross_rows:
        parts.append(f"<p>Gain = receive rate of the strategy over one dialog per thread with everything else equal. "
                     f"“Pays from” is the first total thread count from which the gain stays above "
                     f"{threshold_pct:g} % at every larger thread count measured (– never). The whitepaper found the "
                     f"150 trick paying from about 30 concurrent threads (3×10), up to +315 %.</p>")
        parts.append(key_table(cross_rows))
    else:
        parts.append("<p class='note'>No dialog-strategy comparison: the run(s) do not have one dialog per thread "
                     "and another strategy at the same settings.</p>")
    parts.append(_plots_html(plots))
    parts.append("<h2>Permutations</h2>")
    parts.append(f"<details><summary>{len(perms)} permutations (click to expand)</summary>"
                 + table(perms, PERM_COLUMNS, limit=1000) + "</details>")
    parts.append("<h2>Tables</h2><ul>")
    for name, what in TABLE_FILES:
        links = " · ".join(f"<a href='{_e(f)}'>{_e(Path(f).suffix.lstrip('.') or f)}</a>"
                           for f in written.get(name, []))
        if links:
            parts.append(f"<li><b>{_e(name)}</b> ({links}): {_e(what)}</li>")
    parts.append("</ul><p class='note'>Parquet tables are directories written by Spark; CSVs are single files.</p>")
    parts.append("</body></html>\n")
    return write_atomic(out_dir / "index.html", "\n".join(parts))
