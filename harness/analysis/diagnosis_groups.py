"""The diagnosis at scale: permutations grouped by what limits them, each remedy stated once.

:func:`group_by_limit` gives the terminal's summary and the report's first table
(docs/diagnosis.md); the per-permutation detail stays in the report, ``tables/diagnosis.csv``
and ``--json``. Pure Python.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Iterable

from .diagnosis import Diagnosis, Remedy
from .tables import group_by

#: above this many permutations the terminal prints the grouped summary instead of the detail
GROUP_ABOVE = 24
#: permutation ids the terminal names per group before "and N more"
EXAMPLES = 3


@dataclass(frozen=True)
class LimitGroup:
    """The permutations that share one limit and one remedy."""

    limit: str                 # "SEND: log flush", or the confidence when no stage was named
    stage: str | None
    remedy: Remedy | None
    members: tuple[Diagnosis, ...]

    @property
    def count(self) -> int:
        return len(self.members)

    def confidences(self) -> str:
        """``clear 300, mixed 12``: how sure the members are, most frequent first."""
        c = Counter(d.confidence for d in self.members)
        return ", ".join(f"{k} {n}" for k, n in sorted(c.items(), key=lambda kv: (-kv[1], kv[0])))

    def examples(self, n: int = EXAMPLES) -> str:
        ids = [d.perm_id for d in self.members]
        more = len(ids) - n
        return ", ".join(ids[:n]) + (f" and {more} more" if more > 0 else "")


def group_by_limit(diags: Iterable[Diagnosis]) -> list[LimitGroup]:
    """One group per (limit, remedy), the largest first (then by limit); members keep the
    order they came in."""
    groups = group_by(diags, key=lambda d: (d.limit, d.stage, d.remedy))     # a Remedy is a frozen dataclass
    out = [LimitGroup(members[0].limit, members[0].stage, members[0].remedy, tuple(members))
           for members in groups.values()]
    return sorted(out, key=lambda g: (-g.count, g.limit))


def remedy_text(r: Remedy | None) -> str:
    return f"{r.technique}; matrix: {r.axis} ({r.source})" if r else ""
