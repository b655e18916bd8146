"""The exposed metrics: :class:`LiveState` turned into Prometheus metric families at each scrape
(a ``prometheus_client`` custom collector: the library writes the exposition formats).

:data:`METRICS` is the one list of what the endpoint exposes (name, type, help); docs/monitoring.md
explains each and the dashboard test checks every query against it. Labels are bounded: the
run, the permutation and the repetition (only the one in progress and the last committed are
exposed), the phase, the initiator, the worker slot, a host, a wait type (the top
:data:`~harness.metrics.live.TOP_WAITS`), a state or status word. Never a dialog, a user, a
connection string or a password: every free-text value passes :func:`harness.redact.redact_string`.
"""

from __future__ import annotations

from typing import Iterable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from ..redact import redact_string
from ..load.merge import PHASES, Buckets
from .live import LiveState, RepetitionState

REP = ("run_id", "permutation", "repetition")

#: name -> (type, labels beyond the repetition's, help). "counter" names are exposed with _total.
METRICS: dict[str, tuple[str, tuple[str, ...], str]] = {
    # the run
    "ssbench_run_info": ("gauge", ("run_id", "matrix", "target", "command"), "The run in progress (1)."),
    "ssbench_run_repetitions": ("gauge", ("run_id",),
                                "Repetitions planned in the matrix run, done and to do (auto: each round adds its own)."),
    "ssbench_run_repetitions_done": ("gauge", ("run_id",), "Repetitions complete, resumed ones included."),
    "ssbench_run_eta_seconds": ("gauge", ("run_id",), "Estimated time to the end of the run."),
    "ssbench_run_messages_lost": ("counter", ("run_id",),
                                  "Messages lost in the repetitions this process committed (0 is the only good answer)."),
    # the repetition
    "ssbench_repetition_state": ("gauge", ("state",),
                                 "1 for the repetition's state: preparing, running, draining, complete, aborted, ..."),
    "ssbench_repetition_phase": ("gauge", ("phase",),
                                 "1 for the phase of the load now: warmup, measure (the measured window), drain."),
    "ssbench_repetition_status": ("gauge", ("status",), "1 for the committed repetition's status (ok, lost, ...)."),
    "ssbench_repetition_messages_sent": ("gauge", (), "Messages sent, as the target counted them after the drain."),
    "ssbench_repetition_messages_received": ("gauge", (), "Messages received at the target after the drain."),
    "ssbench_repetition_messages_sent_client": ("gauge", (), "SENDs the client recorded (every phase)."),
    "ssbench_repetition_messages_lost": ("gauge", (), "Messages lost (sent, never received nor queued)."),
    "ssbench_repetition_messages_undelivered": ("gauge", (), "Messages still queued when the drain stopped (timed out, or the queue disabled)."),
    "ssbench_repetition_send_rate": ("gauge", (), "SENDs per second over the measured window (the summary's)."),
    "ssbench_repetition_receive_rate": ("gauge", (), "Messages received per second over the measured window."),
    # the client: the workers' recorders
    "ssbench_sends": ("counter", ("phase", "initiator", "worker"), "SENDs completed (successful)."),
    "ssbench_send_errors": ("counter", ("phase", "initiator", "worker"), "SENDs (and connects) that failed."),
    "ssbench_send_latency_seconds": ("histogram", ("phase", "initiator"),
                                     "SEND latency, merged over the initiator's workers."),
    "ssbench_send_latency_corrected_seconds": ("histogram", ("phase", "initiator"),
                                               "Open loop: SEND latency from the intended time."),
    "ssbench_send_latency_quantile_seconds": ("gauge", ("phase", "quantile"),
                                              "Exact SEND latency percentile (nearest rank), all initiators."),
    "ssbench_worker_users": ("gauge", ("initiator", "worker"), "Locust users running on the worker."),
    "ssbench_worker_cpu_percent": ("gauge", ("initiator", "worker"), "The worker process's CPU, % of one core."),
    "ssbench_client_host_cpu_percent": ("gauge", ("host",), "A client host's CPU, % of the machine."),
    "ssbench_client_host_memory_percent": ("gauge", ("host",), "A client host's memory in use, %."),
    "ssbench_client_host_memory_used_bytes": ("gauge", ("host",), "A client host's memory in use, bytes."),
    # the target: the collectors (samples.jsonl)
    "ssbench_received_messages_per_second": ("gauge", (), "Messages processed at the target per second."),
    "ssbench_messages_processed": ("counter", (), "Messages processed at the target (its tally)."),
    "ssbench_transmission_queue_depth": ("gauge", ("initiator",), "Messages in the initiator's transmission queue."),
    "ssbench_target_queue_depth": ("gauge", (), "Messages in the target queue."),
    "ssbench_activation_tasks_running": ("gauge", (), "Activation tasks (queue readers) running."),
    "ssbench_activation_tasks_started_per_second": ("gauge", (), "Activation tasks started per second."),
    "ssbench_perf_counter": ("gauge", ("object", "counter"),
                             "Broker performance counters (rates end in _per_s), as sampled."),
    "ssbench_dialogs": ("gauge", ("count",), "Dialog lifetime counts since the repetition began."),
    "ssbench_wait_time_ms_per_second": ("gauge", ("wait_type",),
                                        "The top waits: wait time per second, averaged over the last ticks."),
    "ssbench_sessions_waiting": ("gauge", ("role", "wait_type"),
                                 "Sessions of the test waiting, by role (sender: the load's; reader: the "
                                 "activated tasks) and wait type: the mean of the last tick's samples."),
    "ssbench_process_cpu_percent": ("gauge", ("role",),
                                    "CPU of this host's processes, % of one core: client (ssbench and its "
                                    "swarm), server (the database server's processes here)."),
    "ssbench_process_rss_bytes": ("gauge", ("role",), "Resident memory of those processes."),
    "ssbench_controller_cpu_percent": ("gauge", (), "This host's CPU, % of the machine."),
    "ssbench_controller_memory_percent": ("gauge", (), "This host's memory in use, %."),
    "ssbench_other_cpu_percent": ("gauge", (), "CPU taken by other processes on this host, % of one core."),
    "ssbench_steal_percent": ("gauge", (), "CPU stolen by the hypervisor, % of the machine."),
    "ssbench_cpu_probe_milliseconds": ("gauge", (), "The host's CPU probe: a fixed loop's own CPU time, ms "
                                                    "(higher: the host's CPU ran slower)."),
    "ssbench_cross_cpu_round_trip_nanoseconds": ("gauge", (), "A cache line's round trip between two of this "
                                                              "host's CPUs, ns (higher: CPUs farther apart)."),
    # end to end (the target's receive times, read after the drain)
    "ssbench_e2e_latency_seconds": ("histogram", ("phase",),
                                    "End-to-end latency of the measured window, once the repetition is committed."),
    "ssbench_e2e_latency_quantile_seconds": ("gauge", ("phase", "quantile"),
                                             "Exact end-to-end latency percentile, once committed."),
}

#: sampled (family, metric) -> exposed name, for the metrics read from one tick's samples
SAMPLED = {("throughput", "received_per_s"): "ssbench_received_messages_per_second",
           ("throughput", "processed_total"): "ssbench_messages_processed",
           ("activation", "tasks_running"): "ssbench_activation_tasks_running",
           ("activation", "tasks_started_per_s"): "ssbench_activation_tasks_started_per_second",
           ("host", "system_cpu_percent"): "ssbench_controller_cpu_percent",
           ("host", "system_memory_percent"): "ssbench_controller_memory_percent",
           ("host", "other_cpu_percent"): "ssbench_other_cpu_percent",
           ("host", "steal_percent"): "ssbench_steal_percent",
           ("cpu_speed", "probe_ms"): "ssbench_cpu_probe_milliseconds",
           ("cross_cpu", "round_trip_ns"): "ssbench_cross_cpu_round_trip_nanoseconds"}


class _Families:
    """One scrape's metric families, by name."""

    def __init__(self):
        self.f: dict = {}

    def get(self, name: str):
        fam = self.f.get(name)
        if fam is None:
            kind, extra, text = METRICS[name]
            labels = list(extra) if name.startswith("ssbench_run_") else list(REP + extra)
            cls = {"gauge": GaugeMetricFamily, "counter": CounterMetricFamily, "histogram": HistogramMetricFamily}[kind]
            fam = self.f[name] = cls(name, text, labels=labels)
        return fam

    def add(self, name: str, labels: list[str], value: float) -> None:
        self.get(name).add_metric([redact_string(str(v)) for v in labels], float(value))

    def histogram(self, name: str, labels: list[str], b: Buckets) -> None:
        buckets, s = b.cumulative()
        self.get(name).add_metric([redact_string(str(v)) for v in labels], buckets, s)

    def quantiles(self, name: str, labels: list[str], values: dict[str, float] | None) -> None:
        for q, v in (values or {}).items():
            self.add(name, labels + [q], v)


class SsbenchCollector(Collector):
    """The ``prometheus_client`` collector of a :class:`LiveState`."""

    def __init__(self, live: LiveState):
        self.live = live

    def collect(self) -> Iterator:
        f = _Families()
        with self.live.lock:
            run, reps = self.live.snapshot()
            if run is not None:
                _run(f, run)
            for rep in reps:
                _repetition(f, rep)
        yield from f.f.values()


def _run(f: _Families, run) -> None:
    f.add("ssbench_run_info", [run.run_id, run.matrix, run.target, run.command], 1)
    f.add("ssbench_run_messages_lost", [run.run_id], run.lost)
    p = run.progress
    if p is not None:
        f.add("ssbench_run_repetitions", [run.run_id], p.total)
        f.add("ssbench_run_repetitions_done", [run.run_id], p.done)
        eta = p.eta_seconds()
        if eta is not None:
            f.add("ssbench_run_eta_seconds", [run.run_id], eta)
    else:
        f.add("ssbench_run_repetitions_done", [run.run_id], run.committed)


def _repetition(f: _Families, rep: RepetitionState) -> None:
    base = [rep.run_id, rep.permutation, str(rep.repetition)]
    f.add("ssbench_repetition_state", base + [rep.state], 1)
    f.add("ssbench_repetition_phase", base + [rep.window.phase_at(rep.tick_ts)], 1)
    _client(f, base, rep)
    _sampled(f, base, rep)
    s = rep.summary
    if s is not None:
        f.add("ssbench_repetition_status", base + [s.status], 1)
        for name, value in (("sent", s.messages_sent), ("received", s.messages_received),
                            ("sent_client", s.messages_sent_client), ("lost", s.messages_lost),
                            ("undelivered", s.messages_undelivered)):
            f.add(f"ssbench_repetition_messages_{name}", base, value)
        f.add("ssbench_repetition_send_rate", base, s.send_rate)
        f.add("ssbench_repetition_receive_rate", base, s.receive_rate)
    if rep.e2e is not None:
        f.histogram("ssbench_e2e_latency_seconds", base + ["measure"], rep.e2e[0])
        f.quantiles("ssbench_e2e_latency_quantile_seconds", base + ["measure"], rep.e2e[1])


def _client(f: _Families, base: list[str], rep: RepetitionState) -> None:
    c = rep.client
    # every known worker's counters from 0 in every phase (Prometheus's advice for label values
    # known in advance): rate() and increase() see a series' first SENDs only as a rise from a
    # scraped value, and a short phase may reach the endpoint in a single step
    sends = {(i, w, ph): n for i, w, ph, n in c.get("sends", ())}
    errors = {(i, w, ph): n for i, w, ph, n in c.get("errors", ())}
    known = {(i, w, ph) for i, w, *_ in c.get("workers", ()) for ph in PHASES} | set(sends) | set(errors)
    for initiator, worker, phase in sorted(known):
        f.add("ssbench_sends", base + [phase, initiator, worker], sends.get((initiator, worker, phase), 0))
        f.add("ssbench_send_errors", base + [phase, initiator, worker], errors.get((initiator, worker, phase), 0))
    for name, key in (("ssbench_send_latency_seconds", "latency"), ("ssbench_send_latency_corrected_seconds",
                                                                    "corrected")):
        for initiator, phase, counts, sum_us in c.get(key, ()):
            f.histogram(name, base + [phase, initiator], Buckets(counts, sum_us))
    for phase, q in c.get("quantiles", {}).items():
        f.quantiles("ssbench_send_latency_quantile_seconds", base + [phase], q)
    hosts: dict[str, list] = {}
    for initiator, worker, host, users, sample in c.get("workers", ()):
        f.add("ssbench_worker_users", base + [initiator, worker], users)
        if sample:
            f.add("ssbench_worker_cpu_percent", base + [initiator, worker], sample[1])
            if host not in hosts or sample[0] > hosts[host][0]:
                hosts[host] = sample
    for host, (_ts, _proc, cpu, mem, used) in sorted(hosts.items()):
        f.add("ssbench_client_host_cpu_percent", base + [host], cpu)
        f.add("ssbench_client_host_memory_percent", base + [host], mem)
        f.add("ssbench_client_host_memory_used_bytes", base + [host], used)


def _sampled(f: _Families, base: list[str], rep: RepetitionState) -> None:
    for (family, metric, key), v in sorted(rep.samples.items()):
        name = SAMPLED.get((family, metric))
        if name is not None:
            f.add(name, base, v)
        elif family == "queues" and metric == "depth":
            if key == "queue":
                f.add("ssbench_target_queue_depth", base, v)
            elif key.startswith("xmitq.i"):
                f.add("ssbench_transmission_queue_depth", base + [key[len("xmitq.i"):]], v)
        elif family in ("activation", "broker"):
            f.add("ssbench_perf_counter", base + [key or "Broker Activation", metric], v)
        elif family == "dialogs" and metric != "endpoints":
            f.add("ssbench_dialogs", base + [metric], v)
        elif family == "host" and metric in ("cpu_percent", "rss_bytes") and key in ("client", "server"):
            f.add(f"ssbench_process_{metric}", base + [key], v)
        elif family == "session_waits" and metric == "waiting":
            role, _, wait_type = key.partition("/")
            f.add("ssbench_sessions_waiting", base + [role, wait_type], v)
    for wait_type, ms in rep.waits.top():
        f.add("ssbench_wait_time_ms_per_second", base + [wait_type], ms)


def exposed_names(kinds: Iterable[str] = ("gauge", "counter", "histogram")) -> set[str]:
    """Every series name the endpoint can expose (counters with _total; histograms with
    _bucket, _count and _sum), for the dashboard test and the docs."""
    out = set()
    for name, (kind, _, _) in METRICS.items():
        if kind not in kinds:
            continue
        if kind == "counter":
            out.add(name + "_total")
        elif kind == "histogram":
            out.update(name + s for s in ("_bucket", "_count", "_sum"))
        else:
            out.add(name)
    return out
