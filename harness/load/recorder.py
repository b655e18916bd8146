"""Exact per-worker recording of SEND completions, in time buckets.

Each SEND's completion time (epoch) and latency (integer microseconds) go into a bucket of
``bucket_seconds``; the runner later keeps exactly the buckets inside the measured window. The
data are mergeable (counts per microsecond value), unlike Locust's rounded response-time
buckets.

Per user, the first and last completion time and the number of completions are kept too, so
a user that never got going (or stopped) is counted and reported, not silently missing.

In open loop (:mod:`harness.load.pacing`) each SEND also has an intended time; its latency from
that time (corrected for coordinated omission) goes into a second exact histogram,
``corrected``, bucketed by completion time like the first.

A SEND that took at least :data:`SLOW_SEND_S` is also kept with its exact start time
(``slow``): one that started inside the measured window and completed after it (a server
frozen across the window's end) counts in the window's SEND latency too
(:func:`harness.load.window.merge_workers`), so a freeze is not hidden by bucketing on
completion.
"""

from __future__ import annotations

import itertools
import json
import os
from collections import Counter, defaultdict
from pathlib import Path

from harness.results.store import write_atomic

BUCKET_SECONDS = 0.1
MAX_ERROR_SAMPLES = 20
#: a SEND at least this slow is also kept with its start time (``slow``)
SLOW_SEND_S = 1.0
#: at most this many slow SENDs are kept per worker (a worker has at most one in flight per user)
MAX_SLOW_SENDS = 100_000


class Recorder:
    def __init__(self, initiator: int, bucket_seconds: float = BUCKET_SECONDS, worker: int = 1):
        self.initiator = initiator
        self.worker = worker          # this process's index among its initiator's workers (1..N)
        self.bucket_seconds = bucket_seconds
        self.reset()

    def reset(self) -> None:
        self.buckets: dict[int, Counter] = defaultdict(Counter)
        self.errors: Counter = Counter()
        self.error_samples: list[str] = []
        self.users: dict[int, list] = {}   # user -> [first completion, last completion, count]
        self._next_user = itertools.count(0)
        self.corrected: dict[int, Counter] = defaultdict(Counter)   # open loop only
        self.schedule = None      # the worker's harness.load.pacing.Schedule (open loop)
        #: a ``priority`` axis: SEND latency per dialog priority ("high", "normal"), bucketed
        self.by_priority: dict[str, dict[int, Counter]] = {}
        #: SENDs still running when the worker's users were stopped after waiting for them: each
        #: may have reached the database uncounted here (0 unless a SEND hung at the end)
        self.cut_at_stop = 0
        #: SENDs of at least SLOW_SEND_S: [start epoch, latency us] (successful ones)
        self.slow: list[list] = []
        #: live progress (the metrics endpoint): the same SENDs again, since the last
        #: take_progress, as {bucket: Counter}; None: not tracked (the endpoint is off)
        self.pending: dict[int, Counter] | None = None
        self.pending_errors: Counter = Counter()
        self.pending_corrected: dict[int, Counter] = defaultdict(Counter)
        self.pending_slow: list[list] = []

    def number_users_from(self, first: int) -> None:
        """Worker W of an initiator's N numbers its users from (W-1) x threads/N: each user of
        the initiator keeps its own dialog slot and its own slots of the open-loop schedule."""
        self._next_user = itertools.count(max(0, int(first)))

    def add_user(self, usable: int) -> tuple[int, int]:
        """Register the next user on this worker: (user index, dialog slot). User k sends on
        dialog slot k (1-based, wrapping at the usable dialogs)."""
        user = next(self._next_user)
        self.users[user] = [None, None, 0]
        return user, user % max(1, usable) + 1

    def record(self, end_epoch: float, elapsed_s: float, exc: BaseException | None,
               user: int | None = None, intended_epoch: float | None = None,
               priority: str | None = None) -> None:
        """One finished SEND (see :meth:`record_many`)."""
        self.record_many(((end_epoch, elapsed_s, exc, intended_epoch),), user, priority)

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
        bs, buckets, corrected, pending = self.bucket_seconds, self.buckets, self.corrected, self.pending
        by_prio = self.by_priority.setdefault(priority, defaultdict(Counter)) if priority is not None else None
        b_prev = c = p = None
        for end_epoch, elapsed_s, exc, intended_epoch in results:
            b = int(end_epoch / bs)
            if exc is None:
                if b != b_prev:            # a batch spans one or two buckets
                    b_prev, c = b, buckets[b]
                    if pending is not None:
                        p = pending.get(b)
                        if p is None:
                            p = pending[b] = Counter()
                us = round(elapsed_s * 1e6)
                if us < 0:                 # pragma: no cover - perf_counter is monotonic
                    us = 0
                c[us] = c.get(us, 0) + 1   # (not c[us] += 1: Counter's __missing__ is Python)
                if p is not None:          # the endpoint on: the same SEND for the next Progress
                    p[us] = p.get(us, 0) + 1
                if elapsed_s >= SLOW_SEND_S and len(self.slow) < MAX_SLOW_SENDS:
                    self.slow.append([round(end_epoch - elapsed_s, 6), us])
                    if pending is not None:
                        self.pending_slow.append(self.slow[-1])
                if by_prio is not None:
                    by_prio[b][us] += 1
                if intended_epoch is not None:
                    late = max(0, round((end_epoch - intended_epoch) * 1e6))
                    corrected[b][late] += 1
                    if pending is not None:
                        self.pending_corrected[b][late] += 1
            else:
                self.errors[b] += 1
                if pending is not None:
                    self.pending_errors[b] += 1
                if len(self.error_samples) < MAX_ERROR_SAMPLES:
                    self.error_samples.append(f"{type(exc).__name__}: {exc}"[:500])

    def track_progress(self) -> None:
        """Keep the SENDs recorded from now on apart too, for :meth:`take_progress`."""
        self.pending = {}
        self.pending_errors = Counter()
        self.pending_corrected = defaultdict(Counter)
        self.pending_slow = []

    def take_progress(self) -> dict:
        """The SENDs recorded since the last call (exactly what the recording gained), as the
        fields of a :class:`harness.load.protocol.Progress`: ``buckets`` and ``corrected``
        (bucket -> [latencies us, counts], two lists: packed by msgpack's C code, no string per
        latency), ``errors`` (bucket -> count), bucket numbers as strings, and ``slow`` (the new
        slow SENDs, [start epoch, latency us])."""
        if self.pending is None:
            return {"buckets": {}, "errors": {}, "corrected": {}, "slow": []}
        out = {"buckets": {str(b): [list(c), list(c.values())] for b, c in self.pending.items() if c},
               "errors": {str(b): n for b, n in self.pending_errors.items()},
               "corrected": {str(b): [list(c), list(c.values())] for b, c in self.pending_corrected.items()},
               "slow": self.pending_slow}
        self.track_progress()
        return out

    def to_json(self, swarm_id: str = "") -> dict:
        return {"initiator": self.initiator, "worker": self.worker, "pid": os.getpid(), "swarm_id": swarm_id,
                "bucket_seconds": self.bucket_seconds,
                "buckets": {str(b): {str(k): v for k, v in c.items()} for b, c in self.buckets.items()},
                "errors": {str(b): n for b, n in self.errors.items()},
                "error_samples": self.error_samples,
                "users": {str(u): v for u, v in self.users.items()},
                **({"sends_cut_at_stop": self.cut_at_stop} if self.cut_at_stop else {}),
                **({"slow": self.slow} if self.slow else {}),
                **({"corrected": {str(b): {str(k): v for k, v in c.items()} for b, c in self.corrected.items()}}
                   if self.corrected else {}),
                **({"priority": {p: {str(b): {str(k): v for k, v in c.items()} for b, c in bs.items()}
                                 for p, bs in self.by_priority.items()}} if self.by_priority else {})}

    def write(self, out_dir: str | os.PathLike, swarm_id: str = "") -> Path:
        out = Path(out_dir)
        return write_atomic(out / f"worker-i{self.initiator}-{os.getpid()}.json",
                            json.dumps(self.to_json(swarm_id)))
