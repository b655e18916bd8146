"""Dialog strategies: how a matrix's client threads map onto dialogs (the ``dialogs`` axis,
docs/matrices.md). :mod:`harness.matrix` re-exports :class:`DialogStrategy`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .errors import show


@dataclass(frozen=True, order=True)
class DialogStrategy:
    """How client threads map onto dialogs (conversations).

    ``every_n`` dialogs are created per usable dialog and every ``every_n``-th one is kept (the
    paper's "150 trick" is ``every_n=150``; one dialog per thread is ``every_n=1``). ``shared``
    means all threads of one initiator send on a single dialog.
    """

    every_n: int = 1
    shared: bool = False

    @property
    def token(self) -> str:
        if self.shared:
            return "shared"
        if self.every_n == 1:
            return "per_thread"
        if self.every_n == 150:
            return "trick150"
        return f"every{self.every_n}"

    def usable_dialogs(self, threads: int) -> int:
        """Dialogs the client threads of one initiator send on."""
        return 1 if self.shared else threads

    def dialogs_created(self, threads: int) -> int:
        """Dialogs BEGUN on one initiator (the 150 trick begins 150 per usable dialog)."""
        return self.usable_dialogs(threads) * self.every_n

    def __str__(self) -> str:
        return self.token

    @classmethod
    def parse(cls, value: Any) -> "DialogStrategy":
        """Parse ``per_thread`` / ``trick150`` / ``shared`` / ``{every_n: N}``; ValueError if not."""
        if isinstance(value, str):
            named = {"per_thread": cls(1), "trick150": cls(150), "shared": cls(1, shared=True)}
            if value in named:
                return named[value]
            m = re.fullmatch(r"every(\d+)", value)
            if m and int(m.group(1)) >= 1:
                return cls(int(m.group(1)))
            raise ValueError(f"unknown dialog strategy {show(value)} "
                             "(use per_thread, trick150, shared or {every_n: N})")
        if isinstance(value, dict):
            if set(value) != {"every_n"}:
                raise ValueError("a dialog strategy mapping takes exactly one key, every_n; "
                                 f"got {show(sorted(value))}")
            n = value["every_n"]
            if isinstance(n, bool) or not isinstance(n, int) or n < 1 or n > 100_000:
                raise ValueError(f"every_n must be an integer from 1 to 100000, got {show(n)}")
            return cls(n)
        raise ValueError(f"a dialog strategy is a name or {{every_n: N}}, got {type(value).__name__}")
