"""Explicit Spark schemas of the result files (``docs/results.md``): nothing is inferred.

Numbers that the runner may write as either integers or floats are read as doubles (a JSON
``512.0`` does not fit a LongType field and would make the whole record corrupt); the axes of a
permutation (initiators, threads, payload, ...) are integers by construction and read as longs.
Each schema carries ``_corrupt_record`` so that a corrupt file or line is seen, reported by
name and skipped instead of failing the job.
"""

from __future__ import annotations

from pyspark.sql.types import (ArrayType, BooleanType, DoubleType, LongType, MapType, StringType,
                               StructField, StructType)

CORRUPT = "_corrupt_record"


def _s(*fields: tuple) -> StructType:
    return StructType([StructField(name, typ, True) for name, typ in fields])


LATENCY_STATS = _s(("count", DoubleType()), ("mean", DoubleType()), ("p50", DoubleType()),
                   ("p95", DoubleType()), ("p99", DoubleType()), ("max", DoubleType()))

BROKER = _s(("max_queue_readers", LongType()), ("receive_top", LongType()),
            ("waitfor_timeout_ms", LongType()), ("monitor_interval_seconds", DoubleType()),
            ("high_priority_share", DoubleType()),
            # absent at their default (harness.matrix.OPTIONAL_BROKER)
            ("processing_us_per_message", LongType()), ("transport_rate_limit", DoubleType()),
            ("client_cpu_us_per_send", LongType()))

PERMUTATION = _s(("id", StringType()), ("index", LongType()), ("initiators", LongType()),
                 ("threads", LongType()), ("total_threads", LongType()), ("dialogs", StringType()),
                 ("dialogs_every_n", LongType()), ("dialogs_shared", BooleanType()),
                 ("payload_bytes", LongType()), ("server", StringType()), ("broker", BROKER),
                 # dialog lifetime (null: unlimited reuse / not fire and forget)
                 ("messages_per_dialog", LongType()), ("fire_and_forget", BooleanType()),
                 # open loop: offered SENDs per second per initiator (null: closed loop)
                 ("rate", DoubleType()),
                 # the matrix case (cases:) it belongs to (null: a matrix without cases)
                 ("case", StringType()))

TARGET = _s(("kind", StringType()), ("label", StringType()), ("profile", StringType()))

WINDOW = _s(("warmup_seconds", DoubleType()), ("measure_seconds", DoubleType()),
            ("measure_start", DoubleType()), ("measure_end", DoubleType()),
            ("spawn_complete", DoubleType()))

PER_INITIATOR = _s(("initiator", LongType()), ("sent", DoubleType()), ("received", DoubleType()),
                   ("lost", DoubleType()), ("xmitq_left", DoubleType()), ("queued", DoubleType()),
                   ("poison", DoubleType()), ("duplicates", DoubleType()))

WORKER = _s(("initiator", LongType()), ("worker", LongType()), ("host", StringType()),
            ("users", DoubleType()), ("users_active", DoubleType()), ("sends", DoubleType()),
            ("errors", DoubleType()), ("cpu_percent", DoubleType()), ("client_bound", BooleanType()))

CLIENT_HOST = _s(("host", StringType()), ("workers", DoubleType()), ("cpu_percent", DoubleType()),
                 ("memory_percent", DoubleType()), ("memory_used_bytes", DoubleType()))

TOP_WAIT = _s(("wait_type", StringType()), ("wait_time_ms", DoubleType()),
              ("waiting_tasks", DoubleType()), ("share", DoubleType()))

GROWTH = _s(("per_s", DoubleType()), ("ci_low", DoubleType()), ("ci_high", DoubleType()),
            ("first", DoubleType()), ("last", DoubleType()), ("samples", LongType()))

#: ``<perm>/rep-NN/summary.json`` (schema ssbench.summary/1): every field of
#: :class:`harness.results.RepetitionSummary`, in its order (a unit test compares the two).
#: ``error_samples``, ``collector_errors`` and ``web`` are kept as raw JSON text: their items
#: are free-form.
SUMMARY = _s(
    ("schema", StringType()), ("run_id", StringType()), ("permutation_id", StringType()),
    ("repetition", LongType()), ("permutation", PERMUTATION), ("target", TARGET),
    ("window", WINDOW), ("dialogs_created", DoubleType()), ("usable_dialogs", DoubleType()),
    ("messages_sent", DoubleType()), ("messages_sent_client", DoubleType()),
    ("messages_received", DoubleType()), ("messages_lost", DoubleType()), ("drained", BooleanType()),
    ("per_initiator", ArrayType(PER_INITIATOR)), ("send_rate", DoubleType()),
    ("receive_rate", DoubleType()), ("send_latency_ms", LATENCY_STATS),
    ("e2e_latency_ms", LATENCY_STATS), ("top_waits", ArrayType(TOP_WAIT)),
    ("max_xmitq_depth", DoubleType()), ("max_queue_depth", DoubleType()),
    ("activation_tasks_started", DoubleType()), ("activation_tasks_max_running", DoubleType()),
    ("activation_tasks_started_per_s", DoubleType()), ("activation_tasks_started_in_window", DoubleType()),
    ("activation_tasks_ended_in_window", DoubleType()),
    ("client_cpu_percent", DoubleType()), ("server_cpu_percent", DoubleType()),
    ("worker_cpu_percent", MapType(StringType(), DoubleType())), ("client_bound", BooleanType()),
    ("other_cpu_percent", DoubleType()), ("steal_percent", DoubleType()), ("noisy_host", BooleanType()),
    ("cpu_probe_ms", DoubleType()), ("cpu_reference_ms", DoubleType()), ("cpu_speed", DoubleType()),
    ("slow_cpu", BooleanType()), ("cross_cpu_ns", DoubleType()),
    ("commit_latency_ms", DoubleType()), ("storage_probe_ms", DoubleType()),
    ("storage_reference_ms", DoubleType()), ("noisy_storage", BooleanType()),
    ("session_waits", MapType(StringType(), MapType(StringType(), DoubleType()))),
    ("session_wait_samples", DoubleType()),
    ("freeze_seconds", DoubleType()), ("server_frozen", BooleanType()),
    ("receive_stall_seconds", DoubleType()), ("receive_send_ratio", DoubleType()),
    ("queue_growth", DoubleType()), ("receive_stalled", BooleanType()),
    ("stall_chains", ArrayType(StringType())), ("sends_in_flight_at_end", DoubleType()),
    ("cpu_pinning", MapType(StringType(), ArrayType(LongType()))),
    ("alternation", _s(("members", ArrayType(StringType())), ("slice_seconds", DoubleType()),
                       ("member", LongType()))),
    ("workers", ArrayType(WORKER)), ("client_hosts", ArrayType(CLIENT_HOST)),
    ("users_expected", DoubleType()), ("users_spawned", DoubleType()), ("users_active", DoubleType()),
    ("errors", DoubleType()), ("error_samples", StringType()), ("collector_errors", StringType()),
    ("poison_messages", DoubleType()), ("messages_duplicated", DoubleType()), ("queue_disabled", BooleanType()),
    ("messages_undelivered", DoubleType()), ("broker_restarts", DoubleType()),
    ("offered_rate", DoubleType()), ("achieved_rate", DoubleType()), ("behind", BooleanType()),
    ("send_latency_corrected_ms", LATENCY_STATS),
    ("send_latency_high_ms", LATENCY_STATS), ("send_latency_normal_ms", LATENCY_STATS),
    ("e2e_latency_high_ms", LATENCY_STATS), ("e2e_latency_normal_ms", LATENCY_STATS),
    ("backlog_messages", DoubleType()), ("drain_seconds", DoubleType()), ("drain_rate", DoubleType()),
    ("dialogs_begun", DoubleType()), ("dialogs_ended", DoubleType()), ("dialogs_ended_in_window", DoubleType()),
    ("dialog_errors_received", DoubleType()), ("dialog_errors_lost", DoubleType()),
    ("endpoints", MapType(StringType(), DoubleType())),
    ("messages_sent_client_cut", DoubleType()),
    # the diagnosis' evidence (docs/diagnosis.md)
    ("xmitq_depth_growth", GROWTH), ("queue_depth_growth", GROWTH), ("transport_rate", DoubleType()),
    ("receives_per_s", DoubleType()), ("activation_tasks_running", DoubleType()),
    ("activation_max_readers", DoubleType()), ("activation_at_max_share", DoubleType()),
    ("activation_task_limit_per_s", DoubleType()), ("procedure_us_per_message", DoubleType()),
    ("procedure_busy", DoubleType()), ("messages_per_receive", DoubleType()),
    ("server_on_host", BooleanType()), ("server_cpu_utilization", DoubleType()), ("host_cpu_utilization", DoubleType()),
    ("host_cpus", DoubleType()), ("client_cpu_demand", DoubleType()),
    ("server_cpu_demand", DoubleType()), ("broker_waits", MapType(StringType(), DoubleType())),
    ("page_latch_objects", MapType(StringType(), DoubleType())),
    ("status", StringType()), ("web", StringType()),
)

#: ``<perm>/rep-NN/samples.jsonl``: the collectors' long-format time series.
SAMPLES = _s(("ts", DoubleType()), ("elapsed_s", DoubleType()), ("phase", StringType()),
             ("family", StringType()), ("metric", StringType()), ("key", StringType()),
             ("value", DoubleType()))


def with_corrupt(schema: StructType) -> StructType:
    """``schema`` plus the ``_corrupt_record`` column Spark fills for unparseable records."""
    return StructType(list(schema.fields) + [StructField(CORRUPT, StringType(), True)])
