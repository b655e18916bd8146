"""Where users see the diagnosis (docs/diagnosis.md): its table, report section and terminal text.

Also the columns it adds to the permutations table, and where the limit moves as the thread
count grows. Pure Python.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any, Iterable

from ..results.fields import COMPARED_ROLES, axis_names
from .diagnosis import Diagnosis, diagnose_run
from .diagnosis_groups import GROUP_ABOVE, group_by_limit, remedy_text
from .markup import run_label, table
from .tables import group_by

#: one-or-two-letter marks of the stages (the wait-profile plot writes them above its bars)
STAGE_MARKS = {"client": "CL", "SEND": "SD", "transmission": "TX", "receive": "RC", "processing": "PR",
               "server CPU": "CPU", "offered load": "OL", None: "?"}
#: the permutation values that are "everything else" when comparing thread counts
_CONTEXT = axis_names(*COMPARED_ROLES, but=("threads",))


def rows(diags: Iterable[Diagnosis]) -> list[dict[str, Any]]:
    """The ``diagnosis`` table: one row per permutation."""
    out = []
    for d in diags:
        p, r = d.permutation, d.remedy
        out.append({"run_id": d.run_id, "perm_id": d.perm_id, "perm_index": p.get("index"), "case": p.get("case"),
                    "initiators": p.get("initiators"), "threads": p.get("threads"),
                    "total_threads": p.get("total_threads"), "dialogs": p.get("dialogs"),
                    "payload_bytes": p.get("payload_bytes"), "server": p.get("server"),
                    "target_kind": d.target_kind, "reps": d.reps, "stage": d.stage, "detail": d.detail,
                    "confidence": d.confidence, "evidence": d.evidence, "technique": r.technique if r else None,
                    "try_axis": r.axis if r else None, "source": r.source if r else None, "also": d.also,
                    "rep_stages": ", ".join(d.rep_stages), "send_rate": d.send_rate, "receive_rate": d.receive_rate})
    return out


def limit_columns(diags: Iterable[Diagnosis]) -> list[dict[str, Any]]:
    """The permutations table's diagnosis columns (run_id, perm_id, limit, limit_stage,
    limit_confidence, limit_remedy)."""
    return [{"run_id": d.run_id, "perm_id": d.perm_id, "limit": d.limit, "limit_stage": d.stage,
             "limit_confidence": d.confidence, "limit_remedy": d.remedy.technique if d.remedy else None}
            for d in diags]


def _context(p: dict[str, Any], varying: set[str]) -> str:
    parts = [f"i{p.get('initiators')}", str(p.get("dialogs")), f"p{p.get('payload_bytes')}", str(p.get("server"))]
    shown = {"initiators", "payload_bytes", "server", *axis_names("strategy")}
    for k in sorted(varying - shown):
        v = p.get(k)
        parts.append(f"{k}={json.dumps(v, sort_keys=True) if isinstance(v, dict) else v}")
    return " ".join(parts)


def limit_moves(diags: list[Diagnosis]) -> list[dict[str, Any]]:
    """Where the limit moves with the thread count: per run and everything else equal, the
    stage at each thread count (only where there are two or more): run_id, context, moves."""
    out = []
    for run_id, mine in sorted(group_by(diags, key=lambda d: d.run_id).items()):
        keys = set(_CONTEXT)
        varying = {k for k in keys if len({json.dumps(d.permutation.get(k), sort_keys=True) for d in mine}) > 1}
        groups = group_by(mine, key=lambda d: json.dumps({k: d.permutation.get(k) for k in sorted(keys)},
                                                          sort_keys=True, default=str))
        for members in groups.values():
            if len({d.permutation.get("threads") for d in members}) < 2:
                continue
            members.sort(key=lambda d: d.permutation.get("total_threads") or 0)
            moves = " -> ".join(f"{d.permutation.get('total_threads')}: {d.stage or d.confidence}"
                                + (f" ({d.detail})" if d.stage in ("SEND", "receive") else "") for d in members)
            out.append({"run_id": run_id, "context": _context(members[0].permutation, varying), "moves": moves})
    return out


# --------------------------------------------------------------------------- the terminal

def terminal_text(diags: list[Diagnosis], width: int = 100, group_above: int = GROUP_ABOVE) -> str:
    """The diagnosis as plain text: per permutation its limit, confidence, evidence and what to
    try, then where the limit moves with the thread count; above ``group_above`` permutations
    the grouped summary instead: each limit, how many permutations it holds (with a few of
    their ids) and its remedy, once (the detail is in the report and ``--json``)."""
    if not diags:
        return ""
    wrap = lambda head, text: textwrap.fill(text, width, initial_indent=head,  # noqa: E731
                                            subsequent_indent=" " * len(head))
    title = "What limits throughput, and what to try (docs/diagnosis.md)"
    emulation = [f"  ({engine} emulation: the limits found are the emulation's, not SQL Server's)"
                 for engine in sorted({d.emulation for d in diags if d.emulation})]
    moves = limit_moves(diags)
    if len(diags) > group_above:
        groups = group_by_limit(diags)
        lines = ["", f"{title}: {len(diags)} permutations, {len(groups)} limit{'s' if len(groups) != 1 else ''}",
                 *emulation]
        for g in groups:
            lines.append(f"{g.limit}: {g.count} permutation{'s' if g.count != 1 else ''}  [{g.confidences()}]")
            lines.append(wrap("    e.g. ", g.examples()))
            if g.remedy:
                lines.append(wrap("    try: ", remedy_text(g.remedy)))
        lines.append(wrap("", "Each permutation's evidence and confidence"
                              + (f", and where the limit moves with the thread count ({len(moves)} series)"
                                 if moves else "")
                              + ": the report, tables/diagnosis.csv and --json."))
        return "\n".join(lines)
    lines = ["", title, *emulation]
    for d in diags:
        reps = f"{d.reps} repetition{'s' if d.reps != 1 else ''}"
        lines.append(f"{d.perm_id}: {d.limit}  [{d.confidence}, {reps}]")
        if d.evidence:
            lines.append(wrap("    evidence: ", d.evidence))
        if d.also:
            lines.append(wrap("    also fired: ", d.also))
        if d.remedy:
            lines.append(wrap("    try: ", remedy_text(d.remedy)))
    if moves:
        lines.append("Where the limit moves with the thread count:")
        for m in moves:
            lines.append(wrap("  ", f"{m['context']}: {m['moves']}"))
    return "\n".join(lines)


def print_runs(paths: Iterable[str | Path], stream=None) -> list[Diagnosis]:
    """Print the diagnosis of run directories (the end of ``ssbench run``, ``bench`` and
    ``analyze``) and return it. Summaries that do not read are left out."""
    diags = [d for p in paths for d in diagnose_run(p)]
    text = terminal_text(diags)
    if text:
        print(text, file=stream or sys.stdout)
    return diags


# --------------------------------------------------------------------------- the report

#: the report's first diagnosis table: one row per limit, its remedy once
GROUP_COLUMNS = [("limit", "what limits throughput", "l"), ("count", "permutations", ""),
                 ("confidence", "confidence", "l"), ("technique", "what to try", "l"),
                 ("try_axis", "matrix axis", "l"), ("source", "from", "l")]
#: and the detail, per permutation (its remedy is its limit's, above)
REPORT_COLUMNS = [("run_label", "run", "l"), ("perm_id", "permutation", "l"), ("limit", "what limits throughput", "l"),
                  ("confidence", "confidence", "l"), ("reps", "reps", ""), ("evidence", "evidence", "l"),
                  ("also", "also fired", "l")]


def group_rows(diags: list[Diagnosis]) -> list[dict[str, Any]]:
    """The report's grouped table: one row per limit and remedy (:func:`group_by_limit`)."""
    return [{"limit": g.limit, "count": g.count, "confidence": g.confidences(),
             "technique": g.remedy.technique if g.remedy else None, "try_axis": g.remedy.axis if g.remedy else None,
             "source": g.remedy.source if g.remedy else None} for g in group_by_limit(diags)]


def report_section(diags: list[Diagnosis], synthetic_runs: set[str] | None = None) -> str:
    """The report's "What limits throughput, and what to try" section (an HTML fragment; the
    notebook shows it too): the limits with their remedies, then each permutation's evidence
    (folded away above :data:`GROUP_ABOVE` permutations)."""
    if not diags:
        return ""

    synthetic_runs = synthetic_runs or set()
    body = [dict(r, limit=d.limit, run_label=run_label(d.run_id, d.run_id in synthetic_runs))
            for d, r in zip(diags, rows(diags))]
    cell = "td.l{white-space:normal;min-width:7em;max-width:28em}"
    opened = " open" if len(diags) <= GROUP_ABOVE else ""
    parts = [f"<h2>What limits throughput, and what to try</h2><style>#diagnosis {cell}</style><div id='diagnosis'>",
             "<p>The whitepaper's chain of reasoning, per permutation (docs/diagnosis.md): a queue that grows "
             "through the measured window names the stage after SEND that falls behind (the transmission queue: "
             "<b>transmission</b>; the target queue: <b>receive</b>, or <b>processing</b> when the readers' time "
             "goes to the activation procedure's own work); when none grows, the limit is the load generator "
             "(<b>client</b>), the <b>SEND</b> itself (the wait that holds the users' time) or the "
             "<b>server CPU</b>. <i>clear</i>: only that stage's evidence fired, in every repetition; "
             "<i>mixed</i>: another fired too, or the repetitions disagree (the <i>also fired</i> column); "
             "<i>not enough data</i>: the summaries lack the figures.</p>",
             table(group_rows(diags), GROUP_COLUMNS),
             f"<details{opened}><summary>Each permutation's evidence ({len(diags)} permutations; also "
             "tables/diagnosis.csv)</summary>" + table(body, REPORT_COLUMNS) + "</details>"]
    moves = limit_moves(diags)
    if moves:
        parts.append(f"<details{opened}><summary>Where the limit moves with the thread count ({len(moves)} series)"
                     "</summary>")
        parts.append(table([dict(m, run_label=run_label(m["run_id"], m["run_id"] in synthetic_runs)) for m in moves],
                           [("run_label", "run", "l"), ("context", "everything else", "l"),
                            ("moves", "total threads: limit", "l")]) + "</details>")
    parts.append("</div>")
    return "\n".join(parts)
