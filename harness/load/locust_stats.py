"""A worker's delta into Locust's statistics, in the master: Locust's web UI, console and CSVs
show the merge's SENDs (:mod:`harness.load.merge`).

Locust's own way is each worker logging every request into its statistics and reporting them to
the master every 3 s, which extends its own entries with them. ssbench's workers log nothing
there: their recorder is the one source, and :func:`log_delta` turns each delta into the
``StatsEntry`` a worker's report would have carried (its SENDs counted in the seconds they
completed in, response times rounded by Locust's ``bucket_response_time``, the failures by
error text) and extends the ``SEND`` entry and the total with it, as Locust's master does
(``StatsEntry.extend``, which also keeps the per-second snapshots of the web UI's current
percentiles). Response times are the successful SENDs' (the recorder keeps no failure's).
"""

from __future__ import annotations

import time
from collections import Counter
from itertools import chain, repeat
from operator import mul, truediv

from locust import stats as _locust_stats
from locust.stats import StatsEntry, StatsError

_LOCUST_BUCKET = _locust_stats.bucket_response_time
METHOD, NAME = "SSB", "SEND"


def log_delta(stats, d, content_length: int) -> None:
    """Add delta ``d`` (:class:`harness.load.protocol.Delta`) to ``stats`` (a
    ``locust.stats.RequestStats``), each SEND ``content_length`` long."""
    for text, n in d.error_kinds.items():      # (sent at once; their buckets once ended)
        err = stats.errors.setdefault(StatsError.create_key(METHOD, NAME, text), StatsError(METHOD, NAME, text))
        err.occurrences += n
        err.first_seen, err.last_seen = err.first_seen or time.time(), time.time()   # as the master heard
    if not d.buckets and not d.errors:
        return
    e = StatsEntry(stats, NAME, METHOD)
    bs = float(d.bucket_seconds)
    for b, counts in d.buckets.items():
        n = sum(counts.values())
        e.num_reqs_per_sec[int((int(b) + 0.5) * bs)] += n      # the second the bucket is in
        e.num_requests += n
        e.total_response_time += sum(map(mul, counts.keys(), counts.values())) / 1000.0
        lo, hi = min(counts) / 1000.0, max(counts) / 1000.0
        e.min_response_time = lo if e.min_response_time is None else min(e.min_response_time, lo)
        e.max_response_time = max(e.max_response_time, hi)
        for k, c in _rounded(counts).items():
            e.response_times[k] += c
    for b, n in d.errors.items():
        t = int((int(b) + 0.5) * bs)
        e.num_reqs_per_sec[t] += n
        e.num_fail_per_sec[t] += n
        e.num_requests += n
        e.num_failures += n
    e.last_request_timestamp = (max(int(b) for b in (*d.buckets, *d.errors)) + 1) * bs
    e.total_content_length = content_length * e.num_requests
    key = (NAME, METHOD)
    if key not in stats.entries:
        stats.entries[key] = StatsEntry(stats, NAME, METHOD, use_response_times_cache=True)
    stats.entries[key].extend(e)
    stats.total.extend(e)


def _rounded(counts: dict) -> Counter:
    """{latency us: n} as Locust's response-time dict ({rounded ms: n})."""
    bucket = _locust_stats.bucket_response_time     # looked up each time: Locust allows replacing it
    ms = list(map(truediv, counts, repeat(1000.0)))
    keys = map(round, ms) if bucket is _LOCUST_BUCKET and max(counts) < 100_000 else map(bucket, ms)
    return Counter(chain.from_iterable(map(repeat, keys, counts.values())))
