"""Compare a candidate run against a baseline run: the entry point of the gate.

:func:`compare_runs` judges the permutations both runs have (:mod:`harness.verdicts.regression`
and :mod:`.integrity`), notes what makes the comparison suspect (provenance, client-bound or
idle-user repetitions, differing settings) and returns a
:class:`~harness.gate.report.GateReport`. Exit codes: 0 pass, warning or inconclusive; 1
regression or failure; 2 input error.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..errors import UserError
from ..results import disturbance
from ..verdicts.comparison_metrics import METRICS
from ..verdicts.regression import INCONCLUSIVE, NO_DATA, GateSettings, compare_samples
from .integrity import check_integrity
from .report import GateReport
from .rundata import RunData


# --------------------------------------------------------------------------- provenance

#: run.json's sections compared, and their keys (None: every key either run has)
PROVENANCE_FIELDS = (
    ("host", ("hostname", "platform", "cpu_model", "cpu_count", "cpu_quota", "memory_bytes")),
    ("target", ("kind", "label", "versions")),
    ("software", None),
)


#: how many repetitions a run made and how it judged them: expected to differ between two runs
REPETITION_SETTINGS = ("repetitions", "min_repetitions", "max_repetitions", "budget_minutes", "threshold_pct")


def provenance_differences(baseline: Mapping[str, Any], candidate: Mapping[str, Any]) -> list[str]:
    """Human-readable differences in the provenance of two run.json documents that make a
    stored-baseline comparison suspect: host, target, software versions, and the matrix's run
    and broker settings. (The ssbench git commit is expected to differ and is not listed.)"""
    out: list[str] = []

    def diff(label: str, a: Any, b: Any) -> None:
        if a != b:
            out.append(f"{label}: {a!r} (baseline) != {b!r} (candidate)")

    def sections(name: str) -> tuple[dict, dict]:
        return tuple(d.get(name) if isinstance(d.get(name), dict) else {} for d in (baseline, candidate))

    for section, keys in PROVENANCE_FIELDS:
        a, b = sections(section)
        for key in keys or sorted(set(a) | set(b)):
            diff(f"{section}.{key}", a.get(key), b.get(key))
    a, b = sections("matrix")
    for key in ("run", "broker", "embedded_profiles"):
        ra, rb = a.get(key), b.get(key)
        if isinstance(ra, dict) and isinstance(rb, dict):
            for sub in sorted(set(ra) | set(rb)):
                if key == "run" and sub in REPETITION_SETTINGS:
                    continue
                diff(f"matrix.{key}.{sub}", ra.get(sub), rb.get(sub))
        else:
            diff(f"matrix.{key}", ra, rb)
    return out



def _kept_out_is_inconclusive(rows, baseline: RunData, candidate: RunData) -> None:
    """A row without data because a side's repetitions were all kept out of verdicts is
    ``inconclusive``, not ``no-data``: there was data, none of it could be trusted."""
    for row in rows:
        if row.verdict != NO_DATA:
            continue
        empty = [(side, data.perms[row.permutation]) for side, data, n in
                 (("baseline", baseline, row.n_baseline), ("candidate", candidate, row.n_candidate)) if n == 0]
        out = [(side, perm.kept_out()) for side, perm in empty if perm.kept_out()]
        if out:
            row.verdict = INCONCLUSIVE
            row.reason = "; ".join(f"every {side} repetition kept out of verdicts "
                                   f"({', '.join(sorted({r.summary.status for r in reps}))})" for side, reps in out)


def compare_runs(baseline: RunData, candidate: RunData, settings: GateSettings = GateSettings(),
                 *, check_provenance: bool = True, paired: bool = False) -> GateReport:
    """Compare two loaded runs; UserError when they have no permutation in common. ``paired``:
    the runs' repetition ``i`` ran in the same round (an interleaved gate's sides)."""
    settings.validate()
    common = [p for p in candidate.perms if p in baseline.perms]
    if not common:
        raise UserError(f"no common permutations between baseline {baseline.path} "
                        f"({', '.join(sorted(baseline.perms)) or 'none'}) and candidate {candidate.path} "
                        f"({', '.join(sorted(candidate.perms)) or 'none'})")
    notes = list(baseline.notes) + list(candidate.notes)
    for p in sorted(set(baseline.perms) - set(candidate.perms)):
        notes.append(f"permutation {p} only in the baseline: not compared")
    for p in sorted(set(candidate.perms) - set(baseline.perms)):
        notes.append(f"permutation {p} only in the candidate: not compared")
    b_samples = {p: {m.name: baseline.perms[p].samples(m.name) for m in METRICS} for p in common}
    c_samples = {p: {m.name: candidate.perms[p].samples(m.name) for m in METRICS} for p in common}
    rows = compare_samples(b_samples, c_samples, settings, paired)
    _kept_out_is_inconclusive(rows, baseline, candidate)
    integrity = [check_integrity(p, baseline.perms[p], candidate.perms[p]) for p in common]
    for p in common:
        b, c = baseline.perms[p], candidate.perms[p]
        if any(r.messages_lost > 0 for r in b.reps):
            notes.append(f"{p}: the baseline lost messages too ({sum(r.messages_lost for r in b.reps)}): "
                         "its numbers are suspect")
        for side, data in (("baseline", b), ("candidate", c)):
            cb = [r.repetition for r in data.reps if r.summary.client_bound]
            if cb:
                notes.append(f"{p}: {side} repetition(s) {', '.join(map(str, cb))} were client-bound: "
                             "the load generator, not the broker, limited throughput")
            for r in data.kept_out():
                why = disturbance(r.summary)
                notes.append(f"{p}: {side} repetition {r.repetition} kept out of the comparison ({r.summary.status})"
                             + (f": {why}" if why else ""))
            idle = [r.repetition for r in data.reps if r.summary.status == "users_idle"]
            if idle:
                notes.append(f"{p}: {side} repetition(s) {', '.join(map(str, idle))} had Locust users "
                             "that were not sending through the window: fewer clients than configured")
        bp = {k: v for k, v in (b.reps[0].summary.permutation or {}).items() if k != "index"}
        cp = {k: v for k, v in (c.reps[0].summary.permutation or {}).items() if k != "index"}
        if bp and cp and bp != cp:
            notes.append(f"{p}: the permutation's settings differ between baseline and candidate")
        bm = {r.summary.window.measure_seconds for r in b.reps} - {None}
        cm = {r.summary.window.measure_seconds for r in c.reps} - {None}
        if bm and cm and bm != cm:
            notes.append(f"{p}: measured window differs: baseline {sorted(bm)} s, candidate {sorted(cm)} s")
    prov = provenance_differences(baseline.run, candidate.run) if check_provenance else []
    return GateReport(baseline=baseline, candidate=candidate, settings=settings, rows=rows,
                      integrity=integrity, provenance_warnings=prov, notes=notes)
