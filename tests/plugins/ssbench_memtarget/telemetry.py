"""The in-memory target's telemetry: ssbench's interface, and one figure more, which only a
collector of this plugin reads (its ``reads``)."""

from __future__ import annotations

import abc

from harness.targets.base import Telemetry


class MemoryTelemetry(Telemetry):
    @abc.abstractmethod
    def peak_backlog(self) -> int:
        """The most messages the target queue held at once since the last prepare."""
