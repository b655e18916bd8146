"""The gate's report: verdicts per permutation and overall, the table, gate.json."""

from __future__ import annotations

import io
import math
import os
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..results import write_json
from ..verdicts.answer import Column, Section
from ..verdicts.regression import (FAILING, INCONCLUSIVE, NO_DATA, PASS, REGRESSION, SEVERITY, WARNING, GateSettings,
                                   MetricResult, overall, why_inconclusive, worst)
from .integrity import IntegrityResult
from .rundata import RunData

GATE_SCHEMA = "ssbench.gate/1"
CORRECTION = "benjamini-hochberg"

#: effects beyond the threshold listed by name in the inconclusive warning (the rest counted)
LIST_AT_MOST = 8
#: the table's columns: (key and header, alignment)
COLUMNS = [Column(h, h, a, always=True) for h, a in (
    ("permutation", "<"), ("metric", "<"), ("n b/c", ">"), ("baseline", ">"), ("candidate", ">"), ("r", ">"),
    ("threshold", ">"), ("p", ">"), ("q", ">"), ("verdict", "<"))]


@dataclass
class GateReport:
    baseline: RunData | None
    candidate: RunData | None
    settings: GateSettings
    rows: list[MetricResult]
    integrity: list[IntegrityResult]
    provenance_warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    mode: str = "stored"            # stored | interleaved
    interleave: dict[str, Any] | None = None

    @property
    def permutation_verdicts(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for row in self.rows:
            out[row.permutation] = worst(out.get(row.permutation, PASS), row.verdict)
        for integ in self.integrity:
            out[integ.permutation] = worst(out.get(integ.permutation, PASS), integ.verdict)
        return out

    @property
    def verdict(self) -> str:
        """fail (integrity), regression, warning, inconclusive or pass for the whole comparison."""
        return overall(self.permutation_verdicts.values())

    @property
    def exit_code(self) -> int:
        return 1 if self.verdict in FAILING else 0

    @property
    def inconclusive_rows(self) -> list[MetricResult]:
        return [r for r in self.rows if r.verdict == INCONCLUSIVE]

    def warnings(self) -> list[str]:
        """What the user must hear even when the gate exits 0: the rows it could not judge."""
        rows = self.inconclusive_rows
        if not rows:
            return []
        why = Counter((r.n_baseline, r.n_candidate) for r in rows)
        reasons = "; ".join(f"{why_inconclusive(nb, nc, self.settings)} ({n} row(s))"
                            for (nb, nc), n in sorted(why.items()))
        out = [f"inconclusive: {len(rows)} of {len(self.rows)} permutation x metric row(s) could not be "
               f"judged: {reasons}. A regression needs a significant test; run at least "
               f"{self.settings.min_reps} repetitions a side (5 let one metric alone fail)"]
        worse = [r for r in rows if r.effect_beyond]
        if worse:
            named = ", ".join(f"{r.permutation} {r.metric} r={_fmt_r(r.r)}" for r in worse[:LIST_AT_MOST])
            more = f" and {len(worse) - LIST_AT_MOST} more" if len(worse) > LIST_AT_MOST else ""
            out.append(f"inconclusive: {len(worse)} of them look worse beyond the threshold, without "
                       f"statistical evidence: {named}{more}")
        return out

    def to_json(self) -> dict[str, Any]:
        def side(run: RunData | None) -> dict[str, Any] | None:
            if run is None:
                return None
            ss = run.run.get("ssbench") if isinstance(run.run.get("ssbench"), dict) else {}
            host = run.run.get("host")
            return {"path": str(run.path), "run_id": run.run.get("run_id"), "status": run.run.get("status"),
                    "git_commit": ss.get("git_commit"), "git_dirty": ss.get("git_dirty"),
                    "host": host.get("hostname") if isinstance(host, dict) else None}

        inconclusive = self.inconclusive_rows
        return _finite({
            "schema": GATE_SCHEMA,
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "mode": self.mode,
            "baseline": side(self.baseline),
            "candidate": side(self.candidate),
            "settings": {**asdict(self.settings), "correction": CORRECTION,
                         "significance": "one-sided t test of the log ratio of the geometric means, paired "
                                         "by round where the rounds interleave (rows: paired), its variance "
                                         "moderated by the run's paired rows (rows: estimate.prior_df), "
                                         "else Welch",
                         "effect": "r = median(candidate)/median(baseline), inverted for latencies; r < 1 is worse",
                         "threshold": "min(max_effect, max(min_effect, k x baseline robust spread / baseline median))",
                         "regression": "effect beyond the threshold AND significant (BH q <= alpha)",
                         "inconclusive": "fewer than min_reps repetitions a side: no test, no regression on "
                                         "effect alone"},
            "tests": sum(1 for r in self.rows if r.p is not None),
            "permutations": self.permutation_verdicts,
            "inconclusive": {"rows": len(inconclusive),
                             "worse_beyond_threshold": sum(1 for r in inconclusive if r.effect_beyond)},
            "warnings": self.warnings(),
            "rows": [asdict(r) for r in self.rows],
            "integrity": [asdict(i) for i in self.integrity],
            "provenance_warnings": self.provenance_warnings,
            "notes": self.notes,
            "interleave": self.interleave,
        })

    def format_table(self) -> str:
        rows = []
        for r in self.rows:
            verdict = r.verdict.upper() if r.verdict in FAILING else r.verdict
            if r.verdict == INCONCLUSIVE and r.effect_beyond:
                verdict += " (worse, unproven)"
            cells = [r.permutation, r.metric, f"{r.n_baseline}/{r.n_candidate}",
                     _fmt(r.baseline_median), _fmt(r.candidate_median), _fmt_r(r.r),
                     "-" if r.threshold is None else ("inf" if not math.isfinite(r.threshold) else f"{r.threshold:.1%}"),
                     "n/a" if r.p is None else f"{r.p:.4f}", "n/a" if r.q is None else f"{r.q:.4f}", verdict]
            rows.append({c.key: v for c, v in zip(COLUMNS, cells)})
        table = io.StringIO()   # untitled: the header is the first line
        Section("gate", "", COLUMNS, rows, [f"{r.verdict}: {r.permutation} {r.metric}: {r.reason}" for r in self.rows
                                            if r.reason and r.verdict in (REGRESSION, WARNING, NO_DATA)]).text(table)
        out = [table.getvalue().strip("\n"), ""]
        if all(i.verdict == PASS for i in self.integrity):
            out.append("integrity (candidate): ok: no messages lost, no rise in errors, no disabled queue")
        else:
            out.append("integrity (candidate): lost messages, more errors or a disabled queue fail "
                       "whatever the throughput and however few the repetitions:")
        for i in self.integrity:
            if i.verdict != PASS:
                out.append(f"  FAIL: {i.permutation}: {'; '.join(i.reasons)}")
        out.append("")
        out.append(self.settings.describe())
        out.append(f"false alarms: controlled with {CORRECTION} across the "
                   f"{sum(1 for r in self.rows if r.p is not None)} permutation x metric tests")
        for w in self.warnings():
            out.append(f"warning: {w}")
        for w in self.provenance_warnings:
            out.append(f"warning: provenance differs: {w}")
        for n in self.notes:
            out.append(f"note: {n}")
        counts = Counter(self.permutation_verdicts.values())
        summary = ", ".join(f"{n} {v}" for v, n in sorted(counts.items(), key=lambda kv: -SEVERITY[kv[0]]))
        out.append(f"gate: {self.verdict.upper()} ({len(self.permutation_verdicts)} permutation(s): "
                   f"{summary}) -> exit {self.exit_code}")
        return "\n".join(out)


def _fmt(x: float | None) -> str:
    if x is None:
        return "-"
    if not math.isfinite(x):
        return str(x)
    if abs(x) >= 100:
        return f"{x:.1f}"
    return f"{x:.3g}" if abs(x) < 1 else f"{x:.2f}"


def _fmt_r(r: float | None) -> str:
    return "-" if r is None else ("inf" if not math.isfinite(r) else f"{r:.3f}")


def _finite(obj: Any) -> Any:
    """JSON has no NaN or infinity: write them as null."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    return obj


def write_report(report: GateReport, path: str | os.PathLike[str] | None = None) -> Path:
    """Write gate.json (default: next to the candidate run, ``<candidate>/gate.json``)."""
    if path is None:
        if report.candidate is None:
            raise ValueError("no candidate run to write gate.json next to")
        path = report.candidate.path / "gate.json"
    p = Path(path)
    write_json(p, report.to_json())
    return p
