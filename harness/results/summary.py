"""Build the summaries from plain data: pure functions, no I/O, no target, no Locust.

:func:`build_repetition_summary` turns what a repetition measured (the window, the exact
accounting, the client's recording, the collectors' contributions) into a
:class:`~harness.results.model.RepetitionSummary`; :func:`repetition_status` holds the status
precedence; :func:`summarize_permutation` and :func:`median` aggregate repetitions (the one
median over repetitions that ssbench's Python code uses).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from .histogram import Histogram
from .model import (ClientHost, InitiatorResult, WorkerResult, LatencySummary, Medians, PermutationSummary, RepetitionSummary,
                    TargetRef, TopWait, Window)


def median(values: Iterable[float | None]) -> float | None:
    """Median of the values that are not None (None when there are none)."""
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def repetition_status(*, lost: int, queue_disabled: bool, errors: int, users_active: int,
                      users_expected: int, client_bound: bool, noisy_host: bool = False,
                      undelivered: int = 0, behind: bool = False) -> str:
    """The first that applies: lost > undelivered > queue_disabled > errors > users_idle >
    behind > client_bound > noisy_host > ok."""
    if lost:
        return "lost"
    if undelivered:
        return "undelivered"
    if queue_disabled:
        return "queue_disabled"
    if errors:
        return "errors"
    if users_active < users_expected:
        return "users_idle"
    if behind:
        return "behind"
    if client_bound:
        return "client_bound"
    if noisy_host:
        return "noisy_host"
    return "ok"


@dataclass
class InitiatorAccount:
    """Exact accounting of one initiator after the drain (the target's own counts)."""

    initiator: int
    sent: int
    received: int
    xmitq: int = 0


@dataclass
class Accounting:
    initiators: list[InitiatorAccount]
    poison_messages: int = 0      # received into the error table: not lost
    queue_disabled: bool = False
    in_flight: int = 0            # still queued (transmission queues + target queue)

    @property
    def sent(self) -> int:
        return sum(c.sent for c in self.initiators)

    @property
    def received(self) -> int:
        return sum(c.received for c in self.initiators)


@dataclass
class ClientRecord:
    """What the Locust users recorded, cut to the measured window (harness.load.window)."""

    window_start: float            # bucket-aligned window actually measured, epoch seconds
    window_end: float
    send_latency: Histogram        # SENDs completed in the window
    sends_total: int = 0           # successful SENDs over the whole swarm
    errors_total: int = 0
    error_samples: list[str] = field(default_factory=list)
    users_spawned: int = 0
    users_active: int = 0
    #: open loop: SENDs completed in the window, latency from their intended time
    send_latency_corrected: Histogram | None = None
    #: per worker process (harness.load.window.WindowData.workers)
    workers: list[dict] = field(default_factory=list)
    #: a ``priority`` axis: SENDs completed in the window per dialog priority (high, normal)
    send_latency_by_priority: dict[str, Histogram] = field(default_factory=dict)
    #: SENDs still running when the users were stopped (see RepetitionSummary)
    sends_cut_at_stop: int = 0


@dataclass
class RepetitionData:
    run_id: str
    permutation: dict[str, Any]
    repetition: int
    target: TargetRef
    warmup_seconds: float
    spawn_complete: float | None
    dialogs_created: int
    usable_dialogs: int
    users_expected: int
    accounting: Accounting
    client: ClientRecord
    e2e_latency: Histogram
    #: a ``priority`` axis: end-to-end latency per dialog priority (high, normal) where the
    #: target records it (the SQL Server target)
    e2e_latency_by_priority: dict[str, Histogram] = field(default_factory=dict)
    #: fields the collectors contribute (Collector.summary_fields), merged into the summary
    collected: dict[str, Any] = field(default_factory=dict)
    collector_errors: list[str] = field(default_factory=list)
    web: dict[str, Any] | None = None
    #: open loop: offered SENDs per second over all initiators (None: closed loop), and the
    #: shortfall of the achieved rate beyond which the repetition is ``behind``
    offered_rate: float | None = None
    rate_tolerance: float = 0.05
    #: a worker process at or above this CPU (percent of one core) is client-bound
    client_bound_cpu: float = 90.0


def _mean(values: list[float]) -> float | None:
    return round(statistics.fmean(values), 2) if values else None


def worker_results(workers: list[dict], start: float, end: float,
                   bound_cpu: float) -> tuple[list[WorkerResult], list[ClientHost]]:
    """Per worker process and per client host, over [start, end), from the workers' own
    probes (samples [ts, process CPU, host CPU, host memory percent, host memory used])."""
    out, hosts = [], {}
    for w in sorted(workers, key=lambda w: (w["initiator"], w["worker"])):
        inside = [s for s in w.get("samples", []) if start <= s[0] < end]
        cpu = _mean([s[1] for s in inside])
        out.append(WorkerResult(initiator=w["initiator"], worker=w["worker"], host=w.get("host", ""),
                                users=w.get("users", 0), users_active=w.get("users_active", 0),
                                sends=w.get("sends", 0), errors=w.get("errors", 0), cpu_percent=cpu,
                                client_bound=cpu is not None and cpu >= bound_cpu))
        h = hosts.setdefault(w.get("host", ""), {"n": 0, "ts": {}})
        h["n"] += 1
        for s in inside:   # one host, several workers: each tick once per worker, same figures
            h["ts"].setdefault(round(s[0]), s)
    client_hosts = [ClientHost(host=name, workers=h["n"], cpu_percent=_mean([s[2] for s in h["ts"].values()]),
                               memory_percent=_mean([s[3] for s in h["ts"].values()]),
                               memory_used_bytes=max((s[4] for s in h["ts"].values()), default=None))
                    for name, h in sorted(hosts.items())]
    return out, client_hosts


def is_behind(offered_rate: float | None, achieved_rate: float, tolerance: float = 0.05) -> bool:
    """Open loop: did the achieved rate fall short of the offered one by more than ``tolerance``?"""
    return bool(offered_rate) and achieved_rate < offered_rate * (1.0 - tolerance)


def latency_summary(h: Histogram) -> LatencySummary:
    return LatencySummary(**h.summary_ms())


def build_repetition_summary(d: RepetitionData) -> RepetitionSummary:
    c, a = d.client, d.accounting
    seconds = max(c.window_end - c.window_start, 1e-9)
    per_init = [InitiatorResult(initiator=i.initiator, sent=i.sent, received=i.received,
                                lost=max(0, i.sent - i.received - i.xmitq), xmitq_left=i.xmitq)
                for i in a.initiators]
    # a poison message is received into the error table, not lost; a message still queued when
    # the drain timed out is undelivered (it is there, and will be delivered), not lost
    lost = max(0, a.sent - a.received - a.poison_messages - a.in_flight)
    undelivered = min(a.in_flight, max(0, a.sent - a.received - a.poison_messages))
    col = dict(d.collected)
    top_waits = [w if isinstance(w, TopWait) else TopWait(**w) for w in col.pop("top_waits", [])]
    workers, client_hosts = worker_results(c.workers, c.window_start, c.window_end, d.client_bound_cpu)
    # judged per process: the host collector's view of local workers, or a worker's own probe
    client_bound = bool(col.pop("client_bound", False)) or any(w.client_bound for w in workers)
    noisy_host = bool(col.pop("noisy_host", False))
    send_rate = round(c.send_latency.count / seconds, 3)
    if d.offered_rate:
        col.update(offered_rate=round(d.offered_rate, 3), achieved_rate=send_rate)
        if c.send_latency_corrected is not None:
            col["send_latency_corrected_ms"] = latency_summary(c.send_latency_corrected)
    for prio in ("high", "normal"):
        if prio in c.send_latency_by_priority:
            col[f"send_latency_{prio}_ms"] = latency_summary(c.send_latency_by_priority[prio])
        if prio in d.e2e_latency_by_priority:
            col[f"e2e_latency_{prio}_ms"] = latency_summary(d.e2e_latency_by_priority[prio])
    # open loop: a user has slots in the window only if the schedule reaches it (at a low rate
    # and many users, some users have none: idle by design, not stuck)
    users_due = min(d.users_expected, int(d.offered_rate * seconds)) if d.offered_rate else d.users_expected
    status = repetition_status(lost=lost, queue_disabled=a.queue_disabled, errors=c.errors_total,
                               users_active=c.users_active, users_expected=users_due,
                               client_bound=client_bound, noisy_host=noisy_host, undelivered=undelivered,
                               behind=is_behind(d.offered_rate, send_rate, d.rate_tolerance))
    return RepetitionSummary(
        run_id=d.run_id, permutation_id=d.permutation["id"], repetition=d.repetition,
        permutation=d.permutation, target=d.target,
        window=Window(warmup_seconds=d.warmup_seconds, measure_seconds=round(seconds, 3),
                      measure_start=c.window_start, measure_end=c.window_end,
                      spawn_complete=d.spawn_complete),
        dialogs_created=d.dialogs_created, usable_dialogs=d.usable_dialogs,
        messages_sent=a.sent, messages_sent_client=c.sends_total, messages_received=a.received,
        messages_lost=lost, drained=a.in_flight == 0, per_initiator=per_init,
        messages_sent_client_cut=c.sends_cut_at_stop or None,
        send_rate=send_rate,
        receive_rate=round(d.e2e_latency.count / seconds, 3),
        send_latency_ms=latency_summary(c.send_latency), e2e_latency_ms=latency_summary(d.e2e_latency),
        top_waits=top_waits, client_bound=client_bound, noisy_host=noisy_host,
        workers=workers, client_hosts=client_hosts,
        users_expected=d.users_expected, users_spawned=c.users_spawned, users_active=c.users_active,
        errors=c.errors_total, error_samples=list(c.error_samples[:10]),
        collector_errors=list(d.collector_errors[:10]),
        poison_messages=a.poison_messages, queue_disabled=a.queue_disabled,
        messages_undelivered=undelivered, status=status,
        web=d.web, **col)


def summarize_permutation(permutation: dict[str, Any],
                          reps: Sequence[RepetitionSummary]) -> PermutationSummary:
    reps = sorted(reps, key=lambda r: r.repetition)
    return PermutationSummary(
        permutation=permutation, repetitions=[r.repetition for r in reps],
        median=Medians(send_rate=median(r.send_rate for r in reps),
                       receive_rate=median(r.receive_rate for r in reps),
                       send_p50_ms=median(r.send_latency_ms.p50 for r in reps),
                       send_p99_ms=median(r.send_latency_ms.p99 for r in reps),
                       e2e_p99_ms=median(r.e2e_latency_ms.p99 for r in reps),
                       offered_rate=median(r.offered_rate for r in reps),
                       achieved_rate=median(r.achieved_rate for r in reps),
                       send_corrected_p50_ms=median(r.send_latency_corrected_ms.p50 for r in reps
                                                    if r.send_latency_corrected_ms is not None),
                       send_corrected_p99_ms=median(r.send_latency_corrected_ms.p99 for r in reps
                                                    if r.send_latency_corrected_ms is not None),
                       drain_seconds=median(r.drain_seconds for r in reps),
                       drain_rate=median(r.drain_rate for r in reps)),
        messages_lost=sum(r.messages_lost for r in reps), errors=sum(r.errors for r in reps),
        behind=sum(r.status == "behind" for r in reps) if any(r.offered_rate for r in reps) else None)
