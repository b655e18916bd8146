"""A target's exact message accounting (:meth:`harness.targets.base.Target.counts`): the
results contract's own types, so what the runner reports is the target's, field for field."""

from __future__ import annotations

from ..results.summary import Accounting, InitiatorAccount

#: what :meth:`~harness.targets.base.Target.counts` returns
Counts = Accounting
#: one initiator's exact counts
InitiatorCounts = InitiatorAccount

__all__ = ["Counts", "InitiatorCounts"]
