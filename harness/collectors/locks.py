"""Blocking chains (diagnostic): who blocked whom, per tick, where the target samples it.

The embedded target's broker samples ``pg_blocking_pids`` and long transactions when its lock
sampler is switched on (``SSBENCH_EMBEDDED_LOCK_SAMPLE_MS``, docs/embedded.md); each tick this
collector reads the chains seen since the previous tick (:meth:`Target.blocking_chains`) into
``samples.jsonl``: family ``locks``, metric ``blocked_s``, key the chain ("waiter [wait] <-
holder [state]"), value the seconds it was seen. Nothing when the sampler is off.
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
