"""A worker's exact record of its SENDs, sent to the master as deltas: the one source of a SEND's
figures.

Each SEND's completion time (epoch) and latency (integer microseconds) go into a bucket of
``bucket_seconds`` (counts per microsecond value: mergeable, unlike Locust's rounded buckets);
the summary keeps exactly the buckets inside the measured window. The recorder holds only what
it has not sent yet: every sample interval the worker sends a delta (:meth:`Recorder.take_delta`,
:class:`harness.load.protocol.Delta`), which the master merges once (:mod:`harness.load.merge`).
A bucket goes once it ended :data:`DELTA_LAG_S` ago; a SEND that comes later into it goes in the
next delta. The last delta (``final``) takes every bucket left and the per-user table (first and
last completion, completions), so a user that never got going is counted, not missing.

In open loop (:mod:`harness.load.pacing`) each SEND's latency from its intended time (corrected
for coordinated omission) goes into a second exact histogram, ``corrected``. A SEND of at least
:data:`SLOW_SEND_S` is also kept with its start time (``slow``): one in flight across the
window's end counts in the window's latency too (:func:`harness.load.window.merge_workers`), so
a server frozen across the end is not hidden by bucketing on completion.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter, defaultdict

from harness.runsettings import BUCKET_SECONDS

#: distinct error texts kept per worker (each with its count); the rest are counted together
MAX_ERROR_KINDS = 20
OTHER_ERRORS = "(other errors)"
#: a SEND at least this slow is also kept with its start time (``slow``)
SLOW_SEND_S = 1.0
#: at most this many slow SENDs are kept per worker (a worker has at most one in flight per user)
MAX_SLOW_SENDS = 100_000
#: a bucket goes in a delta once it ended this long ago
DELTA_LAG_S = 1.0


class Recorder:
    def __init__(self, initiator: int, bucket_seconds: float = BUCKET_SECONDS, worker: int = 1):
        self.initiator = initiator
        self.worker = worker          # this process's index among its initiator's workers (1..N)
        self.bucket_seconds = bucket_seconds
        self.reset()

    def reset(self, first_user: int = 0) -> None:
        """Start afresh, numbering users from ``first_user``: worker W of an initiator's N numbers
        its users from (W-1) x threads/N, so each user of the initiator keeps its own dialog slot
        and its own slots of the open-loop schedule."""
        # not sent yet: bucket -> Counter(latency us -> SENDs), bucket -> failed SENDs
        self.buckets: dict[int, Counter] = defaultdict(Counter)
        self.errors: Counter = Counter()
        self.corrected: dict[int, Counter] = defaultdict(Counter)   # open loop only
        #: a ``priority`` axis: SEND latency per dialog priority ("high", "normal"), bucketed
        self.by_priority: dict[str, dict[int, Counter]] = {}
        self.slow: list[list] = []      # SENDs of at least SLOW_SEND_S: [start epoch, latency us]
        self.error_kinds: Counter = Counter()   # error text -> failures
        self._kinds: set[str] = set()           # every error text seen (at most MAX_ERROR_KINDS)
        self._slow_kept = 0
        self.users: dict[int, list] = {}   # user -> [first completion, last completion, count]
        self.settled: dict[int, float] = {}    # user -> when its first connect ended (either way)
        self._next_user = itertools.count(max(0, int(first_user)))
        self.schedule = None      # the worker's harness.load.pacing.Schedule (open loop)
        #: SENDs still running when the worker's users were stopped after waiting for them: each
        #: may have reached the database uncounted here (0 unless a SEND hung at the end)
        self.cut_at_stop = 0

    def add_user(self, usable: int) -> tuple[int, int]:
        """Register the next user on this worker: (user index, dialog slot). User k sends on
        dialog slot k (1-based, wrapping at the usable dialogs)."""
        user = next(self._next_user)
        self.users[user] = [None, None, 0]
        return user, user % max(1, usable) + 1

    def settle(self, user: int) -> None:
        """The user's first connect attempt has ended, with its connection and dialog or with an
        error: from then on it SENDs or retries, and the swarm's window may start."""
        self.settled.setdefault(user, time.time())

    def ready_at(self, users: int) -> float | None:
        """When the last of this worker's ``users`` settled (:meth:`settle`), 0 for none; None before."""
        if users <= 0:
            return 0.0
        return max(self.settled.values()) if len(self.settled) >= users else None

    def record_many(self, results, user: int | None = None, priority: str | None = None) -> None:
        """Finished SENDs of one user, in completion order: ``(completion epoch, elapsed s,
        exception or None, intended epoch or None)`` each. Called from the worker's greenlets
        only (one thread), so no lock."""
        if not results:
            return
        if user is not None:
            u = self.users[user]                # registered by add_user
            if u[0] is None:
                u[0] = results[0][0]
            u[1] = results[-1][0]
            u[2] += len(results)
        bs, buckets, corrected = self.bucket_seconds, self.buckets, self.corrected
        by_prio = self.by_priority.setdefault(priority, defaultdict(Counter)) if priority is not None else None
        b_prev = c = None
        for end_epoch, elapsed_s, exc, intended_epoch in results:
            b = int(end_epoch / bs)
            if exc is None:
                if b != b_prev:            # a batch spans one or two buckets
                    b_prev, c = b, buckets[b]
                us = round(elapsed_s * 1e6)
                if us < 0:                 # pragma: no cover - perf_counter is monotonic
                    us = 0
                c[us] = c.get(us, 0) + 1   # (not c[us] += 1: Counter's __missing__ is Python)
                if elapsed_s >= SLOW_SEND_S and self._slow_kept < MAX_SLOW_SENDS:
                    self._slow_kept += 1
                    self.slow.append([round(end_epoch - elapsed_s, 6), us])
                if by_prio is not None:
                    by_prio[b][us] += 1
                if intended_epoch is not None:
                    corrected[b][max(0, round((end_epoch - intended_epoch) * 1e6))] += 1
            else:
                self.errors[b] += 1
                self._error_kind(exc)

    def _error_kind(self, exc: BaseException) -> None:
        text = f"{type(exc).__name__}: {exc}"[:500]
        if text not in self._kinds:
            if len(self._kinds) >= MAX_ERROR_KINDS:
                text = OTHER_ERRORS
            else:
                self._kinds.add(text)
        self.error_kinds[text] += 1

    def take_delta(self, now: float | None = None, final: bool = False) -> dict:
        """What was recorded and not sent yet, as the fields of a
        :class:`harness.load.protocol.Delta`: ``buckets``, ``corrected`` (bucket -> {latency us:
        SENDs}), ``errors`` (bucket -> failed SENDs), ``priority`` (priority -> buckets),
        ``slow``, ``error_kinds`` (text -> failures), ``users`` (registered so far); the buckets
        that ended :data:`DELTA_LAG_S` before ``now`` (``final``: all, with the per-user table
        ``user_spans`` and ``sends_cut_at_stop``). Integer keys: Locust's msgpack carries them."""
        end = None if final else int(((time.time() if now is None else now) - DELTA_LAG_S) / self.bucket_seconds)
        out = {"buckets": _ready(self.buckets, end), "errors": _ready(self.errors, end),
               "corrected": _ready(self.corrected, end),
               "priority": {p: got for p, bs in self.by_priority.items() if (got := _ready(bs, end))},
               "slow": self.slow, "error_kinds": dict(self.error_kinds), "users": len(self.users)}
        self.slow, self.error_kinds = [], Counter()
        if final:
            out.update(user_spans=dict(self.users), sends_cut_at_stop=self.cut_at_stop)
        return out


def _ready(pending: dict, end: int | None) -> dict:
    """Take the buckets below ``end`` (None: every one) out of ``pending``."""
    if end is None:
        out = dict(pending)
        pending.clear()
        return out
    return {b: pending.pop(b) for b in [b for b in pending if b < end]}
