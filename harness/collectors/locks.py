"""Blocking chains (diagnostic): who blocked whom, per tick, where the target samples it.

Each tick reads the chains seen since the last (:meth:`Target.blocking_chains`; the embedded
lock sampler, ``SSBENCH_EMBEDDED_LOCK_SAMPLE_MS``) into ``samples.jsonl``: family ``locks``,
metric ``blocked_s``, keyed by chain. Nothing when the sampler is off.
"""

from __future__ import annotations

from .base import Collector


class LockCollector(Collector):
    family = "locks"

    def __init__(self):
        self.since: float | None = None

    def sample(self, ctx, now):
        since, self.since = self.since, now
        if since is None:
            return []
        return [("blocked_s", chain, seconds)
                for chain, seconds in ctx.call(ctx.telemetry.blocking_chains, since, now).items()]
