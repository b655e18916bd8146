"""One repetition, start to finish: the lifecycle ``ssbench run`` and ``ssbench web`` share.

:meth:`Repetition.setup` makes a fresh ``.rep-NN.partial/`` directory, prepares the target (every
conversation and message cleared, the server profile and broker settings applied), begins the
permutation's dialogs, warms them up (one message each, as the paper does), starts the broker
side and the collectors. Then the swarm: :meth:`Repetition.run_swarm` for a headless run (one
user per client thread, stopped by the master after the warm-up and measured windows), or the
web UI's own swarm. :meth:`Repetition.finish` drains, stops, verifies (sent = received per
initiator), builds the summary (:func:`harness.results.build_repetition_summary`), writes it
and commits the directory. A repetition is one window of its ``members`` (harness.plan): the
permutation alone, or an alternated group, each member getting its summary from its own slices.
With ``metrics`` the repetition also feeds the live endpoint.
"""

from __future__ import annotations

import heapq
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import Any, Callable

from .plan import member_at
from .collectors import SampleContext, Sampler, default_collectors
from .errors import DiskFull, TargetError, UserError
from .load.protocol import SwarmPlan, slot_name
from .load.spec import SwarmSpec
from .load.series import LOGS_DIR, SwarmSeries
from .load.swarm import RemoteWorkers, Swarm, SwarmFailed, SwarmResult
from .load.window import merge_workers
from .matrix import Matrix, Permutation, RunSettings
from .metrics.live import LiveState, RepetitionFeed
from .results import Histogram, RunDir, build_repetition_summary, write_json, write_jsonl
from .results.model import LATENCY_SCHEMA, RepetitionSummary
from .results.records import Alternation, TargetRef
from .results.summary import RepetitionData
from .targets.base import Counts, Target

log = logging.getLogger(__name__)

#: how long a swarm's master waits for its local workers to connect and claim their slots
LOCAL_WORKER_WAIT_S = 60.0


class Interrupted(Exception):
    """The repetition was stopped (Ctrl-C, SIGTERM, the web UI shutting down): not committed."""


class RepetitionFailed(TargetError):
    """The repetition cannot be trusted (a Locust worker died, a recording is missing): not
    committed, so ``--resume`` redoes it."""


@dataclass
class Repetition:
    """Repetition ``rep`` of ``members`` in one window (``perm`` is the first; empty:
    ``perm`` alone). :meth:`run` and :meth:`finish` return their summaries, in order."""

    target: Target
    run_dir: RunDir
    perm: Permutation
    rep: int
    profile: str
    settings: RunSettings
    lock: threading.Lock
    stop_event: threading.Event = field(default_factory=threading.Event)
    #: progress text ("preparing ...", "draining ...") for the caller to show
    on_status: Callable[[str], None] = lambda text: None
    #: every collector tick's samples (live displays)
    on_tick: Callable[[list], None] | None = None
    #: extra client processes to sample (the web UI's workers); a headless swarm adds its own
    client_pids: Callable[[], dict[str, int]] | None = None
    users_expected: int | None = None
    #: workers on client hosts (ssbench run --remote-workers); None: local workers
    remote: RemoteWorkers | None = None
    #: the live metrics endpoint's state (--metrics-port); None: off
    metrics: LiveState | None = None
    #: the run's master and workers, kept from one repetition to the next (a headless swarm
    #: runs there; None: a web UI session, whose swarm is the web UI's)
    swarms: SwarmSeries | None = None
    #: the run's last swarm: its series closes (in the background) once the window's messages
    #: are all processed, while the repetition stops and writes (not for a backlog drain, whose
    #: drain is measured)
    last_swarm: bool = False
    #: an alternated window's permutations, ``perm`` first (harness.plan); empty: ``perm`` alone
    members: list[Permutation] = field(default_factory=list)
    slice_seconds: float = 0.5

    #: does the measured window receive (False: a backlog fill, activation off by design)
    receiving: bool = True
    partial: Path | None = None
    #: each member's partial directory and the dialogs it began
    partials: dict[str, Path] = field(default_factory=dict)
    created: dict[str, int] = field(default_factory=dict)
    pinning: dict[str, list[int]] | None = None
    sampler: Sampler | None = None
    swarm: Swarm | None = None
    feed: RepetitionFeed | None = None
    _sent: list[list[int]] | None = None
    _start_announced: bool = False   # "every user started" said (once a repetition)

    def __post_init__(self) -> None:
        self.members = list(self.members) or [self.perm]
        if self.metrics is not None:
            self.feed = self.metrics.repetition(self.run_dir.run_id, self.perm.id, self.rep)
            shown = self.on_status

            def on_status(text: str) -> None:
                self.feed.status(text)
                shown(text)

            self.on_status = on_status

    def _on_tick(self, samples) -> None:
        cur = self.swarm.current if self.swarm is not None else None
        if cur is not None and "spawn_complete" in cur.facts and not self._start_announced:
            # the window's origin is fixed: say when the measured part begins (a phase change)
            self._start_announced = True
            s = self.settings
            self.on_status(f"running: every user started; {s.warmup_seconds:g} s warm-up, "
                           f"then the measured window")
        if self.feed is not None:
            self.feed.tick(samples)
        if self.on_tick is not None:
            self.on_tick(samples)

    def on_live(self, figures: dict) -> None:
        """The master's live figures of the swarm (the swarm's ``on_live``)."""
        if self.feed is not None:
            self.feed.client(figures)

    @property
    def alternated(self) -> bool:
        return len(self.members) > 1

    # ------------------------------------------------------------------ 1. setup
    def setup(self) -> Path:
        """Prepare the target and start the collectors, and return once their idle references
        are in (no SEND may touch them); returns the partial directory."""
        t, p = self.target, self.perm
        self.partials = {q.id: self.run_dir.begin_rep(q.id, self.rep) for q in self.members}
        self.partial = self.partials[p.id]
        self.on_status(f"preparing ({p.initiators} x {p.dialogs.dialogs_created(p.threads)} dialogs)")
        try:
            with self.lock:
                t.prepare(p.initiators, self.profile, p.broker)
                self.created = {}
                for i in range(1, p.initiators + 1):
                    self._begin_dialogs(i)
                    t.warm_up(i)
                t.settle()      # a steady state before the window (embedded: vacuum, WAL, checkpoint)
                t.start()
            warm = self._drain()
            if self.stop_event.is_set():
                raise Interrupted()
            if warm.in_flight:
                raise TargetError(f"warm-up did not drain within {self.settings.drain_timeout_seconds:g}s "
                                  f"({warm.in_flight} messages in flight)")
            ctx = SampleContext(target=t, lock=self.lock, client_pids=self._client_pids, run=str(self.run_dir.path),
                                spill_dir=str(self.partial))
            self.sampler = Sampler(ctx, default_collectors(t.telemetry), interval=self.settings.sample_interval_seconds,
                                   on_tick=self._on_tick)
            self.sampler.start()
            self.sampler.wait_for_references(self.stop_event)   # the probes' idle references, before any SEND
            if self.stop_event.is_set():
                raise Interrupted()
        except BaseException:
            self.abort()
            raise
        return self.partial

    def _drain_and_stop(self):
        """Wait for the queues to empty, then stop the collectors and the broker side: the
        final counts and the broker's restarts."""
        self.on_status("draining: waiting for the queues to empty")
        final = self._drain()
        if self.stop_event.is_set():
            raise Interrupted()
        if self.last_swarm and self.swarms is not None:
            self.swarms.close()
        self.sampler.stop()
        with self.lock:
            restarts = self.target.broker_restarts()
            self.target.stop()
        self._unpin()
        return final, restarts

    def _begin_dialogs(self, initiator: int) -> None:
        """Begin the members' dialogs on ``initiator`` (the caller holds the lock), in order:
        member j's slots follow the earlier members'."""
        for q in self.members:
            made = self.target.create_dialogs(initiator, _usable(q), q.dialogs.every_n)
            self.created[q.id] = self.created.get(q.id, 0) + made

    def _client_pids(self) -> dict[str, int]:
        pids = dict(self.client_pids()) if self.client_pids else {}
        if self.swarm is not None:
            pids.update(self.swarm.worker_pids())
        return pids

    def swarm_plan(self, *, warmup_seconds: float, planned_seconds: float, users: dict[str, int] | None = None,
                   live_window: tuple[float, float] | None = None) -> SwarmPlan:
        """The swarm of this repetition: the spec every user gets, its users per initiator
        (default: the permutation's threads on each of its initiators) and windows; with the
        live endpoint, the window of its live figures (default: the swarm's)."""
        s, p = self.settings, self.perm
        users = users or {str(i): p.threads for i in range(1, p.initiators + 1)}
        spec = SwarmSpec(sender_specs={k: self.target.sender_spec(int(k)) for k in users},
                         payload_bytes=p.payload_bytes, usable={k: _usable(p) for k in users},
                         rate=p.rate or 0.0, users=dict(users), sample_interval_seconds=s.sample_interval_seconds,
                         high_priority_share=p.broker.high_priority_share,
                         messages_per_dialog=p.messages_per_dialog or 0, fire_and_forget=p.fire_and_forget,
                         send_mode=s.send_mode)
        if self.alternated:
            spec.alternation = [_usable(q) for q in self.members]
            spec.slice_seconds = self.slice_seconds
        live = None
        if self.feed is not None:
            live = list(live_window or (warmup_seconds, planned_seconds))
            self.feed.window(*live)
            self.feed.status("running")   # the swarm is planned, so it starts (a web session says no more)
        return SwarmPlan(spec=spec, users=dict(users), workers_per_initiator=s.workers_per_initiator,
                         warmup_seconds=warmup_seconds, planned_seconds=planned_seconds,
                         worker_wait_seconds=self.remote.wait_seconds if self.remote else LOCAL_WORKER_WAIT_S,
                         live_window=live)

    # ------------------------------------------------------------------ 2. the headless swarm
    def run_swarm(self, *, until=None) -> SwarmResult:
        """One headless swarm: warm-up and measured windows, one a member (or until
        ``until()``: the backlog fill), then its recordings in the partial directory."""
        s = self.settings
        # a fill's window ends when it is stopped (harness.backlog)
        plan = self.swarm_plan(warmup_seconds=s.warmup_seconds if until is None else 0.0,
                               planned_seconds=self._span(),
                               live_window=None if until is None else (0.0, 0.0))
        self.on_status("running")
        try:
            res = self.swarms.run(plan, self.partial, s.spawn_rate, stop_event=self.stop_event,
                                  on_started=self._swarm_started, until=until,
                                  on_live=self.on_live if self.feed is not None else None)
        except SwarmFailed as e:
            raise RepetitionFailed(f"{e} (the repetition is not kept; --resume redoes it)") from None
        if self.stop_event.is_set() or res.interrupted:
            raise Interrupted()
        if res.spawn_complete is None and until is None:   # a fill may end before the last user started
            raise RepetitionFailed("the Locust swarm never finished spawning its users "
                                   "(the repetition is not kept; --resume redoes it)")
        return res

    def _swarm_started(self, swarm: Swarm) -> None:
        self.swarm = swarm
        if self.settings.pin_cpus:
            self.pinning = pin_cpus(self._server_pids(), list(swarm.worker_pids().values()))

    # ------------------------------------------------------------------ 3. finish
    def finish(self, res: SwarmResult, *, warmup_seconds: float | None = None,
               span_seconds: float | None = None, web: dict[str, Any] | None = None,
               error_samples: list[str] | None = None, require_sends: bool = True) -> list[RepetitionSummary]:
        """Drain and stop once, then each member's summary (from its slices), verified, written
        into its own partial directory; every member is committed once all are written.
        ``warmup_seconds`` and the measured window's wall-clock ``span_seconds`` default to the
        run settings (the web UI passes its session's, the backlog fill its fill's)."""
        out = []
        try:
            final, restarts = self._drain_and_stop()
            warmup = self.settings.warmup_seconds if warmup_seconds is None else warmup_seconds
            span = self._span() if span_seconds is None else span_seconds
            for m in self._members():
                summary, lat = self._summarize(res, final, warmup, span, web, m)
                samples = list(summary.error_samples or [])
                self._check_disk(samples + list(error_samples or []))
                if require_sends and summary.send_latency_ms.count == 0:
                    first = f" (first error: {samples[0]})" if samples else ""
                    where = "its slices of the alternated window" if self.alternated else "the measured window"
                    raise RepetitionFailed(f"{m.perm.id} rep {self.rep}: no SEND completed in {where}, "
                                           f"{summary.errors} failed{first}: the repetition measured nothing")
                samples += (error_samples or []) + (["Locust wrote no stats CSV"] if res.stats_csv is None else [])
                summary = summary.replace(broker_restarts=restarts, error_samples=samples)
                self._write(summary, lat, m.partial)
                out.append((summary, lat["e2e"]))
        except BaseException:
            self.abort()
            raise
        for q in self.members:
            self.run_dir.commit_rep(q.id, self.rep, self.partials[q.id])
            self.run_dir.write_permutation_summary(q.id, q.values())
        if self.feed is not None:   # the live endpoint shows the window under its first member
            self.feed.committed(*out[0])
        return [summary for summary, _ in out]

    def run(self) -> list[RepetitionSummary]:
        """The headless repetition: setup, the measured window (:meth:`measure`), finish."""
        self.setup()
        try:
            res, window = self.measure()
        except BaseException:
            self.abort()
            raise
        return self.finish(res, **window)

    def measure(self) -> tuple[SwarmResult, dict[str, float]]:
        """The measured window: the swarm's result and :meth:`finish`'s window arguments
        (none: the run settings')."""
        return self.run_swarm(), {}

    def abort(self) -> None:
        """Best effort: stop the collectors and the broker side (nothing committed); a headless
        swarm that failed is already gone (SwarmSeries.run closes it)."""
        if self.feed is not None:
            self.feed.aborted()
        self._unpin()
        if self.sampler is not None:
            try:
                self.sampler.stop(check=False)      # nothing is kept: lost samples do not matter
            except Exception:  # pragma: no cover - best effort
                log.exception("stopping the collectors")
        with self.lock:
            try:
                self.target.stop()
            except Exception:  # pragma: no cover - best effort
                log.exception("stopping the target")

    # ------------------------------------------------------------------ helpers
    def _unpin(self) -> None:
        """The server is shared and outlives the repetition: give it every CPU back."""
        if self.pinning:
            pin_cpus(self._server_pids(), [], restore=True)

    def _server_pids(self) -> list[int]:
        with self.lock:
            return self.target.telemetry.server_pids()

    def _check_disk(self, errors: list[str]) -> None:
        """A target whose disk filled stops the run as a full disk (exit 5, the repetition left
        to ``--resume``), never a summary of a window it could not record."""
        with self.lock:
            full = self.target.disk_full(errors)
        if full:
            raise DiskFull(full)

    def _drain(self) -> Counts:
        return self.target.drain(self.settings.drain_timeout_seconds, lock=self.lock, stop=self.stop_event)

    def _span(self) -> float:
        """The measured window's planned seconds: one measured window a member."""
        return self.settings.measure_seconds * len(self.members)

    def _members(self) -> list["Member"]:
        return [Member(q, self.partials[q.id], self.created.get(q.id, 0), j if self.alternated else None)
                for j, q in enumerate(self.members)]

    def _summarize(self, res: SwarmResult, final: Counts, warmup: float, span: float,
                   web: dict[str, Any] | None, m: "Member") -> tuple[RepetitionSummary, dict[str, Histogram]]:
        """Member ``m``'s summary of the window: a function of the member, the swarm's result
        and the accounting (no state of the repetition changes)."""
        t, p = self.target, m.perm
        start = res.spawn_complete + warmup
        # the workers' SENDs in the measured window (an alternated member: in its slices)
        wd = merge_workers(res.worker_files, start, start + span, member=self._member_slices(m))
        with self.lock:
            e2e_us = self._e2e_latencies(wd, m)
            by_prio = (t.telemetry.e2e_latencies_by_priority_us(wd.start, wd.end)
                       if p.broker.high_priority_share else {})
        e2e = Histogram().extend_us(e2e_us)
        permutation = p.values()
        users_expected = self.users_expected if self.users_expected is not None else p.total_threads
        if self.users_expected is not None:
            permutation["total_threads"] = self.users_expected
        data = RepetitionData(
            run_id=self.run_dir.run_id, permutation=permutation, repetition=self.rep,
            target=TargetRef(kind=t.kind, label=t.label, profile=self.profile),
            warmup_seconds=warmup, spawn_complete=res.spawn_complete,
            dialogs_created=m.dialogs_created, usable_dialogs=_usable(p) * p.initiators,
            users_expected=users_expected,
            accounting=final,
            client=wd,
            e2e_latency=e2e, e2e_latency_by_priority={k: Histogram().extend_us(v) for k, v in by_prio.items()},
            collected={**self.sampler.summary_fields(wd.start, wd.end, self._member_slices(m)),
                                        **({"cpu_pinning": self.pinning} if self.pinning else {})},
            collector_errors=self.sampler.errors, web=web,
            offered_rate=p.rate * p.initiators if p.rate else None, rate_tolerance=self.settings.rate_tolerance,
            receiving=self.receiving, alternation=self._alternation(m))
        self._workers = wd.workers
        # latency.json's SEND histogram is the summary's: completed in the window, plus any in
        # flight across its end (a frozen server)
        lat = {"send": wd.send_latency, "e2e": e2e}
        if wd.latency_corrected is not None:
            lat["send_corrected"] = wd.latency_corrected
        return build_repetition_summary(data), lat

    def _e2e_latencies(self, wd, m: "Member") -> list[int]:
        """The end-to-end latencies of member ``m``'s messages (the caller holds the lock): an
        alternated window's are read once for all its members and split by their send slices."""
        if m.index is None:
            return self.target.telemetry.e2e_latencies_us(wd.start, wd.end)
        if self._sent is None:
            k = len(self.members)
            self._sent = [[] for _ in range(k)]
            for sent, us in self.target.telemetry.e2e_sent_latencies_us(wd.start, wd.end):
                self._sent[member_at(sent / 1e6, self.slice_seconds, k)].append(us)
        return self._sent[m.index]

    def _member_slices(self, m: "Member") -> tuple[float, int, int] | None:
        """An alternated member's slices (slice_seconds, members, index) for the collectors
        that split the window's figures by slice; None: not alternated."""
        return None if m.index is None else (self.slice_seconds, len(self.members), m.index)

    def _alternation(self, m: "Member") -> Alternation | None:
        """The summary's ``alternation`` record (harness.plan); None: not alternated."""
        return None if m.index is None else Alternation([q.id for q in self.members], self.slice_seconds, m.index)

    def _phases(self, summary: RepetitionSummary) -> tuple[float, float]:
        """The measured window's start and end, for each sample's phase in samples.jsonl."""
        return summary.window.measure_start, summary.window.measure_end

    def _sample_rows(self) -> Iterator[tuple[float, str, str, str, float]]:
        """The collectors' samples and the workers', in time order (those of one time in the
        order they were taken, the collectors' first): streamed from the sampler's file when
        its samples came in time order, as they do but for a backlog fill's drain."""
        taken = self.sampler.samples
        mine = ((s.ts, s.family, s.metric, s.key, s.value) for s in taken)
        theirs = sorted(worker_samples(getattr(self, "_workers", [])), key=_ts)
        if not taken.in_time_order:
            return iter(sorted(chain(mine, theirs), key=_ts))
        return heapq.merge(mine, theirs, key=_ts)

    def _write(self, summary: RepetitionSummary, lat: dict[str, Histogram], partial: Path) -> None:
        start, end = self._phases(summary)
        t0 = self.sampler.started

        def phase(ts):
            return "warmup" if ts < start else ("measure" if ts < end else "drain")

        write_jsonl(partial / "samples.jsonl",
                    ({"ts": round(ts, 4), "elapsed_s": round(ts - t0, 4), "phase": phase(ts),
                      "family": fam, "metric": met, "key": key, "value": val}
                     for ts, fam, met, key, val in self._sample_rows()))
        write_json(partial / "latency.json", {"schema": LATENCY_SCHEMA, "unit": "us",
                                              "send": lat["send"].to_json(), "e2e": lat["e2e"].to_json(),
                                              **({"send_corrected": lat["send_corrected"].to_json()}
                                                 if "send_corrected" in lat else {})})
        write_json(partial / "summary.json", summary)


def resolve_profile(matrix: Matrix, target: Target, server: str) -> str:
    """The target's profile a permutation's ``server`` names (UserError if it has none)."""
    profile = matrix.profile_aliases(applies=target.capabilities.profile_aliases).get(server, server)
    if profile not in target.profiles():
        raise UserError(f"server profile {server!r} is not defined for the {target.kind} target "
                        f"(known: {', '.join(target.profiles())})", file=str(matrix.path), field="axes.server")
    return profile


class Repetitions:
    """What the repetitions of one run (``ssbench run``, ``saturate``) share: the target, the
    run directory, one lock, the stop, the live endpoint, and one Locust master and its
    workers (local, or on client hosts) for them all, until :meth:`close`."""

    def __init__(self, matrix: Matrix, target: Target, run_dir: RunDir, *,
                 stop_event: threading.Event | None = None, remote: RemoteWorkers | None = None,
                 metrics: LiveState | None = None):
        self.matrix = matrix
        self.target = target
        self.run_dir = run_dir
        self.stop_event = stop_event or threading.Event()
        self.lock = threading.Lock()
        self.remote = remote
        self.metrics = metrics
        self.swarms = SwarmSeries(run_dir.path / LOGS_DIR, remote)

    def repetition(self, perm: Permutation, rep: int, cls: type[Repetition] = Repetition, **kw: Any) -> Repetition:
        """Repetition ``rep`` of ``perm`` (``kw``: more of its fields)."""
        return cls(target=self.target, run_dir=self.run_dir, perm=perm, rep=rep,
                   profile=resolve_profile(self.matrix, self.target, perm.server), settings=self.matrix.run_for(perm),
                   lock=self.lock, stop_event=self.stop_event, remote=self.remote, metrics=self.metrics,
                   swarms=self.swarms, **kw)

    def close(self) -> None:
        """The swarm series ended, its processes gone and their logs whole."""
        self.swarms.close()
        Swarm.wait_closed()


@dataclass(frozen=True)
class Member:
    """What a summary is of: a permutation of the window (an alternated window's member
    ``index``; None: the whole window), its partial directory and the dialogs it began."""

    perm: Permutation
    partial: Path
    dialogs_created: int
    index: int | None = None


def _ts(row: tuple) -> float:
    return row[0]


def worker_samples(workers: list[dict]) -> list[tuple[float, str, str, str, float]]:
    """The workers' own probes as samples: family ``worker`` (``cpu_percent`` of the process,
    key ``i<K>.w<W>``) and family ``client_host`` (``cpu_percent`` of the machine,
    ``memory_percent``, ``memory_used_bytes``, key the host name; one row per host and tick)."""
    rows, seen = [], set()
    for w in workers:
        key, host = slot_name(w["initiator"], w["worker"]), w.get("host", "")
        for ts, proc, cpu, mem, used in w.get("samples", []):
            rows.append((ts, "worker", "cpu_percent", key, proc))
            if (host, round(ts)) not in seen:
                seen.add((host, round(ts)))
                rows += [(ts, "client_host", "cpu_percent", host, cpu), (ts, "client_host", "memory_percent", host, mem),
                         (ts, "client_host", "memory_used_bytes", host, used)]
    return rows


def pin_cpus(server_pids: list[int], client_pids: list[int], restore: bool = False) -> dict[str, list[int]] | None:
    """Pin the database server's processes to the first half of this process's CPUs and the
    load generator's to the other half, so they do not compete for a core. Returns the CPU
    sets, or None where the host does not allow it (fewer than 2 CPUs, no affinity support, or
    a remote server)."""
    import os

    import psutil

    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None
    if len(cpus) < 2 or not server_pids:
        return None
    half = len(cpus) // 2
    sets = {"server": cpus if restore else cpus[:half], "client": cpus[half:]}
    for name, pids in (("server", server_pids), ("client", client_pids)):
        for pid in pids:
            try:
                psutil.Process(pid).cpu_affinity(sets[name])
            except psutil.NoSuchProcess:
                # gone since it was listed (a server backend whose session just ended): nothing
                # to pin; the others still are
                continue
            except (psutil.Error, OSError) as e:
                log.warning("cannot pin pid %s: %s", pid, e)
                return None
    return sets


def _usable(perm: Permutation) -> int:
    """The dialogs ``perm``'s client threads send on, on one initiator."""
    return perm.dialogs.usable_dialogs(perm.threads)

