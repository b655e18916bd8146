"""The analysis' transformations: pure functions from DataFrames to DataFrames.

Statistics across repetitions are exact: the median and the quartiles use Spark's
``percentile`` (linear interpolation between order statistics, the same as Python's
``statistics.median`` and ``statistics.quantiles(..., method="inclusive")``); IQR = Q3 - Q1.

Wait analysis. A wait type's rate in one repetition is the wait time it accrued per second of
the measured window: the sum of its ``waits/wait_ms_per_s`` samples over the measured ticks
divided by the number of measured ticks of that repetition (the most samples any one series has
in the window; a wait type absent from a tick waited 0 ms then). A permutation's rate is the
mean over the repetitions that have wait data. Repetitions without samples fall back to their
summary's ``top_waits`` (``wait_time_ms`` per second of the window's length). Idle (benign)
waits are not here: each target's ``wait_stats()`` leaves them out before the collectors sample
them, so every wait the analysis sees counts (shares, top waits, the diagnosis).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

#: How each output table is sorted when written (the transforms themselves do not sort: a
#: global sort costs Spark an extra sampling job; the tables are small and sorted at the end).
SORT_KEYS = {
    "permutations": ("run_id", "perm_index", "perm_id"),
    "repetitions": ("run_id", "perm_index", "perm_id", "rep"),
    "dialog_gains": ("run_id", "server", "strategy", "payload_bytes", "initiators", "threads"),
    "crossover": ("run_id", "server", "strategy", "payload_bytes", "initiators"),
    "wait_profile": ("run_id", "perm_id", "rank", "wait_type"),
    "top_waits": ("run_id", "perm_id", "rank"),
    "queue_timeseries": ("run_id", "perm_id", "rep", "key", "elapsed_s"),
    "sample_metrics": ("run_id", "perm_id", "rep", "family", "metric", "key"),
}

#: Per-repetition summary metrics aggregated across repetitions.
METRICS = ("send_rate", "receive_rate", "send_p50_ms", "send_p95_ms", "send_p99_ms",
           "e2e_p50_ms", "e2e_p95_ms", "e2e_p99_ms")

#: Per-repetition values kept as arrays in the permutations table.
VALUE_METRICS = ("receive_rate", "send_rate")

AXES = ("initiators", "threads", "total_threads", "dialogs", "dialogs_every_n", "dialogs_shared",
        "payload_bytes", "server", "perm_index", "target_kind", "target_label", "target_profile",
        # technique axes and the offered rate (harness.analysis.techniques)
        "messages_per_dialog", "fire_and_forget", "waitfor_timeout_ms", "high_priority_share",
        "max_queue_readers", "receive_top", "rate")

#: Wait categories (first match wins): SQL Server wait types (what both targets report; the
#: embedded one maps PostgreSQL's wait events to them) and raw PostgreSQL events, should a
#: collector report those.
WAIT_CATEGORIES = (
    ("page latch", r"(?i)^(PAGELATCH_.*|LWLock:(BufferContent|buffer_content|BufferMapping|buffer_mapping)"
                   r"|BufferPin.*)$"),
    ("log flush", r"(?i)^(WRITELOG|LOGBUFFER|IO:WAL.*|LWLock:(WALWrite|WALInsert|WALBufMapping|WALWriteLock)"
                  r"|WALWrite.*|WALSync.*)$"),
    ("lock", r"(?i)^(LCK_M_.*|Lock:.*)$"),
    ("client", r"(?i)^(ASYNC_NETWORK_IO|Client:.*)$"),
    ("io", r"(?i)^(PAGEIOLATCH_.*|IO_COMPLETION|IO:.*)$"),
    ("cpu", r"(?i)^(SOS_SCHEDULER_YIELD|CPU.*)$"),
)
#: the wait categories whose share of the wait time the permutations table shows
SHARE_CATEGORIES = ("page latch", "log flush", "lock")


# --------------------------------------------------------------------------- repetitions

def measured_metrics(samples: DataFrame) -> DataFrame:
    """One pass over the raw samples (:func:`harness.analysis.discovery.read_samples`): per
    (run_id, perm_id, rep, family, metric, key) of the measured window (phase == 'measure'):
    n, sum, mean, max, min of value. Corrupt lines are counted in rows with ``_bad`` true
    (family, metric, key null). Grouped by the file first; the file is parsed into run_id,
    perm_id, rep on the (small) result."""
    from .discovery import with_rep_keys

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


def rep_ticks(metrics: DataFrame) -> DataFrame:
    """Measured ticks per repetition: the most samples any one series has in the window."""
    return (metrics.where(~F.col("_bad")).groupBy("run_id", "perm_id", "rep")
            .agg(F.max("n").alias("ticks")))


# --------------------------------------------------------------------------- permutations

def _quantiles(col: str):
    return F.percentile(F.col(col), F.array(F.lit(0.25), F.lit(0.5), F.lit(0.75)))


def permutation_stats(reps: DataFrame) -> DataFrame:
    """Per permutation across its repetitions: for each of :data:`METRICS` the median, Q1, Q3,
    IQR, min and max, and n (repetitions); plus lost messages, errors, client-bound and
    disturbed repetitions, the summaries' max transmission-queue and target-queue depths, and the
    repetitions' numbers, statuses and values of :data:`VALUE_METRICS` (``rep_numbers``,
    ``rep_statuses``, ``<metric>_values``, in repetition order; the comparisons leave out those
    harness.results.counts_in_verdicts keeps out: harness.verdicts.pairs.samples)."""
    aggs = [F.count(F.lit(1)).alias("n")]
    aggs += [F.first(c, ignorenulls=True).alias(c) for c in AXES]
    for m in METRICS:
        aggs += [_quantiles(m).alias(f"_{m}_q"), F.min(m).alias(f"{m}_min"), F.max(m).alias(f"{m}_max"),
                 F.count(m).alias(f"_{m}_n")]
    aggs += [F.sum("messages_lost").alias("messages_lost"), F.sum("errors").alias("errors"),
             F.sum(F.col("client_bound").cast("int")).alias("client_bound_reps"),
             F.sum(F.col("disturbed").cast("int")).alias("disturbed_reps"),
             F.max("max_xmitq_depth").alias("max_xmitq_depth"),
             F.max("max_queue_depth").alias("max_queue_depth"),
             F.expr("percentile(client_cpu_percent, 0.5)").alias("client_cpu_percent"),
             F.expr("percentile(server_cpu_percent, 0.5)").alias("server_cpu_percent"),
             F.expr("percentile(activation_tasks_started_per_s, 0.5)").alias("activation_tasks_started_per_s"),
             F.sum("dialog_errors_lost").alias("dialog_errors_lost"),
             F.concat_ws(",", F.array_sort(F.collect_set("status"))).alias("statuses"),
             F.concat_ws(",", F.array_sort(F.collect_list("rep")).cast("array<string>")).alias("reps")]
    # the repetitions (numbers, statuses) and their rates in repetition order: the driver's
    # intervals and verdicts use them (harness.verdicts.pairs.samples)
    by_rep = F.array_sort(F.collect_list(F.struct("rep", "status", "alt_window", *VALUE_METRICS)))
    aggs += [by_rep.getField("rep").alias("rep_numbers"), by_rep.getField("status").alias("rep_statuses"),
             by_rep.getField("alt_window").alias("rep_windows")]
    for m in VALUE_METRICS:
        aggs.append(by_rep.getField(m).alias(f"{m}_values"))
    g = reps.groupBy("run_id", "perm_id").agg(*aggs)
    cols = [F.col("run_id"), F.col("perm_id"), F.col("n")] + [F.col(c) for c in AXES]
    for m in METRICS:
        q = F.col(f"_{m}_q")
        cols += [q[1].alias(f"{m}_median"), q[0].alias(f"{m}_q1"), q[2].alias(f"{m}_q3"),
                 (q[2] - q[0]).alias(f"{m}_iqr"), F.col(f"{m}_min"), F.col(f"{m}_max")]
    cols += [F.col(c) for c in ("messages_lost", "errors", "client_bound_reps", "disturbed_reps", "max_xmitq_depth",
                                "max_queue_depth", "client_cpu_percent", "server_cpu_percent",
                                "activation_tasks_started_per_s", "dialog_errors_lost",
                                "statuses", "reps", "rep_numbers", "rep_statuses", "rep_windows")]
    cols += [F.col(f"{m}_values") for m in VALUE_METRICS]
    return g.select(*cols)


def sample_extras(metrics: DataFrame) -> DataFrame:
    """Per permutation from the measured samples: max transmission-queue depth (any
    initiator), max target-queue depth, mean client/server CPU (percent of one core), max
    running activation tasks, activation task-limit hits per second, samples' repetitions."""
    m = metrics.where(~F.col("_bad"))
    is_xq = (F.col("family") == "queues") & (F.col("metric") == "depth") & F.col("key").startswith("xmitq")
    is_q = (F.col("family") == "queues") & (F.col("metric") == "depth") & (F.col("key") == "queue")
    cpu = (F.col("family") == "host") & (F.col("metric") == "cpu_percent")
    act = F.col("family") == "activation"
    return (m.groupBy("run_id", "perm_id").agg(
        F.max(F.when(is_xq, F.col("max"))).alias("xmitq_depth_max_measured"),
        F.max(F.when(is_q, F.col("max"))).alias("queue_depth_max_measured"),
        F.avg(F.when(cpu & (F.col("key") == "client"), F.col("mean"))).alias("client_cpu_mean"),
        F.avg(F.when(cpu & (F.col("key") == "server"), F.col("mean"))).alias("server_cpu_mean"),
        F.max(F.when(act & (F.col("metric") == "tasks_running"), F.col("max"))).alias("activation_tasks_max"),
        F.avg(F.when(act & (F.col("metric") == "task_limit_reached_per_s"), F.col("mean")))
         .alias("activation_limit_per_s"),
        F.countDistinct("rep").alias("sample_reps")))


def permutations_table(stats: DataFrame, extras: DataFrame | None, shares: DataFrame | None) -> DataFrame:
    """The permutation table: :func:`permutation_stats` with the samples' extras and the wait
    shares joined on (the job adds the diagnosis' columns)."""
    out = stats
    if extras is not None:
        out = out.join(extras, ["run_id", "perm_id"], "left")
    if shares is not None:
        out = out.join(shares, ["run_id", "perm_id"], "left")
    return out


# --------------------------------------------------------------------------- waits

def _category(col):
    expr = F.lit("other")
    for name, pattern in reversed(WAIT_CATEGORIES):
        expr = F.when(col.rlike(pattern), F.lit(name)).otherwise(expr)
    return expr


def session_wait_rates(reps: DataFrame) -> DataFrame:
    """Per (run_id, perm_id, rep, wait_type) of an alternated member with sampled session waits:
    the test's sessions' (senders' and readers') mean sessions waiting in its own slices, as ms
    of wait per second (10.3 waiting = 10,300 ms/s), ``source`` 'sessions'. The server's waits
    of such a window are every strategy's together."""
    roles = (reps.where(F.col("alternated") & F.col("session_waits").isNotNull())
             .select("run_id", "perm_id", "rep", F.explode("session_waits").alias("role", "waits")))
    return (roles.select("run_id", "perm_id", "rep", F.explode("waits").alias("wait_type", "waiting"))
            .groupBy("run_id", "perm_id", "rep", "wait_type")
            .agg((F.sum("waiting") * 1000.0).alias("wait_ms_per_s"))
            .select("run_id", "perm_id", "rep", "wait_type", "wait_ms_per_s",
                    F.lit(None).cast("double").alias("waiting_tasks_per_s"), F.lit("sessions").alias("source")))


def rep_wait_rates(metrics: DataFrame | None, reps: DataFrame,
                   fallback: list[tuple[str, str, int]] | None = None) -> DataFrame:
    """Per (run_id, perm_id, rep, wait_type): wait_ms_per_s and waiting_tasks_per_s over the
    measured window, with ``source`` 'samples', or 'summary' for the repetitions listed in
    ``fallback`` (run_id, perm_id, rep: those without wait samples), from their summary's
    top_waits. ``fallback`` None: every repetition without wait samples, found by Spark. An
    alternated member with sampled session waits takes those instead (:func:`session_wait_rates`)."""
    sessions = session_wait_rates(reps)
    keys = sessions.select("run_id", "perm_id", "rep").distinct()
    return sessions.unionByName(_window_wait_rates(metrics, reps, fallback).join(keys, ["run_id", "perm_id", "rep"],
                                                                                "left_anti"))


def _window_wait_rates(metrics: DataFrame | None, reps: DataFrame,
                       fallback: list[tuple[str, str, int]] | None) -> DataFrame:
    """:func:`rep_wait_rates` from the server's waits: the samples, else the summary's."""
    parts = []
    if metrics is not None:
        ticks = rep_ticks(metrics)
        w = (metrics.where(~F.col("_bad") & (F.col("family") == "waits")
                           & F.col("metric").isin("wait_ms_per_s", "waiting_tasks_per_s"))
             .groupBy("run_id", "perm_id", "rep", F.col("key").alias("wait_type"))
             .agg(F.sum(F.when(F.col("metric") == "wait_ms_per_s", F.col("sum"))).alias("_ms"),
                  F.sum(F.when(F.col("metric") == "waiting_tasks_per_s", F.col("sum"))).alias("_tasks"))
             .join(ticks, ["run_id", "perm_id", "rep"])
             .select("run_id", "perm_id", "rep", "wait_type",
                     (F.coalesce(F.col("_ms"), F.lit(0.0)) / F.col("ticks")).alias("wait_ms_per_s"),
                     (F.coalesce(F.col("_tasks"), F.lit(0.0)) / F.col("ticks")).alias("waiting_tasks_per_s"),
                     F.lit("samples").alias("source")))
        parts.append(w)
        if fallback is not None and not fallback:
            return w
    summary = reps
    if fallback:
        keys = [f"{r}/{p}/{n}" for r, p, n in fallback]
        summary = reps.where(F.concat_ws("/", "run_id", "perm_id", F.col("rep").cast("string")).isin(keys))
    # the waits are the window's: per second of its length (an alternated member's
    # measure_seconds is only its own slices)
    from_summary = (summary.select("run_id", "perm_id", "rep", "window_seconds",
                                   F.explode_outer("top_waits").alias("w"))
                    .where(F.col("w").isNotNull() & (F.col("window_seconds") > 0))
                    .select("run_id", "perm_id", "rep", F.col("w.wait_type").alias("wait_type"),
                            (F.col("w.wait_time_ms") / F.col("window_seconds")).alias("wait_ms_per_s"),
                            (F.col("w.waiting_tasks") / F.col("window_seconds")).alias("waiting_tasks_per_s"),
                            F.lit("summary").alias("source")))
    if not parts:
        return from_summary
    if fallback is None:
        have = parts[0].select("run_id", "perm_id", "rep").distinct()
        from_summary = from_summary.join(have, ["run_id", "perm_id", "rep"], "left_anti")
    return parts[0].unionByName(from_summary)


def wait_profile(rep_waits: DataFrame) -> DataFrame:
    """Per (run_id, perm_id, wait_type): mean wait_ms_per_s over the repetitions with wait
    data, category, share of the permutation's wait time and rank (1 = top)."""
    reps_with = rep_waits.groupBy("run_id", "perm_id").agg(F.countDistinct("rep").alias("_reps"))
    per = (rep_waits.groupBy("run_id", "perm_id", "wait_type")
           .agg(F.sum("wait_ms_per_s").alias("_ms"), F.sum("waiting_tasks_per_s").alias("_tasks"),
                F.concat_ws(",", F.array_sort(F.collect_set("source"))).alias("source"))
           .join(reps_with, ["run_id", "perm_id"])
           .select("run_id", "perm_id", "wait_type", (F.col("_ms") / F.col("_reps")).alias("wait_ms_per_s"),
                   (F.col("_tasks") / F.col("_reps")).alias("waiting_tasks_per_s"), "source",
                   F.col("_reps").alias("reps"),
                   _category(F.col("wait_type")).alias("category")))
    w_perm = Window.partitionBy("run_id", "perm_id")
    total = F.sum(F.col("wait_ms_per_s")).over(w_perm)
    rank_w = Window.partitionBy("run_id", "perm_id").orderBy(F.col("wait_ms_per_s").desc(), F.col("wait_type"))
    return (per.withColumn("share", F.when(total > 0, F.col("wait_ms_per_s") / total))
            .withColumn("rank", F.row_number().over(rank_w)))


def top_waits(profile: DataFrame, n: int = 5) -> DataFrame:
    """The ``n`` largest waits of each permutation."""
    return profile.where(F.col("rank") <= n)


def wait_shares(profile: DataFrame, stats: DataFrame) -> DataFrame:
    """Per permutation: the shares of page-latch, log-flush and lock waits in its wait time, the
    top wait and its share, and the wait time per second. What limits throughput is the
    diagnosis' (harness.analysis.diagnosis: these shares alone cannot say it; docs/diagnosis.md)."""
    shares = profile.groupBy("run_id", "perm_id").agg(
        *[F.coalesce(F.sum(F.when(F.col("category") == c, F.col("share"))), F.lit(0.0))
          .alias(c.replace(" ", "_") + "_share") for c in SHARE_CATEGORIES],
        F.max(F.when(F.col("rank") == 1, F.col("wait_type"))).alias("top_wait"),
        F.max(F.when(F.col("rank") == 1, F.col("share"))).alias("top_wait_share"),
        F.sum("wait_ms_per_s").alias("wait_ms_per_s_total"))
    return stats.select("run_id", "perm_id").join(shares, ["run_id", "perm_id"], "left")


# --------------------------------------------------------------------------- time series

def queue_timeseries(samples: DataFrame) -> DataFrame:
    """Queue depths over time (all phases) of the given samples: run_id, perm_id, rep,
    elapsed_s, phase, key (xmitq.iN or queue), depth."""
    from .discovery import with_rep_keys

    return with_rep_keys(
        samples.where(~F.col("_bad") & (F.col("family") == "queues") & (F.col("metric") == "depth"))
        .groupBy("file", "elapsed_s", "phase", "key")
        .agg(F.max("value").alias("depth")))
