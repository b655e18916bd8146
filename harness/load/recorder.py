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
import time
from collections import Counter, defaultdict
from pathlib import Path

from harness.results.store import write_atomic
from harness.runsettings import BUCKET_SECONDS

MAX_ERROR_SAMPLES = 20
#: a SEND at least this slow is also kept with its start time (``slow``)
SLOW_SEND_S = 1.0
#: at most this many slow SENDs are kept per worker (a worker has at most one in flight per user)
MAX_SLOW_SENDS = 100_000
#: live progress: a bucket is sent whole once it ended this long ago (a user's greenlet reports
#: its finished SENDs every report interval, 0.2 s by default); a SEND later than that into it
#: is sent on its own
PROGRESS_LAG_S = 1.0


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
        #: live progress (the metrics endpoint; None: off): buckets below ``shipped_below`` were
        #: sent whole in a Progress; a late SEND into one of them is kept apart here too
        #: ({bucket: Counter}), so that the next Progress carries exactly what it added
        self.shipped_below: int | None = None
        self.late: dict[int, Counter] = {}
        self.late_errors: Counter = Counter()
        self.late_corrected: dict[int, Counter] = defaultdict(Counter)
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
        bs, buckets, corrected, shipped = self.bucket_seconds, self.buckets, self.corrected, self.shipped_below
        by_prio = self.by_priority.setdefault(priority, defaultdict(Counter)) if priority is not None else None
        b_prev = c = p = None
        late = False
        for end_epoch, elapsed_s, exc, intended_epoch in results:
            b = int(end_epoch / bs)
            if exc is None:
                if b != b_prev:            # a batch spans one or two buckets
                    b_prev, c = b, buckets[b]
                    late = shipped is not None and b < shipped   # into a bucket a Progress has sent
                    p = self.late.setdefault(b, Counter()) if late else None
                us = round(elapsed_s * 1e6)
                if us < 0:                 # pragma: no cover - perf_counter is monotonic
                    us = 0
                c[us] = c.get(us, 0) + 1   # (not c[us] += 1: Counter's __missing__ is Python)
                if p is not None:          # a late SEND: for the next Progress too
                    p[us] = p.get(us, 0) + 1
                if elapsed_s >= SLOW_SEND_S and len(self.slow) < MAX_SLOW_SENDS:
                    self.slow.append([round(end_epoch - elapsed_s, 6), us])
                    if shipped is not None:
                        self.pending_slow.append(self.slow[-1])
                if by_prio is not None:
                    by_prio[b][us] += 1
                if intended_epoch is not None:
                    behind = max(0, round((end_epoch - intended_epoch) * 1e6))
                    corrected[b][behind] += 1
                    if late:
                        self.late_corrected[b][behind] += 1
            else:
                self.errors[b] += 1
                if shipped is not None and b < shipped:
                    self.late_errors[b] += 1
                if len(self.error_samples) < MAX_ERROR_SAMPLES:
                    self.error_samples.append(f"{type(exc).__name__}: {exc}"[:500])

    def track_progress(self) -> None:
        """From now on, :meth:`take_progress` gives the SENDs recorded since its last call."""
        self.shipped_below = -1
        self.late, self.late_errors, self.late_corrected, self.pending_slow = {}, Counter(), defaultdict(Counter), []

    def take_progress(self, now: float | None = None, final: bool = False) -> dict:
        """The SENDs recorded since the last call, exactly, as the fields of a
        :class:`harness.load.protocol.Progress`: ``buckets`` and ``corrected`` (bucket ->
        [latencies us, counts], two lists: packed by msgpack's C code, no string per latency),
        ``errors`` (bucket -> count), bucket numbers as strings, and ``slow`` (the new slow SENDs,
        [start epoch, latency us]).

        It sends each bucket whole once it ended :data:`PROGRESS_LAG_S` ago (``final``: every
        bucket), copied from the recording itself, and after that only the late SENDs into
        it: so the endpoint costs the recording nothing per SEND, but a test per batch."""
        if self.shipped_below is None:
            return {"buckets": {}, "errors": {}, "corrected": {}, "slow": []}
        bs, start = self.bucket_seconds, self.shipped_below
        end = (max(self.buckets, default=-1) + 1 if final
               else int(((time.time() if now is None else now) - PROGRESS_LAG_S) / bs))
        if start < 0:                       # the first Progress: from the first bucket recorded
            start = min(min(self.buckets, default=end), min(self.errors, default=end))
        end = max(end, max(self.errors, default=-1) + 1) if final else end
        if end - start <= len(self.buckets) + len(self.errors):
            whole = range(start, end)
        else:                               # a long gap (a clock far from the recording's): the buckets there
            whole = sorted(b for b in {*self.buckets, *self.errors} if start <= b < end)
        out = {"buckets": _lists(self.late), "errors": {str(b): n for b, n in self.late_errors.items()},
               "corrected": _lists(self.late_corrected), "slow": self.pending_slow}
        for b in whole:
            for name, source in (("buckets", self.buckets), ("corrected", self.corrected)):
                c = source.get(b)
                if c:
                    out[name][str(b)] = [list(c), list(c.values())]
            if self.errors.get(b):
                out["errors"][str(b)] = self.errors[b]
        self.shipped_below = max(end, self.shipped_below)
        self.late, self.late_errors, self.late_corrected, self.pending_slow = {}, Counter(), defaultdict(Counter), []
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


def _lists(buckets: dict[int, Counter]) -> dict[str, list]:
    return {str(b): [list(c), list(c.values())] for b, c in buckets.items() if c}
