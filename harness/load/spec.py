"""The swarm spec: what the Locust master and workers need to know, as a JSON file."""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness.results.store import write_atomic


@dataclass
class SwarmSpec:
    sender_specs: dict[str, dict]         # initiator number (as a string) -> Target.sender_spec()
    payload_bytes: int = 100
    usable: dict[str, int] = field(default_factory=dict)  # initiator -> usable dialogs
    warmup_seconds: float = 0.0           # master: stop after warm-up + measured window
    measure_seconds: float = 0.0          # 0 = run until stopped (web UI)
    out_dir: str = ""                     # where workers and the master write their data
    #: this swarm's identity: a worker's recording is accepted only by the swarm that started
    #: it (an orphaned worker of an earlier, killed run must not leak into a resumed one)
    swarm_id: str = field(default_factory=lambda: secrets.token_hex(8))
    #: open loop: offered SENDs per second per initiator, spread over its users
    #: (harness.load.pacing); 0 = closed loop
    rate: float = 0.0
    #: users per initiator the schedule is split over (user u of n takes every n-th slot)
    users_per_initiator: int = 0
    #: initiators in use and Locust worker processes per initiator (a headless swarm's shape:
    #: the master waits for initiators x workers_per_initiator workers)
    initiators: int = 0
    workers_per_initiator: int = 1
    #: "message": each worker sends its recording to the master over Locust's messages and the
    #: master writes it (ssbench run, local or remote workers); "file": the worker writes it
    #: into out_dir itself (ssbench web, whose plugin forwards it)
    recording_via: str = "file"
    #: seconds the master waits for every expected worker before it gives up naming the missing
    worker_wait_seconds: float = 60.0
    #: a worker samples its process and its host (CPU, memory) this often
    sample_interval_seconds: float = 1.0
    #: a ``priority`` axis: the share of dialog slots begun at high priority
    #: (harness.matrix.high_priority_slot); the recorder keeps their SEND latency apart
    high_priority_share: float = 0.0
    #: dialog lifetime (docs/matrices.md): messages per dialog before the sender begins a new
    #: one (0: unlimited, the slot's dialog for the whole run) and fire and forget
    messages_per_dialog: int = 0
    fire_and_forget: bool = False

    def usable_dialogs(self, initiator: int) -> int:
        return int(self.usable.get(str(initiator), 1))

    def payload(self) -> bytes:
        # deterministic, compressible-proof enough filler; the target prepends its header
        unit = b"ssbench-payload-"
        return (unit * (self.payload_bytes // len(unit) + 1))[: self.payload_bytes]

    def dump(self, path: str | os.PathLike) -> Path:
        return write_atomic(path, json.dumps(asdict(self), indent=2))

    @classmethod
    def load(cls, path: str | os.PathLike) -> "SwarmSpec":
        if not path:
            raise RuntimeError("no ssbench swarm spec: set SSBENCH_SPEC or --ssbench-spec")
        return cls.from_dict(json.loads(Path(path).read_text()))

    @classmethod
    def from_dict(cls, data: dict) -> "SwarmSpec":
        """A spec from its JSON form; keys this version does not know are ignored (a newer
        master's spec pushed to an older worker)."""
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})

    def to_dict(self) -> dict:
        return asdict(self)
