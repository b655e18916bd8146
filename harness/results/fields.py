"""The field registry: every matrix axis and every repetition-summary field, declared once.

A :class:`Field` has a unique name, type, unit, section, direction and one line of meaning.
The summary's model, its flat row (:func:`flat_row`), the Spark schema, the permutation keys
(:func:`axis_names`) and docs/results.md's tables (:func:`markdown`) all come from it. A new
summary field is one :class:`Field` here plus the code that measures it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..brokersettings import BrokerSettings
from .records import Alternation, ClientHost, Growth, InitiatorResult, LatencySummary, TargetRef, TopWait, WorkerResult

HIGHER, LOWER = "higher", "lower"

#: repetition statuses, in precedence order: the first that applies is the repetition's status
#: (harness.results.summary.repetition_status)
STATUSES = ("lost", "duplicated", "undelivered", "queue_disabled", "server_frozen", "errors", "users_idle",
            "receive_stalled", "noisy_storage", "behind", "noisy_host", "client_bound", "ok")
#: statuses of a window disturbed relative to the rest of its run (the target froze, its receive
#: side stalled, the disk was far slower than the run's typical): shown everywhere with their
#: figures, and kept out of every verdict. ``noisy_host`` is not among them: its test is absolute
#: (other processes' CPU), so on a shared machine it flags a whole run, both sides of every
#: comparison alike, and leaving it out would leave such a machine no verdict at all
#: (docs/results.md, "Disturbed repetitions").
DISTURBED_STATUSES = ("server_frozen", "receive_stalled", "noisy_storage")
#: the statuses whose repetitions count in no verdict
KEPT_OUT_OF_VERDICTS: frozenset[str] = frozenset(DISTURBED_STATUSES)


def counts_in_verdicts(status: str | None) -> bool:
    """Does a repetition with this status count in a verdict? The one predicate the analysis,
    the gate and the runner's auto loop ask: no for :data:`KEPT_OUT_OF_VERDICTS`."""
    return status not in KEPT_OUT_OF_VERDICTS


@dataclass(frozen=True)
class Field:
    """One value of a repetition summary. ``path``: where in the summary a column that is not a
    field of its own reads (a latency percentile); ``column``: a column of the flat row."""

    name: str
    type: Any
    section: str
    meaning: str
    unit: str = ""
    direction: str = ""
    required: bool = False
    path: tuple[str, ...] = ()
    column: bool = True
    summarized: bool = False    # summarized across repetitions (permutation summary.json, permutations table)
    #: the least value a summary may hold (its reader refuses less); an integer field is a
    #: count, at least 0, unless it says otherwise
    minimum: float | None = None

    def __post_init__(self):
        if self.minimum is None and self.type is int:
            object.__setattr__(self, "minimum", 0)

    @property
    def higher_is_better(self) -> bool | None:
        return {HIGHER: True, LOWER: False}.get(self.direction)


@dataclass(frozen=True)
class Axis:
    """One setting of a permutation (``summary.json``'s ``permutation``). ``role``: scale
    (initiators, threads), strategy (the dialog strategy and what follows from it), technique (an
    axis compared against its baseline), load (the offered rate), setting (held equal in every
    comparison), broker (a broker setting held equal), derived (total_threads) or identity.
    ``matrix``: ``required`` or ``optional`` in a matrix file's axes (empty: not a matrix axis),
    under ``alias`` when the file names it otherwise, and ``token`` in a permutation's id."""

    name: str
    type: Any
    role: str
    meaning: str
    default: Any = None
    broker: bool = False    # inside the permutation's ``broker`` settings
    matrix: str = ""
    token: str = ""
    alias: str = ""

    @property
    def matrix_name(self) -> str:
        return self.alias or self.name


# --------------------------------------------------------------------------- axes

#: each broker setting: its meaning, its role, and where a matrix may make an axis of it, its
#: id's token (and the matrix's name for it)
_BROKER = {
    "max_queue_readers": ("MAX_QUEUE_READERS of the target queue's activation", "technique", "r", ""),
    "receive_top": ("RECEIVE TOP (n) in the activation procedure", "technique", "top", ""),
    "waitfor_timeout_ms": ("WAITFOR (RECEIVE ...), TIMEOUT of the activation procedure", "technique", "wf", ""),
    "monitor_interval_seconds": ("the queue monitor's period", "broker", "", ""),
    "high_priority_share": ("share of dialogs begun at high priority (a priority axis)", "technique", "hp",
                            "priority"),
    "processing_us_per_message": ("the activation procedure's own work per message", "broker", "proc", ""),
    "transport_rate_limit": ("the emulated transport's limit, messages per second per initiator", "broker", "", ""),
    "client_cpu_us_per_send": ("CPU each SEND costs its Locust worker (emulation knob)", "broker", "", ""),
}


def _broker_axis(f: dataclasses.Field) -> Axis:
    meaning, role, token, alias = _BROKER[f.name]
    return Axis(f.name, f.type, role, meaning, default=f.default, broker=True, matrix="optional" if token else "",
                token=token, alias=alias)


AXES: tuple[Axis, ...] = (
    Axis("id", str, "identity", "the permutation's stable id"),
    Axis("index", int, "identity", "its 1-based position in the matrix's order"),
    Axis("initiators", int, "scale", "initiator databases (the paper's test client computers)",
         matrix="required", token="i"),
    Axis("threads", int, "scale", "client threads (Locust users) per initiator", matrix="required", token="t"),
    Axis("total_threads", int, "derived", "initiators x threads"),
    Axis("dialogs", str, "strategy", "dialog strategy: per_thread, trick150, shared, every_<n>", matrix="required"),
    Axis("dialogs_every_n", int, "strategy", "every N-th dialog begun is used (150: the 150 trick)"),
    Axis("dialogs_shared", bool, "strategy", "one dialog shared by every thread"),
    Axis("payload_bytes", int, "setting", "message body size, bytes", default=100, matrix="required", token="p"),
    Axis("server", str, "setting", "server profile", matrix="required"),
    *(_broker_axis(f) for f in dataclasses.fields(BrokerSettings)),
    Axis("rate", float, "load", "offered SENDs per second per initiator (open loop); null: closed loop",
         matrix="optional"),
    Axis("messages_per_dialog", int, "technique", "messages a dialog carries before it is retired; null: reuse",
         matrix="optional"),
    Axis("fire_and_forget", bool, "technique", "the initiator ENDs a retired dialog right after its last SEND",
         default=False, matrix="optional"),
    Axis("case", str, "setting", "the matrix case (cases:) it belongs to; null: a matrix without cases"),
)
#: the axes held equal or compared within a run
COMPARED_ROLES = ("scale", "strategy", "setting", "broker", "load", "technique")


def axis_names(*roles: str, but: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The flat names of the axes of ``roles`` (all when none) in registry order, less ``but``:
    the key tuples that identify a permutation or hold a comparison's context equal."""
    return tuple(a.name for a in AXES if (not roles or a.role in roles) and a.name not in but)


#: what identifies a permutation within its run: every axis but the identity and the derived
COMPARISON_KEYS = ("run_id",) + axis_names(*COMPARED_ROLES)


# --------------------------------------------------------------------------- summary fields

def _section(section: str, *fields: tuple) -> list[Field]:
    out = []
    for spec in fields:
        name, tp, meaning, *rest = spec
        kw = rest[0] if rest else {}
        out.append(Field(name, tp, section, meaning, **kw))
    return out


def _lat(name: str, stat: str, what: str) -> Field:
    return Field(f"{name}_{stat}_ms", float, "latency", f"{what} {stat}", unit="ms", direction=LOWER,
                 path=(f"{name}_latency_ms", stat), summarized=True)


_N, _MS, _PCT, _RATE = ({"unit": "messages"}, {"unit": "ms", "minimum": 0}, {"unit": "% of one core", "minimum": 0},
                        {"unit": "msg/s", "minimum": 0})

FIELDS: tuple[Field, ...] = tuple([
    *_section("", ("run_id", str, "the run's id (its directory's name)", {"required": True}),
              ("permutation_id", str, "the permutation's id", {"required": True}),
              ("repetition", int, "the repetition's number, from 1", {"required": True, "minimum": 1}),
              ("permutation", dict, "the permutation's axes (AXES)", {"required": True, "column": False}),
              ("target", TargetRef, "the target's kind, label and server profile", {"required": True, "column": False}),
              ("status", str, "the first that applies of STATUSES", {"required": True}),
              ("alternation", Alternation, "run.alternate: the members sharing this window, the slice, this one's "
                                           "index", {"column": False}),
              ("collector_errors", list[str], "collectors that failed during the repetition (first 10)",
               {"column": False}),
              ("web", dict, "ssbench web sessions only: the form's values and how the session ended",
               {"column": False})),
    *_section("window",
              ("warmup_seconds", float, "warm-up before the measured window", {"unit": "s", "required": True}),
              ("measure_seconds", float, "seconds measured: the window, or an alternated member's own slices",
               {"unit": "s", "required": True}),
              ("measure_start", float, "the window's start, epoch seconds", {"unit": "s", "required": True}),
              ("measure_end", float, "the window's end, epoch seconds", {"unit": "s", "required": True}),
              ("span_seconds", float, "the window's wall-clock length (its shared figures are over it)",
               {"unit": "s"}),
              ("spawn_complete", float, "when the last Locust user had started and tried its first connect: the warm-up's start, epoch seconds", {"unit": "s"})),
    *_section("accounting",
              ("messages_sent", int, "SENDs committed (the target's count), warm-up excluded", {**_N, "required": True}),
              ("messages_sent_client", int, "SENDs the Locust users saw succeed", _N),
              ("messages_sent_client_cut", int, "SENDs still running when their user was stopped: "
                                                "messages_sent_client may be short by this many", _N),
              ("messages_received", int, "distinct messages processed by the target after the drain",
               {**_N, "required": True}),
              ("messages_lost", int, "sent, and neither received, poison nor still queued: per dialog, sequence "
                                     "numbers sent and found nowhere", {**_N, "required": True}),
              ("messages_duplicated", int, "tallies of a message beyond its first (exactly-once broken)", _N),
              ("messages_phantom", int, "messages received, poison or queued under a (dialog, sequence number) "
                                        "never sent (exactly-once broken; they count in no received message)", _N),
              ("messages_undelivered", int, "still queued when the drain stopped (timed out, or the queue "
                                            "disabled): there, not lost", _N),
              ("poison_messages", int, "data messages in the error table and never received", _N),
              ("drained", bool, "every queue empty after the drain"),
              ("queue_disabled", bool, "five rollbacks in a row disabled the target queue"),
              ("broker_restarts", int, "the embedded broker process died and was restarted"),
              ("dialogs_created", int, "dialogs begun at prepare", {"unit": "dialogs"}),
              ("usable_dialogs", int, "dialogs the threads send on", {"unit": "dialogs"}),
              ("per_initiator", list[InitiatorResult], "each initiator's accounting (sums to the totals)",
               {"column": False})),
    *_section("load",
              ("send_rate", float, "SENDs completed in the measured window per second",
               {**_RATE, "direction": HIGHER, "required": True, "summarized": True}),
              ("receive_rate", float, "messages processed by the target in the window per second",
               {**_RATE, "direction": HIGHER, "required": True, "summarized": True}),
              ("users_expected", int, "Locust users (client threads) planned", {"unit": "users"}),
              ("users_spawned", int, "Locust users started", {"unit": "users"}),
              ("users_active", int, "users completing SENDs from the window's start to its end", {"unit": "users"}),
              ("errors", int, "failed SENDs", {"unit": "SENDs"}),
              ("error_samples", list[str], "the first failed SENDs' messages", {"column": False}),
              ("offered_rate", float, "open loop: SENDs per second offered (rate x initiators)",
               {**_RATE, "summarized": True}),
              ("achieved_rate", float, "open loop: SENDs completed per second (= send_rate)",
               {**_RATE, "summarized": True}),
              ("behind", bool, "open loop: achieved_rate below offered_rate by more than run.rate_tolerance"),
              ("sends_in_flight_at_end", int, "SENDs started in the window and still running at its end", _N),
              ("workers", list[WorkerResult], "each Locust worker process: users, SENDs, errors, CPU",
               {"column": False}),
              ("client_hosts", list[ClientHost], "each client host: CPU and memory", {"column": False})),
    *_section("latency",
              ("send_latency_ms", LatencySummary, "SEND latency (service time) of the window's SENDs",
               {"unit": "ms", "required": True, "column": False}),
              ("e2e_latency_ms", LatencySummary, "end-to-end latency, SEND to the target's processing",
               {"unit": "ms", "required": True, "column": False}),
              ("send_latency_corrected_ms", LatencySummary, "open loop: SEND latency from each SEND's intended "
                                                            "time (coordinated omission corrected)",
               {"unit": "ms", "column": False}),
              ("send_latency_high_ms", LatencySummary, "a priority axis: SEND latency of high-priority dialogs",
               {"unit": "ms", "column": False}),
              ("send_latency_normal_ms", LatencySummary, "a priority axis: SEND latency of the others",
               {"unit": "ms", "column": False}),
              ("e2e_latency_high_ms", LatencySummary, "a priority axis: end-to-end latency of high-priority "
                                                      "dialogs", {"unit": "ms", "column": False}),
              ("e2e_latency_normal_ms", LatencySummary, "a priority axis: end-to-end latency of the others",
               {"unit": "ms", "column": False})),
    *[_lat(n, s, w) for n, w in (("send", "SEND latency"), ("e2e", "end-to-end latency"))
      for s in ("p50", "p95", "p99")],
    Field("send_corrected_p50_ms", float, "latency", "open loop: corrected SEND latency p50", unit="ms",
          direction=LOWER, path=("send_latency_corrected_ms", "p50"), summarized=True),
    Field("send_corrected_p99_ms", float, "latency", "open loop: corrected SEND latency p99", unit="ms",
          direction=LOWER, path=("send_latency_corrected_ms", "p99"), summarized=True),
    Field("high_priority_sends", int, "latency", "a priority axis: SENDs on high-priority dialogs",
          path=("send_latency_high_ms", "count")),
    Field("e2e_high_p99_ms", float, "latency", "a priority axis: end-to-end p99 of high-priority dialogs",
          unit="ms", direction=LOWER, path=("e2e_latency_high_ms", "p99")),
    Field("e2e_normal_p99_ms", float, "latency", "a priority axis: end-to-end p99 of the others", unit="ms",
          direction=LOWER, path=("e2e_latency_normal_ms", "p99")),
    *_section("host",
              ("client_cpu_percent", float, "ssbench's and Locust's processes, window mean", _PCT),
              ("server_cpu_percent", float, "the database server's CPU, window mean: its processes on this host, "
                                            "or a remote SQL Server's resource pools sampled every tick (summed over "
                                            "its instances)", _PCT),
              ("worker_cpu_percent", dict[str, float], "each local Locust worker (key worker.i<K>.w<W>)",
               {**_PCT, "column": False}),
              ("client_bound", bool, "a Locust worker process at or above 90 % of a core"),
              ("other_cpu_percent", float, "processes that are not ssbench's, its swarm's or the server's", _PCT),
              ("steal_percent", float, "CPU stolen by the hypervisor", {"unit": "% of the machine"}),
              ("noisy_host", bool, "other_cpu_percent > 25, steal_percent > 5 or slow_cpu: a shared machine"),
              ("cpu_probe_ms", float, "a fixed loop's CPU time over the window (mean of the ticks' medians)", _MS),
              ("cpu_reference_ms", float, "the run's typical probe: median of the idle references", _MS),
              ("cpu_speed", float, "reference / probe: 0.7 = the host ran 30 % slower"),
              ("slow_cpu", bool, "cpu_speed < 0.8 (noisy_host)"),
              ("cross_cpu_ns", float, "a cache line's round trip between two CPUs of this machine (recorded)",
               {"unit": "ns"}),
              ("cpu_pinning", dict[str, list[int]], "run.pin_cpus: the CPU sets used", {"column": False}),
              ("server_on_host", bool, "the database server runs on this host"),
              ("server_cpu_utilization", float, "share of the server's CPUs it used; under a cgroup CPU quota, "
                                                "at least the share of the quota its cgroup used (SQL Server: the "
                                                "busiest instance over its schedulers)"),
              ("host_cpu_utilization", float, "share of this host's CPUs busy"),
              ("host_cpus", int, "CPUs of this host"),
              ("server_cpu_quota", float, "the local server's cgroup CPU quota in CPUs (a container's "
                                          "--cpus), when one is set"),
              ("client_cpu_demand", float, "the busiest Locust worker thread on a CPU or waiting for one",
               {"unit": "%"}),
              ("server_cpu_demand", float, "the server's processes on a CPU or waiting for one", _PCT)),
    *_section("disturbance",
              ("freeze_seconds", float, "longest gap between collector ticks beyond the interval", {"unit": "s"}),
              ("server_frozen", bool, "freeze_seconds >= 2: the target answered nobody"),
              ("receive_stall_seconds", float, "longest span with nothing received while SENDs went on",
               {"unit": "s"}),
              ("receive_send_ratio", float, "receive_rate / send_rate"),
              ("queue_growth", float, "the queues' depth, last tick of the window minus first", _N),
              ("receive_stalled", bool, "a receive stall of 1.5 s, or (closed loop) receive below half of send "
                                        "while the queues grew"),
              ("stall_chains", list[str], "blocking chains seen during the longest stall (lock sampler; [] when none)",
               {"column": False}),
              ("commit_latency_ms", float, "the server's mean log flush (median over the ticks)", _MS),
              ("storage_probe_ms", float, "a 4 KiB overwrite + fdatasync beside the data: window median", _MS),
              ("storage_reference_ms", float, "the run's typical storage probe (idle references)", _MS),
              ("other_write_mib_s", float, "what processes other than the server's and ssbench's wrote "
                                           "(their /proc/PID/io write_bytes)", {"unit": "MiB/s"}),
              ("noisy_storage", bool, "probe >= 3 x typical and >= typical + 2 ms while other processes "
                                      "wrote >= 1 MiB/s: another writer"),
              ("log_events", list[str], "what ran on the test's databases' logs inside the window: a log that "
                                        "autogrew, a backup (SQL Server's msdb.dbo.backupset); a warning each",
               {"column": False})),
    *_section("waits",
              ("top_waits", list[TopWait], "the window's top waits (wait time, signal wait included; tasks; share; "
                                           "its signal wait where the target tells)", {"column": False}),
              ("signal_wait_ms_per_s", float, "every wait type's signal wait per second: tasks runnable, waiting "
                                              "for a CPU (SQL Server)", {"unit": "ms/s"}),
              ("session_waits", dict[str, dict[str, float]], "the test's sessions waiting, sampled: mean sessions "
                                                             "by role (sender, reader) and wait type",
               {"column": False}),
              ("session_wait_samples", int, "samples behind session_waits"),
              ("broker_waits", dict[str, float], "Service Broker's own waits and latches, ms per second",
               {"column": False}),
              ("page_latch_objects", dict[str, float], "tasks waiting on a page latch per tick, by object",
               {"column": False})),
    *_section("queues",
              ("max_xmitq_depth", float, "the transmission queues' largest depth sampled", _N),
              ("max_queue_depth", float, "the target queue's largest depth sampled", _N),
              ("xmitq_depth_growth", Growth, "the transmission queues' depth: Theil-Sen slope with its interval",
               {"column": False}),
              ("queue_depth_growth", Growth, "the target queue's depth: Theil-Sen slope with its interval",
               {"column": False}),
              ("transport_rate", float, "messages leaving the transmission queues per second", _RATE)),
    *_section("activation",
              ("activation_tasks_started", float, "activation tasks started since prepare"),
              ("activation_tasks_max_running", float, "most activation tasks running at once"),
              ("activation_tasks_started_per_s", float, "activation tasks started per second of the window"),
              ("activation_tasks_started_in_window", int, "tasks started between the ticks bounding the window"),
              ("activation_tasks_ended_in_window", int, "tasks ended between the ticks bounding the window"),
              ("activation_tasks_running", float, "the test queue's activation tasks, window mean"),
              ("activation_max_readers", int, "its MAX_QUEUE_READERS"),
              ("activation_at_max_share", float, "share of ticks at MAX_QUEUE_READERS"),
              ("activation_task_limit_per_s", float, "Task Limit Reached per second"),
              ("procedure_us_per_message", float, "the activation procedure's own time per data message",
               {"unit": "us"}),
              ("procedure_busy", float, "the procedure's time inside the window per second"),
              ("messages_per_receive", float, "messages per RECEIVE that returned some"),
              ("receives_per_s", float, "RECEIVEs per second", {"unit": "1/s"})),
    *_section("dialogs",
              ("dialogs_begun", int, "BEGIN DIALOGs of the SEND path", {"unit": "dialogs"}),
              ("dialogs_ended", int, "END CONVERSATIONs of retired dialogs", {"unit": "dialogs"}),
              ("dialogs_ended_in_window", int, "of those, between the ticks bounding the window", {"unit": "dialogs"}),
              ("dialog_errors_received", int, "Error messages that reached a listening initiator endpoint"),
              ("dialog_errors_lost", int, "Error messages for an endpoint its side had ended"),
              ("endpoints", dict[str, int], "conversation endpoints left behind, by side and state",
               {"column": False})),
    *_section("backlog",
              ("backlog_messages", int, "messages queued with activation off (run.backlog_messages)", _N),
              ("drain_seconds", float, "activation on to an empty queue",
               {"unit": "s", "direction": LOWER, "summarized": True}),
              ("drain_rate", float, "backlog_messages / drain_seconds", {**_RATE, "direction": HIGHER, "summarized": True})),
])
BY_NAME: dict[str, Field] = {f.name: f for f in FIELDS}
#: summary.json's sections in order ("" is the top level)
SECTIONS: tuple[str, ...] = tuple(dict.fromkeys(f.section for f in FIELDS))
#: the fields stored in a section (not the columns that read into another field)
STORED: dict[str, tuple[Field, ...]] = {s: tuple(f for f in FIELDS if f.section == s and not f.path)
                                        for s in SECTIONS}
#: the columns computed from a row (harness.results.fields.derive), after the stored ones
DERIVED = (Field("perm_id", str, "", "the permutation's id"),
           Field("perm_index", int, "", "its position in the matrix"),
           Field("target_kind", str, "", "the target's kind"), Field("target_label", str, "", "the target's label"),
           Field("target_profile", str, "", "the server profile's settings"),
           Field("alt_window", float, "", "an alternated window's start: the window its members shared"),
           Field("alternated", bool, "", "the window was shared by more than one permutation"),
           Field("disturbed", bool, "", "a disturbed status: counts in no verdict"))


#: the top-level fields a flat row names otherwise (run_id stays; the id and the number as
#: perm_id and rep, the permutation as its axes)
_RENAMED = ("permutation_id", "repetition", "permutation")


def columns() -> tuple[str, ...]:
    """The repetitions table's columns: the run, permutation and repetition, the axes, every
    field that is a column, the derived ones."""
    axes = tuple(a.name for a in AXES if a.role != "identity")
    return ("run_id", "perm_id", "perm_index", "rep") + axes + tuple(
        f.name for f in FIELDS if f.column and f.name not in ("run_id",) + _RENAMED) + tuple(
        d.name for d in DERIVED[2:])


def get_path(obj: Any, path: tuple[str, ...]) -> Any:
    """The value at ``path`` in a summary document or record (None where absent)."""
    for key in path:
        if obj is None:
            return None
        obj = obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)
    return obj


def flat_axes(permutation: dict[str, Any]) -> dict[str, Any]:
    """A permutation's axes flat (the broker settings among them), defaults where absent."""
    broker = permutation.get("broker") if isinstance(permutation.get("broker"), dict) else {}
    out = {}
    for a in AXES:
        v = (broker if a.broker else permutation).get(a.name)
        out[a.name] = a.default if v is None else v
    if out["total_threads"] is None and out["initiators"] and out["threads"]:
        out["total_threads"] = out["initiators"] * out["threads"]
    return out


def derive(row: dict[str, Any]) -> dict[str, Any]:
    """Add the derived columns (:data:`DERIVED`) to a flat row, in place; returns it."""
    alternation = row.get("alternation") or {}
    target = row.get("target") or {}
    row.update(perm_id=row.get("perm_id") or row.get("permutation_id"),
               target_kind=target.get("kind"), target_label=target.get("label"),
               target_profile=target.get("profile"),
               alt_window=row.get("measure_start") if alternation else None,
               alternated=len(alternation.get("members") or ()) > 1,
               disturbed=row.get("status") in DISTURBED_STATUSES)
    return row


def flat_row(doc: dict[str, Any]) -> dict[str, Any]:
    """The one flat row of a summary document (summary.json's JSON in this version's layout):
    every field by its name (a nested value as JSON), every axis, the derived columns. What the
    analysis' repetitions table holds, and what the verdicts, the diagnosis and the gate read."""
    perm = doc.get("permutation") or {}
    row: dict[str, Any] = {"run_id": doc.get("run_id"), "perm_id": doc.get("permutation_id"),
                           "perm_index": perm.get("index"), "rep": doc.get("repetition")}
    row.update(flat_axes(perm))
    for f in FIELDS:
        if f.name not in ("run_id",) + _RENAMED:
            row[f.name] = get_path(doc.get(f.section) if f.section else doc, f.path or (f.name,))
    return derive(row)


def markdown() -> str:
    """The field tables of docs/results.md: the axes, then each section's fields."""
    def table(title: str, rows: list[tuple[str, ...]], head: tuple[str, ...]) -> list[str]:
        return [f"#### {title}", "", "| " + " | ".join(head) + " |", "|" + " --- |" * len(head),
                *("| " + " | ".join(r) + " |" for r in rows), ""]

    def tname(tp: Any) -> str:
        return getattr(tp, "__name__", None) if isinstance(tp, type) else str(tp).replace("typing.", "")

    out = table("permutation (the axes)", [(f"`{a.name}`" if not a.broker else f"`broker.{a.name}`", tname(a.type),
                                            a.role, "" if a.default is None else f"`{a.default}`", a.meaning)
                                           for a in AXES], ("field", "type", "role", "default", "meaning"))
    for s in SECTIONS:
        rows = [(f"`{f.name}`" + (f" = `{'.'.join(f.path)}`" if f.path else ""), tname(f.type), f.unit,
                 f.direction, ("required; " if f.required else "") + f.meaning) for f in FIELDS if f.section == s]
        out += table(f"{s or 'top level'}", rows, ("field", "type", "unit", "better", "meaning"))
    return "\n".join(out)


DOCS_BEGIN, DOCS_END = "<!-- fields: generated by python -m harness.results -->", "<!-- fields: end -->"


def write_docs(path: str = "docs/results.md") -> None:
    """Replace the generated block of ``path`` by :func:`markdown`."""
    from pathlib import Path

    p = Path(path)
    text = p.read_text()
    head, _, rest = text.partition(DOCS_BEGIN)
    _, _, tail = rest.partition(DOCS_END)
    p.write_text(f"{head}{DOCS_BEGIN}\n\n{markdown()}\n{DOCS_END}{tail}")
