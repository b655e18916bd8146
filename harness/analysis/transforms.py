"""The samples' reduction on Spark: ``samples.jsonl`` to small per-repetition aggregates.

:func:`measured_metrics` is the one pass over the raw samples; :func:`rep_waits` and
:func:`rep_extras` reduce it further; :func:`queue_timeseries` keeps the plotted repetitions'
queue depths.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .discovery import with_rep_keys


def measured_metrics(samples: DataFrame) -> DataFrame:
    """Per (run_id, perm_id, rep, family, metric, key) of the measured window (phase ==
    'measure'): n, sum, mean, max, min of value. Corrupt lines are counted in rows with ``_bad``
    true (family, metric, key null). Grouped by the file first; the file is parsed into run_id,
    perm_id, rep on the (small) result."""
    rows = samples.where(F.col("_bad") | (F.col("phase") == "measure"))
    keep = ~F.col("_bad")
    agg = (rows.select("file", "_bad",
                       F.when(keep, F.col("family")).alias("family"),
                       F.when(keep, F.col("metric")).alias("metric"),
                       F.when(keep, F.col("key")).alias("key"), "value")
           .groupBy("file", "_bad", "family", "metric", "key")
           .agg(F.count(F.lit(1)).alias("n"), F.sum("value").alias("sum"), F.avg("value").alias("mean"),
                F.max("value").alias("max"), F.min("value").alias("min")))
    return with_rep_keys(agg)


def rep_waits(metrics: DataFrame) -> DataFrame:
    """Per (run_id, perm_id, rep, wait_type): the wait samples' sums over the measured ticks
    (``ms_sum``, ``tasks_sum``) and the repetition's measured ticks (the most samples any one
    series has in the window)."""
    ticks = metrics.groupBy("run_id", "perm_id", "rep").agg(F.max("n").alias("ticks"))
    waits = (metrics.where((F.col("family") == "waits") & F.col("metric").isin("wait_ms_per_s", "waiting_tasks_per_s"))
             .groupBy("run_id", "perm_id", "rep", F.col("key").alias("wait_type"))
             .agg(F.sum(F.when(F.col("metric") == "wait_ms_per_s", F.col("sum"))).alias("ms_sum"),
                  F.sum(F.when(F.col("metric") == "waiting_tasks_per_s", F.col("sum"))).alias("tasks_sum")))
    return waits.join(ticks, ["run_id", "perm_id", "rep"])


def rep_extras(metrics: DataFrame) -> DataFrame:
    """Per repetition: the largest transmission-queue (any initiator) and target-queue depth in
    the measured window, mean client and server CPU (percent of one core), most activation tasks
    running, Task Limit Reached per second."""
    is_depth = (F.col("family") == "queues") & (F.col("metric") == "depth")
    cpu = (F.col("family") == "host") & (F.col("metric") == "cpu_percent")
    act = F.col("family") == "activation"
    return metrics.groupBy("run_id", "perm_id", "rep").agg(
        F.max(F.when(is_depth & F.col("key").startswith("xmitq"), F.col("max"))).alias("xmitq_depth_max"),
        F.max(F.when(is_depth & (F.col("key") == "queue"), F.col("max"))).alias("queue_depth_max"),
        F.avg(F.when(cpu & (F.col("key") == "client"), F.col("mean"))).alias("client_cpu_mean"),
        F.avg(F.when(cpu & (F.col("key") == "server"), F.col("mean"))).alias("server_cpu_mean"),
        F.max(F.when(act & (F.col("metric") == "tasks_running"), F.col("max"))).alias("tasks_running_max"),
        F.avg(F.when(act & (F.col("metric") == "task_limit_reached_per_s"), F.col("mean"))).alias("task_limit_per_s"))


def queue_timeseries(samples: DataFrame) -> DataFrame:
    """Queue depths over time (all phases) of the given samples: run_id, perm_id, rep,
    elapsed_s, phase, key (xmitq.iN or queue), depth."""
    return with_rep_keys(
        samples.where(~F.col("_bad") & (F.col("family") == "queues") & (F.col("metric") == "depth"))
        .groupBy("file", "elapsed_s", "phase", "key")
        .agg(F.max("value").alias("depth")))
