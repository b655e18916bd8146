"""The swarm spec: what every Locust user needs to know. It travels only inside the swarm
protocol's messages (:mod:`harness.load.protocol`): the controller's SwarmPlan to the master,
the master's Assignment to each worker. No file, no environment variable."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field


@dataclass
class SwarmSpec:
    sender_specs: dict[str, dict]         # initiator number (as a string) -> Target.sender_spec()
    payload_bytes: int = 100
    usable: dict[str, int] = field(default_factory=dict)  # initiator -> usable dialogs
    #: this swarm's identity: a recording is accepted only by the swarm that started it (an
    #: orphaned worker of an earlier, killed run must not leak into a resumed one)
    swarm_id: str = field(default_factory=lambda: secrets.token_hex(8))
    #: open loop: offered SENDs per second per initiator, spread over its users
    #: (harness.load.pacing); 0 = closed loop
    rate: float = 0.0
    #: users per initiator (initiator number as a string): the open-loop schedule is split over them
    users: dict[str, int] = field(default_factory=dict)
    #: a worker sends its recorder's delta, with a sample of its process and its host (CPU,
    #: memory), this often (protocol.Delta)
    sample_interval_seconds: float = 1.0
    #: a ``priority`` axis: the share of dialog slots begun at high priority
    #: (harness.matrix.high_priority_slot); the recorder keeps their SEND latency apart
    high_priority_share: float = 0.0
    #: dialog lifetime (docs/matrices.md): messages per dialog before the sender begins a new
    #: one (0: unlimited, the slot's dialog for the whole run) and fire and forget
    messages_per_dialog: int = 0
    fire_and_forget: bool = False
    #: the SEND path (harness.runsettings.SEND_MODES) and how often a user hands its finished
    #: SENDs to the recorder (each hand-over costs about as much as a dozen SENDs; the recording
    #: is exact whenever it is taken)
    send_mode: str = "auto"
    report_interval_seconds: float = 0.2
    #: an alternated window (run.alternate, harness.plan): each member strategy's usable
    #: dialogs per initiator, in the order they were begun (empty: one strategy), and the slice
    #: each SEND's dialog is chosen by: member ``int(time.time() / slice_seconds) % k``
    alternation: list[int] = field(default_factory=list)
    slice_seconds: float = 0.0

    def alternation_slots(self, user: int) -> list[int]:
        """User ``user``'s dialog slot of each member of an alternated window: member ``j``'s
        dialogs follow the earlier members', and user k sends on its ``k % usable``-th."""
        out, offset = [], 0
        for usable in self.alternation:
            out.append(offset + user % max(1, usable) + 1)
            offset += usable
        return out

    def usable_dialogs(self, initiator: int) -> int:
        return int(self.usable.get(str(initiator), 1))

    def users_of(self, initiator: int) -> int:
        return int(self.users.get(str(initiator), 0))

    def payload(self) -> bytes:
        # deterministic, compressible-proof enough filler; the target prepends its header
        unit = b"ssbench-payload-"
        return (unit * (self.payload_bytes // len(unit) + 1))[: self.payload_bytes]

    @classmethod
    def from_dict(cls, data: dict) -> "SwarmSpec":
        """A spec from its JSON form; keys this version does not know are ignored (a newer
        controller's spec pushed to an older worker)."""
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})
