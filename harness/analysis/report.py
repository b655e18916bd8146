"""``index.html``: one self-contained page (inline CSS, relative links to ``plots/*.png`` and
``tables/*``) readable without Spark or Python."""

from __future__ import annotations

import datetime as _dt
import re
from pathlib import Path
from typing import Any, Iterable

from ..results import disturbance, write_atomic
from ..verdicts import MIN_REPS, Answer, Section
from ..verdicts.answer import pct_interval as pct_ci
from .discovery import Discovery
from .markup import CSS, _e, blank, run_label, table, thresholds
from .plots import STRATEGY_ORDER, Plot, strategy_label
from .techniques_report import section_html as technique_section_html

def _provenance(disc: Discovery, targets: dict[str, str]) -> str:
    cols = ("run", "target", "status", "matrix", "time (UTC)", "ssbench", "host")
    rows = []
    for run in disc.runs:
        m = run.meta
        sw, host, matrix = m.get("ssbench") or {}, m.get("host") or {}, m.get("matrix") or {}
        rows.append(dict(zip(cols, (
            run.run_id, targets.get(run.run_id), m.get("status", "unknown (no run.json)"),
            f"{blank(matrix.get('name'))} ({blank(m.get('permutations_done'))}/{blank(m.get('permutations_total'))}"
            " permutations)",
            f"{blank(m.get('started'))} → {blank(m.get('ended'))}",
            f"{blank(sw.get('version'))} {(sw.get('git_commit') or '')[:10]}{' (dirty)' if sw.get('git_dirty') else ''}",
            f"{blank(host.get('cpu_count'))} CPUs {blank(host.get('cpu_model'))}"))))
    return table(rows, [(k, k, "l") for k in cols], table_class="meta")


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
    ("run_label", "run", "l"), ("perm_id", "permutation", "l"), ("n", "reps", ""),
    ("receive_rate_median", "receive msg/s (median)", "rate"),
    ("receive_rate_mean", "geometric mean", "rate"), ("receive_rate_ci_low", "95 % CI low", "rate"),
    ("receive_rate_ci_high", "95 % CI high", "rate"), ("receive_rate_iqr", "IQR", "rate"),
    ("receive_rate_min", "min", "rate"), ("receive_rate_max", "max", "rate"),
    ("send_rate_median", "send msg/s (median)", "rate"), ("send_rate_iqr", "IQR", "rate"),
    ("send_p50_ms_median", "SEND p50 ms", "ms"), ("send_p99_ms_median", "SEND p99 ms", "ms"),
    ("e2e_p50_ms_median", "e2e p50 ms", "ms"), ("e2e_p99_ms_median", "e2e p99 ms", "ms"),
    ("xmitq_depth_max_measured", "max xmitq (measured window)", ""),
    ("top_wait", "top wait", "l"), ("top_wait_share", "share", "share"),
    ("limit", "what limits throughput", "l"), ("limit_confidence", "confidence", "l"),
    ("messages_lost", "lost", ""),
]
CROSS_COLUMNS = [
    ("run_label", "run", "l"), ("server_label", "server", "l"),
    ("strategy_label", "strategy vs one dialog per thread", "l"),
    ("initiators", "initiators", ""), ("payload_bytes", "payload (B)", ""),
    ("verdict", "verdict (at the most threads)", "verdict"),
    ("crossover_total_threads", "pays from (total threads)", ""),
    ("gain_at_max_text", "gain at the most threads [interval]", "l"),
    ("max_gain_text", "largest gain [interval], its verdict", "l"),
    ("min_reps", "reps (fewest on a side)", ""),
    ("peak_receive_rate", "peak msg/s (strategy)", "rate"),
]
TABLE_FILES = [
    ("permutations", "per permutation across repetitions: median, Q1, Q3, IQR, min, max, n of rates and "
                     "latencies; queue depths; CPU; wait shares and top wait; what limits throughput "
                     "(limit, limit_confidence, limit_remedy)"),
    ("diagnosis", "what limits throughput, and what to try, per permutation: the stage, its evidence in "
                  "figures, the confidence, the technique, the matrix axis to try it with and where it comes "
                  "from (docs/diagnosis.md)"),
    ("limit_moves", "where the limit moves as the thread count grows, everything else equal"),
    ("repetitions", "one row per repetition (from summary.json)"),
    ("dialog_gains", "gain in % of each dialog strategy over one dialog per thread, with its interval "
                     "and verdict (the stopping rule's, docs/statistics.md)"),
    ("crossover", "where each strategy starts to pay (verdict gain from there on) and the verdict at the most "
                  "threads"),
    ("technique_gains", "each technique axis value against its baseline, everything else equal, on each "
                        "metric the axis moves: gain in % (the metric's better direction) with its interval and "
                        "verdict (the stopping rule's), or not exercised (the mechanism never engaged) with how to "
                        "exercise it"),
    ("scaling", "per thread sweep (permutations that differ only in their thread count): the Universal "
                "Scalability Law's λ, σ, κ, peak N* and peak rate with their 95 % intervals, the lack-of-fit test, "
                "or why it has none (docs/statistics.md, \"How far it scales\")"),
    ("scaling_moves", "per comparison across thread counts: the change of λ (%), σ and κ with its interval and "
                      "the coefficients it moves"),
    ("top_waits", "top waits per permutation"),
    ("wait_profile", "every wait type per permutation (idle waits are left out by the targets)"),
    ("queue_timeseries", "queue depths over time of the plotted permutations"),
    ("sample_metrics", "measured-window aggregates of every sample series per repetition (Parquet only)"),
    ("issues", "missing or corrupt files (CSV only)"),
]


def key_rows(perms: list[dict], cross: list[dict], server_labels: dict[tuple[str, str], str]) -> list[dict]:
    """The key table: the crossover rows with display labels, the gains with their intervals as
    text, and the strategy's peak receive rate (median) over the thread counts."""
    peak: dict[tuple, float] = {}
    for p in perms:
        k = (p["run_id"], p["server"], p["dialogs"], p["initiators"], p["payload_bytes"])
        peak[k] = max(peak.get(k, 0.0), p.get("receive_rate_median") or 0.0)
    rows = []
    for c in cross:
        d = dict(c)
        d["run_label"] = run_label(c["run_id"], bool(c.get("synthetic")))
        d["server_label"] = server_labels.get((c["run_id"], c["server"]), c["server"])
        d["strategy_label"] = strategy_label(c["strategy"])
        d["gain_at_max_text"] = (pct_ci(c["gain_at_max_threads_pct"], c["gain_at_max_threads_ci_low_pct"],
                                        c["gain_at_max_threads_ci_high_pct"]) + f" at {c['max_total_threads']}")
        d["max_gain_text"] = ("–" if c["max_gain_pct"] is None else
                              pct_ci(c["max_gain_pct"], c["max_gain_ci_low_pct"], c["max_gain_ci_high_pct"])
                              + f" at {c['max_gain_total_threads']}: {c['max_gain_verdict']}")
        d["peak_receive_rate"] = peak.get((c["run_id"], c["server"], c["strategy"], c["initiators"], c["payload_bytes"]))
        rows.append(d)
    rows.sort(key=lambda d: (d["run_id"], d["server"], STRATEGY_ORDER.get(d["strategy"], 9), d["strategy"],
                             d["payload_bytes"], d["initiators"]))
    return rows


def key_table(rows: list[dict]) -> str:
    """The key table as an HTML fragment (the notebook displays it too)."""
    return table(rows, CROSS_COLUMNS)


def verdict_words(gains: list[dict]) -> str:
    """How to read the verdicts, and (in words) how many comparisons are inconclusive for
    lack of repetitions. An HTML fragment (the notebook displays it too)."""
    thr = thresholds(gains)
    parts = [f"<p>Each gain is the ratio of the geometric means of the strategy's receive rates and one dialog "
             f"per thread's, everything else equal, with a repeated confidence interval (Welch, on the log ratio): "
             f"over all the looks a run with <code>repetitions: auto</code> makes, the intervals cover the true "
             f"gain with probability at least 95 %, and at least 90 % for <b>no difference</b>, an equivalence "
             f"test (docs/statistics.md); each comparison is wrong at most 5 % of the time. Verdicts: <b>gain</b> "
             f"only where the whole interval is above +{thr} %, <b>loss</b> only where it is wholly below −{thr} %, "
             f"<b>no difference</b> where it lies within ±{thr} %, otherwise <b>inconclusive</b>. "
             f"“Pays from” is the first total thread count from which every verdict is gain (– never).</p>"]
    few = [g for g in gains if min(g["n"], g["baseline_n"]) < MIN_REPS]
    if few:
        if len(few) == len(gains):
            every = ("Every comparison rests" if len(gains) > 1 else "The comparison rests")
            whose = "its verdict is" if len(gains) == 1 else "every verdict is"
        else:
            every, whose = f"{len(few)} of {len(gains)} comparisons rest", "their verdicts are"
        kept = [g for g in few if g.get("kept_out")]
        advice = (f"{sum(g['kept_out'] for g in kept)} of their repetitions were kept out of verdicts (a noisy "
                  "host: other processes' CPU, see the permutations' statuses); rerun on a quieter machine"
                  if kept else f"Run the matrix with <code>repetitions: auto</code> or "
                               f"<code>repetitions: {MIN_REPS}</code> or more")
        parts.append(f"<p class='issues'><b>{every} on fewer than {MIN_REPS} repetitions on a side, so "
                     f"{whose} inconclusive</b> whatever the medians say: "
                     f"one or two repetitions cannot tell an effect from noise. {advice}.</p>")
    return "\n".join(parts)


def section_html(section: Section) -> str:
    """An answer's section (harness.verdicts.answer) as an HTML table with its notes."""
    cols = [(c.key, c.header, "verdict" if c.key == "verdict" else ("l" if c.align == "<" else ""))
            for c in section.columns if c.always or any(r.get(c.key) not in (None, "") for r in section.rows)]
    notes = "".join(f"<li>{_e(n)}</li>" for n in section.notes)
    return (f"<h3>{_e(section.title)}</h3>" + (table(section.rows, cols) if section.rows else "")
            + (f"<ul class='note'>{notes}</ul>" if notes else ""))


def _mapping_rows(mapping: Any) -> list[tuple[str, str]]:
    """A wait mapping from run.json's target section: a list of {"pg_wait_type", "pg_wait_event"
    (null: any event of that type), "wait_type"} (what the embedded target writes), or
    {"Type/Event": "WAIT"}."""
    if isinstance(mapping, dict):
        return [(str(k), str(v)) for k, v in mapping.items()]
    rows = []
    for m in mapping if isinstance(mapping, list) else []:
        if isinstance(m, dict) and m.get("wait_type"):
            pg = f"{m.get('pg_wait_type') or '?'}:{m.get('pg_wait_event') or '(any other)'}"
            rows.append((pg, str(m["wait_type"]) + (" (idle, left out)" if m.get("benign") else "")))
    return rows


#: a target's note that says its waits are mapped: the report's own caveat says it, with the mapping
_WAITS_MAPPED = re.compile(r"wait.{0,40}\bmapped\b|\bmapped\b.{0,40}wait", re.I)


def _notes(target: dict[str, Any]) -> list[str]:
    """The target's notes; its one-line ``note`` only when it has no list (the list says it)."""
    notes = target.get("notes")
    out = [n for n in (notes if isinstance(notes, list) else [notes]) if isinstance(n, str) and n]
    if not out and isinstance(target.get("note"), str) and target["note"]:
        out.append(target["note"])
    return out


def about_targets(disc: Discovery, targets: dict[str, str], synthetic_runs: set[str]) -> str:
    """What the reader must know about the runs' targets before reading any number, each caveat
    once: synthetic data, an emulation's mapped waits (with the run's mapping) and missing page
    latch (from the capabilities the target declared, run.json ``target.capabilities``), the
    target's own notes (run.json ``target.notes``). An HTML fragment (the notebook shows it)."""
    parts = []
    if synthetic_runs:
        parts.append("<div class='synthetic'>SYNTHETIC DATA: " + _e(", ".join(sorted(synthetic_runs)))
                     + (" was" if len(synthetic_runs) == 1 else " were")
                     + " generated by tests/support/synth.py from a model. Nothing in "
                     + ("it" if len(synthetic_runs) == 1 else "them") + " was measured.</div>")
    for run in disc.runs:
        t = run.target
        notes = _notes(t)
        engine = run.capabilities.get("emulation")
        # each caveat once: an emulation's wait mapping is said by its own item, with the run's mapping
        items = [_e(n) for n in notes if not (engine and _WAITS_MAPPED.search(n))]
        if engine:
            items += _emulation_items(str(engine), _mapping_rows(t.get("wait_mapping")), notes)
        if items:
            parts.append(f"<div class='about'><b>About run {_e(run_label(run.run_id, run.run_id in synthetic_runs))}"
                         f"</b> ({_e(targets.get(run.run_id))}):<ul>" + "".join(f"<li>{i}</li>" for i in items)
                         + "</ul></div>")
    return "\n".join(parts)


def _emulation_items(engine: str, rows: list[tuple[str, str]], notes: list[str]) -> list[str]:
    """The caveats of a run on a target that emulates Service Broker on ``engine``."""
    table_html = ("<details><summary>the wait mapping used by this run</summary>"
                  + table([{"pg": a, "as": b} for a, b in rows], [("pg", f"{engine} wait event", "l"),
                                                                    ("as", "reported as", "l")])
                  + "</details>") if rows else (
        " The mapping is documented with the target (docs/targets.md lists each target's page).")
    items = [f"Its wait types are <b>mapped from {_e(engine)} wait events</b> to Service Broker's wait-type "
             "names; they are estimates, not the server's own wait statistics." + table_html]
    if not any(re.search(r"page.latch", n, re.I) for n in notes):
        items.append(f"The <b>page-latch contention behind the 150 trick does not exist on {_e(engine)}</b> "
                     "(the hot sysdesend pages of the whitepaper): what the 150 trick does here says nothing "
                     "about that mechanism.")
    return items


def disturbed_section(reps: list[dict]) -> str:
    """The disturbed repetitions (harness.results.disturbed), each with why: shown, and left
    out of the intervals, gains and verdicts."""
    if not reps:
        return ""
    cols = [("run_id", "run", "l"), ("perm_id", "permutation", "l"), ("rep", "rep", ""), ("status", "status", "l"),
            ("why", "why", "l")]
    return (f"<div class='issues'><b>{len(reps)} disturbed repetition(s)</b>: shown in every table, left out of "
            "the intervals, gains and verdicts (docs/results.md, \"Disturbed repetitions\")."
            + table([dict(r, why=disturbance(r)) for r in reps[:200]], cols, table_class="meta") + "</div>")


def write_index(out_dir: Path, disc: Discovery, targets: dict[str, str], perms: list[dict], cross_rows: list[dict],
                plots: list[Plot], answer: Answer, written: dict[str, list[str]], elapsed_s: float,
                gains: list[dict] | None = None, synthetic_runs: set[str] | None = None,
                techniques: list[dict] | None = None, diagnosis_html: str = "",
                disturbed: list[dict] | None = None) -> Path:
    runs = ", ".join(r.run_id for r in disc.runs)
    lost = [p for p in perms if (p.get("messages_lost") or 0) > 0]
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
             f"<title>ssbench report — {_e(runs)}</title><style>{CSS}</style></head><body>",
             f"<h1>{'SYNTHETIC DATA — ' if synthetic_runs else ''}ssbench report — {_e(runs)}</h1>",
             f"<p>Service Broker load test analysis: {_e('; '.join(sorted(set(targets.values()))))}. "
             f"Generated {_dt.datetime.now(_dt.timezone.utc).strftime('%Y-%m-%d %H:%M:%S UTC')} "
             f"in {elapsed_s:.1f} s. Rates are messages per second over each repetition's measured window; "
             f"statistics are across repetitions (median, IQR = Q3 − Q1, min, max, n).</p>",
             _provenance(disc, targets), about_targets(disc, targets, synthetic_runs or set())]
    if lost:
        parts.append(f"<div class='alarm'>MESSAGES LOST in {len(lost)} permutation(s): "
                     + ", ".join(_e(f"{p['perm_id']} ({int(p['messages_lost'])})") for p in lost[:20])
                     + ("…" if len(lost) > 20 else "") + "</div>")
    if disc.issues:
        parts.append(f"<div class='issues'><b>{len(disc.issues)} problem(s) with the input</b> (the rest was "
                     "analyzed):<ul>" + "".join(f"<li><code>{_e(i.path)}</code>: {_e(i.problem)}</li>"
                                                for i in disc.issues[:200])
                     + ("<li>… see tables/issues.csv</li>" if len(disc.issues) > 200 else "") + "</ul></div>")
    parts.append(disturbed_section(disturbed or []))
    parts.append("<h2>Key results</h2>")
    parts.append(verdict_words(gains or []))
    parts += [section_html(sec) for sec in answer.sections]   # what ssbench analyze prints
    parts.append("<h2>Where a dialog strategy pays</h2>")
    if cross_rows:
        parts.append("<p>The whitepaper found the 150 trick paying from about 30 concurrent threads (3×10), up "
                     "to +315 %.</p>")
        parts.append(key_table(cross_rows))
    else:
        parts.append("<p class='note'>No dialog-strategy comparison: the run(s) do not have one dialog per thread "
                     "and another strategy at the same settings.</p>")
    parts.append(diagnosis_html)   # harness.analysis.diagnosis_view.report_section
    parts.append(technique_section_html(techniques or []))   # empty without a technique axis
    parts.append(_plots_html(plots))
    parts.append("<h2>Permutations</h2>")
    parts.append(f"<details><summary>{len(perms)} permutations (click to expand)</summary>"
                 + table([dict(p, run_label=run_label(p["run_id"], bool(p.get("synthetic")))) for p in perms],
                         PERM_COLUMNS, limit=1000) + "</details>")
    parts.append("<h2>Tables</h2><ul>")
    for name, what in TABLE_FILES:
        links = " · ".join(f"<a href='{_e(f)}'>{_e(Path(f).suffix.lstrip('.') or f)}</a>"
                           for f in written.get(name, []))
        if links:
            parts.append(f"<li><b>{_e(name)}</b> ({links}): {_e(what)}</li>")
    parts.append("</ul><p class='note'>Parquet tables are directories written by Spark; CSVs are single files.</p>")
    parts.append("</body></html>\n")
    return write_atomic(out_dir / "index.html", "\n".join(parts))
