"""Saturation search: the highest offered rate each permutation sustains (``ssbench saturate``).

For every permutation of a matrix (its ``rate`` axis aside) the search runs open-loop probes,
one :class:`harness.repetition.Repetition` each, at rising offered rates (``start_rate`` times
``factor`` until a probe is not sustained), then bisects between the last sustained and the
first unsustained rate until they are within ``precision`` (or the probe budget is spent). A
probe is sustained when the SENDs kept up with the offered rate within ``run.rate_tolerance``
with no failure, loss or disabled queue; no queue grew through the window (messages sent minus
processed in it, both exact, under ``growth_tolerance`` times the offered rate; the sampled
depths' slope is evidence only); the drain finished; and, with an SLO, the end-to-end p99 is at
or under ``slo_p99_ms`` (docs/saturate.md). Rates are per initiator. The probes are ordinary
repetitions of an ordinary run directory (``<perm id>-rate<r>/rep-01/``), and the search is
written to ``saturation.json`` beside them.
"""

from __future__ import annotations

import json
import logging
import statistics
import threading
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from .matrix import MAX_RATE, Matrix, Permutation
from .repetition import Interrupted, RepetitionFailed, Repetitions
from .results import DISTURBED_STATUSES, RepetitionSummary, RunDir, write_json

log = logging.getLogger(__name__)

SATURATION_SCHEMA = "ssbench.saturation/1"
#: below this many messages of growth over the window a queue is not "growing" (sampling noise
#: of the approximate depth counts)
MIN_GROWTH_MESSAGES = 20
#: statuses that say nothing about the rate (the host, not the system, was the problem)
NEUTRAL_STATUSES = ("ok", "client_bound", "noisy_host", "noisy_storage")
#: a probe the host disturbed (DISTURBED_STATUSES: a frozen server, a receive stall, a noisy
#: disk) is run again at its rate, this many times at most, before it is judged
DISTURBED_RETRIES = 2


@dataclass(frozen=True)
class SearchSettings:
    start_rate: float = 50.0          # first probe, SENDs/s per initiator
    factor: float = 2.0               # step-up factor until a probe is not sustained
    precision: float = 0.1            # bisection stops when (hi - lo) <= precision * lo
    max_probes: int = 12              # per permutation
    min_rate: float = 1.0             # stepping down below this gives up
    max_rate: float = MAX_RATE
    slo_p99_ms: float | None = None   # end-to-end p99 limit
    growth_tolerance: float = 0.05    # queue growth per second, as a fraction of the offered rate


@dataclass
class Probe:
    rate: float                       # offered SENDs/s per initiator
    offered_rate: float               # all initiators
    sustained: bool
    reasons: list[str] = field(default_factory=list)   # why not (empty when sustained)
    achieved_rate: float | None = None
    status: str | None = None
    send_p99_ms: float | None = None
    send_corrected_p99_ms: float | None = None
    e2e_p99_ms: float | None = None
    queue_growth_per_s: float | None = None     # exact: send rate - receive rate in the window
    depth_slope_per_s: float | None = None      # sampled (approximate) total queue depth's slope
    max_xmitq_depth: float | None = None
    max_queue_depth: float | None = None
    permutation_id: str = ""
    repetition: int = 1               # the probe's rep-NN (a disturbed probe's re-run is the next)


@dataclass
class SearchResult:
    sustainable_rate: float | None    # per initiator; None: not even the lowest probe held
    first_unsustained_rate: float | None   # None: max_rate (or the budget) reached first
    probes: list[Probe]
    converged: bool                   # within precision (False: the probe budget ran out)


# --------------------------------------------------------------------------- judging one probe

def depth_slope_per_s(samples: list[dict[str, Any]]) -> float | None:
    """Slope (messages per second) of the total queue depth (every transmission queue and the
    target queue) over the measured window's ``queues`` samples; None with fewer than 3 ticks."""
    ticks: dict[float, float] = {}
    for s in samples:
        if s.get("family") == "queues" and s.get("metric") == "depth" and s.get("phase") == "measure":
            ticks[s["ts"]] = ticks.get(s["ts"], 0.0) + float(s["value"])
    if len(ticks) < 3:
        return None
    ts = sorted(ticks)
    return statistics.linear_regression(ts, [ticks[t] for t in ts]).slope


def judge(summary: RepetitionSummary, samples: list[dict[str, Any]], settings: SearchSettings,
          rate: float) -> Probe:
    """Was the offered rate sustained? The probe with its evidence and, if not, the reasons."""
    offered = summary.offered_rate or rate * int(summary.permutation.get("initiators", 1))
    reasons = []
    if summary.behind:   # also under a more severe status (noisy_storage)
        reasons.append(f"achieved {summary.achieved_rate:g} of {offered:g} SENDs/s offered")
    elif summary.status not in NEUTRAL_STATUSES:
        reasons.append(f"status {summary.status}")
    growth = summary.send_rate - summary.receive_rate
    slope = depth_slope_per_s(samples)
    window = summary.window.measure_seconds
    if growth > settings.growth_tolerance * offered and growth * window > MIN_GROWTH_MESSAGES:
        reasons.append(f"queues grew {growth:.1f} msg/s through the window")
    e2e = summary.e2e_latency_ms.p99
    if settings.slo_p99_ms is not None and (e2e is None or e2e > settings.slo_p99_ms):
        reasons.append(f"end-to-end p99 {e2e if e2e is not None else float('nan'):.1f} ms over the "
                       f"{settings.slo_p99_ms:g} ms limit")
    corrected = summary.send_latency_corrected_ms
    return Probe(rate=rate, offered_rate=offered, sustained=not reasons, reasons=reasons,
                 achieved_rate=summary.achieved_rate, status=summary.status,
                 send_p99_ms=summary.send_latency_ms.p99,
                 send_corrected_p99_ms=corrected.p99 if corrected is not None else None,
                 e2e_p99_ms=e2e, queue_growth_per_s=round(growth, 3),
                 depth_slope_per_s=None if slope is None else round(slope, 3),
                 max_xmitq_depth=summary.max_xmitq_depth, max_queue_depth=summary.max_queue_depth,
                 permutation_id=summary.permutation_id)


# --------------------------------------------------------------------------- the search

def _round(r: float) -> float:
    """Three significant digits: readable rates and permutation ids."""
    return float(f"{r:.3g}")


def search(probe: Callable[[float], Probe], s: SearchSettings) -> SearchResult:
    """Steps up from ``s.start_rate`` by ``s.factor`` until a probe is not sustained (stepping
    down instead when the first one is not), then bisects; a disturbed probe is run again
    (:data:`DISTURBED_RETRIES`). Pure: ``probe(rate)`` does the work."""
    probes: list[Probe] = []

    def run(r: float) -> bool:
        for _ in range(1 + DISTURBED_RETRIES):
            p = probe(r)
            probes.append(p)
            if p.status not in DISTURBED_STATUSES or len(probes) >= s.max_probes:
                break
        return p.sustained

    lo: float | None = None
    hi: float | None = None
    r = _round(min(s.start_rate, s.max_rate))
    while len(probes) < s.max_probes:
        if not run(r):
            hi = r
            break
        lo = r
        if r >= s.max_rate:
            break
        r = _round(min(r * s.factor, s.max_rate))
    if lo is None and hi is not None:
        r = _round(hi / s.factor)
        while len(probes) < s.max_probes and r >= s.min_rate:
            if run(r):
                lo = r
                break
            hi = r
            r = _round(r / s.factor)
    while lo is not None and hi is not None and len(probes) < s.max_probes and hi - lo > s.precision * lo:
        mid = _round((lo + hi) / 2)
        if mid in (lo, hi):
            break
        if run(mid):
            lo = mid
        else:
            hi = mid
    converged = lo is not None and (hi is None and lo >= s.max_rate or hi is not None and
                                    (hi - lo <= s.precision * lo or _round((lo + hi) / 2) in (lo, hi)))
    return SearchResult(sustainable_rate=lo, first_unsustained_rate=hi, probes=probes, converged=converged)


# --------------------------------------------------------------------------- over a matrix

def base_permutations(matrix: Matrix) -> list[Permutation]:
    """The matrix's permutations with the rate axis taken out (one per other combination)."""
    seen: dict[str, Permutation] = {}
    for p in matrix.permutations():
        base = replace(p, rate=None)
        seen.setdefault(base.id, base)
    return list(seen.values())


class Saturation(Repetitions):
    """Run the search for every permutation of ``matrix`` on ``target`` into ``run_dir``."""

    def __init__(self, matrix: Matrix, target, run_dir: RunDir, settings: SearchSettings, *,
                 stop_event: threading.Event | None = None, say: Callable[[str], None] = lambda text: None,
                 remote=None, metrics=None):
        super().__init__(matrix, target, run_dir, stop_event=stop_event, remote=remote, metrics=metrics)
        self.settings = settings
        self.say = say
        self.results: list[dict[str, Any]] = []
        self._reps: dict[str, int] = {}      # permutation id -> repetitions run (a re-run is the next)

    def probe(self, base: Permutation, rate: float) -> Probe:
        if self.stop_event.is_set():
            raise Interrupted()
        perm = replace(base, rate=rate)
        rep = self._reps[perm.id] = self._reps.get(perm.id, 0) + 1
        try:
            [summary] = self.repetition(perm, rep).run()
        except RepetitionFailed as e:
            p = Probe(rate=rate, offered_rate=rate * perm.initiators, sustained=False,
                      reasons=[f"repetition failed: {str(e).splitlines()[0]}"], permutation_id=perm.id,
                      repetition=rep)
        else:
            samples_path = self.run_dir.rep_dir(perm.id, rep) / "samples.jsonl"
            samples = [json.loads(line) for line in samples_path.read_text().splitlines() if line.strip()]
            p = replace(judge(summary, samples, self.settings, rate), repetition=rep)
        verdict = "sustained" if p.sustained else "NOT sustained: " + "; ".join(p.reasons)
        self.say(f"{base.id}: {rate:g} SENDs/s per initiator: achieved "
                 f"{p.achieved_rate if p.achieved_rate is not None else float('nan'):g}/s, "
                 f"e2e p99 {p.e2e_p99_ms if p.e2e_p99_ms is not None else float('nan'):.1f} ms: {verdict}")
        return p

    def run(self) -> list[dict[str, Any]]:
        try:
            for base in base_permutations(self.matrix):
                res = search(lambda r, b=base: self.probe(b, r), self.settings)
                self.results.append(permutation_result(base, res))
                self.write()
        finally:
            self.close()
        return self.results

    def document(self) -> dict[str, Any]:
        return {"schema": SATURATION_SCHEMA, "run_id": self.run_dir.run_id, "matrix": self.matrix.name,
                "target": {"kind": self.target.kind, "label": self.target.label},
                "settings": asdict(self.settings), "rate_tolerance": self.matrix.run.rate_tolerance,
                "permutations": self.results}

    def write(self) -> Path:
        return write_json(self.run_dir.path / "saturation.json", self.document())


def permutation_result(base: Permutation, res: SearchResult) -> dict[str, Any]:
    best = next((p for p in reversed(res.probes) if p.sustained and p.rate == res.sustainable_rate), None)
    first_bad = next((p for p in reversed(res.probes) if not p.sustained and p.rate == res.first_unsustained_rate),
                     None)
    n = base.initiators
    return {"permutation": base.values(),
            "sustainable_rate": res.sustainable_rate,
            "sustainable_offered_rate": None if res.sustainable_rate is None else res.sustainable_rate * n,
            "first_unsustained_rate": res.first_unsustained_rate,
            "converged": res.converged,
            "evidence": asdict(best) if best else None,
            "limit": asdict(first_bad) if first_bad else None,
            "probes": [asdict(p) for p in res.probes]}


def format_table(results: list[dict[str, Any]]) -> str:
    """One line per permutation: the highest sustained rate and what stopped the next one."""
    lines = [f"{'permutation':<36} {'rate/init':>9} {'total/s':>9} {'achieved':>9} {'e2e p99 ms':>10} "
             f"{'probes':>6}  limit"]
    nan = float("nan")
    for r in results:
        ev, lim = r["evidence"] or {}, r["limit"] or {}
        rate = r["sustainable_rate"]
        why = (f"{r['first_unsustained_rate']:g}/s: " + "; ".join(lim.get("reasons", []))) if lim else \
            ("max rate reached" if rate is not None else "-")
        lines.append(f"{r['permutation']['id']:<36} {rate if rate is not None else nan:>9g} "
                     f"{r['sustainable_offered_rate'] if rate is not None else nan:>9g} "
                     f"{ev.get('achieved_rate') if ev.get('achieved_rate') is not None else nan:>9g} "
                     f"{ev.get('e2e_p99_ms') if ev.get('e2e_p99_ms') is not None else nan:>10.2f} "
                     f"{len(r['probes']):>6}  {why}{'' if r['converged'] else ' (not converged)'}")
    return "\n".join(lines)
