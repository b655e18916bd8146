"""Telemetry: one collector per metric family, sampled together by :class:`Sampler`.

Collectors only read a target's :class:`harness.targets.telemetry.Telemetry`, so they work the
same against every target (the embedded PostgreSQL emulation, a real SQL Server, a plugin's).
They are registered by name in the entry-point group ``ssbench.collectors``
(:func:`default_collectors`).
"""

from .base import Collector, Sample, SampleContext, Sampler, default_collectors

__all__ = ["Collector", "Sample", "SampleContext", "Sampler", "default_collectors"]
