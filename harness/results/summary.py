"""Build the summaries from plain data: pure functions, no I/O, no target, no Locust.

:func:`build_repetition_summary` turns a repetition's measurements into a
:class:`~harness.results.model.RepetitionSummary`; :func:`repetition_status` holds the status
precedence; :func:`summarize_permutation` and :func:`median` aggregate repetitions.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from .histogram import Histogram
from .fields import FIELDS, STATUSES
from .model import PermutationSummary, RepetitionSummary
from .records import Alternation, ClientHost, InitiatorResult, LatencySummary, TargetRef, TopWait, WorkerResult


def host_cpu_speed(summaries: Iterable[Any]) -> dict[str, Any] | None:
    """How far the host's CPU speed (harness.collectors.cpuspeed) moved across a run's windows:
    the lowest and highest ``cpu_speed`` and the log-normal s.d. in percent; None with fewer
    than 2 windows measured."""
    speeds = [float(s.get("cpu_speed")) for s in summaries if s.get("cpu_speed")]
    if len(speeds) < 2:
        return None
    logs = [math.log(v) for v in speeds]
    mean = sum(logs) / len(logs)
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))
    return {"windows": len(speeds), "min": round(min(speeds), 3), "max": round(max(speeds), 3),
            "sd_pct": round(100.0 * (math.exp(sd) - 1.0), 1)}


def host_cross_cpu(summaries: Iterable[Any]) -> dict[str, Any] | None:
    """How far the host's cross-CPU latency (harness.collectors.crosscpu) moved across a run's
    windows: the lowest and highest ``cross_cpu_ns`` (an alternated window's members share
    one figure, counted once); None with fewer than 2 windows measured."""
    seen: dict[Any, float] = {}
    for s in summaries:
        ns = s.get("cross_cpu_ns")
        if ns:
            start = s.get("measure_start")
            seen[start if start is not None else id(s)] = float(ns)
    if len(seen) < 2:
        return None
    return {"windows": len(seen), "min_ns": round(min(seen.values()), 1), "max_ns": round(max(seen.values()), 1)}


def number(v: Any) -> float | None:
    """A row's value as a float when it is a number (not a bool), else None."""
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def median(values: Iterable[float | None]) -> float | None:
    """Median of the values that are not None (None when there are none)."""
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


#: a Locust worker is one Python process: at or above this CPU (percent of one core), the
#: client is the bottleneck (client-bound: the host collector, the summary, the diagnosis)
CLIENT_BOUND_CPU = 90.0
#: a frozen target: no collector tick for this many seconds beyond the usual interval
FREEZE_S = 2.0
#: a receive stall: nothing received for this many seconds (certain: from the first tick that
#: saw the count to the last that saw it unchanged) while SENDs went on and readers ran; with
#: the default 1 s ticks, three ticks in a row (two intervals, less their jitter)
RECEIVE_STALL_S = 1.5
#: ... or the window's receive rate below this share of its send rate while the queues grew
RECEIVE_BEHIND_RATIO = 0.5


def progress_flags(*, freeze_seconds: float | None, receive_stall_seconds: float | None,
                   receive_rate: float, send_rate: float, queue_growth: float | None,
                   offered_rate: float | None = None, receiving: bool = True) -> dict[str, Any]:
    """The target's progress over the window (figures from harness.collectors.stalls):
    ``server_frozen`` (no collector tick for FREEZE_S beyond the usual interval) and
    ``receive_stalled`` (nothing received for RECEIVE_STALL_S while SENDs went on and readers
    ran, or, in closed loop, receive below RECEIVE_BEHIND_RATIO of send while the queues grew),
    with ``receive_send_ratio``. ``receiving`` False: the window receives nothing by design
    (a backlog fill with activation off), so falling behind is not judged. The thresholds'
    error rates: tests/collectors/test_stalls.py and docs/results.md."""
    ratio = round(receive_rate / send_rate, 4) if send_rate > 0 else None
    behind = (receiving and not offered_rate and ratio is not None and ratio < RECEIVE_BEHIND_RATIO
              and (queue_growth or 0) > 0)
    return {"server_frozen": (freeze_seconds or 0.0) >= FREEZE_S,
            "receive_stalled": (receive_stall_seconds or 0.0) >= RECEIVE_STALL_S or behind,
            "receive_send_ratio": ratio}


def disturbance(s: Any) -> str | None:
    """Why a repetition is disturbed (or its host noisy), with its figure, in one line; None
    when it is neither. ``s``: a RepetitionSummary or a mapping with its
    fields (a flat row: harness.results.fields.flat_row)."""
    get = s.get

    def num(name, fmt="{:.1f}"):
        v = get(name)
        return fmt.format(v) if v is not None else "?"

    status = get("status")
    if status == "server_frozen":
        return f"server frozen: no collector sample for {num('freeze_seconds')} s beyond the interval"
    if status == "receive_stalled":
        growth = get("queue_growth")
        return (f"receive stalled: nothing received for {num('receive_stall_seconds')} s while SENDs went on; "
                f"receive/send {num('receive_send_ratio', '{:.2f}')}"
                + (f", queues {growth:+,.0f} messages" if growth is not None else ""))
    if status == "noisy_host":
        if get("slow_cpu"):
            return (f"noisy host: its CPU ran at {100 * get('cpu_speed'):.0f}% of the run's typical speed "
                    f"(cpu probe {num('cpu_probe_ms', '{:.2f}')} ms against {num('cpu_reference_ms', '{:.2f}')} ms)")
        return (f"noisy host: other processes took {num('other_cpu_percent', '{:.0f}')}% of a core, "
                f"steal {num('steal_percent')}%")
    if status == "noisy_storage":
        return (f"noisy storage: fsync probe {num('storage_probe_ms', '{:.2f}')} ms against a typical "
                f"{num('storage_reference_ms', '{:.2f}')} ms"
                + (f", other processes wrote {get('other_write_mib_s'):,.1f} MiB/s"
                   if get("other_write_mib_s") is not None else ""))
    return None


def repetition_status(*, lost: int, queue_disabled: bool, duplicated: int = 0, errors: int, users_active: int,
                      users_expected: int, client_bound: bool, noisy_host: bool = False,
                      undelivered: int = 0, behind: bool = False, server_frozen: bool = False,
                      receive_stalled: bool = False, noisy_storage: bool = False) -> str:
    """The first of :data:`~harness.results.fields.STATUSES` that applies, in its order (the
    disturbed ones come before behind, noisy_host and client_bound, which count in verdicts, so a
    disturbed window is never counted as merely behind, noisy or client-bound; its ``behind`` flag
    still says whether it fell behind)."""
    applies = dict(lost=lost, duplicated=duplicated, undelivered=undelivered, queue_disabled=queue_disabled,
                   server_frozen=server_frozen, errors=errors, users_idle=users_active < users_expected,
                   receive_stalled=receive_stalled, noisy_storage=noisy_storage, behind=behind,
                   noisy_host=noisy_host, client_bound=client_bound)
    return next(s for s in STATUSES if s == "ok" or applies[s])


@dataclass
class InitiatorAccount:
    """One initiator's data messages after the drain, as the target counts them. A message
    counts once however often it was tallied: ``received`` is distinct messages, and the tallies
    beyond a message's first are ``duplicates``, so a duplicate never stands in for a loss.
    ``phantoms``: messages the target holds under a (dialog, sequence number) their dialog never
    sent, so a phantom never stands in for a loss either (a gap with the totals matching)."""

    initiator: int
    sent: int
    received: int                 # distinct messages processed
    xmitq: int = 0                # still in its transmission queue
    queued: int = 0               # delivered to the target queue, not yet received
    poison: int = 0               # in the target's error table and never received
    duplicates: int = 0           # tallies beyond a message's first
    phantoms: int = 0             # received, poison or queued, and never sent

    @property
    def in_flight(self) -> int:
        return self.xmitq + self.queued

    @property
    def accounted(self) -> int:
        """Messages sent that are received, poison or still queued: every message the target
        holds, less those never sent."""
        return self.received + self.poison + self.in_flight - self.phantoms

    @property
    def lost(self) -> int:
        """Sent and neither received, nor poison (received into the error table), nor still
        queued (undelivered: it is there and will be delivered): per dialog, the sequence
        numbers sent that are found nowhere."""
        return max(0, self.sent - self.accounted)

    @property
    def undelivered(self) -> int:
        return min(self.in_flight, max(0, self.sent - self.accounted + self.in_flight))


@dataclass
class Accounting:
    """Exact accounting of a repetition after the drain (:meth:`harness.targets.base.Target.counts`):
    per initiator, so the initiators' figures always sum to the totals."""

    initiators: list[InitiatorAccount]
    queue_disabled: bool = False

    def _sum(self, name: str) -> int:
        return sum(getattr(c, name) for c in self.initiators)

    sent = property(lambda self: self._sum("sent"))
    received = property(lambda self: self._sum("received"))
    poison = property(lambda self: self._sum("poison"))
    duplicates = property(lambda self: self._sum("duplicates"))
    phantoms = property(lambda self: self._sum("phantoms"))
    in_flight = property(lambda self: self._sum("in_flight"))
    lost = property(lambda self: self._sum("lost"))
    undelivered = property(lambda self: self._sum("undelivered"))
    target_queue = property(lambda self: self._sum("queued"))

    @property
    def settled(self) -> bool:
        """Queues empty and every message sent accounted for: processed, or in the error table
        (a poison message is received and logged, not lost)."""
        return self.in_flight == 0 and self._sum("accounted") >= self.sent


@dataclass
class ClientRecord:
    """What the Locust users recorded, cut to the measured window
    (:func:`harness.load.window.merge_workers` builds it)."""

    start: float                 # the window actually covered (bucket-aligned), epoch seconds
    end: float
    latency: Histogram = field(default_factory=Histogram)   # SENDs completed in the window
    sends_total: int = 0         # successful SENDs over the whole swarm (warm-up included)
    errors_total: int = 0
    error_samples: list[str] = field(default_factory=list)
    users_spawned: int = 0       # Locust users that registered (ran on_start)
    users_active: int = 0        # users that completed SENDs before and up to the window's end
    #: open loop: the window's SENDs' latency from their intended time (None: closed loop)
    latency_corrected: Histogram | None = None
    #: one entry per worker process: initiator, worker, host, users, users_active, sends and
    #: errors in the window, and its probe's samples [ts, process CPU, host CPU, host memory
    #: percent, host memory used] (harness.load.worker.HostProbe)
    workers: list[dict] = field(default_factory=list)
    #: a ``priority`` axis: the window's SENDs' latency per dialog priority (high, normal)
    latency_by_priority: dict[str, Histogram] = field(default_factory=dict)
    #: SENDs still running when a worker stopped its users (harness.load.recorder.cut_at_stop)
    sends_cut_at_stop: int = 0
    #: SENDs that started inside the window and completed after it, slower than the recorder's
    #: SLOW_SEND_S (a frozen server): in the reported SEND latency, not in the send rate
    latency_in_flight: Histogram = field(default_factory=Histogram)
    #: an alternated window's member: the seconds of its own slices (None: the whole window)
    member_seconds: float | None = None

    @property
    def seconds(self) -> float:
        if self.member_seconds is not None:
            return self.member_seconds
        return max(self.end - self.start, 0.0)

    @property
    def count(self) -> int:
        return self.latency.count

    @property
    def rate(self) -> float:
        return self.count / self.seconds if self.seconds > 0 else 0.0

    @property
    def send_latency(self) -> Histogram:
        """The reported SEND latency: the SENDs completed in the window and those in flight
        across its end."""
        return Histogram().merge(self.latency).merge(self.latency_in_flight)


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
    #: False where the window receives nothing by design (a backlog fill, activation off)
    receiving: bool = True
    #: an alternated window (run.alternate): its members, slice and this member's index
    alternation: Alternation | None = None


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
    seconds = max(c.seconds, 1e-9)
    per_init = [InitiatorResult(initiator=i.initiator, sent=i.sent, received=i.received, lost=i.lost,
                                xmitq_left=i.xmitq, queued=i.queued, poison=i.poison, duplicates=i.duplicates,
                                phantoms=i.phantoms)
                for i in a.initiators]
    lost, undelivered = a.lost, a.undelivered
    col = dict(d.collected)
    top_waits = [w if isinstance(w, TopWait) else TopWait(**w) for w in col.pop("top_waits", [])]
    workers, client_hosts = worker_results(c.workers, c.start, c.end, CLIENT_BOUND_CPU)
    # judged per process: the host collector's view of local workers, or a worker's own probe
    client_bound = bool(col.pop("client_bound", False)) or any(w.client_bound for w in workers)
    # the host's CPU slower than the run's typical (harness.collectors.cpuspeed) is host noise too
    noisy_host = bool(col.pop("noisy_host", False)) or bool(col.get("slow_cpu"))
    noisy_storage = bool(col.pop("noisy_storage", False))
    send_rate = round(c.count / seconds, 3)
    receive_rate = round(d.e2e_latency.count / seconds, 3)
    progress = progress_flags(freeze_seconds=col.get("freeze_seconds"),
                              receive_stall_seconds=col.get("receive_stall_seconds"),
                              receive_rate=receive_rate, send_rate=send_rate,
                              queue_growth=col.get("queue_growth"), offered_rate=d.offered_rate,
                              receiving=d.receiving)
    col.update(progress)
    if c.latency_in_flight.count:
        col["sends_in_flight_at_end"] = c.latency_in_flight.count
    if d.offered_rate:
        behind = is_behind(d.offered_rate, send_rate, d.rate_tolerance)
        col.update(offered_rate=round(d.offered_rate, 3), achieved_rate=send_rate, behind=behind)
        if c.latency_corrected is not None:
            col["send_latency_corrected_ms"] = latency_summary(c.latency_corrected)
    for prio in ("high", "normal"):
        if prio in c.latency_by_priority:
            col[f"send_latency_{prio}_ms"] = latency_summary(c.latency_by_priority[prio])
        if prio in d.e2e_latency_by_priority:
            col[f"e2e_latency_{prio}_ms"] = latency_summary(d.e2e_latency_by_priority[prio])
    # open loop: a user has slots in the window only if the schedule reaches it (at a low rate
    # and many users, some users have none: idle by design, not stuck)
    users_due = min(d.users_expected, int(d.offered_rate * seconds)) if d.offered_rate else d.users_expected
    status = repetition_status(lost=lost, duplicated=a.duplicates + a.phantoms, queue_disabled=a.queue_disabled, errors=c.errors_total,
                               users_active=c.users_active, users_expected=users_due,
                               client_bound=client_bound, noisy_host=noisy_host, undelivered=undelivered,
                               behind=bool(col.get("behind")),
                               server_frozen=progress["server_frozen"], receive_stalled=progress["receive_stalled"],
                               noisy_storage=noisy_storage)
    return RepetitionSummary.of(
        run_id=d.run_id, permutation_id=d.permutation["id"], repetition=d.repetition,
        permutation=d.permutation, target=d.target,
        warmup_seconds=d.warmup_seconds, measure_seconds=round(seconds, 3), measure_start=c.start,
        measure_end=c.end, span_seconds=round(c.end - c.start, 3),
        spawn_complete=d.spawn_complete,
        dialogs_created=d.dialogs_created, usable_dialogs=d.usable_dialogs,
        messages_sent=a.sent, messages_sent_client=c.sends_total, messages_received=a.received,
        messages_lost=lost, messages_duplicated=a.duplicates,
        messages_phantom=a.phantoms, drained=a.in_flight == 0, per_initiator=per_init,
        messages_sent_client_cut=c.sends_cut_at_stop or None,
        send_rate=send_rate,
        receive_rate=receive_rate,
        send_latency_ms=latency_summary(c.send_latency), e2e_latency_ms=latency_summary(d.e2e_latency),
        top_waits=top_waits, client_bound=client_bound, noisy_host=noisy_host, noisy_storage=noisy_storage,
        workers=workers, client_hosts=client_hosts,
        users_expected=d.users_expected, users_spawned=c.users_spawned, users_active=c.users_active,
        errors=c.errors_total, error_samples=list(c.error_samples[:10]),
        collector_errors=list(d.collector_errors[:10]),
        poison_messages=a.poison, queue_disabled=a.queue_disabled,
        messages_undelivered=undelivered, status=status,
        web=d.web, alternation=d.alternation, **col)


#: the fields whose median across repetitions a permutation's summary.json holds
MEDIAN_FIELDS = tuple(f.name for f in FIELDS if f.summarized)


def summarize_permutation(permutation: dict[str, Any],
                          reps: Sequence[RepetitionSummary]) -> PermutationSummary:
    reps = sorted(reps, key=lambda r: r.repetition)
    medians = {name: median(r[name] for r in reps) for name in MEDIAN_FIELDS}
    return PermutationSummary(
        permutation=permutation, repetitions=[r.repetition for r in reps],
        median={k: v for k, v in medians.items() if v is not None},
        messages_lost=sum(r.messages_lost for r in reps), errors=sum(r.errors or 0 for r in reps),
        behind=sum(bool(r["behind"]) for r in reps) if any(r.offered_rate for r in reps) else None)
