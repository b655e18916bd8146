"""Which worker drives which initiator, and how many users each runs.

A swarm has ``users`` per initiator and up to ``workers_per_initiator`` Locust worker processes
per initiator. Users split over an initiator's workers as evenly as possible, the first ones
taking one more (5 users over 2 workers: 3 + 2), and an initiator never has more workers than
users (1 thread and 2 workers per initiator: one worker). Each worker numbers its users from
its first user's index among its initiator's, so every user keeps its own dialog slot.

Workers are placed by their claims (:class:`harness.load.protocol.Claim`): an exact claim
(initiator and worker index) first, then an initiator claim takes its lowest free index, then
the rest fill the lowest free slots. One function does it for every swarm: ``ssbench run``
with local or remote workers, ``saturate`` and the web UI.

:func:`make_dispatcher` builds Locust's ``dispatcher_class`` (its documented extension point)
that gives each placed worker exactly its users, ramping up at the spawn rate, and none to a
worker without a slot.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Iterator

from .protocol import Claim, slot_name


@dataclass(frozen=True)
class Slot:
    initiator: int
    worker: int
    users: int
    first_user: int

    @property
    def name(self) -> str:
        return slot_name(self.initiator, self.worker)


def split(n: int, parts: int) -> list[int]:
    """``n`` as evenly as possible over ``parts`` (the first ones get one more)."""
    parts = max(1, int(parts))
    q, r = divmod(max(0, int(n)), parts)
    return [q + (1 if k < r else 0) for k in range(parts)]


def slots(users: dict, workers_per_initiator: int) -> list[Slot]:
    """The swarm's worker slots: initiator order, then worker index."""
    out = []
    for key in sorted(users, key=int):
        n = int(users[key])
        if n <= 0:
            continue
        first = 0
        for w, k in enumerate(split(n, min(max(1, int(workers_per_initiator)), n)), start=1):
            out.append(Slot(initiator=int(key), worker=w, users=k, first_user=first))
            first += k
    return out


def assign(claims: dict[str, Claim], free: list[Slot]) -> dict[str, Slot]:
    """Slots for the workers that claimed (client id -> Claim): exact claims first, then an
    initiator claim takes its lowest free worker index, then the rest fill the lowest free
    slots. Workers that fit no free slot are left out."""
    free = list(free)
    out: dict[str, Slot] = {}
    for rule in ("exact", "initiator", "any"):
        for cid, c in sorted(claims.items()):
            if cid in out:
                continue
            i, w = c.initiator, c.worker
            pick = None
            if rule == "exact" and i and w:
                pick = next((s for s in free if (s.initiator, s.worker) == (i, w)), None)
            elif rule == "initiator" and i and not w:
                pick = next((s for s in free if s.initiator == i), None)
            elif rule == "any" and not i:
                pick = free[0] if free else None
            if pick is not None:
                free.remove(pick)
                out[cid] = pick
    return out


def rescale(placed: dict[str, Slot], total: int, workers_per_initiator: int) -> dict[str, int]:
    """Users per placed worker for a new total (the web UI's user count changed mid-session):
    the total split over the initiators in use, each initiator's share over its workers."""
    inits = sorted({s.initiator for s in placed.values()})
    per_init = dict(zip(inits, split(total, len(inits))))
    out: dict[str, int] = {}
    for i in inits:
        mine = sorted((s.worker, cid) for cid, s in placed.items() if s.initiator == i)
        for (_w, cid), k in zip(mine, split(per_init[i], len(mine))):
            out[cid] = k
    return out


def make_dispatcher(quotas: Callable[[int], dict[str, int]]):
    """Locust's ``dispatcher_class`` for ssbench: ``quotas(target_user_count)`` says how many users
    each placed worker (client id) runs; workers it does not name get none."""
    from locust.dispatch import UsersDispatcher

    class SlotDispatcher(UsersDispatcher):
        """Gives every placed worker exactly its quota, ``max(1, floor(spawn_rate))`` users per
        step across the workers in turn, a step every ``step / spawn_rate`` seconds; removing
        users (a ramp-down) takes them back in the reverse order."""

        def __init__(self, worker_nodes, user_classes):
            self._counts: dict[str, int] = {}
            super().__init__(worker_nodes=worker_nodes, user_classes=user_classes)
            self._class = sorted(c.__name__ for c in user_classes)[0]
            self._steps: Iterator[dict[str, dict[str, int]]] = iter(())
            self._busy = False

        @property
        def dispatch_in_progress(self) -> bool:
            return self._busy

        def new_dispatch(self, target_user_count, spawn_rate, user_classes=None) -> None:
            if spawn_rate <= 0 or not math.isfinite(spawn_rate):
                raise ValueError(f"spawn_rate must be a positive finite number, got {spawn_rate}")
            want = {cid: n for cid, n in quotas(int(target_user_count)).items()}
            self._steps = self._ramp(want, max(1, math.floor(spawn_rate)), spawn_rate)

        def _ramp(self, want: dict[str, int], step: int, rate: float):
            self._busy = True
            try:
                for cid in list(self._counts):
                    want.setdefault(cid, 0)
                order = _interleave(want, self._counts)
                if not order:                  # nothing to change: Locust still needs one dispatch
                    yield self._snapshot()
                while order:
                    batch, order = order[:step], order[step:]
                    for cid, delta in batch:
                        self._counts[cid] = self._counts.get(cid, 0) + delta
                    t0 = time.perf_counter()
                    yield self._snapshot()
                    if order:
                        import gevent

                        gevent.sleep(max(0.0, step / rate - (time.perf_counter() - t0)))
            finally:
                self._busy = False

        def _snapshot(self) -> dict[str, dict[str, int]]:
            return {cid: {self._class: n} for cid, n in self._counts.items()}

        def __next__(self) -> dict[str, dict[str, int]]:
            return next(self._steps)

        def add_worker(self, worker_node) -> None:
            pass   # a worker that joins mid-swarm gets users at the next swarm

        def remove_worker(self, worker_node) -> None:
            self._counts.pop(worker_node.id, None)   # its users are gone with it

        def get_current_user_count(self) -> int:
            return sum(self._counts.values())

    return SlotDispatcher


def _interleave(want: dict[str, int], have: dict[str, int]) -> list[tuple[str, int]]:
    """The single-user changes from ``have`` to ``want``, taking the workers in turn (so every
    initiator ramps up together), additions before removals."""
    adds = {cid: want[cid] - have.get(cid, 0) for cid in want if want[cid] > have.get(cid, 0)}
    rems = {cid: have.get(cid, 0) - want[cid] for cid in want if want[cid] < have.get(cid, 0)}
    out: list[tuple[str, int]] = []
    for table, sign in ((adds, 1), (rems, -1)):
        ids = sorted(table)
        while any(table[c] > 0 for c in ids):
            for cid in ids:
                if table[cid] > 0:
                    table[cid] -= 1
                    out.append((cid, sign))
    return out
