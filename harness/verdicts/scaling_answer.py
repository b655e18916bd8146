"""The scalability model in the answer: a line per sweep and a line per shift.

:func:`add_sections` adds ``scaling`` (per sweep: λ, σ, κ, the peak and its rate with 95 %
intervals, or why there is no model) and ``scaling_moves`` (per comparison across thread
counts: the coefficients it moves) to an :class:`~harness.verdicts.answer.Answer`, from plain
permutation rows (:mod:`.scaling`); neither when no group has two thread counts.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

from ..results.fields import axis_names
from . import scaling as S
from .answer import Answer, Column, Section

SCALING, MOVES = "scaling", "scaling_moves"
SYMBOL = {"log_lam": "λ", "sigma": "σ", "kappa": "κ"}

COLUMNS = [
    Column("run_id", "run"), Column("server", "server"), Column("sweep", "sweep", always=True),
    Column("initiators", "initiators", ">"), Column("payload_bytes", "payload B", ">"),
    Column("threads_text", "threads", ">", True), Column("status", "model", always=True),
    Column("lambda_text", "λ msg/s [interval]", ">", True), Column("sigma_text", "σ [interval]", ">", True),
    Column("kappa_text", "κ [interval]", ">", True), Column("peak_text", "peak N* [interval]", ">", True),
    Column("peak_rate_text", "peak msg/s [interval]", ">", True), Column("fit_text", "fit", ">", True),
]
MOVE_COLUMNS = [
    Column("run_id", "run"), Column("server", "server"), Column("comparison_text", "comparison", always=True),
    Column("context", "other axes"), Column("initiators", "initiators", ">"), Column("payload_bytes", "payload B", ">"),
    Column("lambda_text", "λ change [interval]", ">", True), Column("sigma_text", "σ change [interval]", ">", True),
    Column("kappa_text", "κ change [interval]", ">", True), Column("moves_text", "moves", always=True),
]


def add_sections(answer: Answer, rows: Iterable[Mapping[str, Any]]) -> list[S.Sweep]:
    """Model every sweep of ``rows`` and add the two sections to ``answer`` (none when no
    group has two thread counts); returns the sweeps (for the tables and the figures)."""
    rows = list(rows)
    modelled = S.sweeps(rows)
    if modelled:
        answer.add(sweep_section(modelled))
    if any(s.status == S.FITTED for s in modelled):
        answer.add(move_section(S.shifts(rows, modelled), S.unfitted_pairs(rows, modelled)))
    return modelled


def _num(v: float, kind: str) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "?"
    if math.isinf(v):
        return "∞"
    if kind == "rate":
        return f"{v:,.0f}"
    if kind == "kappa":
        return "0" if v == 0 else f"{v:.2e}"
    if kind == "threads":       # below one thread: the rate falls from the first
        return f"{v:,.0f}" if v >= 10 else (f"{v:.1f}" if v >= 1 else "<1")
    return f"{v:.3f}"


def _with_ci(v: float, ci: tuple[float, float], kind: str) -> str:
    return f"{_num(v, kind)} [{_num(ci[0], kind)}, {_num(ci[1], kind)}]"


def sweep_label(s: S.Sweep, varying: Iterable[str] = ()) -> str:
    """The sweep's dialog strategy, and its values of the axes ``varying`` (:func:`_varying`)."""
    return ", ".join([str(s.first.get("dialogs"))] + [f"{a}={s.first.get(a)}" for a in varying])


def _varying(modelled: list[S.Sweep], keys: Iterable[str] = S.OTHER_AXES) -> list[str]:
    """The axes of ``keys`` but the strategy whose values differ between the sweeps (the rows
    name the other axes; the notes, with ``SWEEP_KEYS``, the server, initiators and payload too)."""
    return [k for k in keys if k not in axis_names("strategy") and len({s.first.get(k) for s in modelled}) > 1]


def _threads_text(threads: tuple[int, ...]) -> str:
    if not threads:
        return "none"
    return f"{threads[0]}-{threads[-1]} ({len(threads)})" if len(threads) > 1 else str(threads[0])


def sweep_row(s: S.Sweep, varying: Iterable[str] = ()) -> dict[str, Any]:
    """A sweep's line (JSON-able): its keys, status, texts and the numbers behind them."""
    r: dict[str, Any] = {k: s.first.get(k) for k in S.SWEEP_KEYS}
    r.update(sweep=sweep_label(s, varying), threads_text=_threads_text(s.threads), thread_counts=list(s.threads),
             status=s.status, reason=s.reason or None)
    r.update(S.coefficients(s))
    r["fit_p"] = s.lack[3] if s.lack else None
    if s.status == S.FITTED:
        exp = (lambda c: (math.exp(c[0]), math.exp(c[1])))
        r["lambda_text"] = _with_ci(s.fit.lam, exp(s.ci["log_lam"]), "rate")
        r["sigma_text"] = _with_ci(s.fit.sigma, s.ci["sigma"], "sigma")
        r["kappa_text"] = _with_ci(s.fit.kappa, s.ci["kappa"], "kappa")
        r["peak_text"] = _peak_text(s)
        r["peak_rate_text"] = _with_ci(s.fit.peak_rate, exp(s.ci["log_peak_rate"]), "rate")
        r["beyond"] = s.fit.peak_threads > max(s.threads)
    r["fit_text"] = f"p {s.lack[3]:.2g}" if s.lack else ("not tested" if s.status == S.FITTED else None)
    return r


def _peak_text(s: S.Sweep) -> str:
    lo, hi = s.ci["peak"]
    if math.isinf(s.fit.peak_threads):
        return f"none [≥ {_num(lo, 'threads')}]"
    return _with_ci(s.fit.peak_threads, (lo, hi), "threads")


def sweep_section(modelled: list[S.Sweep]) -> Section:
    """The ``scaling`` section: a line per sweep, notes on reading it and on every sweep
    without coefficients."""
    varying = _varying(modelled)
    rows = [sweep_row(s, varying) for s in modelled]
    fitted = sum(1 for s in modelled if s.status == S.FITTED)
    columns = [c for c in COLUMNS if c.key != "run_id" or len({r["run_id"] for r in rows}) > 1]
    notes = [f"X(N) = λN / (1 + σ(N−1) + κN(N−1)), N the total client threads, fitted to the repetitions' receive "
             f"rates (log scale): λ the rate of one thread, σ contention (the rate levels off at λ/σ), κ coherency "
             f"(the rate peaks at N* = sqrt((1−σ)/κ), then falls; none: κ may be 0). Intervals: 95 % profile "
             f"likelihood; fit: the lack-of-fit test's p (below {S.FIT_ALPHA:g}: the law does not fit); "
             "docs/statistics.md, \"How far it scales\"."]
    said: dict[tuple[str, str], list[str]] = {}
    beyond = []
    names = [sweep_label(s, _varying(modelled, S.SWEEP_KEYS)) for s in modelled]
    for r, s, name in zip(rows, modelled, names):
        if s.status == S.FITTED and r.get("beyond"):
            beyond.append(f"{name} ({max(s.threads)})")
        if s.reason:      # sweeps with the same reason (bench.yaml's three strategies) in one note
            said.setdefault((s.status, s.reason), []).append(name)
    if beyond:
        notes.append(f"peak beyond the most threads measured, an extrapolation of the law (N* and its rate): "
                     f"{', '.join(beyond)}")
    notes += [f"{status}: {', '.join(names)}: {reason}" for (status, reason), names in said.items()]
    title = (f"How far it scales (Universal Scalability Law): {fitted} of {len(rows)} thread sweep"
             f"{'s' if len(rows) != 1 else ''} fitted")
    return Section(SCALING, title, columns, rows, notes)


def move_row(sh: S.Shift) -> dict[str, Any]:
    """A shift's line (JSON-able)."""
    t = sh.treatment.first
    r: dict[str, Any] = {"run_id": t.get("run_id"), "kind": sh.family, "comparison": sh.label,
                         "baseline": sh.baseline_value, "comparison_text": f"{sh.label} vs {sh.baseline_value}",
                         "context": sh.context, "server": t.get("server"), "initiators": t.get("initiators"),
                         "payload_bytes": t.get("payload_bytes"), "level": sh.level}
    for k, name in (("log_lam", "lambda"), ("sigma", "sigma"), ("kappa", "kappa")):
        d, lo, hi = sh.moves[k]
        spec, unit, key = ("+.2e" if k == "kappa" else "+.3f"), "", name
        if k == "log_lam":   # λ's change as a ratio, in percent
            d, lo, hi = (100 * (math.exp(x) - 1) for x in (d, lo, hi))
            spec, unit, key = "+.1f", " %", "lambda_pct"
        r.update({f"{key}_change": d, f"{key}_change_low": lo, f"{key}_change_high": hi})
        r[f"{name}_text"] = f"{d:{spec}}{unit} [{lo:{spec}}, {hi:{spec}}]"
    moved = sh.moved()
    r["moves"] = [{"log_lam": "lambda"}.get(k, k) for k in moved]
    r["moves_text"] = ", ".join(("raises " if sh.moves[k][0] > 0 else "lowers ") + SYMBOL[k] for k in moved) or (
        "none shown")
    return r


def move_section(found: list[S.Shift], unfitted: list[tuple[Any, S.Sweep]]) -> Section:
    """The ``scaling_moves`` section: a line per comparison seen across thread counts, and a
    note for each that has no line because a sweep has no coefficients."""
    rows = [move_row(sh) for sh in found]
    columns = [c for c in MOVE_COLUMNS if c.key != "run_id" or len({r["run_id"] for r in rows}) > 1]
    notes = []
    if rows:
        notes.append(f"change: the treatment's coefficient less the baseline's (λ: as a ratio), intervals at "
                     f"{100 * S.MOVE_LEVEL:.1f} % each (MOVER from the two sweeps' profile intervals), so that the "
                     "three together hold at 95 %: a coefficient whose interval excludes no change is one the "
                     "technique moves. docs/statistics.md, \"How far it scales\".")
    for p, s in unfitted:
        notes.append(f"{p.label} vs {p.baseline_value}: no change computed: the {s.first.get('dialogs')} sweep "
                     f"{'does not fit the law' if s.status == S.NO_FIT else 'has no model'}")
    title = (f"What each comparison moves across thread counts: {len(rows)} comparison{'s' if len(rows) != 1 else ''}"
             if rows else "What each comparison moves across thread counts: none (no compared pair of fitted sweeps)")
    return Section(MOVES, title, columns, rows, notes)
