"""Finished SENDs into Locust's own statistics, a batch at a time.

Locust's statistics (its console table, its web UI, the master's merge of its workers'
reports) are kept next to ssbench's exact recording (:mod:`harness.load.recorder`), which is
what the results are made of. Locust's way in is one ``events.request`` per request: on the
green SEND path that event and its two ``StatsEntry.log`` calls cost about as much client CPU
as the SEND itself (benchmarks/harness_ceiling.py). :func:`log_batch` puts a batch of
successful SENDs into the same ``StatsEntry`` fields that ``log`` would have set one by one,
each at its own completion time (not the time it was reported), and keeps ``log``'s per-second
snapshots of the response times for the web UI's current percentiles. A test holds it equal
to Locust's own per-request path (batches of several users overlap in time: the latest
completion stays the entry's last request time, as Locust's own merge keeps it). Failed SENDs still go through ``events.request`` one by one:
they are rare, and Locust's error table wants each exception.
"""

from __future__ import annotations

from collections import Counter

from locust import stats as _locust_stats

_LOCUST_BUCKET = _locust_stats.bucket_response_time


def log_batch(stats, method: str, name: str, done: list[tuple[float, float]], content_length: int) -> None:
    """Log successful requests ``done`` = [(completion epoch, response time ms)], in completion
    order, each ``content_length`` long, into ``stats`` (a ``locust.stats.RequestStats``): its
    total and its ``(name, method)`` entry, as ``RequestStats.log_request`` would one by one
    (the sum of response times up to float rounding: it is added per second, not per request)."""
    if not done:
        return
    bucket = _locust_stats.bucket_response_time     # looked up each time: Locust allows replacing it
    entries = (stats.total, stats.entries[(name, method)])
    # one group per whole second: log() snapshots the response times when a new second begins
    i, n = 0, len(done)
    while i < n:
        t = int(done[i][0])
        if int(done[-1][0]) == t:      # the usual batch: within one second
            j = n
        else:
            j = i + 1
            while j < n and int(done[j][0]) == t:
                j += 1
        times = [rt for _e, rt in done[i:j]]
        last = done[j - 1][0]
        if bucket is _LOCUST_BUCKET:   # Locust's own: below 100 ms it is round(), done in C
            small = [x for x in times if x < 100]
            counts = Counter(map(round, small))
            if len(small) < len(times):
                counts.update(bucket(x) for x in times if x >= 100)
        else:
            counts = Counter(map(bucket, times))
        group = (t, last, len(times), sum(times), min(times), max(times), counts.items())
        for entry in entries:
            _apply(entry, group, content_length)
        i = j


def _apply(entry, group, content_length: int) -> None:
    """What the group's calls of ``entry.log`` within one second do, the last at ``last``."""
    t, last, n, total, lo, hi, counts = group
    if entry.use_response_times_cache and entry.last_request_timestamp and t > int(entry.last_request_timestamp):
        entry._cache_response_times(t - 1)
    entry.num_requests += n
    entry.num_reqs_per_sec[t] += n
    # batches of different users overlap in time: the latest completion stays the latest
    prev = entry.last_request_timestamp
    entry.last_request_timestamp = last if prev is None else max(prev, last)
    entry.total_response_time += total
    entry.min_response_time = lo if entry.min_response_time is None else min(entry.min_response_time, lo)
    entry.max_response_time = max(entry.max_response_time, hi)
    rt = entry.response_times
    for k, c in counts:
        rt[k] += c
    entry.total_content_length += content_length * n
