"""The answer of a run on the terminal, in the report and for scripts: the key table.

:func:`key_answer` builds an :class:`Answer` (a row per comparison, and why each undecided one
is so); it renders as text, JSON (``--json``) and HTML. Other parts add sections
(``answer.add(Section(...))``) or rows (:func:`key_row`) without changing this module.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, TextIO

from .comparison_metrics import RECEIVE_RATE
from ..results.fields import COMPARISON_KEYS, axis_names
from .pairs import Judged, Pairing, kept_out, pays_from, samples
from .rule import INCONCLUSIVE, NOT_EXERCISED
from .techniques import how_to_exercise

ANSWER_SCHEMA = "ssbench.answer/1"
KEY = "key"
#: a strategy comparison's row leaves the strategy out (it is the comparison)
STRATEGY = axis_names("strategy")
#: what stays the same along a row group's thread counts ("pays from" is per group)
GROUP_KEYS = ("kind", "comparison", "baseline", "metric", "context", *(k for k in COMPARISON_KEYS if k != "threads"))


@dataclass
class Column:
    key: str
    header: str
    align: str = "<"        # "<" left, ">" right
    always: bool = False    # shown even when every row is empty there


@dataclass
class Section:
    """A titled table with notes: how every part of an answer is rendered."""

    key: str
    title: str
    columns: list[Column]
    rows: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> "Section":
        return cls(str(doc.get("key")), str(doc.get("title")),
                   [Column(**c) for c in doc.get("columns") or []],
                   list(doc.get("rows") or []), list(doc.get("notes") or []))

    def text(self, stream: TextIO) -> None:
        cols = [c for c in self.columns if c.always or any(r.get(c.key) not in (None, "") for r in self.rows)]
        cells = [[_cell(r.get(c.key)) for c in cols] for r in self.rows]
        widths = [max([len(c.header)] + [len(row[i]) for row in cells]) for i, c in enumerate(cols)]
        print(f"\n{self.title}", file=stream)
        if cells:
            print("  ".join(f"{c.header:{c.align}{w}}" for c, w in zip(cols, widths)).rstrip(), file=stream)
            print("  ".join("-" * w for w in widths), file=stream)
            for row in cells:
                print("  ".join(f"{v:{c.align}{w}}" for v, c, w in zip(row, cols, widths)).rstrip(), file=stream)
        for n in self.notes:
            print(f"  {n}", file=stream)


def _cell(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


@dataclass
class Answer:
    runs: list[str]
    sections: list[Section] = field(default_factory=list)
    report: str | None = None
    diagnosis: list[dict[str, Any]] | None = None    # one row per permutation (docs/diagnosis.md)

    def add(self, section: Section) -> "Answer":
        self.sections.append(section)
        return self

    def section(self, key: str) -> Section | None:
        return next((s for s in self.sections if s.key == key), None)

    def to_json(self) -> dict[str, Any]:
        doc = {"schema": ANSWER_SCHEMA, "runs": self.runs, "report": self.report,
               "sections": [s.to_json() for s in self.sections]}
        return doc if self.diagnosis is None else {**doc, "diagnosis": self.diagnosis}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> "Answer":
        return cls(list(doc.get("runs") or []), [Section.from_json(s) for s in doc.get("sections") or []],
                   doc.get("report"), doc.get("diagnosis"))

    def render(self, stream: TextIO) -> None:
        for s in self.sections:
            s.text(stream)


def read_answer(path: str | Path) -> Answer | None:
    """The ``answer.json`` beside a report's index.html (``path``: the report directory or
    its index.html); None when there is none."""
    p = Path(path)
    f = (p.parent if p.suffix == ".html" else p) / "answer.json"
    if not f.is_file():
        return None
    return Answer.from_json(json.loads(f.read_text(encoding="utf-8")))


# --------------------------------------------------------------------------- the key table

KEY_COLUMNS = [
    Column("run_id", "run"), Column("server", "server"), Column("comparison_text", "comparison", always=True),
    Column("judged_on", "judged on"), Column("context", "other axes"), Column("initiators", "initiators", ">"),
    Column("payload_bytes", "payload B", ">"), Column("rate", "rate/s", ">"),
    Column("total_threads", "threads", ">", True),
    Column("gain_text", "gain [interval]", ">", True), Column("verdict", "verdict", always=True),
    Column("pays_from", "pays from", ">", True), Column("reps_text", "reps", ">", True),
]


def pct_interval(v: float | None, lo: float | None, hi: float | None) -> str:
    """``+12.3 % [-4.0, +25.1]``; ``[no interval]`` without one."""
    if v is None:
        return "–"
    return f"{v:+.1f} % " + (f"[{lo:+.1f}, {hi:+.1f}]" if lo is not None and hi is not None else "[no interval]")


def comparison_words(row: Mapping[str, Any]) -> str:
    """A key-table row's comparison in words: ``waitfor_timeout_ms=50 vs 3000 on e2e p99 (ms),
    lower is better``."""
    return row["comparison_text"] + (f" on {row['judged_on']}" if row.get("judged_on") else "")


def threads_text(n: Any) -> str:
    return f"{n} thread" if n == 1 else f"{n} threads"


def _left_out(auto: Mapping[str, Any], pairing: Pairing | None) -> int | None:
    """The round ``pairing`` was left out of for the time budget, when that was the run's last
    round (harness.verdicts.auto.fit_round; run.json's ``auto.round_plan``), else None."""
    begun = auto.get("round_plan")
    if pairing is None or not isinstance(begun, Mapping) or begun.get("round") != auto.get("rounds"):
        return None
    t, b = pairing.perm_ids
    hit = any(isinstance(x, Mapping) and (x.get("perm_id"), x.get("baseline_perm_id")) == (t, b)
              for x in begun.get("left_out") or ())
    return begun.get("round") if hit else None


def stop_words(auto: Mapping[str, Any] | None, pairing: Pairing | None = None) -> str:
    """Why an auto run stopped adding rounds, in words ("" when it did not say); with
    ``pairing``, why it stopped adding rounds for that comparison (left out of the last round
    for the budget)."""
    if not isinstance(auto, Mapping):
        return ""
    stopped, rounds = auto.get("stopped"), auto.get("rounds")
    left = _left_out(auto, pairing)
    if left is not None:
        return (f"the time budget ({(auto.get('budget_seconds') or 0) / 60:g} min) left no room for it in round "
                f"{left}, which ran the comparisons that fitted")
    if stopped == "budget":
        return (f"the time budget ({(auto.get('budget_seconds') or 0) / 60:g} min) left no room for round "
                f"{(rounds or 0) + 1}")
    if stopped == "max":
        return f"the maximum of {rounds} repetitions was reached"
    return ""


#: a run whose host's CPU speed spread more than this across its windows (log-normal s.d., %)
#: gets a note under its key table when a comparison stayed inconclusive
HOST_NOTE_SD_PCT = 5.0


def host_note(auto: Mapping[str, Any] | None) -> str | None:
    """The note on a run's host (its auto record's ``host_cpu_speed``): said when its CPU's own
    speed moved more than :data:`HOST_NOTE_SD_PCT` across the windows; None otherwise."""
    h = (auto or {}).get("host_cpu_speed") or {}
    if (h.get("sd_pct") or 0.0) <= HOST_NOTE_SD_PCT:
        return None
    return (f"host: its CPU's own speed moved across the run's {h['windows']} windows, from {h['min']:.2f} to "
            f"{h['max']:.2f} of its typical (s.d. {h['sd_pct']:.0f} %, cpu probe; docs/embedded.md, \"CPU "
            "speed\"): a machine whose speed moves that much widens every interval, and the rates are not "
            "corrected for it")


def cross_cpu_note(auto: Mapping[str, Any] | None) -> str | None:
    """What a run's windows measured of the host's cross-CPU latency (its auto record's
    ``host_cross_cpu``): said whenever recorded, as a figure, not a judgement; None otherwise."""
    h = (auto or {}).get("host_cross_cpu") or {}
    if not h:
        return None
    return (f"host: a cache line's round trip between two of its CPUs took {h['min_ns']:.0f} to {h['max_ns']:.0f} ns "
            f"across the run's {h['windows']} windows (cross_cpu_ns; docs/embedded.md, \"Cross-CPU latency\": on a VM "
            "whose host runs its vCPUs far apart part of the time, a permutation's absolute rates follow it; "
            "alternated strategies share each window's)")


def rate_spread(judged: Iterable[Judged]) -> dict[str, Any] | None:
    """How far each compared permutation's receive rates spread over its repetitions that
    count in verdicts: the smallest and largest max/min across the permutations with at least
    2 of them, and the permutation of the largest; None when none has 2."""
    rows = {}
    for j in judged:
        for r in (j.pairing.treatment, j.pairing.baseline):
            rows[(r.get("run_id"), r.get("perm_id"))] = r
    spreads = {}
    for key, r in rows.items():
        rates = [v for _, v in samples(r, RECEIVE_RATE)]
        if len(rates) >= 2 and min(rates) > 0:
            spreads[key] = max(rates) / min(rates)
    if not spreads:
        return None
    run, pid = widest = max(spreads, key=spreads.__getitem__)
    return {"permutations": len(spreads), "min": round(min(spreads.values()), 3), "max": round(spreads[widest], 3),
            "widest": pid if len({k[0] for k in spreads}) == 1 else f"{run}/{pid}"}


def spread_note(spread: Mapping[str, Any] | None) -> str | None:
    """The note saying :func:`rate_spread`'s figure (None without one)."""
    if not spread:
        return None
    return (f"rates: each permutation's repetitions spread by {spread['min']:.2f} to {spread['max']:.2f} (max/min "
            f"receive rate, {spread['permutations']} permutations; the widest {spread['widest']}): what one "
            "repetition's rate is worth on this machine; the intervals above carry it (docs/embedded.md, \"Alternated "
            "windows\")")


def key_row(j: Judged, auto: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One key-table row (JSON-able) for a judged comparison; ``auto``: its run's ``auto``
    record from run.json (why the run stopped adding rounds)."""
    p, o, t = j.pairing, j.outcome, j.pairing.treatment
    out = kept_out(t) + kept_out(p.baseline)
    reason = o.reason
    if o.verdict == INCONCLUSIVE:
        statuses = ", ".join(sorted({s for _, s in out}))
        kept = f"{len(out)} repetition(s) kept out of verdicts ({statuses})" if out else ""
        extra = stop_words(auto, j.pairing) if j.rule.sequential else (
            f"the run had a fixed number of repetitions ({max(o.n_treatment, o.n_baseline)})")
        reason = "; ".join(x for x in (reason, kept, extra) if x)
    return {
        "run_id": t.get("run_id"), "kind": p.family, "comparison": p.label, "baseline": p.baseline_value,
        "comparison_text": f"{p.label} vs {p.baseline_value}",
        "judged_on": (p.metric.text + ("" if p.metric.higher_is_better else ", lower is better")
                      if p.family == "technique" or p.metric.name != "receive_rate" else None),
        "metric": p.metric.name, "higher_is_better": p.metric.higher_is_better,
        **{k: t.get(k) for k in COMPARISON_KEYS[1:] if p.family == "technique" or k not in STRATEGY},
        "total_threads": t.get("total_threads"), "context": p.context,
        "perm_id": t.get("perm_id"), "baseline_perm_id": p.baseline.get("perm_id"),
        "gain_pct": o.gain_pct, "ci_low_pct": o.ci_low_pct, "ci_high_pct": o.ci_high_pct,
        "confidence": o.confidence, "gain_text": pct_interval(o.gain_pct, o.ci_low_pct, o.ci_high_pct),
        "verdict": o.verdict, "n": o.n_treatment, "baseline_n": o.n_baseline,
        "reps_text": f"{o.n_treatment}/{o.n_baseline}" + (" paired" if o.paired else ""), "paired": o.paired,
        "kept_out": len(out), "look": o.look,
        "threshold_pct": j.rule.threshold_pct,
        "reason": reason, "pays_from": None,
        "how_to_exercise": how_to_exercise(p.axis) if o.verdict == NOT_EXERCISED else None,
    }


def _add_pays_from(rows: list[dict[str, Any]]) -> None:
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(tuple(r.get(k) for k in GROUP_KEYS), []).append(r)
    for members in groups.values():
        cross = pays_from((r["total_threads"] or 0, r["verdict"]) for r in members)
        for r in members:
            r["pays_from"] = cross


def key_section(judged: Iterable[Judged], autos: Mapping[str, Mapping[str, Any]] | None = None) -> Section:
    """The key table of judged comparisons (dialog strategies and techniques alike), with one
    note per inconclusive comparison saying why, one per technique not exercised saying how to
    exercise it, how to read the verdicts, how far the compared permutations' own rates spread
    (:func:`rate_spread`) and what the host's probes saw."""
    autos, judged = autos or {}, list(judged)
    rows = [key_row(j, autos.get(j.pairing.treatment.get("run_id") or "")) for j in judged]
    _add_pays_from(rows)
    columns = [c for c in KEY_COLUMNS if c.key != "run_id" or len({r["run_id"] for r in rows}) > 1]
    notes = []
    thresholds = sorted({r["threshold_pct"] for r in rows})
    if rows:
        thr = "/".join(f"{t:g}" for t in thresholds)
        notes.append(f"gain: of the geometric mean over the repetitions that count; interval: the deciding look's "
                     f"(repeated confidence intervals over every look: 95 %, and 90 % for no difference, an equivalence "
                     f"test); verdicts against +-{thr} % "
                     "(docs/statistics.md). pays from: total threads from which every verdict is gain.")
        if any(r["higher_is_better"] is False for r in rows):
            notes.append("lower is better: the gain of a latency is how much lower it is (the baseline's geometric "
                         "mean over the technique's, less 1: +100 % is half the latency).")
    for r in rows:
        if r["verdict"] in (INCONCLUSIVE, NOT_EXERCISED):
            where = f"{comparison_words(r)} at {threads_text(r['total_threads'])}" + "".join(
                f" ({x})" for x in (f"rate {r['rate']:g}/s" if r.get("rate") else "", r.get("context")) if x)
            notes.append(f"{r['verdict']}: {where}: {r['reason']}")
    if any(r["verdict"] == INCONCLUSIVE for r in rows):
        notes += [n for n in (host_note(a) for a in autos.values()) if n]
    if rows:
        notes += [n for n in [spread_note(rate_spread(judged))] + [cross_cpu_note(a) for a in autos.values()] if n]
    decided = sum(1 for r in rows if r["verdict"] not in (INCONCLUSIVE, NOT_EXERCISED))
    idle = sum(1 for r in rows if r["verdict"] == NOT_EXERCISED)
    title = (f"Key results: {decided} of {len(rows)} comparisons decided" + (f", {idle} not exercised" if idle else "")
             if rows else "Key results: no comparison (no permutation has a baseline with everything else equal)")
    return Section(KEY, title, columns, rows, notes)


def key_answer(judged: Iterable[Judged], runs: Iterable[str], autos: Mapping[str, Mapping[str, Any]] | None = None,
               report: str | None = None) -> Answer:
    """The answer of ``runs``: the key table (:func:`key_section`)."""
    return Answer(list(runs), [key_section(judged, autos)], report)


def run_answer(path: str | Path) -> Answer:
    """The key table of one run directory straight from its summaries (no Spark), and the
    scalability model's sections (:mod:`.scaling_answer`): what ``ssbench bench --no-analysis``
    prints; the analysis computes the same from its tables."""
    from ..results import RunReader
    from .pairs import judge_all, permutation_rows
    from .rule import Rule
    from .scaling_answer import add_sections

    reader = RunReader(path)
    record = reader.record().to_json() if reader.exists() else {}
    rule = Rule.of_run((record.get("matrix") or {}).get("run"))
    rows = permutation_rows(s.row() for s in reader.readable_summaries())
    answer = key_answer(judge_all(rows, default=rule), [reader.run_id], {reader.run_id: record.get("auto") or {}})
    add_sections(answer, rows)      # how far each thread sweep scales
    return answer
