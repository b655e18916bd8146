"""Cut the workers' recorded SENDs to the measured window and merge them exactly."""

from __future__ import annotations

import json
import math
from pathlib import Path

from harness.plan import member_at
from harness.results.histogram import Histogram
from harness.results.summary import ClientRecord


def window_buckets(start: float, end: float, bucket_seconds: float) -> tuple[int, int]:
    """The measured window in whole recording buckets ``[b0, b1)``: from the first bucket
    starting at or after ``start``, as many as ``end - start`` holds (at least one). The one
    place this is decided: the summaries (:func:`merge_workers`) and the live metrics
    (harness.metrics) place every SEND alike."""
    b0 = math.ceil(start / bucket_seconds - 1e-9)
    return b0, b0 + max(1, round((end - start) / bucket_seconds))


def in_flight_at_end(slow, b0: int, b1: int, bucket_seconds: float):
    """The latencies (us) of the slow SENDs (``[start epoch, latency us]``) that started inside
    the window ``[b0, b1)`` and completed after it: in flight across its end (a frozen server).
    The summaries (:func:`merge_workers`) and the live metrics count them alike."""
    bs = bucket_seconds
    for started, us in slow:
        if b0 * bs <= started < b1 * bs and int((started + us / 1e6) / bs) >= b1:
            yield int(us)


def merge_workers(files: list[Path], start: float, end: float,
                  member: tuple[float, int, int] | None = None) -> ClientRecord:
    """SENDs completed within the measured window, which starts at the first bucket boundary at
    or after ``start`` and lasts ``end - start`` (rounded to whole buckets); the window reported
    is exactly the span of those buckets. ``member`` (slice seconds, members, j): an alternated
    window's member ``j``, its buckets only (a SEND counts for the slice it completed in: each
    slice gains the SENDs in flight at its start and loses those at its end, one per user)."""
    wd = None
    for f in files:
        data = json.loads(Path(f).read_text())
        bs = float(data["bucket_seconds"])
        # whole buckets [b0, b1) (the master keeps the load on a little past `end`)
        b0, b1 = window_buckets(start, end, bs)
        if member is not None:
            mine_only = {b for b in range(b0, b1) if member_at(b * bs, member[0], member[1]) == member[2]}
            in_window = mine_only.__contains__
        else:
            def in_window(b: int, b0=b0, b1=b1) -> bool:
                return b0 <= b < b1
        if wd is None:
            wd = ClientRecord(start=b0 * bs, end=b1 * bs)
            if member is not None:
                wd.member_seconds = len(mine_only) * bs
        init = int(data["initiator"])
        mine = {"initiator": init, "worker": int(data.get("worker", 1)), "host": str(data.get("host", "")),
                "sends": 0, "errors": 0, "samples": data.get("samples", [])}
        for b, counts in data["buckets"].items():
            n = sum(counts.values())
            wd.sends_total += n
            if in_window(int(b)):
                for us, c in counts.items():
                    wd.latency.add(int(us), c)
                mine["sends"] += n
        if data.get("corrected"):
            wd.latency_corrected = wd.latency_corrected or Histogram()
            _add_in_window(wd.latency_corrected, data["corrected"], in_window)
        for prio, buckets in data.get("priority", {}).items():
            _add_in_window(wd.latency_by_priority.setdefault(prio, Histogram()), buckets, in_window)
        for b, n in data["errors"].items():
            wd.errors_total += n
            if in_window(int(b)):
                mine["errors"] += n
        wd.error_samples.extend(data.get("error_samples", [])[:10])
        wd.sends_cut_at_stop += int(data.get("sends_cut_at_stop", 0))
        for us in in_flight_at_end(data.get("slow", []), b0, b1, bs):
            wd.latency_in_flight.add(us)
        users = data.get("users", {})
        wd.users_spawned += len(users)
        # active: it completed a SEND by the window's end and was still completing them at its
        # start (a user stuck in its first connect, or one that stopped, is not)
        active = sum(1 for first, last, _n in users.values()
                     if first is not None and first < wd.end and last >= wd.start)
        wd.users_active += active
        mine.update(users=len(users), users_active=active)
        wd.workers.append(mine)
    if wd is None:
        wd = ClientRecord(start=start, end=end)
    return wd


def _add_in_window(h: Histogram, buckets: dict, in_window) -> None:
    """Add the latencies of ``buckets`` (bucket -> {latency us: SENDs}) inside the window to ``h``."""
    for b, counts in buckets.items():
        if in_window(int(b)):
            for us, c in counts.items():
                h.add(int(us), c)
