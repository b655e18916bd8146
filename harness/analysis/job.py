"""The analysis job: run directories in, a report directory out.

    analyze(run_dirs, out=None, master=None) -> Path of index.html

Also runnable on its own, e.g. on a cluster::

    spark-submit harness/analysis/job.py [--out DIR] [--threshold PCT] RUN_DIR [RUN_DIR ...]

Outputs (``RUN_DIR/report/`` by default; with several runs and no ``out``, a
``report-<UTC time>`` directory beside the first run): ``tables/<name>.parquet`` (Spark) and
``tables/<name>.csv``, ``plots/*.png``, ``index.html`` and ``answer.json`` (the key table,
:mod:`harness.verdicts.answer`: what ``ssbench analyze`` and ``ssbench bench`` print).

Design for volume: the samples of every repetition are read by one ``spark.read.json`` with
an explicit schema and reduced in one aggregation to measured-window statistics per series
(small); everything after that, the plots included, works on small aggregated frames. Only the
few plotted permutations' time series are read again.
"""

from __future__ import annotations

import argparse
import csv
import datetime as _dt
import io
import json
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

if __package__ in (None, ""):  # spark-submit harness/analysis/job.py: make `harness` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from harness.analysis import diagnosis_view, discovery, plots, report, techniques  # noqa: E402
from harness.errors import UserError  # noqa: E402
from harness.results import write_atomic, write_json  # noqa: E402
from harness.results.model import target_capabilities  # noqa: E402
from harness import environment  # noqa: E402
from harness.verdicts import Answer, Rule, judge_all, key_answer, with_repetitions  # noqa: E402

MARKER = ".ssbench-report"


def default_out(run_dirs: list[str | Path]) -> Path:
    first = Path(run_dirs[0]).expanduser().resolve()
    if len(run_dirs) == 1:
        return first / "report"
    return first.parent / f"report-{_dt.datetime.now(_dt.timezone.utc).strftime('%Y%m%d-%H%M%S')}"


def prepare_out(out: Path) -> Path:
    """Create ``out`` or reuse a previous report there (its plots/ and tables/ are replaced);
    refuse a non-empty directory that is not an ssbench report."""
    out = out.expanduser().resolve()
    if out.exists():
        if not out.is_dir():
            raise UserError("the report location exists and is not a directory", file=str(out))
        ours = (out / MARKER).exists()
        if not ours and any((out / d).exists() for d in ("plots", "tables", "index.html")):
            raise UserError("not an ssbench report directory (no .ssbench-report marker) but it has "
                            "plots/, tables/ or index.html: choose another --out", file=str(out))
        for d in ("plots", "tables"):
            if (out / d).exists():
                shutil.rmtree(out / d)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / MARKER, "written by ssbench analyze; plots/ and tables/ are replaced on each run\n")
    return out


@dataclass
class AnalysisResult:
    """What one analysis produced (the notebook displays these; the CLI prints ``index``)."""

    index: Path                                  # report/index.html
    permutations: list[dict[str, Any]]           # tables/permutations.csv as dicts
    gains: list[dict[str, Any]]                  # tables/dialog_gains.csv
    crossover: list[dict[str, Any]]              # tables/crossover.csv
    key_rows: list[dict[str, Any]]               # the report's crossover table (crossover + labels + peak)
    plots: list[plots.Plot]                      # in report order; skipped ones carry a note
    issues: list[discovery.Issue]
    seconds: float
    notes_html: str = ""                         # synthetic data, target notes, how to read verdicts
    techniques: list[dict[str, Any]] = field(default_factory=list)   # tables/technique_gains.csv
    answer: Answer | None = None                 # the key table (answer.json; the terminal prints it)
    diagnosis: list[dict[str, Any]] = field(default_factory=list)   # tables/diagnosis.csv
    diagnosis_html: str = ""                     # the report's diagnosis section

    @property
    def out_dir(self) -> Path:
        return self.index.parent


def find_runs(path: str | Path) -> list[Path]:
    """``path`` itself when it is a run directory (run.json or permutation directories with
    rep-NN/), else the run directories directly under it (a results directory), sorted."""
    p = Path(path).expanduser()
    if not p.is_dir():
        raise UserError("no such directory", file=str(path))

    if discovery.is_run_dir(p):
        return [p]
    runs = sorted(d for d in p.iterdir() if d.is_dir() and not d.name.startswith(".") and discovery.is_run_dir(d))
    if not runs:
        raise UserError("neither a run directory nor a directory of runs", file=str(path))
    return runs


def analyze(run_dirs: list[str | Path], out: str | Path | None = None, master: str | None = None, *,
            spark=None, threshold_pct: float | None = None, top_waits: int = 5,
            log: Callable[[str], None] | None = None, remote: str | None = None) -> Path:
    """Analyze ``run_dirs`` into a report directory and return the path of its index.html.

    ``spark``: an existing SparkSession to use (kept running); otherwise one is started on
    ``master`` (default local[*]), or on the Spark Connect server ``remote`` (sc://host:port),
    and stopped at the end. ``threshold_pct``: a comparison's verdict is ``gain`` only when its
    whole interval is above it, ``loss`` only when wholly below its negative, ``no difference``
    within +-it (docs/statistics.md); None: each run's own ``run.threshold_pct`` (5 when it has
    none). ``log``: progress messages (default: none).
    """
    return analyze_result(run_dirs, out, master, spark=spark, threshold_pct=threshold_pct,
                          top_waits=top_waits, log=log, remote=remote).index


def analyze_result(run_dirs: list[str | Path], out: str | Path | None = None, master: str | None = None, *,
                   spark=None, threshold_pct: float | None = None, top_waits: int = 5,
                   log: Callable[[str], None] | None = None, remote: str | None = None) -> AnalysisResult:
    """:func:`analyze`, returning everything it produced (:class:`AnalysisResult`)."""
    if isinstance(run_dirs, (str, Path)):
        run_dirs = [run_dirs]
    if not run_dirs:
        raise UserError("no run directory given")
    say = log or (lambda _msg: None)
    t0 = time.monotonic()
    disc = discovery.discover(run_dirs)
    out_dir = prepare_out(Path(out) if out else default_out(run_dirs))
    # (the issues are counted at the end: reading the summaries and samples finds more)
    say(f"found {len(disc.reps)} repetitions in {len(disc.runs)} run(s)")
    helper = start_plot_helper()
    own = False
    try:
        if spark is None:
            from pyspark.sql import SparkSession

            from harness.analysis.spark import get_spark

            # a session we did not start is left running
            own = remote is not None or SparkSession.getActiveSession() is None
            spark = get_spark(master, input_bytes=disc.samples_bytes, remote=remote)
            where = remote or spark.conf.get("spark.master", None) or "?"
            say(f"Spark {spark.version} on {where} ready after {time.monotonic() - t0:.1f} s")
        return _run(spark, disc, out_dir, threshold_pct, top_waits, say, t0, helper)
    finally:
        if helper is not None:
            helper.shutdown(wait=True, cancel_futures=True)
        if own and spark is not None:
            from harness.analysis.spark import stop_session

            stop_session(spark)     # and the JVM gone, its archive written, before the command returns


def _rows(df) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in df.collect()]


def _run(spark, disc: discovery.Discovery, out_dir: Path, threshold_pct: float | None, n_top: int,
         say: Callable[[str], None], t0: float, helper=None) -> AnalysisResult:
    from harness.analysis import comparisons as C
    from harness.analysis import transforms as T

    tables: dict[str, Any] = {}
    reps = discovery.read_summaries(spark, disc)
    rep_keys = {(r.run_id, r.perm_id, r.rep) for r in disc.reps}
    metrics, with_waits = _reduce_samples(spark, disc, tables)
    say(f"samples reduced after {time.monotonic() - t0:.1f} s")

    stats = T.permutation_stats(reps).localCheckpoint()
    fallback: list[tuple[str, str, int]] | None = sorted(rep_keys - with_waits)
    if metrics is None or len(fallback) > 200:  # let Spark find them (an anti-join) instead of a long IN list
        fallback = None
    profile = T.wait_profile(T.rep_wait_rates(metrics, reps, fallback)).localCheckpoint()
    extras = T.sample_extras(metrics) if metrics is not None else None
    perms_df = T.permutations_table(stats, extras, T.wait_shares(profile, stats)).localCheckpoint()
    top_df = T.top_waits(profile, n_top)

    # intervals, gains, verdicts and crossovers on the driver (harness.analysis.comparisons):
    # the values per permutation are its few repetitions
    perms = _sorted(_rows(perms_df), "permutations")
    synthetic_runs = {r.run_id for r in disc.runs if is_synthetic(r, perms)}
    intervals = C.rate_intervals(perms, synthetic_runs)
    perms_df = perms_df.join(spark.createDataFrame(C.as_tuples(intervals, C.INTERVAL_SCHEMA), C.INTERVAL_SCHEMA),
                             ["run_id", "perm_id"], "left")
    diags, diag_rows, moves, perms_df = _diagnose(spark, disc, perms, perms_df, tables)
    rep_rows = _sorted(_rows(reps), "repetitions")
    rules, gains, cross, tech, answer = judge_runs(disc, perms, rep_rows, threshold_pct, out_dir / "index.html")
    tech_df = spark.createDataFrame(C.as_tuples(tech, techniques.TECHNIQUE_SCHEMA), techniques.TECHNIQUE_SCHEMA)
    gains_df = spark.createDataFrame(C.as_tuples(gains, C.GAINS_SCHEMA), C.GAINS_SCHEMA)
    cross_df = spark.createDataFrame(C.as_tuples(cross, C.CROSSOVER_SCHEMA), C.CROSSOVER_SCHEMA)
    profile_rows = _sorted(_rows(profile), "wait_profile")
    say(f"aggregated {len(perms)} permutations after {time.monotonic() - t0:.1f} s")

    chosen, series = _timeseries(spark, disc, perms, tables)
    tables.update({
        "permutations": perms_df, "dialog_gains": gains_df, "crossover": cross_df, "top_waits": top_df,
        "technique_gains": tech_df,
        "wait_profile": profile, "repetitions": reps,
    })
    # Spark writes the tables in a thread while Python draws the plots: the JVM and the
    # interpreter work at the same time.
    csv_rows = {"permutations": perms, "dialog_gains": gains, "crossover": cross, "queue_timeseries": series,
                "technique_gains": tech, "diagnosis": diag_rows, "limit_moves": moves}
    csv_rows["wait_profile"] = profile_rows
    csv_rows["top_waits"] = [w for w in profile_rows if w["rank"] is not None and w["rank"] <= n_top]
    csv_rows["repetitions"] = rep_rows
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ssbench-tables") as pool:
        writing = pool.submit(write_tables, out_dir / "tables", tables, csv_rows, {"sample_metrics"}, say)
        all_plots, targets, server_labels = draw_plots(disc, perms, gains, cross, profile_rows, series, chosen,
                                                       out_dir / "plots", rules, helper, tech)
        say(f"{sum(1 for p in all_plots if not p.skipped)} plots after {time.monotonic() - t0:.1f} s")
        written = writing.result()
    written["issues"] = [write_issues(out_dir / "tables", disc)]
    say(f"tables written after {time.monotonic() - t0:.1f} s")

    key_rows = report.key_rows(perms, cross, server_labels)
    diag_html = diagnosis_view.report_section(diags, synthetic_runs)
    write_json(out_dir / "answer.json", answer.to_json())
    path = report.write_index(out_dir, disc, targets, perms, key_rows, all_plots, answer, written,
                              time.monotonic() - t0, gains=gains, synthetic_runs=synthetic_runs, techniques=tech,
                              diagnosis_html=diag_html, disturbed=[r for r in csv_rows["repetitions"] if r.get("disturbed")])
    say(f"report written after {time.monotonic() - t0:.1f} s")
    notes = report.about_targets(disc, targets, synthetic_runs) + report.verdict_words(gains)
    return AnalysisResult(index=path, permutations=perms, gains=gains, crossover=cross, key_rows=key_rows,
                          plots=all_plots, issues=list(disc.issues), seconds=time.monotonic() - t0,
                          notes_html=notes, techniques=tech, answer=answer, diagnosis=diag_rows,
                          diagnosis_html=diag_html)


def _reduce_samples(spark, disc: discovery.Discovery, tables: dict[str, Any]):
    """Every repetition's samples reduced to measured-window statistics (``tables
    ["sample_metrics"]``), the damaged ones reported as issues: the statistics (None without
    samples) and the repetitions whose samples have wait statistics."""
    from pyspark.sql import functions as F

    from harness.analysis import transforms as T

    samples = discovery.read_samples(spark, disc)
    if samples is None:
        return None, set()
    # localCheckpoint (not cache): materialized once, and later queries start from it with a
    # short plan -- with cache() every query still carries (and matches) the whole lineage,
    # which costs ~1-2 s of planning per query here.
    metrics = T.measured_metrics(samples).localCheckpoint()
    per_rep = (metrics.groupBy("run_id", "perm_id", "rep")
               .agg(F.sum(F.when(F.col("_bad"), F.col("n"))).alias("bad"),
                    F.max(F.when(~F.col("_bad") & (F.col("family") == "waits"), F.lit(1))).alias("waits"))
               .collect())
    discovery.report_sample_issues(disc, [(r.run_id, r.perm_id, r.rep, r.bad) for r in per_rep if r.bad])
    with_waits: set[tuple[str, str, int]] = {(r.run_id, r.perm_id, r.rep) for r in per_rep if r.waits}
    metrics = metrics.where(~F.col("_bad"))
    tables["sample_metrics"] = metrics.drop("_bad")
    return metrics, with_waits


def _diagnose(spark, disc: discovery.Discovery, perms: list[dict], perms_df, tables: dict[str, Any]):
    """What limits throughput (harness.analysis.diagnosis), from the summaries the reader
    accepted: the limit columns joined to the permutations (rows and table), the diagnosis and
    limit_moves tables; returns the diagnoses, both tables' rows and the permutations table."""
    from harness.analysis import comparisons as C

    diags = diagnosis_view.diagnose_files((r.summary for r in disc.reps), {r.run_id: r.capabilities for r in disc.runs})
    limits = {(r["run_id"], r["perm_id"]): r for r in diagnosis_view.limit_columns(diags)}
    for p in perms:
        p.update(limits.get((p["run_id"], p["perm_id"]), {}))
    perms_df = perms_df.join(spark.createDataFrame(C.as_tuples(list(limits.values()), diagnosis_view.LIMIT_SCHEMA),
                                                   diagnosis_view.LIMIT_SCHEMA), ["run_id", "perm_id"], "left")
    diag_rows, moves = diagnosis_view.rows(diags), diagnosis_view.limit_moves(diags)
    tables["diagnosis"] = spark.createDataFrame(C.as_tuples(diag_rows, diagnosis_view.DIAGNOSIS_SCHEMA),
                                                diagnosis_view.DIAGNOSIS_SCHEMA)
    tables["limit_moves"] = spark.createDataFrame(C.as_tuples(moves, diagnosis_view.MOVES_SCHEMA),
                                                  diagnosis_view.MOVES_SCHEMA)
    return diags, diag_rows, moves, perms_df


def _timeseries(spark, disc: discovery.Discovery, perms: list[dict[str, Any]], tables: dict[str, Any]):
    """The time series of the highest-load permutation of each dialog strategy (per run): the
    chosen repetitions and their queue depths over time (``tables["queue_timeseries"]``)."""
    from harness.analysis import transforms as T

    chosen = choose_timeseries(perms, disc)
    series: list[dict[str, Any]] = []
    if chosen:
        want = {(c["run_id"], c["perm_id"], c["rep"]) for c in chosen}
        sub = [r for r in disc.reps if (r.run_id, r.perm_id, r.rep) in want]
        ts_samples = discovery.read_samples(spark, disc, sub)
        if ts_samples is not None:
            ts_df = T.queue_timeseries(ts_samples).localCheckpoint()
            series = _sorted(_rows(ts_df), "queue_timeseries")
            tables["queue_timeseries"] = ts_df
    return chosen, series


def judge_runs(disc: discovery.Discovery, perms: list[dict[str, Any]], rep_rows: list[dict[str, Any]],
               threshold_pct: float | None, index: Path):
    """Every comparison of the runs judged under its run's rule (harness.verdicts) on the
    repetitions' values (``rep_rows``, the repetitions table: numbers, statuses, metrics): the
    rules by run, the dialog_gains, crossover and technique_gains rows, and the key answer."""
    from harness.analysis import comparisons as C

    rules = {r.run_id: Rule.of_run((r.meta.get("matrix") or {}).get("run"), threshold_pct) for r in disc.runs}
    judged = judge_all(with_repetitions(perms, rep_rows), rules, Rule().with_threshold(threshold_pct))
    gains = _sorted(C.dialog_gains(judged), "dialog_gains")
    cross = _sorted(C.crossover(gains), "crossover")
    answer = key_answer(judged, [r.run_id for r in disc.runs], {r.run_id: r.meta.get("auto") for r in disc.runs},
                        report=str(index))
    return rules, gains, cross, techniques.technique_gains(judged), answer


def _sorted(rows: list[dict[str, Any]], table: str) -> list[dict[str, Any]]:
    from harness.analysis.transforms import SORT_KEYS

    keys = [k for k in SORT_KEYS.get(table, ()) if rows and k in rows[0]]
    return sorted(rows, key=lambda r: tuple((r[k] is None, r[k] if r[k] is not None else 0) for k in keys))


#: Plots drawn by the helper process (about half the drawing time); the rest in this process.
HELPER_PLOTS = ("wait_profile", "latency", "queue_depth")


def _plot_call(name: str, args: tuple) -> list[plots.Plot]:
    """Run one plotting function by name (what the helper process executes)."""
    from harness.analysis import plots as P
    from harness.analysis import plots_compare as PC

    return (getattr(P, name, None) or getattr(PC, name))(*args)


def _warm_helper() -> bool:
    import harness.analysis.plots  # noqa: F401  (matplotlib's import, done while the JVM starts)

    return True


def start_plot_helper():
    """A one-process pool (spawned, so it inherits no JVM, thread or lock) that imports
    matplotlib right away and later draws :data:`HELPER_PLOTS` while this process draws the
    others. None when disabled (SSBENCH_PLOT_HELPER=0) or it cannot start."""

    if not environment.flag("SSBENCH_PLOT_HELPER"):
        return None
    try:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
        pool.submit(_warm_helper)
        return pool
    except Exception:
        return None


def draw_plots(disc: discovery.Discovery, perms, gains, cross, waits, series, chosen, plot_dir: Path,
               rules: dict[str, Rule] | None = None, helper=None, tech=()):
    """Every plot of every run, grouped by section. Returns (plots, target text per run,
    server label per (run, server)). ``helper``: a process pool from :func:`start_plot_helper`
    (its plots are drawn here instead when it fails)."""
    targets: dict[str, str] = {}
    server_labels: dict[tuple[str, str], str] = {}
    by_run = lambda rows, run_id: [r for r in rows if r["run_id"] == run_id]  # noqa: E731
    jobs: list[tuple[str, tuple]] = []
    skipped: list[plots.Plot] = []
    for run in disc.runs:
        prow = by_run(perms, run.run_id)
        ctx = run_context(run, prow)
        targets[run.run_id] = ctx.target
        for s in {p["server"] for p in prow}:
            server_labels[(run.run_id, s)] = ctx.server_label(s)
        if not prow:
            skipped.append(plots.Plot("Throughput vs client threads (paper Figures 2-4)", "All plots",
                                      run_id=run.run_id, note="skipped: no usable repetition in this run"))
            continue
        g, c = by_run(gains, run.run_id), by_run(cross, run.run_id)
        threshold_pct = (rules or {}).get(run.run_id, Rule()).threshold_pct
        perm_ids = {p["perm_id"] for p in prow}
        jobs += [
            ("throughput", (prow, ctx, plot_dir)),
            ("strategy_gain", (prow, g, c, ctx, plot_dir, "trick150", threshold_pct,
                               "One dialog per thread vs the 150 trick (paper Figure 5)")),
            ("strategy_gain", (prow, g, c, ctx, plot_dir, "shared", threshold_pct,
                               "One dialog per thread vs one shared dialog")),
            ("wait_profile", (prow, [w for w in waits if w["run_id"] == run.run_id and w["perm_id"] in perm_ids],
                              ctx, plot_dir)),
            ("queue_depth", (by_run(series, run.run_id), by_run(chosen, run.run_id), ctx, plot_dir)),
            ("send_vs_receive", (prow, ctx, plot_dir)),
            ("latency", (prow, ctx, plot_dir)),
        ]
        if any(p.get("rate") for p in prow):     # a rate axis: open-loop figures
            jobs.append(("open_loop", (run.path, ctx, plot_dir)))
        if ((run.meta.get("matrix") or {}).get("run") or {}).get("backlog_messages"):
            jobs.append(("backlog_drain", (run.path, ctx, plot_dir)))
        if any(t["run_id"] == run.run_id for t in tech):
            jobs.append(("technique_gains", (by_run(list(tech), run.run_id), ctx, plot_dir, threshold_pct)))
    if len(disc.runs) > 1 and perms:
        contexts = [run_context(run, by_run(perms, run.run_id)) for run in disc.runs]
        jobs.insert(0, ("runs_comparison", (perms, contexts, plot_dir)))
    futures = {}
    if helper is not None:
        for i, (name, args) in enumerate(jobs):
            if name in HELPER_PLOTS:
                try:
                    futures[i] = helper.submit(_plot_call, name, args)
                except Exception:  # a broken pool: draw here
                    break
    results: dict[int, list[plots.Plot]] = {}
    for i, (name, args) in enumerate(jobs):
        if i not in futures:
            results[i] = _plot_call(name, args)
    for i, fut in futures.items():
        try:
            results[i] = fut.result()
        except Exception:
            results[i] = _plot_call(*jobs[i])
    sections: dict[str, list[plots.Plot]] = {}
    for p in skipped + [p for i in sorted(results) for p in results[i]]:
        sections.setdefault(p.section, []).append(p)
    return [p for group in sections.values() for p in group], targets, server_labels


def run_context(run: discovery.RunInfo, perms: list[dict[str, Any]]) -> plots.RunContext:
    """Title context of a run: the target's label and capabilities from run.json, else from the
    summaries (their label, and the capabilities of their kind's target)."""
    kind, label = run.target_kind, run.target_label
    if (not kind or not label) and perms:
        kind = kind or next((p["target_kind"] for p in perms if p.get("target_kind")), None)
        label = label or next((p["target_label"] for p in perms if p.get("target_label")), None)
    profiles: dict[str, str] = {}
    for p in perms:
        if p.get("target_profile"):
            profiles.setdefault(p["server"], p["target_profile"])
    mx = run.meta.get("matrix") if isinstance(run.meta.get("matrix"), dict) else {}
    for s, prof in (mx.get("embedded_profiles") or {}).items():
        profiles.setdefault(s, prof)
    synthetic = is_synthetic(run, perms)
    caps = run.capabilities or target_capabilities({"kind": kind})
    return plots.RunContext(run_id=run.run_id, synthetic=synthetic,
                            target=plots.target_text(label, emulation=caps.get("emulation"),
                                                     synthetic=synthetic, kind=kind),
                            profile_aliases=bool(caps.get("profile_aliases")), server_profiles=profiles)


def is_synthetic(run: discovery.RunInfo, perms: list[dict[str, Any]]) -> bool:
    """run.json says ``"synthetic": true``, or the summaries' target label starts with SYNTHETIC
    (a synthetic run without its run.json)."""
    return run.synthetic or any(plots.is_synthetic_label(p.get("target_label")) for p in perms
                                if p["run_id"] == run.run_id)


def choose_timeseries(perms: list[dict[str, Any]], disc: discovery.Discovery, per_run: int = 4) -> list[dict[str, Any]]:
    """The permutations whose queue depths are plotted over time: per run and dialog strategy,
    the one with the most total threads (then the highest median send rate), at its first
    repetition that has a samples file."""
    with_samples: dict[tuple[str, str], int] = {}
    for r in sorted(disc.reps, key=lambda r: r.rep):
        if r.samples is not None:
            with_samples.setdefault((r.run_id, r.perm_id), r.rep)
    out = []
    for run in disc.runs:
        best: dict[str, dict[str, Any]] = {}
        for p in perms:
            if p["run_id"] != run.run_id or (run.run_id, p["perm_id"]) not in with_samples:
                continue
            key = (p["total_threads"] or 0, p["send_rate_median"] or 0.0)
            cur = best.get(p["dialogs"])
            if cur is None or key > (cur["total_threads"] or 0, cur["send_rate_median"] or 0.0):
                best[p["dialogs"]] = p
        for s in sorted(best)[:per_run]:
            p = best[s]
            out.append({"run_id": run.run_id, "perm_id": p["perm_id"], "dialogs": s,
                        "rep": with_samples[(run.run_id, p["perm_id"])]})
    return out


def write_tables(tdir: Path, tables: dict[str, Any], csv_rows: dict[str, list[dict[str, Any]]],
                 parquet_only: set[str], say: Callable[[str], None] | None = None) -> dict[str, list[str]]:
    """Parquet (a Spark directory) and CSV (one file) of each table; CSV from already collected
    rows when given, else written by Spark and moved to a single file. Returns the relative
    paths written per table."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, MapType, StructType

    from harness.analysis.transforms import SORT_KEYS

    started = time.monotonic()
    tdir.mkdir(parents=True, exist_ok=True)
    written: dict[str, list[str]] = {}
    for name, df in tables.items():
        files = []
        keys = [k for k in SORT_KEYS.get(name, ()) if k in df.columns]
        df = df.coalesce(1).sortWithinPartitions(*keys) if keys else df.coalesce(1)
        df.write.mode("overwrite").parquet(str(tdir / f"{name}.parquet"))
        files.append(f"tables/{name}.parquet")
        if name not in parquet_only:
            if name in csv_rows:
                _csv_from_rows(tdir / f"{name}.csv", df.columns, csv_rows[name])
            else:
                flat = df.select(*[F.to_json(F.col(f.name)).alias(f.name)
                                   if isinstance(f.dataType, (ArrayType, MapType, StructType)) else F.col(f.name)
                                   for f in df.schema.fields])
                tmp = tdir / f".{name}.csv.tmp"
                flat.write.mode("overwrite").option("header", True).csv(str(tmp))
                part = next(tmp.glob("part-*.csv"), None)
                if part is None:  # an empty frame: Spark may write no part file
                    _csv_from_rows(tdir / f"{name}.csv", df.columns, [])
                else:
                    part.replace(tdir / f"{name}.csv")
                shutil.rmtree(tmp, ignore_errors=True)
            files.append(f"tables/{name}.csv")
        written[name] = files
        if say:
            say(f"  table {name} written ({time.monotonic() - started:.1f} s into writing)")
    return written


def _csv_from_rows(path: Path, columns: list[str], rows: list[dict[str, Any]]) -> None:
    buf = io.StringIO(newline="")
    w = csv.writer(buf)
    w.writerow(columns)
    for r in rows:
        w.writerow([_csv_value(r.get(c)) for c in columns])
    write_atomic(path, buf.getvalue())


def _csv_value(v: Any) -> Any:
    """CSV cells as Spark writes them: empty for null, true/false, JSON for nested values."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, dict)):
        return json.dumps(v)
    return v


def write_issues(tdir: Path, disc: discovery.Discovery) -> str:
    _csv_from_rows(tdir / "issues.csv", ["path", "problem"],
                   [{"path": i.path, "problem": i.problem} for i in disc.issues])
    return "tables/issues.csv"


# --------------------------------------------------------------------------- spark-submit entry

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="job.py", description="ssbench analysis job (spark-submit entry point)")
    ap.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    ap.add_argument("--out", help="report directory (default RUN_DIR/report)")
    ap.add_argument("--master", help="Spark master (default: spark-submit's, else local[*])")
    ap.add_argument("--threshold", type=float, default=None,
                    help="a gain (%%) counts only when its whole interval is above this, a loss when wholly "
                         "below minus this, no difference within +-this (default: each run's run.threshold_pct, "
                         "else 5)")
    args = ap.parse_args(argv)
    try:
        path = analyze(args.run_dirs, out=args.out, master=args.master, threshold_pct=args.threshold,
                       log=lambda m: print(f"ssbench analyze: {m}", file=sys.stderr))
    except UserError as e:
        print(f"ssbench: error: {e}", file=sys.stderr)
        return e.exit_code
    for issue in load_issues_from(path):
        print(f"ssbench analyze: warning: {issue}", file=sys.stderr)
    print(path)
    return 0


def load_issues_from(index: Path) -> list[str]:
    """The issues recorded next to a report (tables/issues.csv), as 'path: problem' lines."""
    f = index.parent / "tables" / "issues.csv"
    if not f.exists():
        return []
    with f.open(newline="", encoding="utf-8") as fh:
        return [f"{r['path']}: {r['problem']}" for r in csv.DictReader(fh)]


if __name__ == "__main__":
    sys.exit(main())
