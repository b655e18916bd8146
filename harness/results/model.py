"""The results contract: typed documents with a schema version and to/from JSON.

Every file a run writes that another part of ssbench reads back is one of these classes:

* :class:`RunRecord` — ``run.json`` (provenance and status of a run);
* :class:`RepetitionSummary` — ``<perm>/rep-NN/summary.json`` (one measured repetition);
* :class:`PermutationSummary` — ``<perm>/summary.json`` (the repetitions of one permutation).

They are plain dataclasses, not pydantic models: the contract is small, the Locust workers and
the Spark driver import it, and a stdlib-only module keeps it cheap to import everywhere. The
validation that matters (a known schema version, the fields being present with the right
shape) is done in ``from_json``; a document from an unsupported version is refused with one
line naming the file. Fields a newer minor writer adds are kept in ``extra`` and written back.

``docs/results.md`` documents every field (a test fails when one is not), and the Spark
schemas of :mod:`harness.analysis.schemas` are checked against these classes.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..errors import UserError

RUN_SCHEMA = "ssbench.run/1"
SUMMARY_SCHEMA = "ssbench.summary/1"
PERMUTATION_SCHEMA = "ssbench.permutation/1"
LATENCY_SCHEMA = "ssbench.latency/1"

#: repetition statuses, in precedence order: the first that applies is the repetition's status
STATUSES = ("lost", "duplicated", "undelivered", "queue_disabled", "server_frozen", "errors", "users_idle", "receive_stalled",
            "noisy_storage", "behind", "noisy_host", "client_bound", "ok")
#: statuses of a window disturbed relative to the rest of its run (the target froze, its receive
#: side stalled, the disk was far slower than the run's typical): shown everywhere with their
#: figures, and kept out of every verdict
DISTURBED_STATUSES = ("server_frozen", "receive_stalled", "noisy_storage")
#: repetition statuses whose numbers are kept out of verdicts: shown in every table, but not
#: counted by the comparisons (harness.verdicts), the auto-repetition loop (harness.runner, which
#: runs more rounds instead) or the regression gate. ``noisy_host`` is not among them: its test
#: is absolute (other processes' CPU), so on a shared machine it flags a whole run, both sides of
#: every comparison alike (interleaved), and leaving it out would leave such a machine no verdict
#: at all; it is shown with its figure instead (docs/results.md, "Disturbed repetitions").
KEPT_OUT_OF_VERDICTS: frozenset[str] = frozenset(DISTURBED_STATUSES)


def counts_in_verdicts(status: str | None) -> bool:
    """Does a repetition with this status count in a verdict? The one predicate the analysis
    (intervals, gains, verdicts), the gate (its compared samples) and the runner's auto loop ask:
    no for :data:`KEPT_OUT_OF_VERDICTS`."""
    return status not in KEPT_OUT_OF_VERDICTS


def check_schema(doc: Any, expected: str, file: str | None = None) -> dict[str, Any]:
    """``doc`` must be a JSON object whose ``schema`` has ``expected``'s family and major version."""
    if not isinstance(doc, dict):
        raise UserError(f"not a JSON object (expected {expected})", file=file)
    got = doc.get("schema")
    if got is None:
        raise UserError(f"no 'schema' field (expected {expected})", file=file, field="schema")
    family, _, version = expected.partition("/")
    if not isinstance(got, str) or got.partition("/")[0] != family:
        raise UserError(f"schema is {got!r}, expected {expected}", file=file, field="schema")
    if got.partition("/")[2].split(".")[0] != version:
        raise UserError(f"unsupported schema version {got!r} (this ssbench reads {expected})",
                        file=file, field="schema")
    return doc


# --------------------------------------------------------------------------- generic (de)serialization

class Document:
    """Mixin: to_json/from_json for a dataclass of JSON-able fields and nested Documents."""

    #: fields added by a newer writer that this version does not know (round-tripped)
    extra: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name == "extra":
                continue
            v = getattr(self, f.name)
            if v is None and f.metadata.get("omit_none"):
                continue
            if v == [] and f.metadata.get("omit_empty"):   # fields older documents do not have
                continue
            if v is False and f.metadata.get("omit_false"):
                continue
            if f.metadata.get("omit_default") and v == f.default:   # fields older documents lack
                continue
            out[f.name] = _dump(v)
        out.update(getattr(self, "extra", {}) or {})
        return out

    @classmethod
    def from_json(cls, data: Any, file: str | None = None, where: str = ""):
        if not isinstance(data, dict):
            raise UserError(f"{where or cls.__name__}: expected an object, got {type(data).__name__}", file=file,
                            field=where or None)
        hints = _hints(cls)
        kwargs: dict[str, Any] = {}
        known = set()
        for f in dataclasses.fields(cls):
            if f.name == "extra":
                continue
            known.add(f.name)
            name = f"{where}.{f.name}" if where else f.name
            if f.name not in data:
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                    raise UserError("missing field", file=file, field=name)
                continue
            kwargs[f.name] = _load(hints[f.name], data[f.name], file, name)
        obj = cls(**kwargs)
        if "extra" in {f.name for f in dataclasses.fields(cls)}:
            obj.extra = {k: v for k, v in data.items() if k not in known}
        return obj

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls) if f.name != "extra"]


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    """A document class's resolved field types: resolving them evaluates every annotation,
    most of the time of reading a summary, and they never change."""
    return typing.get_type_hints(cls)


def _dump(v: Any) -> Any:
    if isinstance(v, Document):
        return v.to_json()
    if isinstance(v, list):
        return [_dump(x) for x in v]
    if isinstance(v, dict):
        return {k: _dump(x) for k, x in v.items()}
    return v


def _load(tp: Any, v: Any, file: str | None, name: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if v is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return _load(inner[0], v, file, name)
        return v
    if isinstance(tp, type) and issubclass(tp, Document):
        return tp.from_json(v, file, name)
    if origin is list:
        if not isinstance(v, list):
            raise UserError(f"expected a list, got {type(v).__name__}", file=file, field=name)
        (item,) = args or (Any,)
        return [_load(item, x, file, f"{name}[{i}]") for i, x in enumerate(v)]
    if origin is dict:
        if not isinstance(v, dict):
            raise UserError(f"expected an object, got {type(v).__name__}", file=file, field=name)
        return dict(v)
    if tp is bool:
        if not isinstance(v, bool):
            raise UserError(f"expected true/false, got {v!r}", file=file, field=name)
        return v
    if tp is int:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v):
            raise UserError(f"expected an integer, got {v!r}", file=file, field=name)
        return int(v)
    if tp is float:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise UserError(f"expected a number, got {v!r}", file=file, field=name)
        return float(v) if isinstance(v, float) else v
    if tp is str:
        if not isinstance(v, str):
            raise UserError(f"expected a string, got {v!r}", file=file, field=name)
        return v
    return v


# --------------------------------------------------------------------------- repetition summary

@dataclass
class LatencySummary(Document):
    """Milliseconds from exact microsecond histograms (latency.json); None when empty."""

    count: int = 0
    mean: float | None = None
    p50: float | None = None
    p95: float | None = None
    p99: float | None = None
    max: float | None = None


@dataclass
class TargetRef(Document):
    kind: str
    label: str
    profile: str


#: run.json's ``target.capabilities`` (harness.targets.base.Capabilities) as ssbench's targets
#: declared them before run.json recorded it: a run recorded earlier is read by its kind
CAPABILITIES_BEFORE_RECORDED: dict[str, dict[str, Any]] = {
    "embedded": {"priority": False, "backlog": True, "dialog_lifetime": True, "profile_aliases": True,
                 "emulation": "PostgreSQL"},
    "mssql": {"priority": True, "backlog": True, "dialog_lifetime": True, "profile_aliases": False,
              "emulation": None},
}


def target_capabilities(target: dict[str, Any] | None) -> dict[str, Any]:
    """What a run's target declared it can do: run.json's ``target.capabilities``, or for a run
    recorded before run.json carried it, what the target of its recorded kind declared then
    (empty when unknown)."""
    target = target if isinstance(target, dict) else {}
    caps = target.get("capabilities")
    if isinstance(caps, dict):
        return caps
    return dict(CAPABILITIES_BEFORE_RECORDED.get(target.get("kind"), {}))


@dataclass
class Window(Document):
    warmup_seconds: float
    measure_seconds: float
    measure_start: float
    measure_end: float
    spawn_complete: float | None = None

    @property
    def span_seconds(self) -> float:
        """The window's wall-clock length, over which its shared figures (waits, CPU, storage)
        were taken. ``measure_seconds`` unless the window was alternated: a member's
        ``measure_seconds`` is its own slices, the window spans every member's."""
        span = (self.measure_end or 0.0) - (self.measure_start or 0.0)
        return span if span > 0 else self.measure_seconds


@dataclass
class InitiatorResult(Document):
    """One initiator's accounting (harness.results.summary.InitiatorAccount): the totals of the
    summary are the sums of these."""

    initiator: int
    sent: int
    received: int
    lost: int
    xmitq_left: int = 0
    queued: int = field(default=0, metadata={"omit_default": True})
    poison: int = field(default=0, metadata={"omit_default": True})
    duplicates: int = field(default=0, metadata={"omit_default": True})


@dataclass
class WorkerResult(Document):
    """One Locust worker process over the measured window (its own recording and probe)."""

    initiator: int
    worker: int                      # 1..workers_per_initiator
    host: str = ""
    users: int = 0                   # users that ran on this process
    users_active: int = 0
    sends: int = 0                   # SENDs completed in the window
    errors: int = 0                  # failed SENDs in the window
    cpu_percent: float | None = None  # this process, percent of one core (window mean)
    client_bound: bool = False        # cpu_percent at or above the client-bound threshold


@dataclass
class ClientHost(Document):
    """A client host's CPU and memory over the measured window (its workers' probes)."""

    host: str
    workers: int = 0
    cpu_percent: float | None = None          # percent of the whole machine (window mean)
    memory_percent: float | None = None       # window mean
    memory_used_bytes: float | None = None    # window maximum


@dataclass
class TopWait(Document):
    wait_type: str
    wait_time_ms: float
    waiting_tasks: int
    share: float


@dataclass
class Growth(Document):
    """How a queue's depth changed over the measured window: the Theil-Sen slope in messages per
    second with its 95 % interval, the first and last depth sampled, and the samples."""

    per_s: float
    ci_low: float
    ci_high: float
    first: float
    last: float
    samples: int


@dataclass
class RepetitionSummary(Document):
    """One repetition of one permutation (``rep-NN/summary.json``)."""

    SCHEMA: ClassVar[str] = SUMMARY_SCHEMA

    run_id: str
    permutation_id: str
    repetition: int
    permutation: dict[str, Any]
    target: TargetRef
    window: Window
    dialogs_created: int
    usable_dialogs: int
    messages_sent: int
    messages_sent_client: int
    messages_received: int
    messages_lost: int
    drained: bool
    per_initiator: list[InitiatorResult]
    send_rate: float
    receive_rate: float
    send_latency_ms: LatencySummary
    e2e_latency_ms: LatencySummary
    top_waits: list[TopWait] = field(default_factory=list)
    max_xmitq_depth: float = 0
    max_queue_depth: float = 0
    activation_tasks_started: float = 0
    activation_tasks_max_running: float = 0
    #: activation tasks started during the measured window per second (the queue monitor
    #: starts at most one per monitor period; a WAITFOR timeout too short churns tasks)
    activation_tasks_started_per_s: float | None = field(default=None, metadata={"omit_none": True})
    #: activation tasks started, and ended (started minus the increase of Tasks Running), between
    #: the two collector ticks that bound the measured window: whether task lifetime (a WAITFOR
    #: comparison) engaged there (absent without two ticks, and in older summaries)
    activation_tasks_started_in_window: int | None = field(default=None, metadata={"omit_none": True})
    activation_tasks_ended_in_window: int | None = field(default=None, metadata={"omit_none": True})
    client_cpu_percent: float | None = None
    server_cpu_percent: float | None = None
    worker_cpu_percent: dict[str, float] = field(default_factory=dict)
    client_bound: bool = False
    other_cpu_percent: float | None = None
    steal_percent: float | None = None
    noisy_host: bool = False
    #: the host's CPU speed (harness.collectors.cpuspeed): a fixed loop's CPU time over the window
    #: (mean of the ticks' medians, ms), the run's typical (median of the repetitions' idle
    #: references), their ratio (typical over window: 0.7 = the host ran 30 % slower) and whether
    #: that was below SLOW_CPU_SPEED (slow_cpu: the repetition is noisy_host); absent in older summaries
    cpu_probe_ms: float | None = field(default=None, metadata={"omit_none": True})
    cpu_reference_ms: float | None = field(default=None, metadata={"omit_none": True})
    cpu_speed: float | None = field(default=None, metadata={"omit_none": True})
    slow_cpu: bool = field(default=False, metadata={"omit_false": True})
    #: the host's cross-CPU latency (harness.collectors.crosscpu): a cache line's round trip
    #: between two of the machine's CPUs, ns, mean over the window's ticks; recorded, not judged
    cross_cpu_ns: float | None = field(default=None, metadata={"omit_none": True})
    #: storage (harness.collectors.storage): the server's commit latency (median over the
    #: window's ticks of the mean log flush, ms), the fsync probe beside its data (window
    #: median, ms), its reference (the idle probe before the window) and whether the window's
    #: disk was far slower than that (noisy_storage); absent where not measured
    commit_latency_ms: float | None = field(default=None, metadata={"omit_none": True})
    storage_probe_ms: float | None = field(default=None, metadata={"omit_none": True})
    storage_reference_ms: float | None = field(default=None, metadata={"omit_none": True})
    noisy_storage: bool = field(default=False, metadata={"omit_false": True})
    #: the test's sessions waiting, sampled (harness.collectors.sessionwaits): mean sessions
    #: waiting by role (``sender``: the load's, ``reader``: the activated tasks) and wait type,
    #: over the window (an alternated member: over its own slices), and how many samples;
    #: absent where the target cannot tell
    session_waits: dict[str, dict[str, float]] | None = field(default=None, metadata={"omit_none": True})
    session_wait_samples: int | None = field(default=None, metadata={"omit_none": True})
    #: the target's progress (harness.collectors.stalls, harness.results.summary.progress_flags):
    #: the longest gap between collector ticks beyond the usual interval (a frozen server), the
    #: longest span with nothing received while SENDs went on and readers ran, receive rate over
    #: send rate, the growth of the queues over the window, and the blocking chains seen during
    #: the stall (diagnostic lock sampler only)
    freeze_seconds: float | None = field(default=None, metadata={"omit_none": True})
    server_frozen: bool = field(default=False, metadata={"omit_false": True})
    receive_stall_seconds: float | None = field(default=None, metadata={"omit_none": True})
    receive_send_ratio: float | None = field(default=None, metadata={"omit_none": True})
    queue_growth: float | None = field(default=None, metadata={"omit_none": True})
    receive_stalled: bool = field(default=False, metadata={"omit_false": True})
    stall_chains: list[str] = field(default_factory=list, metadata={"omit_empty": True})
    #: SENDs that started in the window and were still in flight at its end (slower than 1 s):
    #: their latency is in send_latency_ms, not in send_rate (absent: none)
    sends_in_flight_at_end: int | None = field(default=None, metadata={"omit_none": True})
    cpu_pinning: dict[str, list[int]] | None = field(default=None, metadata={"omit_none": True})
    #: an alternated window (run.alternate, harness.alternation): ``members`` (the permutation
    #: ids sharing it, in slice order), ``slice_seconds`` and this one's ``member`` index; its
    #: rates are over its own slices (window.measure_seconds), its window figures shared
    alternation: dict[str, Any] | None = field(default=None, metadata={"omit_none": True})
    #: per Locust worker process and per client host (absent in summaries older than them)
    workers: list[WorkerResult] = field(default_factory=list, metadata={"omit_empty": True})
    client_hosts: list[ClientHost] = field(default_factory=list, metadata={"omit_empty": True})
    users_expected: int = 0
    users_spawned: int = 0
    users_active: int = 0
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)
    collector_errors: list[str] = field(default_factory=list)
    poison_messages: int = 0
    #: tallies of a message beyond its first (exactly-once delivery broken): never offset
    #: against a loss (status ``duplicated``)
    messages_duplicated: int = field(default=0, metadata={"omit_default": True})
    queue_disabled: bool = False
    messages_undelivered: int = 0
    broker_restarts: int = 0
    #: open loop (a ``rate`` axis): offered and achieved SENDs per second (all initiators) and
    #: the SEND latency from each SEND's intended time (corrected for coordinated omission)
    offered_rate: float | None = field(default=None, metadata={"omit_none": True})
    achieved_rate: float | None = field(default=None, metadata={"omit_none": True})
    #: the achieved rate fell short of the offered one by more than run.rate_tolerance; the
    #: status is ``behind`` unless a more severe one applies (a disturbed window: noisy_storage)
    behind: bool = field(default=False, metadata={"omit_false": True})
    send_latency_corrected_ms: LatencySummary | None = field(default=None, metadata={"omit_none": True})
    #: a ``priority`` axis (SQL Server target): SEND latency of the dialogs begun at high
    #: priority and of the others (permutation.broker.high_priority_share of them are high)
    send_latency_high_ms: LatencySummary | None = field(default=None, metadata={"omit_none": True})
    send_latency_normal_ms: LatencySummary | None = field(default=None, metadata={"omit_none": True})
    #: end-to-end latency of the same two groups, where the target records it (SQL Server)
    e2e_latency_high_ms: LatencySummary | None = field(default=None, metadata={"omit_none": True})
    e2e_latency_normal_ms: LatencySummary | None = field(default=None, metadata={"omit_none": True})
    #: backlog drain (``run.backlog_messages``): messages queued with activation off, the time
    #: from activation on to an empty queue, and messages drained per second
    backlog_messages: int | None = field(default=None, metadata={"omit_none": True})
    drain_seconds: float | None = field(default=None, metadata={"omit_none": True})
    drain_rate: float | None = field(default=None, metadata={"omit_none": True})
    #: dialog lifetime (docs/matrices.md), since the repetition's prepare, read after the
    #: drain: dialogs begun and ended by the initiators' SEND path (the initiator's END, on the
    #: target's EndDialog or, fire and forget, right after the SEND), Error messages that reached
    #: a listening initiator endpoint or were lost (its side had ended), and the conversation
    #: endpoints left behind by side and state (``initiator.CD``, ``target.DO``, ...)
    dialogs_begun: int | None = field(default=None, metadata={"omit_none": True})
    dialogs_ended: int | None = field(default=None, metadata={"omit_none": True})
    #: dialogs ended between the two collector ticks that bound the measured window: whether a
    #: dialog-lifetime technique engaged there (absent where the target does not count dialogs)
    dialogs_ended_in_window: int | None = field(default=None, metadata={"omit_none": True})
    dialog_errors_received: int | None = field(default=None, metadata={"omit_none": True})
    dialog_errors_lost: int | None = field(default=None, metadata={"omit_none": True})
    endpoints: dict[str, int] | None = field(default=None, metadata={"omit_none": True})
    #: SENDs still running when the workers stopped their users after waiting for them
    #: (harness.load.locustfile QUIESCE_S): each may have reached the database without the client
    #: counting it, so messages_sent_client may be short by up to this many (absent: none)
    messages_sent_client_cut: int | None = field(default=None, metadata={"omit_none": True})
    #: the diagnosis' evidence over the measured window (docs/diagnosis.md; absent in older
    #: summaries and where the target cannot tell): the queues' growth, the transport's rate,
    #: RECEIVEs per second, activation tasks against MAX_QUEUE_READERS, the activation
    #: procedure's own time, CPU utilization, Service Broker's own waits, page-latch objects
    xmitq_depth_growth: Growth | None = field(default=None, metadata={"omit_none": True})
    queue_depth_growth: Growth | None = field(default=None, metadata={"omit_none": True})
    transport_rate: float | None = field(default=None, metadata={"omit_none": True})
    receives_per_s: float | None = field(default=None, metadata={"omit_none": True})
    activation_tasks_running: float | None = field(default=None, metadata={"omit_none": True})
    activation_max_readers: int | None = field(default=None, metadata={"omit_none": True})
    activation_at_max_share: float | None = field(default=None, metadata={"omit_none": True})
    activation_task_limit_per_s: float | None = field(default=None, metadata={"omit_none": True})
    procedure_us_per_message: float | None = field(default=None, metadata={"omit_none": True})
    procedure_busy: float | None = field(default=None, metadata={"omit_none": True})
    messages_per_receive: float | None = field(default=None, metadata={"omit_none": True})
    server_on_host: bool | None = field(default=None, metadata={"omit_none": True})
    server_cpu_utilization: float | None = field(default=None, metadata={"omit_none": True})
    host_cpu_utilization: float | None = field(default=None, metadata={"omit_none": True})
    host_cpus: int | None = field(default=None, metadata={"omit_none": True})
    client_cpu_demand: float | None = field(default=None, metadata={"omit_none": True})
    server_cpu_demand: float | None = field(default=None, metadata={"omit_none": True})
    broker_waits: dict[str, float] | None = field(default=None, metadata={"omit_none": True})
    page_latch_objects: dict[str, float] | None = field(default=None, metadata={"omit_none": True})
    status: str = "ok"
    web: dict[str, Any] | None = field(default=None, metadata={"omit_none": True})
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {"schema": self.SCHEMA, **super().to_json()}

    @classmethod
    def from_json(cls, data: Any, file: str | None = None, where: str = "") -> "RepetitionSummary":
        check_schema(data, cls.SCHEMA, file)
        body = {k: v for k, v in data.items() if k != "schema"}
        s = super().from_json(body, file, where)
        if s.status not in STATUSES:
            raise UserError(f"unknown status {s.status!r} (expected one of {', '.join(STATUSES)})",
                            file=file, field="status")
        s.behind = s.behind or s.status == "behind"   # summaries before the flag had the status only
        return s


# --------------------------------------------------------------------------- permutation summary

@dataclass
class Medians(Document):
    """Medians across a permutation's repetitions (None when no repetition has the value)."""

    send_rate: float | None = None
    receive_rate: float | None = None
    send_p50_ms: float | None = None
    send_p99_ms: float | None = None
    e2e_p99_ms: float | None = None
    #: open loop (a ``rate`` axis): offered and achieved SENDs/s, SEND latency from the intended
    #: time (corrected for coordinated omission); absent for closed-loop permutations
    offered_rate: float | None = field(default=None, metadata={"omit_none": True})
    achieved_rate: float | None = field(default=None, metadata={"omit_none": True})
    send_corrected_p50_ms: float | None = field(default=None, metadata={"omit_none": True})
    send_corrected_p99_ms: float | None = field(default=None, metadata={"omit_none": True})
    #: backlog drain (``run.backlog_messages``): seconds to drain and messages per second
    drain_seconds: float | None = field(default=None, metadata={"omit_none": True})
    drain_rate: float | None = field(default=None, metadata={"omit_none": True})


@dataclass
class PermutationSummary(Document):
    """One permutation across its repetitions (``<perm>/summary.json``)."""

    SCHEMA: ClassVar[str] = PERMUTATION_SCHEMA

    permutation: dict[str, Any]
    repetitions: list[int]
    median: Medians
    messages_lost: int = 0
    errors: int = 0
    #: open loop: repetitions whose achieved rate fell short of the offered one (status behind)
    behind: int | None = field(default=None, metadata={"omit_none": True})
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {"schema": self.SCHEMA, **super().to_json()}

    @classmethod
    def from_json(cls, data: Any, file: str | None = None, where: str = "") -> "PermutationSummary":
        check_schema(data, cls.SCHEMA, file)
        return super().from_json({k: v for k, v in data.items() if k != "schema"}, file, where)


# --------------------------------------------------------------------------- run.json

@dataclass
class RunRecord(Document):
    """A run's provenance and status (``run.json``); rewritten as the run progresses."""

    SCHEMA: ClassVar[str] = RUN_SCHEMA

    status: str
    run_id: str = ""             # the directory's name
    started: str | None = None
    ended: str | None = None
    ssbench: dict[str, Any] = field(default_factory=dict)
    matrix: dict[str, Any] = field(default_factory=dict)
    target: dict[str, Any] = field(default_factory=dict)
    software: dict[str, Any] = field(default_factory=dict)
    host: dict[str, Any] = field(default_factory=dict)
    argv: list[str] = field(default_factory=list)
    permutations_done: int = 0
    permutations_total: int = 0
    messages_lost: int | None = field(default=None, metadata={"omit_none": True})
    resumed: str | None = field(default=None, metadata={"omit_none": True})
    error: str | None = field(default=None, metadata={"omit_none": True})
    web: dict[str, Any] | None = field(default=None, metadata={"omit_none": True})
    #: ``run.repetitions: auto``: rounds run, time spent, why the rounds stopped, the
    #: comparisons left undecided (harness.runner.Runner.run_auto)
    auto: dict[str, Any] | None = field(default=None, metadata={"omit_none": True})
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {"schema": self.SCHEMA, **super().to_json()}

    @classmethod
    def from_json(cls, data: Any, file: str | None = None, where: str = "") -> "RunRecord":
        check_schema(data, cls.SCHEMA, file)
        return super().from_json({k: v for k, v in data.items() if k != "schema"}, file, where)
