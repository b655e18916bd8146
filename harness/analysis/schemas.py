"""The explicit Spark schema of ``samples.jsonl`` (docs/results.md): nothing is inferred.

The schema carries ``_corrupt_record`` so that a corrupt line is seen, counted and reported by
file instead of failing the job. (Summaries are read by the results model, not by Spark:
harness.analysis.discovery.read_summaries.)
"""

from __future__ import annotations

from pyspark.sql.types import DoubleType, StringType, StructField, StructType

CORRUPT = "_corrupt_record"

#: ``<perm>/rep-NN/samples.jsonl``: the collectors' long-format time series, and the column
#: Spark fills for an unparseable record
SAMPLES = StructType([StructField(name, typ, True) for name, typ in (
    ("ts", DoubleType()), ("elapsed_s", DoubleType()), ("phase", StringType()), ("family", StringType()),
    ("metric", StringType()), ("key", StringType()), ("value", DoubleType()), (CORRUPT, StringType()))])
