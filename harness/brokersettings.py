"""A matrix's ``broker:`` settings (:class:`BrokerSettings`: the queue's activation, RECEIVE,
WAITFOR, the queue monitor, and the emulation's bottleneck knobs), their plain form and their
bounds; re-exported by :mod:`harness.matrix` (docs/matrices.md)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from .runsettings import bounded, spec


@dataclass(frozen=True)
class BrokerSettings:
    max_queue_readers: int = bounded(16, 1, 32_767)  # ALTER QUEUE ... ACTIVATION (MAX_QUEUE_READERS = n)
    receive_top: int = bounded(10000, 1, 1_000_000)  # RECEIVE TOP (n) in the activation procedure
    waitfor_timeout_ms: int = bounded(3000, 0, 3_600_000)  # WAITFOR (RECEIVE ...), TIMEOUT n
    monitor_interval_seconds: float = bounded(5.0, 0.05, 3600)  # queue monitor period (fixed at 5 s on SQL Server)
    #: share of dialogs begun at high priority (a ``priority`` axis, SQL Server target only):
    #: 0 = none; 0.5 = every other dialog on the high-priority contract/service pair that
    #: CREATE BROKER PRIORITY ... PRIORITY_LEVEL = 10 matches (docs/matrices.md)
    high_priority_share: float = bounded(0.0, 0.0, 1.0)
    #: the activation procedure's own work per message (both targets): after each RECEIVE it
    #: waits rows x this many microseconds inside its transaction, as a procedure doing I/O or
    #: a remote call per message would (docs/diagnosis.md, docs/matrices.md)
    processing_us_per_message: int = bounded(0, 0, 1_000_000)  # 1 s: a RECEIVE of 10,000 waits < 24 h
    #: emulation knobs, for targets with the capability (docs/embedded.md, "Building a
    #: bottleneck"): the transport moves at most this many messages per second per initiator
    #: (0: no limit), and every SEND first costs its Locust worker process this much CPU (0: none)
    transport_rate_limit: float = bounded(0.0, 0.0, 10_000_000.0)
    client_cpu_us_per_send: int = bounded(0, 0, 1_000_000)


#: broker settings written only when not their default, so the values of every permutation and
#: matrix that does not use them stay what they were (a gate comparing with an older baseline)
OPTIONAL_BROKER = {"processing_us_per_message": 0, "transport_rate_limit": 0.0, "client_cpu_us_per_send": 0}


def broker_values(b: BrokerSettings) -> dict[str, Any]:
    """``b`` as plain data (summaries, run.json) without the optional settings at their default."""
    return {k: v for k, v in asdict(b).items() if k not in OPTIONAL_BROKER or v != OPTIONAL_BROKER[k]}


BROKER_FIELDS = spec(BrokerSettings)
