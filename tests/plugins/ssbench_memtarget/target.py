"""The in-memory target: its broker (a TCP server and a processing thread in the runner's
process) and :class:`MemoryTarget`, the driver interface's lifecycle, accounting and telemetry."""

from __future__ import annotations

import socketserver
import threading
import time
import uuid
from collections import Counter, deque
from typing import Any

from harness.errors import UserError
from harness.matrix import BrokerSettings
from harness.targets.base import Capabilities, Counts, InitiatorCounts, Target, TargetConfig

from .telemetry import MemoryTelemetry

PROFILES = ("default",)


class Broker:
    """The target's state: per initiator its dialogs, transmission queue and counts; the target
    queue; the processed messages' latencies. One lock around all of it."""

    def __init__(self):
        self.lock = threading.Lock()
        self.reset(0)

    def reset(self, initiators: int) -> None:
        with self.lock:
            self.dialogs: dict[int, dict[int, str]] = {i: {} for i in range(1, initiators + 1)}
            self.xmitq: dict[int, deque] = {i: deque() for i in range(1, initiators + 1)}
            self.queue: deque = deque()
            self.sent: Counter = Counter()
            self.received: Counter = Counter()
            self.processed: list[tuple[float, int]] = []     # (receive epoch, e2e latency in us)
            self.peak = 0

    def dialog(self, initiator: int, slot: int) -> str:
        with self.lock:
            handle = self.dialogs.get(initiator, {}).get(slot)
        if handle is None:
            raise KeyError(f"no dialog {slot} on initiator {initiator}")
        return handle

    def send(self, initiator: int, dialog: str, payload: bytes) -> None:
        """One SEND, committed: the message, its send time stamped, in the transmission queue."""
        with self.lock:
            if dialog not in self.dialogs.get(initiator, {}).values():
                raise KeyError(f"no dialog {dialog} on initiator {initiator}")
            self.xmitq[initiator].append((time.time(), len(payload)))
            self.sent[initiator] += 1

    def step(self) -> int:
        """Transmit everything queued, then receive and process everything in the target queue."""
        with self.lock:
            for i, q in self.xmitq.items():
                while q:
                    self.queue.append((i, *q.popleft()))
            self.peak = max(self.peak, len(self.queue))
            now = time.time()
            n = len(self.queue)
            while self.queue:
                i, sent_at, _ = self.queue.popleft()
                self.received[i] += 1
                self.processed.append((now, int((now - sent_at) * 1e6)))
        return n


class _Handler(socketserver.StreamRequestHandler):
    """One sender's connection: ``DIALOG i slot`` -> ``OK handle``; ``SEND i dialog n`` and n
    bytes of payload -> ``OK``; ``ERR reason`` on failure."""

    def handle(self) -> None:
        broker: Broker = self.server.broker   # type: ignore[attr-defined]
        for line in self.rfile:
            verb, *args = line.decode().split()
            try:
                if verb == "DIALOG":
                    reply = "OK " + broker.dialog(int(args[0]), int(args[1]))
                elif verb == "SEND":
                    payload = self.rfile.read(int(args[2]))
                    broker.send(int(args[0]), args[1], payload)
                    reply = "OK"
                else:
                    reply = f"ERR unknown request {verb}"
            except (KeyError, ValueError, IndexError) as e:
                reply = f"ERR {e}"
            self.wfile.write(reply.encode() + b"\n")


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


class MemoryTarget(Target, MemoryTelemetry):
    """The in-memory target (no capability beyond the required lifecycle)."""

    kind = "memory"
    capabilities = Capabilities()

    def __init__(self):
        self.broker = Broker()
        self.server = _Server(("127.0.0.1", 0), _Handler)
        self.server.broker = self.broker      # type: ignore[attr-defined]
        threading.Thread(target=self.server.serve_forever, name="memtarget-server", daemon=True).start()
        self.label = "in-memory test target (not Service Broker)"
        self._stop = threading.Event()
        self._mover: threading.Thread | None = None
        self._initiators = 0

    # ---------------------------------------------------------------- configuration
    @classmethod
    def read_config(cls, arg: str | None) -> TargetConfig:
        return TargetConfig(name=cls.kind, profiles=PROFILES, capabilities=cls.capabilities)

    @classmethod
    def from_config(cls, config: TargetConfig) -> "MemoryTarget":
        return cls()

    def describe(self) -> dict[str, Any]:
        host, port = self.server.server_address[:2]
        return {**self.declared(), "versions": {"ssbench_memtarget": "1.0"},
                "topology": {"address": f"{host}:{port}"},
                "notes": ["an in-memory test target: its numbers measure ssbench's own overhead, "
                          "not a message broker"]}

    def profiles(self) -> list[str]:
        return list(PROFILES)

    # ---------------------------------------------------------------- lifecycle
    def provision(self, max_initiators: int) -> None:
        """Nothing to create."""

    def prepare(self, initiators: int, profile: str, broker: BrokerSettings) -> None:
        if profile not in PROFILES:
            raise UserError(f"unknown profile {profile!r} of the memory target (it has: {', '.join(PROFILES)})")
        self.stop()
        self.broker.reset(initiators)
        self._initiators = initiators

    def create_dialogs(self, initiator: int, usable: int, every_n: int) -> int:
        with self.broker.lock:
            self.broker.dialogs[initiator] = {k: str(uuid.uuid4()) for k in range(1, usable + 1)}
        return usable * every_n

    def warm_up(self, initiator: int) -> int:
        """Nothing to warm: the dialogs' endpoints exist once begun."""
        return 0

    def start(self) -> None:
        if self._mover is None:
            self._stop.clear()
            self._mover = threading.Thread(target=self._move, name="memtarget-broker", daemon=True)
            self._mover.start()

    def _move(self) -> None:
        while not self._stop.wait(0.005):
            self.broker.step()

    def stop(self) -> None:
        if self._mover is not None:
            self._stop.set()
            self._mover.join()
            self._mover = None

    def sender_spec(self, initiator: int) -> dict[str, Any]:
        host, port = self.server.server_address[:2]
        return {"sender": "memory", "host": host, "port": port, "initiator": initiator}

    def close(self) -> None:
        self.stop()
        self.server.shutdown()
        self.server.server_close()

    # ---------------------------------------------------------------- accounting
    def counts(self) -> Counts:
        b = self.broker
        with b.lock:
            queued = {i: sum(1 for m in b.queue if m[0] == i) for i in range(1, self._initiators + 1)}
            return Counts(initiators=[InitiatorCounts(i, b.sent[i], b.received[i], len(b.xmitq[i]), queued[i])
                                      for i in range(1, self._initiators + 1)])

    # ---------------------------------------------------------------- telemetry
    def queue_depths(self, exact: bool = False) -> dict[str, int]:
        b = self.broker
        with b.lock:
            return {**{f"xmitq.i{i}": len(q) for i, q in b.xmitq.items()}, "queue": len(b.queue)}

    def messages_processed(self) -> int:
        with self.broker.lock:
            return sum(self.broker.received.values())

    def e2e_latencies_us(self, start_epoch: float, end_epoch: float) -> list[int]:
        with self.broker.lock:
            return [us for at, us in self.broker.processed if start_epoch <= at < end_epoch]

    def peak_backlog(self) -> int:
        with self.broker.lock:
            return self.broker.peak
