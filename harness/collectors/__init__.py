"""Telemetry: one collector per metric family, sampled together by :class:`Sampler`.

Collectors read only a target's :class:`harness.targets.telemetry.Telemetry`, so they work
against every target; they are registered in the entry-point group ``ssbench.collectors``.
"""

from .base import Collector, Sample, SampleContext, Sampler, default_collectors

__all__ = ["Collector", "Sample", "SampleContext", "Sampler", "default_collectors"]
