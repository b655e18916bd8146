"""The embedded broker's transport: moves messages between an initiator and the target.

A :class:`TransportLink` copies committed messages from ``ssb.sysxmitqueue`` to the target's
queue in batches and deletes them only after the target committed (the ACK); the target
de-duplicates by dialog and sequence number, so a crash anywhere neither loses nor duplicates a
message. :class:`Transport` runs a link per initiator in the broker.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from typing import TYPE_CHECKING

from ._db import CHECK_CLIENT_MS, connect, connection_lost, use_raw_arrays

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger("ssbench.broker")


class TransportLink:
    """One initiator <-> target link: a step moves one batch each way. Not a thread; the
    broker's :class:`Transport` runs steps in a loop, ``EmbeddedTarget.warm_up`` runs them
    in-line."""

    def __init__(self, initiator: int, init_conninfo: str, target_conninfo: str, *,
                 batch_size: int = 1000, application_name: str | None = None,
                 check_client_ms: int | None = CHECK_CLIENT_MS, **settings: str):
        self.initiator = initiator
        self.batch_size = batch_size
        app = application_name or f"ssbench-transport-i{initiator}"
        self.init = connect(init_conninfo, app, check_client_ms=check_client_ms, **settings)
        try:
            self.tgt = connect(target_conninfo, app, check_client_ms=check_client_ms, **settings)
        except Exception:
            self.init.close()
            raise
        for c in (self.init, self.tgt):
            use_raw_arrays(c)
        self.init_cur = self.init.cursor(binary=True)
        self.tgt_cur = self.tgt.cursor(binary=True)
        self.enqueues = 0
        self.on_enqueued = None  # testing hook, called after the target committed, before the ACK

    def close(self) -> None:
        for c in (self.init, self.tgt):
            with contextlib.suppress(Exception):
                c.close()

    def forward(self, limit: int | None = None) -> int:
        """Move one batch (of at most ``limit`` messages, default the batch size) initiator ->
        target. Returns messages accepted (0: nothing to move; -1: the target queue is disabled
        and keeps them out)."""
        n, dlgids, seqs, types, bodies = self.init_cur.execute(
            "SELECT * FROM ssb.transmit_batch(%s)", (min(limit or self.batch_size, self.batch_size),)).fetchone()
        if not n:
            return 0
        accepted, ack_dlgids, ack_seqs = self.tgt_cur.execute(
            "SELECT * FROM ssb.enqueue(%s::int2, %s::uuid[], %s::int8[], %s::int2[], %s::bytea[])",
            (self.initiator, dlgids, seqs, types, bodies)).fetchone()
        if accepted < 0:
            return -1
        self.enqueues += 1
        if self.on_enqueued:
            self.on_enqueued(self)
        self.init_cur.execute("SELECT ssb.ack(%s::uuid[], %s::int8[])", (ack_dlgids, ack_seqs))
        # messages that were all duplicates still count as moved (they left the xmitq)
        return max(accepted, 1)

    def backward(self) -> int:
        """Move one batch target -> initiator (EndDialog messages). Returns messages moved."""
        n, dlgids, seqs, types, bodies = self.tgt_cur.execute(
            "SELECT * FROM ssb.transmit_batch(%s::int2, %s)", (self.initiator, self.batch_size)).fetchone()
        if not n:
            return 0
        accepted, ack_dlgids, ack_seqs = self.init_cur.execute(
            "SELECT * FROM ssb.accept_replies(%s::uuid[], %s::int8[], %s::int2[], %s::bytea[])",
            (dlgids, seqs, types, bodies)).fetchone()
        self.tgt_cur.execute("SELECT ssb.ack_outbound(%s::uuid[], %s::int8[])", (ack_dlgids, ack_seqs))
        return max(accepted, 1)


class RateLimit:
    """A token bucket: at most ``rate`` messages per second, in bursts of up to a tenth of a
    second's worth. The emulation knob broker.transport_rate_limit (docs/embedded.md, "Building
    a bottleneck"): a transmission-bound case on purpose, not a claim about SQL Server."""

    def __init__(self, rate: float, clock=time.monotonic):
        self.rate = rate
        self.burst = max(1.0, rate / 10)
        self.tokens = self.burst
        self.clock = clock
        self.at = clock()

    def allowance(self) -> tuple[int, float]:
        """(messages that may move now, seconds to wait before one may when none)."""
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens >= 1:
            return int(self.tokens), 0.0
        return 0, (1 - self.tokens) / self.rate

    def spend(self, n: int) -> None:
        self.tokens -= max(0, n)


class Transport(threading.Thread):
    def __init__(self, broker: "Broker", initiator: int, conninfo: str):
        super().__init__(name=f"transport-i{initiator}", daemon=True)
        self.broker = broker
        self.initiator = initiator
        self.conninfo = conninfo
        self.link: TransportLink | None = None
        self.moved = 0
        rate = broker.opts.transport_rate
        self.limit = RateLimit(rate) if rate else None

    def run(self) -> None:
        stop = self.broker.stopping
        idle = 0.001
        last_back = 0.0
        while not stop.is_set():
            try:
                allowed = None
                if self.limit is not None:
                    allowed, wait = self.limit.allowance()
                    if not allowed:
                        stop.wait(min(wait, 0.05))
                        continue
                if self.link is None:
                    self.link = TransportLink(self.initiator, self.conninfo, self.broker.opts.target,
                                              batch_size=self.broker.opts.batch_size)
                    crash_at = self.broker.opts.crash_after_enqueue
                    if crash_at:
                        def hook(link, crash_at=crash_at):
                            if link.enqueues >= crash_at:
                                log.warning("crash-after-enqueue %d reached: SIGKILL", crash_at)
                                os.kill(os.getpid(), signal.SIGKILL)
                        self.link.on_enqueued = hook
                moved = self.link.forward(allowed)
                if self.limit is not None:
                    self.limit.spend(moved)
                now = time.monotonic()
                if moved or now - last_back >= 0.05:
                    last_back = now
                    back = self.link.backward()
                else:
                    back = 0
                if moved > 0:
                    self.moved += moved
                if moved > 0 or back > 0:
                    idle = 0.001
                    continue
                # nothing to move (or the target queue is disabled): back off up to 10 ms
                stop.wait(0.2 if moved < 0 else idle)
                idle = min(idle * 2, 0.01)
            except Exception as e:  # connection lost, server restart, ...
                if stop.is_set():
                    break
                self.link = connection_lost(self.link, f"transport i{self.initiator}", e, stop)
        if self.link:
            self.link.close()
