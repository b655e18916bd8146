"""Synthetic run directories in the documented layout (``docs/results.md``): test data, not
part of the ssbench package (harness/ never imports it).

Used by the analysis tests (``from support import synth``), the benchmark
(``benchmarks/analyze_bench.py``) and the notebook's fallback when it is given no results
directory (both put this repository's tests/ on ``sys.path``). The numbers follow a small model shaped like
the SQLCAT whitepaper's results so that the plots and derived tables have something to show:

- each client thread offers about 260 SENDs/s; an initiator saturates near 6,000 msg/s
  (less for larger payloads, so they plateau earlier);
- one dialog per thread suffers page-latch contention on the initiator's ``sys.sysdesend``
  pages, growing with the threads per initiator, so the 150 trick gains nothing at 5 threads per
  initiator, pays from about 10 (30 in total with 3 initiators) and reaches about +300 % at 50;
- one shared dialog per initiator is serialized on its conversation lock;
- the target processes at most ~20,000 msg/s (less for large payloads), so with three initiators
  and large messages it falls behind and its queue grows;
- wait profiles follow, as shares of the users' time: PAGELATCH_* without the trick, WRITELOG
  with it, LCK_M_* when shared;
  one thread per initiator is client-bound (ASYNC_NETWORK_IO; the summary's client_bound).

Every rep-level value in ``summary.json`` is derived from the generated samples (send_rate is
the mean of the measured ``throughput/sent_per_s`` ticks, and so on), so the files agree with
each other like the runner's do. Everything is deterministic for a given seed. The files are
written through the results contract (:mod:`harness.results`: :class:`RepetitionSummary`,
:func:`summarize_permutation`, :class:`RunRecord`, the atomic writer), so a synthetic run reads
back like a measured one.

Synthetic runs say so: run.json has ``"synthetic": true`` (top level and in ``target``) and the
target label in run.json and every summary starts with :data:`SYNTHETIC_PREFIX`; the analysis
marks every plot, table and report page of such a run SYNTHETIC.

For the statistics' tests, :class:`SynthSpec` can make one strategy a relabelled copy of another
(``same_as``), give a strategy a true multiplicative effect (``effect``) and add independent
uniform noise per repetition (``uniform_noise``, e.g. 0.25 for +-25 %); for the scalability
model's, a strategy's rates can follow the Universal Scalability Law (``usl``), and fall off a
cliff from some thread count on (``cliff``).
"""

from __future__ import annotations

import json
import math
import os
import random
import statistics
import zlib
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable

from harness.results import RunRecord, RepetitionSummary, summarize_permutation, write_atomic, write_json
from harness.results.records import InitiatorResult, LatencySummary, TargetRef, TopWait
from harness.verdicts import usl

PAPER_THREADS = (1, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50)

# Ten wait types per kind of target, aligned by role:
# page latch EX/SH, log flush, lock X/S, scheduler/spin, client network, data read, log buffer,
# other latch. Idle (benign) waits are not there: the targets' wait_stats() leave them out. The
# embedded target reports SQL Server wait types too (its collector maps PostgreSQL's events).
WAITS_MSSQL = ("PAGELATCH_EX", "PAGELATCH_SH", "WRITELOG", "LCK_M_X", "LCK_M_S",
               "SOS_SCHEDULER_YIELD", "ASYNC_NETWORK_IO", "PAGEIOLATCH_SH", "LOGBUFFER", "CXPACKET")
WAITS_EMBEDDED = ("PAGELATCH_EX", "PAGELATCH_SH", "WRITELOG", "LCK_M_X", "LCK_M_SCH_S",
                  "SPINLOCK_BACKOFF", "ASYNC_NETWORK_IO", "PAGEIOLATCH_SH", "LOGBUFFER", "LATCH_EX")

#: synthetic files are written all or nothing but not fsynced: they can be made again, and 4
#: fsyncs a repetition kept the paper-sized set's synthesis waiting on the disk for minutes
DURABLE = False
#: the start of every synthetic run's target label (run.json and the summaries)
SYNTHETIC_PREFIX = "SYNTHETIC data: "
LABELS = {"embedded": "PostgreSQL 18.6 emulation of Service Broker",
          "mssql": "SQL Server 16.0.4135.4"}
EMBEDDED_PROFILE = {"sql2005": "durable", "sql2008": "delayed"}
#: per kind of target: the waits it reports, and its profiles for the paper's server names
#: (the matrix's embedded_profiles; a target without that mapping runs the names as they are)
WAITS = {"embedded": WAITS_EMBEDDED, "mssql": WAITS_MSSQL}
PROFILES = {"embedded": EMBEDDED_PROFILE, "mssql": {}}


@dataclass(frozen=True)
class SynthSpec:
    """What to synthesize: the matrix's axes, repetitions, sampling and target."""

    name: str = "synth"
    initiators: tuple[int, ...] = (1, 2, 3)
    threads: tuple[int, ...] = PAPER_THREADS
    dialogs: tuple[str, ...] = ("per_thread", "trick150")
    payloads: tuple[int, ...] = (100, 1024, 4096, 8192)
    servers: tuple[str, ...] = ("sql2005", "sql2008")
    repetitions: int = 3
    warmup_seconds: int = 10
    measure_seconds: int = 60
    drain_seconds: int = 5
    interval: float = 1.0
    target_kind: str = "embedded"          # embedded | mssql
    target_label: str | None = None        # default: LABELS[target_kind]
    max_queue_readers: int = 16
    seed: int = 1
    noise: float = 0.03                    # per-repetition multiplicative noise (sigma)
    uniform_noise: float = 0.0             # and a uniform factor in [1-u, 1+u] per repetition
    same_as: tuple[tuple[str, str], ...] = ()   # (strategy, strategy whose model it copies)
    effect: tuple[tuple[str, float], ...] = ()  # (strategy, true multiplicative effect on rates)
    #: (strategy, (λ, σ, κ)): its send and receive rates follow the Universal Scalability Law over
    #: the total threads instead of the model below (harness.verdicts.usl)
    usl: tuple[tuple[str, tuple[float, float, float]], ...] = ()
    #: (strategy, total threads, factor): from that many threads on, its rates times the factor (a
    #: sweep the law does not describe)
    cliff: tuple[tuple[str, int, float], ...] = ()
    start_epoch: float = 1_763_739_400.0
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def label(self) -> str:
        return SYNTHETIC_PREFIX + (self.target_label or LABELS.get(self.target_kind, self.target_kind))

    @property
    def permutations(self) -> int:
        return (len(self.initiators) * len(self.threads) * len(self.dialogs) * len(self.payloads)
                * len(self.servers))


def paper_spec(**overrides) -> SynthSpec:
    """The paper's 528-permutation matrix (3 repetitions, 1 s samples over 60 s by default)."""
    return replace(SynthSpec(name="paper"), **overrides)


def small_spec(**overrides) -> SynthSpec:
    """A small run for tests and notebooks: 1-2 initiators, 4 thread steps, three strategies,
    two payloads, one server, 2 repetitions of 8 measured seconds (96 repetitions in all)."""
    base = SynthSpec(name="small", initiators=(1, 2), threads=(1, 5, 10, 20),
                     dialogs=("per_thread", "trick150", "shared"), payloads=(100, 8192),
                     servers=("durable",), repetitions=2, warmup_seconds=2, measure_seconds=8,
                     drain_seconds=2)
    return replace(base, **overrides)


# --------------------------------------------------------------------------- the model

def _strategy(token: str) -> tuple[int, bool]:
    if token == "shared":
        return 1, True
    if token == "per_thread":
        return 1, False
    if token == "trick150":
        return 150, False
    if token.startswith("every"):
        return int(token[5:]), False
    raise ValueError(f"unknown dialog strategy {token!r}")


def _profile(server: str, kind: str) -> str:
    return PROFILES.get(kind, {}).get(server, server)


def _smooth_min(a: float, b: float, k: float = 4.0) -> float:
    if a <= 0 or b <= 0:
        return 0.0
    return (a ** -k + b ** -k) ** (-1.0 / k)


def model(initiators: int, threads: int, dialogs: str, payload: int, server: str) -> dict[str, float]:
    """Steady-state expectations of one permutation (before noise)."""
    every_n, shared = _strategy(dialogs)
    pf = 1.0 / (1.0 + payload / 12000.0)
    fast = server in ("sql2008", "delayed")
    sf = 1.10 if fast else 1.0
    t = threads
    offered = 260.0 * t
    cap_i = 6000.0 * pf * sf
    contention = 1.0 + 0.03 * max(0.0, t - 4.0) ** 1.215  # sysdesend page latch, per initiator
    if shared:
        per_init = _smooth_min(offered, 700.0 * pf * sf) / (1.0 + 0.004 * t)
        contention = 1.0
    else:
        if every_n > 1:  # every_n dialogs spread the usable ones over every_n/150 of the pages
            contention = 1.0 + (contention - 1.0) * max(0.0, 1.0 - math.log(every_n) / math.log(150))
        per_init = _smooth_min(offered, cap_i) / contention
    send = initiators * per_init
    target_cap = 20000.0 * pf ** 1.5 * sf
    receive = _smooth_min(send, target_cap, 8.0)
    return {"per_init": per_init, "send": send, "receive": receive, "contention": contention,
            "shared": float(shared), "fast": float(fast), "pf": pf}


def _wait_rates(m: dict[str, float], initiators: int, threads: int, send: float) -> list[float]:
    """ms of wait accrued per second for each of the 10 wait roles, consistent with the users'
    time (the diagnosis reads waits as a share of it, docs/diagnosis.md): the time the page latch
    adds to every SEND ((contention - 1) / contention of it), the time a shared dialog's users
    queue on its lock and the time lost at the initiator's cap (the log) are waits of every user."""
    it = initiators * threads
    offered = 260.0 * threads
    log = 0.12 * send * (0.35 if m["fast"] else 1.0) \
        + 1000.0 * it * max(0.0, 1.0 - m["per_init"] * m["contention"] / offered) * (0.35 if m["fast"] else 1.0)
    latch_ex = 900.0 * it * (m["contention"] - 1.0) / m["contention"] + 1.5 * it
    lock_x = 1000.0 * it * max(0.0, 1.0 - m["per_init"] / offered) if m["shared"] else 0.4 * it
    return [latch_ex, 0.35 * latch_ex, log, lock_x, 0.2 * lock_x, 0.015 * send,
            (200.0 if threads == 1 else 6.0) * initiators, 0.002 * send, 0.08 * log, 0.5]


# --------------------------------------------------------------------------- writing

def _rng(spec: SynthSpec, perm_id: str, rep: int) -> random.Random:
    return random.Random(zlib.crc32(f"{spec.seed}/{perm_id}/{rep}".encode()))


def _perm_values(index: int, i: int, t: int, d: str, p: int, s: str, spec: SynthSpec) -> dict[str, Any]:
    every_n, shared = _strategy(d)
    return {"id": f"i{i}-t{t}-{d}-p{p}-{s}", "index": index, "initiators": i, "threads": t,
            "total_threads": i * t, "dialogs": d, "dialogs_every_n": every_n, "dialogs_shared": shared,
            "payload_bytes": p, "server": s,
            "broker": {"max_queue_readers": spec.max_queue_readers, "receive_top": 10000,
                       "waitfor_timeout_ms": 3000, "monitor_interval_seconds": 5.0}}


def iter_permutations(spec: SynthSpec) -> Iterable[dict[str, Any]]:
    index = 0
    for i in spec.initiators:
        for t in spec.threads:
            for d in spec.dialogs:
                for p in spec.payloads:
                    for s in spec.servers:
                        index += 1
                        yield _perm_values(index, i, t, d, p, s, spec)


def _fmt(v: float) -> str:
    return f"{v:.6g}" if abs(v) < 1e15 else f"{v:.0f}"


def write_repetition(perm_dir: Path, perm: dict[str, Any], rep: int, spec: SynthSpec,
                     run_id: str) -> RepetitionSummary:
    """Write ``perm_dir/rep-NN/`` (summary.json, samples.jsonl, latency.json, locust_stats.csv)
    and return the summary."""
    rng = _rng(spec, perm["id"], rep)
    i, t, payload = perm["initiators"], perm["threads"], perm["payload_bytes"]
    m = model(i, t, dict(spec.same_as).get(perm["dialogs"], perm["dialogs"]), payload, perm["server"])
    law = dict(spec.usl).get(perm["dialogs"])
    if law:
        m = dict(m, send=float(usl.rate(i * t, *law)), receive=float(usl.rate(i * t, *law)))
    for strategy, threads, factor in spec.cliff:
        if strategy == perm["dialogs"] and i * t >= threads:
            m = dict(m, send=m["send"] * factor, receive=m["receive"] * factor)
    level = math.exp(rng.gauss(0.0, spec.noise)) * dict(spec.effect).get(perm["dialogs"], 1.0)
    if spec.uniform_noise:
        level *= rng.uniform(1.0 - spec.uniform_noise, 1.0 + spec.uniform_noise)
    send_mean = m["send"] * level
    recv_mean = min(m["receive"] * level, send_mean)
    per_init = send_mean / i
    waits = WAITS.get(spec.target_kind, WAITS_MSSQL)
    wait_rates = _wait_rates(m, i, t, send_mean)
    readers = spec.max_queue_readers

    dt = spec.interval
    n_warm = int(round(spec.warmup_seconds / dt))
    n_meas = int(round(spec.measure_seconds / dt))
    n_drain = int(round(spec.drain_seconds / dt))
    t0 = spec.start_epoch + (perm["index"] * 10 + rep) * (n_warm + n_meas + n_drain + 5) * dt
    measure_start = t0 + n_warm * dt
    lines: list[str] = []
    add = lines.append
    meas_sent: list[float] = []
    meas_recv: list[float] = []
    wait_tot = [0.0] * len(waits)
    task_tot = [0.0] * len(waits)
    max_xq = 0.0
    max_q = 0.0
    backlog = 0.0
    cpu_client: list[float] = []
    cpu_server: list[float] = []
    gauss = rng.gauss
    for k in range(n_warm + n_meas + n_drain):
        phase = "warmup" if k < n_warm else ("measure" if k < n_warm + n_meas else "drain")
        ramp = min(1.0, (k + 1) / max(1, n_warm * 0.5)) if phase == "warmup" else 1.0
        elapsed = (k + 1) * dt
        ts = t0 + elapsed
        if phase == "drain":
            sent = 0.0
            recv = min(backlog / dt, recv_mean * 1.2) if backlog > 0 else 0.0
        else:
            sent = max(0.0, send_mean * ramp * (1.0 + gauss(0.0, 0.05)))
            cap = recv_mean * ramp * (1.0 + gauss(0.0, 0.05))
            recv = max(0.0, min(cap, sent + backlog / dt))
        backlog = max(0.0, backlog + (sent - recv) * dt)
        head = f'{{"ts":{ts:.3f},"elapsed_s":{elapsed:.3f},"phase":"{phase}","family":"'
        act = ramp if phase != "drain" else 0.3
        for w, (name, rate) in enumerate(zip(waits, wait_rates)):
            v = max(0.0, rate * act * (1.0 + gauss(0.0, 0.1)))
            tasks = v / 4.0
            add(f'{head}waits","metric":"wait_ms_per_s","key":"{name}","value":{_fmt(v)}}}')
            add(f'{head}waits","metric":"waiting_tasks_per_s","key":"{name}","value":{_fmt(tasks)}}}')
            if phase == "measure":
                wait_tot[w] += v * dt
                task_tot[w] += tasks * dt
        xq_vals = []
        for n in range(1, i + 1):
            xq = max(0.0, per_init * ramp * 0.05 * m["contention"] * (1.0 + gauss(0.0, 0.2)))
            if phase == "drain":
                xq *= 0.1
            xq = float(round(xq))
            xq_vals.append(xq)
            add(f'{head}queues","metric":"depth","key":"xmitq.i{n}","value":{_fmt(xq)}}}')
        qd = float(round(backlog + recv * 0.02))
        add(f'{head}queues","metric":"depth","key":"queue","value":{_fmt(qd)}}}')
        running = float(min(readers, max(1, math.ceil(recv / 2500.0)))) if recv > 0 else 0.0
        started = running if k == 0 else 0.0
        limit = 0.2 if recv / 2500.0 > readers else 0.0
        add(f'{head}activation","metric":"tasks_running","key":"","value":{_fmt(running)}}}')
        add(f'{head}activation","metric":"tasks_started_per_s","key":"","value":{_fmt(started)}}}')
        add(f'{head}activation","metric":"task_limit_reached_per_s","key":"","value":{_fmt(limit)}}}')
        add(f'{head}activation","metric":"procs_invoked_per_s","key":"","value":{_fmt(running * 0.5)}}}')
        for n in range(1, i + 1):
            add(f'{head}broker","metric":"sends_per_s","key":"i{n}","value":{_fmt(sent / i)}}}')
        add(f'{head}broker","metric":"receives_per_s","key":"target","value":{_fmt(recv)}}}')
        add(f'{head}broker","metric":"enqueued_per_s","key":"target","value":{_fmt(recv)}}}')
        add(f'{head}throughput","metric":"sent_per_s","key":"","value":{_fmt(sent)}}}')
        add(f'{head}throughput","metric":"received_per_s","key":"","value":{_fmt(recv)}}}')
        cc = min(100.0 * i, 4.0 + 0.012 * sent) * (1.0 + gauss(0.0, 0.05))
        sc = min(200.0, 3.0 + 0.009 * (sent + recv)) * (1.0 + gauss(0.0, 0.05))
        add(f'{head}host","metric":"cpu_percent","key":"client","value":{_fmt(cc)}}}')
        add(f'{head}host","metric":"cpu_percent","key":"server","value":{_fmt(sc)}}}')
        add(f'{head}host","metric":"rss_bytes","key":"client","value":{_fmt(2.0e8 + 1.5e6 * i * t)}}}')
        add(f'{head}host","metric":"rss_bytes","key":"server","value":{_fmt(6.0e8 + 40.0 * backlog)}}}')
        add(f'{head}host","metric":"system_cpu_percent","key":"","value":{_fmt(min(100.0, (cc + sc) / 2))}}}')
        add(f'{head}host","metric":"system_memory_percent","key":"","value":{_fmt(12.0 + backlog / 1e5)}}}')
        if phase == "measure":
            meas_sent.append(float(_fmt(sent)))
            meas_recv.append(float(_fmt(recv)))
            max_xq = max(max_xq, *xq_vals)
            max_q = max(max_q, qd)
            cpu_client.append(cc)
            cpu_server.append(sc)

    send_rate = statistics.fmean(meas_sent) if meas_sent else 0.0
    receive_rate = statistics.fmean(meas_recv) if meas_recv else 0.0
    sent_total = int(round(send_rate * spec.measure_seconds))
    lag = max(0.0, 1.0 - m["receive"] / m["send"]) if m["send"] else 0.0  # the target falling behind
    sp50 = 1000.0 * t / max(per_init, 1e-9) * math.exp(gauss(0.0, 0.03))
    send_lat = {"count": sent_total, "mean": sp50 * 1.15, "p50": sp50, "p95": sp50 * 1.8 * math.exp(gauss(0, .03)),
                "p99": sp50 * 2.6 * math.exp(gauss(0, .05)), "max": sp50 * 8.0}
    ep50 = sp50 * 1.4 + 3.0 + lag * spec.measure_seconds * 400.0
    e2e_lat = {"count": int(round(receive_rate * spec.measure_seconds)), "mean": ep50 * 1.2, "p50": ep50,
               "p95": ep50 * 2.1 * math.exp(gauss(0, .03)), "p99": ep50 * 3.2 * math.exp(gauss(0, .05)),
               "max": ep50 * 9.0}
    send_lat = {k: (round(v, 4) if k != "count" else v) for k, v in send_lat.items()}
    e2e_lat = {k: (round(v, 4) if k != "count" else v) for k, v in e2e_lat.items()}
    total_wait = sum(wait_tot) or 1.0
    top = sorted(range(len(waits)), key=lambda w: -wait_tot[w])[:5]
    client_bound = t == 1
    received_total = sent_total
    users = i * t
    cpu_client_mean = round(statistics.fmean(cpu_client), 2) if cpu_client else 0.0
    tasks = min(readers, max(1, math.ceil(receive_rate / 2500.0)))
    summary = RepetitionSummary.of(
        run_id=run_id, permutation_id=perm["id"], repetition=rep, permutation=perm,
        target=TargetRef(kind=spec.target_kind, label=spec.label,
                         profile=_profile(perm["server"], spec.target_kind)),
        warmup_seconds=spec.warmup_seconds, measure_seconds=spec.measure_seconds,
        measure_start=measure_start, measure_end=measure_start + n_meas * dt, span_seconds=n_meas * dt,
        spawn_complete=t0 + min(n_warm, 1) * dt,
        dialogs_created=i * (1 if perm["dialogs_shared"] else t) * perm["dialogs_every_n"],
        usable_dialogs=i * (1 if perm["dialogs_shared"] else t),
        messages_sent=sent_total, messages_sent_client=sent_total,
        messages_received=received_total, messages_lost=0, drained=True,
        per_initiator=[InitiatorResult(initiator=n, sent=sent_total // i, received=received_total // i, lost=0,
                                       xmitq_left=0) for n in range(1, i + 1)],
        send_rate=round(send_rate, 4), receive_rate=round(receive_rate, 4),
        send_latency_ms=LatencySummary(**send_lat), e2e_latency_ms=LatencySummary(**e2e_lat),
        top_waits=[TopWait(wait_type=waits[w], wait_time_ms=round(wait_tot[w], 3),
                           waiting_tasks=int(task_tot[w]), share=round(wait_tot[w] / total_wait, 4))
                   for w in top],
        max_xmitq_depth=int(max_xq), max_queue_depth=int(max_q),
        activation_tasks_started=tasks, activation_tasks_max_running=tasks,
        client_cpu_percent=cpu_client_mean,
        server_cpu_percent=round(statistics.fmean(cpu_server), 2) if cpu_server else 0.0,
        worker_cpu_percent={f"worker.i{n}": round(cpu_client_mean / i, 2) for n in range(1, i + 1)},
        client_bound=client_bound, users_expected=users, users_spawned=users, users_active=users,
        errors=0, error_samples=[], collector_errors=[], poison_messages=0, queue_disabled=False,
        status="client_bound" if client_bound else "ok",
    )
    rep_dir = perm_dir / f"rep-{rep:02d}"
    write_atomic(rep_dir / "samples.jsonl", "\n".join(lines) + "\n", DURABLE)
    write_json(rep_dir / "latency.json",
               {"schema": "ssbench.latency/1", "unit": "us", "send": _histogram(rng, send_lat, send_lat["count"]),
                "e2e": _histogram(rng, e2e_lat, e2e_lat["count"])}, DURABLE)
    write_atomic(rep_dir / "locust_stats.csv",
                 "Type,Name,Request Count,Failure Count,Median Response Time,Average Response Time\n"
                 f"SEND,{perm['id']},{sent_total},0,{round(send_lat['p50'])},{round(send_lat['mean'])}\n", DURABLE)
    write_json(rep_dir / "summary.json", summary, DURABLE)   # last: a repetition is complete when it has one
    return summary


def _histogram(rng: random.Random, lat: dict[str, float], count: int, bins: int = 40) -> dict[str, int]:
    """A sparse µs histogram roughly matching the percentiles (for the layout, not for analysis)."""
    if count <= 0:
        return {}
    p50 = max(lat["p50"], 0.001) * 1000.0
    sigma = max(0.05, math.log(max(lat["p99"], lat["p50"] * 1.01) * 1000.0 / p50) / 2.326)
    hist: dict[str, int] = {}
    per = max(1, count // bins)
    for _ in range(bins):
        us = max(1, int(p50 * math.exp(rng.gauss(0.0, sigma))))
        hist[str(us)] = hist.get(str(us), 0) + per
    return hist


def _write_permutation(args: tuple) -> dict[str, Any]:
    run_dir, perm, spec, run_id = args
    perm_dir = Path(run_dir) / perm["id"]
    summaries = [write_repetition(perm_dir, perm, rep, spec, run_id)
                 for rep in range(1, spec.repetitions + 1)]
    write_json(perm_dir / "summary.json", summarize_permutation(perm, summaries), DURABLE)
    return {"id": perm["id"], "reps": len(summaries)}


def synthesize(results_dir: str | Path, spec: SynthSpec | None = None, run_id: str | None = None,
               workers: int = 1) -> Path:
    """Write one complete synthetic run under ``results_dir`` and return its directory.

    ``workers`` > 1 writes permutations in parallel processes (the benchmark's data sets)."""
    spec = spec or small_spec()
    run_id = run_id or f"20261121-153700-{spec.name}"
    run_dir = Path(results_dir) / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    perms = list(iter_permutations(spec))
    tasks = [(str(run_dir), p, spec, run_id) for p in perms]
    if workers > 1 and len(tasks) > 1:
        with ProcessPoolExecutor(max_workers=workers) as ex:
            list(ex.map(_write_permutation, tasks, chunksize=max(1, len(tasks) // (workers * 8))))
    else:
        for task in tasks:
            _write_permutation(task)
    axes = {"initiators": list(spec.initiators), "threads": list(spec.threads),
            "dialogs": list(spec.dialogs), "payload_bytes": list(spec.payloads),
            "server": list(spec.servers)}
    run_settings = {"warmup_seconds": spec.warmup_seconds, "measure_seconds": spec.measure_seconds,
                    "repetitions": spec.repetitions, "drain_timeout_seconds": 60.0,
                    "sample_interval_seconds": spec.interval, "spawn_rate": 50.0}
    profiles = {s: _profile(s, spec.target_kind) for s in spec.servers if _profile(s, spec.target_kind) != s}
    run = RunRecord(
        status="complete", run_id=run_id,
        started="2026-11-21T15:37:00.000Z", ended="2026-11-21T18:37:00.000Z",
        ssbench={"version": "0.1.0", "git_commit": "synthetic", "git_dirty": False},
        matrix={"name": spec.name, "file": f"matrices/{spec.name}.yaml", "sha256": "0" * 64,
                "permutations": len(perms), "axes": axes, "run": run_settings,
                "broker": {"max_queue_readers": spec.max_queue_readers, "receive_top": 10000,
                           "waitfor_timeout_ms": 3000, "monitor_interval_seconds": 5.0},
                "embedded_profiles": profiles},
        target={"kind": spec.target_kind, "label": spec.label, "versions": {}, "topology": {},
                "synthetic": True},
        software={"python": "3.11", "synthetic": True},
        host={"hostname": "synthetic", "platform": "synthetic", "cpu_model": "synthetic",
              "cpu_count": os.cpu_count(), "memory_bytes": 0},
        argv=["tests/support/synth.py"],
        permutations_done=len(perms), permutations_total=len(perms),
        extra={"synthetic": True},
    )
    write_json(run_dir / "run.json", run, DURABLE)
    write_atomic(run_dir / "matrix.yaml", _matrix_yaml(spec, axes, run_settings), DURABLE)
    return run_dir


def _matrix_yaml(spec: SynthSpec, axes: dict, run_settings: dict) -> str:
    lines = [f"# synthetic run written by tests/support/synth.py (spec {asdict(spec)!r})",
             f"name: {spec.name}", "axes:"]
    lines += [f"  {k}: {json.dumps(v)}" for k, v in axes.items()]
    lines += ["run:"] + [f"  {k}: {v}" for k, v in run_settings.items()]
    return "\n".join(lines) + "\n"
