"""The embedded target's sender, failing every ``every``-th SEND of each connection before it
reaches the server (so a failed SEND leaves no row): errors the recorder must count exactly.
Test-only, registered as the sender ``flaky`` by the test plugins' entry points (see sleep_sender)."""

from __future__ import annotations

from harness.targets.embedded.sender import EmbeddedSender


class FlakySender(EmbeddedSender):
    def __init__(self, conninfo: str, initiator: int, every: int):
        super().__init__(conninfo, initiator)
        self.every, self.calls = every, 0

    def send(self, dialog: str, payload: bytes) -> None:
        self.calls += 1
        if self.every and self.calls % self.every == 0:
            raise RuntimeError(f"flaky sender: SEND {self.calls} refused")
        super().send(dialog, payload)


    @classmethod
    def from_spec(cls, spec: dict) -> "FlakySender":
        return cls(spec["conninfo"], spec.get("initiator"), int(spec["every"]))


def spec(embedded_spec: dict, every: int) -> dict:
    return {**embedded_spec, "sender": "flaky", "every": every}
