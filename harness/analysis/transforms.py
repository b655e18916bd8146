"""The samples' reduction on Spark: ``samples.jsonl`` to small per-repetition aggregates.

:func:`measured_metrics` is the one pass over the raw samples (its small result comes back
once: harness.analysis.tables reads it); :func:`queue_timeseries` keeps the plotted
repetitions' queue depths.
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


def queue_timeseries(samples: DataFrame) -> DataFrame:
    """Queue depths over time (all phases) of the given samples: run_id, perm_id, rep,
    elapsed_s, phase, key (xmitq.iN or queue), depth."""
    return with_rep_keys(
        samples.where(~F.col("_bad") & (F.col("family") == "queues") & (F.col("metric") == "depth"))
        .groupBy("file", "elapsed_s", "phase", "key")
        .agg(F.max("value").alias("depth")))
