"""The swarm protocol: typed, versioned messages between the controller (the ssbench process
that owns the target and the results), the Locust master and the Locust workers.

The controller and the master talk over loopback HTTP (:mod:`harness.load.control`), the master
and its workers over Locust's own channel after the token handshake (:mod:`harness.load.auth`).
docs/architecture.md ("The swarm protocol") has the sequence and a table of every message. No
message carries a password; every message carries ``type`` and ``v``, another major version is
refused with :class:`ProtocolError` naming both, and unknown fields are ignored.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .spec import SwarmSpec

VERSION = 1


class ProtocolError(ValueError):
    """A message this side cannot read (another version, another type, a malformed field)."""


@dataclass
class Message:
    TYPE: ClassVar[str] = ""

    def to_wire(self) -> dict[str, Any]:
        out = {"type": self.TYPE, "v": VERSION}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = dataclasses.asdict(value) if isinstance(value, SwarmSpec) else value
        return out

    @classmethod
    def from_wire(cls, data: Any):
        if not isinstance(data, dict):
            raise ProtocolError(f"{cls.TYPE}: not a message: {type(data).__name__}")
        if data.get("type") != cls.TYPE:
            raise ProtocolError(f"expected a {cls.TYPE} message, got {data.get('type')!r}")
        if data.get("v") != VERSION:
            raise ProtocolError(f"{cls.TYPE}: protocol version {data.get('v')!r}, this ssbench speaks {VERSION} "
                                "(run the same ssbench version on the controller and every client host)")
        kw = {}
        for f in dataclasses.fields(cls):
            if f.name in data:
                value = data[f.name]
                kw[f.name] = SwarmSpec.from_dict(value) if f.name == "spec" and isinstance(value, dict) else value
        try:
            return cls(**kw)
        except TypeError as e:
            raise ProtocolError(f"{cls.TYPE}: {e}") from None


# --------------------------------------------------------------------------- master -> controller

@dataclass
class SwarmRequest(Message):
    """Locust is starting a swarm: ``users`` in total at ``spawn_rate``; ``form``: the web UI's
    ssbench fields (initiators, payload_bytes, dialogs), empty for a headless swarm."""

    TYPE: ClassVar[str] = "swarm_request"
    users: int = 0
    spawn_rate: float = 1.0
    form: dict = field(default_factory=dict)


@dataclass
class SwarmPlan(Message):
    """The controller's answer: ``spec`` for the users; ``users`` per initiator in use (keys are
    initiator numbers as strings); up to ``workers_per_initiator`` workers per initiator (never
    more than its users); ``planned_seconds``: its measured window, every alternated member's
    slices together, 0: until it is stopped (web UI).
    ``live_window``: the master keeps the live figures of this window (``[warm-up, measured
    seconds]``, measured 0: until the stop; :mod:`harness.load.merge`), None: none.
    ``error``: the controller could not prepare the swarm (no swarm then)."""

    TYPE: ClassVar[str] = "swarm_plan"
    spec: SwarmSpec | None = None
    users: dict = field(default_factory=dict)
    workers_per_initiator: int = 1
    warmup_seconds: float = 0.0
    planned_seconds: float = 0.0
    worker_wait_seconds: float = 60.0
    live_window: list | None = None
    error: str | None = None

    @property
    def swarm_id(self) -> str:
        return self.spec.swarm_id if self.spec is not None else ""

    def users_of(self, initiator: int) -> int:
        return int(self.users.get(str(initiator), 0))


@dataclass
class Status(Message):
    """The swarm's phase: ``idle`` (no swarm), ``placing`` (waiting for workers), ``spawning``,
    ``running``, ``stopping``, ``ended``. Facts are sent once known: ``workers`` (slot
    ``i<K>.w<W>`` -> host, pid), ``spawn_complete`` (epoch seconds) and ``user_count``,
    ``stop_requested`` (epoch), and at ``ended`` the slots ``recorded`` and ``missing`` and
    Locust's own statistics as CSV text (``stats_csv``, ``failures_csv``, ``exceptions_csv``).
    ``live``: the merge's live figures (:meth:`harness.load.merge.LiveFigures.snapshot`), when
    the plan asked for them and they changed."""

    TYPE: ClassVar[str] = "status"
    swarm_id: str = ""
    phase: str = "idle"
    facts: dict = field(default_factory=dict)
    live: dict | None = None


@dataclass
class Command(Message):
    """The controller's answer to a Status: ``stop`` the swarm now (its recordings still come
    back); ``quit`` the master once the swarm has ended; ``start``: a run's next swarm, on the
    master and workers kept for the whole run (:class:`harness.load.series.SwarmSeries`):
    ``users`` at ``spawn_rate``, asked once per ``start`` number (the heartbeat repeats it until
    the master asks for its plan)."""

    TYPE: ClassVar[str] = "command"
    stop: bool = False
    quit: bool = False
    start: int = 0
    users: int = 0
    spawn_rate: float = 0.0


@dataclass
class Failure(Message):
    """Something that makes the swarm untrustworthy, in one sentence: ``what`` is ``missing``
    (expected workers never came), ``lost`` (a placed worker stopped answering), ``worker``
    (a worker could not run its users), ``plan`` (the controller refused the swarm)."""

    TYPE: ClassVar[str] = "failure"
    swarm_id: str = ""
    what: str = ""
    text: str = ""


@dataclass
class Notice(Message):
    TYPE: ClassVar[str] = "notice"
    text: str = ""


# --------------------------------------------------------------------------- master <-> worker

@dataclass
class Claim(Message):
    """A worker's introduction: the slot it asks for (None: the master chooses) and where it
    runs."""

    TYPE: ClassVar[str] = "claim"
    initiator: int | None = None
    worker: int | None = None
    host: str = ""
    pid: int = 0


@dataclass
class Assignment(Message):
    """The worker's part of a swarm: its slot (``initiator``, ``worker``), its ``users``, the
    index of its first user among its initiator's (each user keeps its own dialog slot and its
    own slots of the open-loop schedule), and the spec."""

    TYPE: ClassVar[str] = "assignment"
    spec: SwarmSpec | None = None
    initiator: int = 0
    worker: int = 0
    users: int = 0
    first_user: int = 0


@dataclass
class Recording(Message):
    """A worker slot's recording, merged by the master from the worker's deltas
    (:meth:`harness.load.merge.SlotRecording.to_json`), for the controller to write."""

    TYPE: ClassVar[str] = "recording"
    swarm_id: str = ""
    initiator: int = 0
    worker: int = 0
    data: dict = field(default_factory=dict)

    @property
    def slot(self) -> str:
        return slot_name(self.initiator, self.worker)


@dataclass
class Delta(Message):
    """What a worker's recorder took since its previous Delta
    (:meth:`harness.load.recorder.Recorder.take_delta`): ``buckets`` and ``corrected``
    (completion bucket -> {latency us: SENDs}; ``corrected``: open loop, from the intended
    time), ``errors`` (bucket -> failed SENDs), ``priority`` (priority -> buckets), ``slow``
    (the new SENDs of at least the recorder's ``SLOW_SEND_S``: [start epoch, latency us]),
    ``error_kinds`` (error text -> failures), ``users`` registered so far, ``ready_at`` (epoch:
    when the last of its assigned users had tried its first connect; None before), its probe's
    ``samples`` taken since (``[ts, process CPU, host CPU, host memory percent, host memory
    used]``). ``seq`` numbers them from 1: the master refuses a gap (the recording would be
    incomplete). ``final``: the last one, with every bucket left, ``user_spans`` (user ->
    [first completion, last completion, SENDs]) and ``sends_cut_at_stop``. Only on Locust's
    channel (msgpack: integer keys travel as they are)."""

    TYPE: ClassVar[str] = "delta"
    swarm_id: str = ""
    initiator: int = 0
    worker: int = 0
    seq: int = 0
    final: bool = False
    bucket_seconds: float = 0.1
    host: str = ""
    pid: int = 0
    buckets: dict = field(default_factory=dict)
    errors: dict = field(default_factory=dict)
    corrected: dict = field(default_factory=dict)
    priority: dict = field(default_factory=dict)
    slow: list = field(default_factory=list)
    error_kinds: dict = field(default_factory=dict)
    users: int = 0
    ready_at: float | None = None
    samples: list = field(default_factory=list)
    user_spans: dict = field(default_factory=dict)
    sends_cut_at_stop: int = 0


def slot_name(initiator: int, worker: int) -> str:
    return f"i{int(initiator)}.w{int(worker)}"


def recording_file(initiator: int, worker: int) -> str:
    """The recording's file name in the repetition directory."""
    return f"worker-i{int(initiator)}-w{int(worker)}.json"


#: Locust's own statistics, sent as CSV text in the "ended" Status's facts -> the file the
#: controller writes them to
LOCUST_CSV = {"stats_csv": "locust_stats.csv", "failures_csv": "locust_failures.csv",
              "exceptions_csv": "locust_exceptions.csv"}
#: Locust message types of the master <-> worker link (the HTTP link's routes: Swarm.start's)
LOCUST_TYPES = {cls.TYPE: f"ssbench_{cls.TYPE}" for cls in (Claim, Assignment, Delta, Failure)}
WELCOME = "ssbench_welcome"   # master -> worker once admitted: "send your Claim"
