"""Compare a candidate run against a baseline run: per permutation and metric, with verdicts.

The method (docs/gate.md has the long form):

* effect ``r = median(candidate) / median(baseline)`` for rates, inverted for latencies
  (``median(baseline) / median(candidate)``), so ``r < 1`` always means "worse";
* threshold ``t = max(min_effect, k x relative robust spread of the baseline)`` for that
  permutation and metric (default ``max(5 %, 2 x MAD x 1.4826 / median)``); the effect is
  beyond the threshold when ``r < 1 - t``;
* significance: one-sided exact Mann-Whitney U (candidate worse), with at least ``min_reps``
  (default 4) repetitions a side, and Benjamini-Hochberg across all permutation x metric
  p-values of the comparison: significant when the BH q-value <= ``alpha`` (default 0.05);
* verdict per row: ``regression`` when the effect is beyond the threshold AND significant,
  ``warning`` when only one holds, ``improved`` when the effect is beyond the threshold the
  other way, else ``pass``. With fewer than ``min_reps`` repetitions on a side the
  significance is not judged and the row is judged on the effect alone (flagged
  ``effect-only``);
* integrity per permutation: ``fail`` whenever the candidate lost messages, its error count
  per repetition rose over the baseline's, or its queue was disabled (poison messages),
  whatever the throughput.

Exit codes: 0 pass (warnings and improvements included), 1 regression or failure, 2 input
error (raised as :class:`harness.errors.UserError`, naming the file).
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..errors import UserError
from ..results import write_json
from . import stats

GATE_SCHEMA = "ssbench.gate/1"
REP_DIR_RE = re.compile(r"^rep-(\d+)$")

# verdicts, from best to worst
PASS, IMPROVED, WARNING, REGRESSION, FAIL, NO_DATA = "pass", "improved", "warning", "regression", "fail", "no-data"
SEVERITY = {NO_DATA: 0, PASS: 0, IMPROVED: 0, WARNING: 1, REGRESSION: 2, FAIL: 3}
CORRECTION = "benjamini-hochberg"


@dataclass(frozen=True)
class Metric:
    name: str
    path: tuple[str, ...]        # where it is in rep-NN/summary.json
    higher_is_better: bool
    unit: str


METRICS: tuple[Metric, ...] = (
    Metric("receive_rate", ("receive_rate",), True, "msg/s"),
    Metric("send_rate", ("send_rate",), True, "msg/s"),
    Metric("send_p50_ms", ("send_latency_ms", "p50"), False, "ms"),
    Metric("send_p99_ms", ("send_latency_ms", "p99"), False, "ms"),
    Metric("e2e_p99_ms", ("e2e_latency_ms", "p99"), False, "ms"),
)
METRIC_BY_NAME = {m.name: m for m in METRICS}


@dataclass(frozen=True)
class GateSettings:
    """The gate's knobs; the defaults are documented in docs/gate.md."""

    k: float = 2.0                # threshold = max(min_effect, k x relative baseline spread)
    min_effect: float = 0.05      # never call anything under 5 % a regression
    min_reps: int = 4             # repetitions a side needed to judge significance
    alpha: float = 0.05           # false discovery rate for Benjamini-Hochberg
    spread: str = "mad"           # mad (MAD x 1.4826) or iqr (IQR / 1.349)
    metrics: tuple[str, ...] = tuple(m.name for m in METRICS)

    def validate(self) -> "GateSettings":
        if not (self.k >= 0 and math.isfinite(self.k)):
            raise UserError(f"--k must be a finite number >= 0, got {self.k}")
        if not 0 <= self.min_effect < 1:
            raise UserError(f"--min-effect must be a fraction in [0, 1), got {self.min_effect}")
        if self.min_reps < 2:
            raise UserError(f"--min-reps must be at least 2, got {self.min_reps}")
        if not 0 < self.alpha < 1:
            raise UserError(f"--alpha must be in (0, 1), got {self.alpha}")
        if self.spread not in stats.SPREAD_METHODS:
            raise UserError(f"--spread must be one of {', '.join(stats.SPREAD_METHODS)}, got {self.spread!r}")
        unknown = [m for m in self.metrics if m not in METRIC_BY_NAME]
        if unknown or not self.metrics:
            raise UserError(f"unknown metric(s) {', '.join(unknown) or '(none given)'} "
                            f"(expected some of {', '.join(METRIC_BY_NAME)})")
        return self

    def describe(self) -> str:
        spread = "MAD x 1.4826" if self.spread == "mad" else "IQR / 1.349"
        return (f"threshold = max({self.min_effect:.0%}, k={self.k:g} x baseline spread ({spread}) / median); "
                f"significance = one-sided exact Mann-Whitney U (>= {self.min_reps} reps a side), "
                f"Benjamini-Hochberg over all permutation x metric tests at FDR {self.alpha:g}")


# --------------------------------------------------------------------------- loading runs

@dataclass
class Rep:
    repetition: int
    path: Path
    values: dict[str, float | None]
    messages_lost: int
    errors: int
    queue_disabled: bool = False
    client_bound: bool = False
    status: str = "ok"
    permutation: dict[str, Any] = field(default_factory=dict)
    measure_seconds: float | None = None


@dataclass
class PermData:
    id: str
    reps: list[Rep]

    def samples(self, metric: str) -> list[float]:
        return [r.values[metric] for r in self.reps if r.values.get(metric) is not None]  # type: ignore[misc]


@dataclass
class RunData:
    path: Path
    run: dict[str, Any]
    perms: dict[str, PermData]
    notes: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return str(self.run.get("run_id") or self.path.name)


def _read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError("no such file", file=str(path)) from None
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"cannot read: {e}", file=str(path)) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise UserError(f"malformed JSON: {e.msg}", file=str(path), line=e.lineno) from None


def _number(doc: Mapping[str, Any], path: Sequence[str], file: Path, *, required: bool) -> float | None:
    cur: Any = doc
    for key in path:
        if not isinstance(cur, Mapping) or key not in cur:
            if required:
                raise UserError("missing field", file=str(file), field=".".join(path))
            return None
        cur = cur[key]
    if cur is None and not required:
        return None
    if isinstance(cur, bool) or not isinstance(cur, (int, float)) or not math.isfinite(cur):
        raise UserError(f"must be a finite number, got {cur!r}", file=str(file), field=".".join(path))
    return float(cur)


def read_doc(path: Path, schema: str, noun: str) -> dict[str, Any]:
    """A results JSON file that must be an object whose ``schema`` (when present) is
    ``<schema>/N``; UserError naming the file otherwise."""
    doc = _read_json(path)
    if not isinstance(doc, dict):
        raise UserError(f"{noun} is a JSON object", file=str(path))
    found = doc.get("schema")
    if found is not None and not str(found).startswith(schema + "/"):
        raise UserError(f"not {noun} (schema {found!r}, expected {schema}/1)", file=str(path))
    return doc


def load_rep(path: Path, repetition: int) -> Rep:
    """Read one ``rep-NN/summary.json``; UserError naming the file when it is malformed."""
    f = path / "summary.json"
    doc = read_doc(f, "ssbench.summary", "a repetition summary")
    values: dict[str, float | None] = {}
    for m in METRICS:
        values[m.name] = _number(doc, m.path, f, required=m.name in ("receive_rate", "send_rate"))
    lost = _number(doc, ("messages_lost",), f, required=True)
    errors = _number(doc, ("errors",), f, required=True)
    perm = doc.get("permutation") if isinstance(doc.get("permutation"), dict) else {}
    window = doc.get("window") if isinstance(doc.get("window"), dict) else {}
    ms = window.get("measure_seconds")
    return Rep(repetition=repetition, path=path, values=values, messages_lost=int(lost or 0),
               errors=int(errors or 0), queue_disabled=bool(doc.get("queue_disabled", False)),
               client_bound=bool(doc.get("client_bound", False)), status=str(doc.get("status", "ok")),
               permutation=perm, measure_seconds=float(ms) if isinstance(ms, (int, float)) else None)


def load_run(path: str | os.PathLike[str]) -> RunData:
    """Load a run directory (``results/<run-id>/``): run.json and every complete repetition.

    Raises UserError when the directory or run.json is missing, a file is malformed (naming
    it), or there is no complete repetition at all.
    """
    p = Path(path)
    if not p.exists():
        raise UserError("no such run directory", file=str(p))
    if not p.is_dir():
        raise UserError("not a directory (give a run directory, results/<run-id>/)", file=str(p))
    run_file = p / "run.json"
    if not run_file.exists():
        raise UserError("not an ssbench run directory: no run.json", file=str(p))
    run = read_doc(run_file, "ssbench.run", "a run file")
    data = RunData(path=p, run=run, perms={})
    status = run.get("status")
    if status not in (None, "complete"):
        data.notes.append(f"{p}: run status is {status!r}, comparing its complete repetitions only")
    for sub in sorted(p.iterdir()):
        if not sub.is_dir() or sub.name.startswith(".") or sub.name == "report":
            continue
        reps: list[Rep] = []
        for rd in sorted(sub.iterdir()):
            m = REP_DIR_RE.match(rd.name)
            if not m or not rd.is_dir():
                continue
            if not (rd / "summary.json").exists():
                data.notes.append(f"{rd}: no summary.json (incomplete repetition), ignored")
                continue
            reps.append(load_rep(rd, int(m.group(1))))
        if reps:
            data.perms[sub.name] = PermData(id=sub.name, reps=reps)
    if not data.perms:
        raise UserError("no complete repetition (no <permutation>/rep-NN/summary.json)", file=str(p))
    return data


# --------------------------------------------------------------------------- provenance

PROVENANCE_FIELDS = (
    ("host", ("hostname", "platform", "cpu_model", "cpu_count", "memory_bytes")),
    ("target", ("kind", "label", "versions")),
)


def provenance_differences(baseline: Mapping[str, Any], candidate: Mapping[str, Any]) -> list[str]:
    """Human-readable differences in the provenance of two run.json documents that make a
    stored-baseline comparison suspect: host, target, software versions, and the matrix's run
    and broker settings. (The ssbench git commit is expected to differ and is not listed.)"""
    out: list[str] = []

    def diff(label: str, a: Any, b: Any) -> None:
        if a != b:
            out.append(f"{label}: {a!r} (baseline) != {b!r} (candidate)")

    for section, keys in PROVENANCE_FIELDS:
        a = baseline.get(section) if isinstance(baseline.get(section), dict) else {}
        b = candidate.get(section) if isinstance(candidate.get(section), dict) else {}
        for key in keys:
            diff(f"{section}.{key}", a.get(key), b.get(key))
    a = baseline.get("software") if isinstance(baseline.get("software"), dict) else {}
    b = candidate.get("software") if isinstance(candidate.get("software"), dict) else {}
    for key in sorted(set(a) | set(b)):
        diff(f"software.{key}", a.get(key), b.get(key))
    a = baseline.get("matrix") if isinstance(baseline.get("matrix"), dict) else {}
    b = candidate.get("matrix") if isinstance(candidate.get("matrix"), dict) else {}
    for key in ("run", "broker", "embedded_profiles"):
        ra, rb = a.get(key), b.get(key)
        if isinstance(ra, dict) and isinstance(rb, dict):
            for sub in sorted(set(ra) | set(rb)):
                if key == "run" and sub == "repetitions":
                    continue
                diff(f"matrix.{key}.{sub}", ra.get(sub), rb.get(sub))
        else:
            diff(f"matrix.{key}", ra, rb)
    return out


# --------------------------------------------------------------------------- comparison

@dataclass
class MetricResult:
    permutation: str
    metric: str
    higher_is_better: bool
    n_baseline: int
    n_candidate: int
    baseline_median: float | None
    candidate_median: float | None
    r: float | None
    baseline_spread: float | None      # relative robust spread of the baseline (fraction)
    threshold: float | None            # fraction: effect beyond it when r < 1 - threshold
    p: float | None                    # one-sided exact Mann-Whitney U (None: not judged)
    q: float | None = None             # Benjamini-Hochberg adjusted p
    effect_beyond: bool = False
    significant: bool | None = None    # None: not judged (too few repetitions)
    significance_judged: bool = False
    verdict: str = PASS
    reason: str = ""


@dataclass
class IntegrityResult:
    permutation: str
    candidate_lost: int
    baseline_lost: int
    candidate_errors_per_rep: float
    baseline_errors_per_rep: float
    candidate_queue_disabled: bool
    verdict: str = PASS
    reasons: list[str] = field(default_factory=list)


def _ratio(num: float, den: float) -> float:
    if den == 0.0:
        return 1.0 if num == 0.0 else math.inf
    return num / den


def effect_ratio(baseline_median: float, candidate_median: float, higher_is_better: bool) -> float:
    """``r``: candidate / baseline for rates, baseline / candidate for latencies (r < 1 = worse)."""
    if higher_is_better:
        return _ratio(candidate_median, baseline_median)
    return _ratio(baseline_median, candidate_median)


def compare_samples(baseline: Mapping[str, Mapping[str, Sequence[float]]],
                    candidate: Mapping[str, Mapping[str, Sequence[float]]],
                    settings: GateSettings = GateSettings()) -> list[MetricResult]:
    """The statistical core: ``{permutation: {metric: [values per repetition]}}`` per side.

    Compares the permutations present on both sides, for ``settings.metrics``; applies
    Benjamini-Hochberg across every permutation x metric p-value and sets each row's verdict.
    """
    settings.validate()
    rows: list[MetricResult] = []
    for perm in [p for p in baseline if p in candidate]:
        for name in settings.metrics:
            metric = METRIC_BY_NAME[name]
            b = stats._clean(baseline[perm].get(name, ()))
            c = stats._clean(candidate[perm].get(name, ()))
            row = MetricResult(permutation=perm, metric=name, higher_is_better=metric.higher_is_better,
                               n_baseline=len(b), n_candidate=len(c), baseline_median=None,
                               candidate_median=None, r=None, baseline_spread=None, threshold=None, p=None)
            rows.append(row)
            if not b or not c:
                row.verdict = NO_DATA
                row.reason = "no data on " + ("either side" if not b and not c else
                                              "the baseline" if not b else "the candidate")
                continue
            row.baseline_median = stats.median(b)
            row.candidate_median = stats.median(c)
            row.r = effect_ratio(row.baseline_median, row.candidate_median, metric.higher_is_better)
            row.baseline_spread = stats.relative_spread(b, settings.spread)
            row.threshold = max(settings.min_effect, settings.k * row.baseline_spread)
            row.effect_beyond = row.r < 1.0 - row.threshold
            if len(b) >= settings.min_reps and len(c) >= settings.min_reps:
                row.significance_judged = True
                row.p = stats.mann_whitney_worse(b, c, metric.higher_is_better)
    qs = stats.benjamini_hochberg([r.p for r in rows])
    for row, q in zip(rows, qs):
        row.q = q
        if row.verdict == NO_DATA:
            continue
        _verdict(row, settings)
    return rows


def _verdict(row: MetricResult, settings: GateSettings) -> None:
    assert row.r is not None and row.threshold is not None
    worse = f"{(1 - row.r):.1%} worse" if math.isfinite(row.r) else "worse"
    better_beyond = row.r > 1.0 + row.threshold
    if not math.isfinite(row.threshold):
        row.verdict = WARNING
        row.reason = "baseline median is 0: no relative threshold, effect not judged"
        return
    if not row.significance_judged:
        row.significant = None
        flag = (f"effect-only: fewer than {settings.min_reps} repetitions a side "
                f"({row.n_baseline}/{row.n_candidate}), significance not judged")
        if row.effect_beyond:
            row.verdict, row.reason = REGRESSION, f"{worse}, beyond threshold {row.threshold:.1%}; {flag}"
        elif better_beyond:
            row.verdict, row.reason = IMPROVED, flag
        else:
            row.verdict, row.reason = PASS, flag
        return
    row.significant = row.q is not None and row.q <= settings.alpha
    if row.effect_beyond and row.significant:
        row.verdict = REGRESSION
        row.reason = f"{worse}, beyond threshold {row.threshold:.1%}, significant (q={row.q:.3g})"
    elif row.effect_beyond:
        row.verdict = WARNING
        minp = stats.min_p_value(row.n_baseline, row.n_candidate)
        row.reason = (f"{worse}, beyond threshold {row.threshold:.1%}, but not significant "
                      f"(q={row.q:.3g} > {settings.alpha:g}; smallest possible p with "
                      f"{row.n_baseline}/{row.n_candidate} reps is {minp:.3g})")
    elif row.significant:
        row.verdict = WARNING
        row.reason = (f"significantly worse (q={row.q:.3g}) but within threshold "
                      f"{row.threshold:.1%} (r={row.r:.3f})")
    elif better_beyond:
        row.verdict = IMPROVED
    else:
        row.verdict = PASS


def check_integrity(perm: str, baseline: PermData, candidate: PermData) -> IntegrityResult:
    """Messages lost, errors and disabled queues: a failure whatever the throughput."""
    c_lost = sum(r.messages_lost for r in candidate.reps)
    b_lost = sum(r.messages_lost for r in baseline.reps)
    c_err = sum(r.errors for r in candidate.reps) / len(candidate.reps)
    b_err = sum(r.errors for r in baseline.reps) / len(baseline.reps)
    disabled = any(r.queue_disabled for r in candidate.reps)
    res = IntegrityResult(permutation=perm, candidate_lost=c_lost, baseline_lost=b_lost,
                          candidate_errors_per_rep=c_err, baseline_errors_per_rep=b_err,
                          candidate_queue_disabled=disabled)
    if c_lost > 0:
        reps = [r.repetition for r in candidate.reps if r.messages_lost > 0]
        res.reasons.append(f"candidate lost {c_lost} message(s) (rep {', '.join(map(str, reps))})")
    if c_err > b_err:
        res.reasons.append(f"errors rose: {c_err:g} per repetition (baseline {b_err:g})")
    if disabled:
        res.reasons.append("candidate queue disabled (poison messages)")
    if res.reasons:
        res.verdict = FAIL
    return res


# --------------------------------------------------------------------------- the report

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
            out[row.permutation] = _worst(out.get(row.permutation, PASS), row.verdict)
        for integ in self.integrity:
            out[integ.permutation] = _worst(out.get(integ.permutation, PASS), integ.verdict)
        return out

    @property
    def verdict(self) -> str:
        """fail (integrity), regression, warning or pass for the whole comparison."""
        worst = PASS
        for v in self.permutation_verdicts.values():
            worst = _worst(worst, v)
        return worst if worst in (FAIL, REGRESSION, WARNING) else PASS

    @property
    def exit_code(self) -> int:
        return 1 if self.verdict in (FAIL, REGRESSION) else 0

    def to_json(self) -> dict[str, Any]:
        def side(run: RunData | None) -> dict[str, Any] | None:
            if run is None:
                return None
            ss = run.run.get("ssbench") if isinstance(run.run.get("ssbench"), dict) else {}
            return {"path": str(run.path), "run_id": run.run.get("run_id"), "status": run.run.get("status"),
                    "git_commit": ss.get("git_commit"), "git_dirty": ss.get("git_dirty"),
                    "host": (run.run.get("host") or {}).get("hostname") if isinstance(run.run.get("host"), dict) else None}

        return _finite({
            "schema": GATE_SCHEMA,
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "mode": self.mode,
            "baseline": side(self.baseline),
            "candidate": side(self.candidate),
            "settings": {**asdict(self.settings), "correction": CORRECTION,
                         "significance": "one-sided exact Mann-Whitney U",
                         "effect": "r = median(candidate)/median(baseline), inverted for latencies; r < 1 is worse",
                         "threshold": "max(min_effect, k x baseline robust spread / baseline median)"},
            "tests": sum(1 for r in self.rows if r.p is not None),
            "permutations": self.permutation_verdicts,
            "rows": [asdict(r) for r in self.rows],
            "integrity": [asdict(i) for i in self.integrity],
            "provenance_warnings": self.provenance_warnings,
            "notes": self.notes,
            "interleave": self.interleave,
        })

    def format_table(self) -> str:
        headers = ("permutation", "metric", "n b/c", "baseline", "candidate", "r", "threshold", "p", "q", "verdict")
        lines: list[list[str]] = []
        for r in self.rows:
            verdict = r.verdict.upper() if r.verdict in (REGRESSION, FAIL) else r.verdict
            if r.verdict != NO_DATA and not r.significance_judged:
                verdict += " (effect-only)"
            lines.append([r.permutation, r.metric, f"{r.n_baseline}/{r.n_candidate}",
                          _fmt(r.baseline_median), _fmt(r.candidate_median),
                          "-" if r.r is None else ("inf" if not math.isfinite(r.r) else f"{r.r:.3f}"),
                          "-" if r.threshold is None else ("inf" if not math.isfinite(r.threshold) else f"{r.threshold:.1%}"),
                          "n/a" if r.p is None else f"{r.p:.4f}", "n/a" if r.q is None else f"{r.q:.4f}",
                          verdict])
        widths = [max(len(h), *(len(l[i]) for l in lines)) if lines else len(h) for i, h in enumerate(headers)]
        right = {2, 3, 4, 5, 6, 7, 8}

        def fmt_line(cells: Sequence[str]) -> str:
            return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                             for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

        out = [fmt_line(headers), fmt_line(["-" * w for w in widths])]
        out += [fmt_line(l) for l in lines]
        for r in self.rows:
            if r.reason and r.verdict in (REGRESSION, WARNING, NO_DATA):
                out.append(f"  {r.verdict}: {r.permutation} {r.metric}: {r.reason}")
        out.append("")
        if all(i.verdict == PASS for i in self.integrity):
            out.append("integrity (candidate): ok: no messages lost, no rise in errors, no disabled queue")
        else:
            out.append("integrity (candidate): lost messages, more errors or a disabled queue fail "
                       "whatever the throughput:")
        for i in self.integrity:
            if i.verdict != PASS:
                out.append(f"  FAIL: {i.permutation}: {'; '.join(i.reasons)}")
        out.append("")
        out.append(self.settings.describe())
        out.append(f"false alarms: controlled with {CORRECTION} across the "
                   f"{sum(1 for r in self.rows if r.p is not None)} permutation x metric tests")
        for w in self.provenance_warnings:
            out.append(f"warning: provenance differs: {w}")
        for n in self.notes:
            out.append(f"note: {n}")
        counts: dict[str, int] = {}
        for v in self.permutation_verdicts.values():
            counts[v] = counts.get(v, 0) + 1
        summary = ", ".join(f"{n} {v}" for v, n in sorted(counts.items(), key=lambda kv: -SEVERITY[kv[0]]))
        out.append(f"gate: {self.verdict.upper()} ({len(self.permutation_verdicts)} permutation(s): "
                   f"{summary}) -> exit {self.exit_code}")
        return "\n".join(out)


def _worst(a: str, b: str) -> str:
    return a if SEVERITY[a] >= SEVERITY[b] else b


def _fmt(x: float | None) -> str:
    if x is None:
        return "-"
    if not math.isfinite(x):
        return str(x)
    if abs(x) >= 100:
        return f"{x:.1f}"
    return f"{x:.3g}" if abs(x) < 1 else f"{x:.2f}"


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


def compare_runs(baseline: RunData, candidate: RunData, settings: GateSettings = GateSettings(),
                 *, check_provenance: bool = True) -> GateReport:
    """Compare two loaded runs; UserError when they have no permutation in common."""
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
    rows = compare_samples(b_samples, c_samples, settings)
    integrity = [check_integrity(p, baseline.perms[p], candidate.perms[p]) for p in common]
    for p in common:
        b, c = baseline.perms[p], candidate.perms[p]
        if any(r.messages_lost > 0 for r in b.reps):
            notes.append(f"{p}: the baseline lost messages too ({sum(r.messages_lost for r in b.reps)}): "
                         "its numbers are suspect")
        for side, data in (("baseline", b), ("candidate", c)):
            cb = [r.repetition for r in data.reps if r.client_bound]
            if cb:
                notes.append(f"{p}: {side} repetition(s) {', '.join(map(str, cb))} were client-bound: "
                             "the load generator, not the broker, limited throughput")
            idle = [r.repetition for r in data.reps if r.status == "users_idle"]
            if idle:
                notes.append(f"{p}: {side} repetition(s) {', '.join(map(str, idle))} had Locust users "
                             "that were not sending through the window: fewer clients than configured")
        bp = {k: v for k, v in (b.reps[0].permutation or {}).items() if k != "index"}
        cp = {k: v for k, v in (c.reps[0].permutation or {}).items() if k != "index"}
        if bp and cp and bp != cp:
            notes.append(f"{p}: the permutation's settings differ between baseline and candidate")
        bm = {r.measure_seconds for r in b.reps if r.measure_seconds is not None}
        cm = {r.measure_seconds for r in c.reps if r.measure_seconds is not None}
        if bm and cm and bm != cm:
            notes.append(f"{p}: measured window differs: baseline {sorted(bm)} s, candidate {sorted(cm)} s")
    prov = provenance_differences(baseline.run, candidate.run) if check_provenance else []
    return GateReport(baseline=baseline, candidate=candidate, settings=settings, rows=rows,
                      integrity=integrity, provenance_warnings=prov, notes=notes)


def write_report(report: GateReport, path: str | os.PathLike[str] | None = None) -> Path:
    """Write gate.json (default: next to the candidate run, ``<candidate>/gate.json``)."""
    if path is None:
        if report.candidate is None:
            raise ValueError("no candidate run to write gate.json next to")
        path = report.candidate.path / "gate.json"
    p = Path(path)
    write_json(p, report.to_json())
    return p
