"""A target's exact message accounting (:meth:`harness.targets.base.Target.counts`)."""

from __future__ import annotations

from dataclasses import dataclass

from ..results.summary import Accounting, InitiatorAccount

#: one initiator's exact counts (sent, received, still in its transmission queue): the results
#: contract's own type, so the accounting the runner reports is the target's, field for field
InitiatorCounts = InitiatorAccount


@dataclass
class Counts:
    """Exact accounting after a drain poll, as the target counts it."""

    initiators: list[InitiatorCounts]
    target_queue: int            # messages waiting in the target's service queue
    errors: int = 0              # rows in the target's error table (poison messages)
    queue_disabled: bool = False  # five consecutive rollbacks disabled the queue

    def accounting(self) -> Accounting:
        return Accounting(initiators=list(self.initiators), poison_messages=self.errors,
                          queue_disabled=self.queue_disabled, in_flight=self.in_flight)

    @property
    def sent(self) -> int:
        return self.accounting().sent

    @property
    def received(self) -> int:
        return self.accounting().received

    @property
    def in_flight(self) -> int:
        return sum(c.xmitq for c in self.initiators) + self.target_queue

    @property
    def settled(self) -> bool:
        """Queues empty and every message sent accounted for: processed, or in the error table
        (a poison message is received and logged, not lost)."""
        return self.in_flight == 0 and self.received + self.errors >= self.sent
