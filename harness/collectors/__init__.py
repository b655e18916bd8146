"""Telemetry: one collector per metric family, sampled together by :class:`Sampler`.

Collectors only use the :class:`harness.targets.base.Target` interface, so they work the same
against the embedded PostgreSQL emulation and a real SQL Server.
"""

from .base import Collector, Sample, SampleContext, Sampler, default_collectors

__all__ = ["Collector", "Sample", "SampleContext", "Sampler", "default_collectors"]
