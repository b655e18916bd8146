"""The analysis job: run directories in, a report directory out (``spark-submit`` runs it too).

:func:`analyze` writes tables, plots, ``index.html`` and ``answer.json`` under
``RUN_DIR/report/``. Each summary is read once into its flat row and each samples file once by
Spark into per-repetition aggregates; everything after is plain Python over small rows.
"""

from __future__ import annotations

import argparse
import csv
import datetime as _dt
import os
import shutil
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

if __package__ in (None, ""):  # spark-submit harness/analysis/job.py: make `harness` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from harness.analysis import diagnosis, diagnosis_view, discovery, plots, report, scaling  # noqa: E402
from harness.analysis import comparisons as C, tables as T  # noqa: E402
from harness.analysis.writer import write_arrow, write_table  # noqa: E402
from harness.errors import DiskFull, UserError, full_disk  # noqa: E402
from harness.results import fields, write_atomic, write_json  # noqa: E402
from harness.results.model import target_capabilities  # noqa: E402
from harness import environment  # noqa: E402
from harness.verdicts import Answer, Rule, judge_all, key_answer  # noqa: E402

MARKER = ".ssbench-report"


def default_out(run_dirs: list[str | Path]) -> Path:
    first = Path(run_dirs[0]).expanduser().resolve()
    if len(run_dirs) == 1:
        return first / "report"
    return first.parent / f"report-{_dt.datetime.now(_dt.timezone.utc).strftime('%Y%m%d-%H%M%S')}"


def prepare_out(out: Path) -> tuple[Path, Path]:
    """Check the report location ``out`` (new, or a previous report: replaced whole when the new
    one is complete; a non-empty directory that is not an ssbench report is refused) and make
    the temporary directory beside it the report is built in: (``out`` resolved, staging)."""
    out = out.expanduser().resolve()
    if out.exists():
        if not out.is_dir():
            raise UserError("the report location exists and is not a directory", file=str(out))
        ours = (out / MARKER).exists()
        if not ours and any((out / d).exists() for d in ("plots", "tables", "index.html")):
            raise UserError("not an ssbench report directory (no .ssbench-report marker) but it has "
                            "plots/, tables/ or index.html: choose another --out", file=str(out))
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        write_atomic(staging / MARKER, "written by ssbench analyze; replaced whole on each run\n")
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out, staging


def put_in_place(staging: Path, out: Path) -> None:
    """Rename the complete report ``staging`` to ``out``. A previous report there is replaced
    (what it holds that the new one does not, someone's own files, is carried over)."""
    if not out.exists():
        os.rename(staging, out)
        return
    for entry in out.iterdir():
        if not (staging / entry.name).exists() and entry.name not in ("plots", "tables"):
            os.rename(entry, staging / entry.name)
    old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
    os.rename(out, old / out.name)
    os.rename(staging, out)
    shutil.rmtree(old, ignore_errors=True)


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


def analyze_result(run_dirs: list[str | Path], out: str | Path | None = None, master: str | None = None, *,
                   spark=None, threshold_pct: float | None = None, top_waits: int = 5,
                   log: Callable[[str], None] | None = None, remote: str | None = None) -> AnalysisResult:
    """Analyze ``run_dirs`` into a report directory; its ``index`` is the report's index.html.

    ``spark``: an existing SparkSession to use (kept running); otherwise one is started on
    ``master`` (default local[*]), or on the Spark Connect server ``remote`` (sc://host:port),
    and stopped at the end. ``threshold_pct``: a comparison's verdict is ``gain`` only when its
    whole interval is above it, ``loss`` only when wholly below its negative, ``no difference``
    within +-it (docs/statistics.md); None: each run's own ``run.threshold_pct`` (5 when it has
    none). ``log``: progress messages (default: none).
    """
    if isinstance(run_dirs, (str, Path)):
        run_dirs = [run_dirs]
    if not run_dirs:
        raise UserError("no run directory given")
    say = log or (lambda _msg: None)
    t0 = time.monotonic()
    disc = discovery.discover(run_dirs)
    out_dir = Path(out) if out else default_out(run_dirs)
    staging = None
    try:
        out_dir, staging = prepare_out(out_dir)
        result = _analyze(disc, staging, out_dir, master, spark, threshold_pct, top_waits, say, t0, remote)
        put_in_place(staging, out_dir)
    except BaseException as e:
        if staging is not None:    # nothing half-written: the previous report, if any, stays
            shutil.rmtree(staging, ignore_errors=True)
        if isinstance(e, Exception) and full_disk(e):
            raise DiskFull("no space left on the device of the report directory: nothing written (a previous "
                           "report there is kept); free some space and analyze again", file=str(out_dir)) from None
        raise
    result.index = out_dir / result.index.name
    return result


def _analyze(disc: discovery.Discovery, staging: Path, out_dir: Path, master, spark, threshold_pct, top_waits: int,
             say: Callable[[str], None], t0: float, remote: str | None) -> AnalysisResult:
    """The analysis proper, its report written in ``staging`` (to become ``out_dir``)."""
    # (the issues are counted at the end: reading the summaries and samples finds more)
    say(f"found {len(disc.reps)} repetitions in {len(disc.runs)} run(s)")
    # the summaries are read (Python) while the JVM starts, once one has read: runs with no
    # readable summary fail at once, with no JVM started
    readable = threading.Event()
    reading = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ssbench-summaries")
    reps = reading.submit(discovery.read_summaries, disc, readable)
    reps.add_done_callback(lambda _f: readable.set())
    reading.shutdown(wait=False)
    readable.wait()
    if reps.done() and reps.exception() is not None:
        raise reps.exception()
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
        return _run(spark, disc, reps.result(), staging, threshold_pct, top_waits, say, t0, helper, out_dir)
    finally:
        if helper is not None:
            helper.shutdown(wait=True, cancel_futures=True)
        if own and spark is not None:
            from harness.analysis.spark import stop_session

            stop_session(spark)     # and the JVM gone, its archive written, before the command returns


def _run(spark, disc: discovery.Discovery, reps: list[dict[str, Any]], out_dir: Path, threshold_pct: float | None,
         n_top: int, say: Callable[[str], None], t0: float, helper=None, final: Path | None = None) -> AnalysisResult:
    """Summaries read once (Python, the results model), samples reduced once (Spark), the small
    tables judged and written here (``out_dir``; ``final``: where it will be, for the answer's
    link): one way through."""
    tdir = out_dir / "tables"
    tdir.mkdir(parents=True, exist_ok=True)
    reps = T.sort_rows(reps, "repetitions")
    written = {"sample_metrics": []}
    metrics = _reduce_samples(spark, disc, tdir, written)
    say(f"samples reduced after {time.monotonic() - t0:.1f} s")
    profile = T.sort_rows(T.wait_profile(T.rep_wait_rates(reps, metrics)), "wait_profile")
    perms = T.sort_rows(T.permutations_table(reps, metrics, profile), "permutations")
    synthetic_runs = {r.run_id for r in disc.runs if is_synthetic(r, perms)}
    C.rate_intervals(perms, synthetic_runs)
    diags, diag_rows, moves = _diagnose(disc, perms, reps)
    rules, gains, cross, tech, answer = judge_runs(disc, perms, threshold_pct, (final or out_dir) / "index.html")
    sweeps, scaling_rows = scaling.attach(perms, answer)     # and the answer's scalability sections
    say(f"aggregated {len(perms)} permutations after {time.monotonic() - t0:.1f} s")
    chosen, series = _timeseries(spark, disc, perms)
    rows = {"permutations": perms, "repetitions": reps, "dialog_gains": gains, "crossover": cross,
            "technique_gains": tech, "wait_profile": profile,
            "top_waits": [w for w in profile if w["rank"] <= n_top], "queue_timeseries": series,
            "diagnosis": diag_rows, "limit_moves": moves, **scaling_rows}
    for name, table_rows in rows.items():
        cols = list(fields.columns()) if name == "repetitions" else None
        written[name] = write_table(tdir, name, table_rows, cols)
    written["issues"] = write_table(tdir, "issues", [{"path": i.path, "problem": i.problem} for i in disc.issues],
                                    ["path", "problem"])
    say(f"tables written after {time.monotonic() - t0:.1f} s")
    all_plots, targets, server_labels = draw_plots(disc, perms, gains, cross, profile, series, chosen,
                                                   out_dir / "plots", rules, helper, tech, reps, sweeps)
    say(f"{sum(1 for p in all_plots if not p.skipped)} plots after {time.monotonic() - t0:.1f} s")
    key_rows = report.key_rows(perms, cross, server_labels)
    diag_html = diagnosis_view.report_section(diags, synthetic_runs)
    answer.diagnosis = diag_rows
    write_json(out_dir / "answer.json", answer.to_json())
    path = report.write_index(out_dir, disc, targets, perms, key_rows, all_plots, answer, written,
                              time.monotonic() - t0, gains=gains, synthetic_runs=synthetic_runs, techniques=tech,
                              diagnosis_html=diag_html, disturbed=[r for r in reps if r.get("disturbed")])
    say(f"report written after {time.monotonic() - t0:.1f} s")
    notes = report.about_targets(disc, targets, synthetic_runs) + report.verdict_words(gains)
    return AnalysisResult(index=path, permutations=perms, gains=gains, crossover=cross, key_rows=key_rows,
                          plots=all_plots, issues=list(disc.issues), seconds=time.monotonic() - t0,
                          notes_html=notes, techniques=tech, answer=answer, diagnosis=diag_rows,
                          diagnosis_html=diag_html)


def _reduce_samples(spark, disc: discovery.Discovery, tdir: Path, written: dict[str, list[str]]):
    """Every repetition's samples reduced on Spark, in one job, to measured-window statistics
    per series (written as ``tables/sample_metrics.parquet``), which come back here once as
    rows (the tables' waits and extras are computed from them); damaged lines are reported as
    issues."""
    import pyarrow.compute as pc

    from harness.analysis import transforms as S

    samples = discovery.read_samples(spark, disc)
    if samples is None:
        return []
    # one collect: its good rows are tables/sample_metrics, its bad ones counted here (a Spark
    # job less than counting them on Spark)
    table = _arrow(S.measured_metrics(samples))
    if "_bad" in table.column_names:        # (none without rows, before Spark 4)
        bad = (table.filter(table["_bad"]).group_by(["run_id", "perm_id", "rep"]).aggregate([("n", "sum")])
               .to_pylist())
        discovery.report_sample_issues(disc, [(r["run_id"], r["perm_id"], r["rep"], r["n_sum"]) for r in bad])
        table = table.filter(pc.invert(table["_bad"])).drop_columns(["_bad"])
    written["sample_metrics"] = write_arrow(tdir, "sample_metrics", table)
    return table.to_pylist()


def _dicts(df) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in df.collect()]


def _arrow(df):
    """A Spark frame as an Arrow table (Spark 4's toArrow; rows, through Python, before it)."""
    import pyarrow as pa

    return df.toArrow() if hasattr(df, "toArrow") else pa.Table.from_pylist(_dicts(df))


def _diagnose(disc: discovery.Discovery, perms: list[dict], reps: list[dict]):
    """What limits throughput (harness.analysis.diagnosis) from the repetitions' rows: the limit
    columns added to the permutation rows; the diagnoses, and the diagnosis and limit_moves rows."""
    diags = diagnosis.diagnose(reps, {r.run_id: r.capabilities for r in disc.runs})
    limits = {(r["run_id"], r["perm_id"]): r for r in diagnosis_view.limit_columns(diags)}
    for p in perms:
        p.update(limits.get((p["run_id"], p["perm_id"]), {}))
    return diags, diagnosis_view.rows(diags), diagnosis_view.limit_moves(diags)


def _timeseries(spark, disc: discovery.Discovery, perms: list[dict[str, Any]]):
    """The time series of the highest-load permutation of each dialog strategy (per run): the
    chosen repetitions and their queue depths over time."""
    from harness.analysis import transforms as S

    chosen = choose_timeseries(perms, disc)
    series: list[dict[str, Any]] = []
    if chosen:
        want = {(c["run_id"], c["perm_id"], c["rep"]) for c in chosen}
        sub = [r for r in disc.reps if (r.run_id, r.perm_id, r.rep) in want]
        ts_samples = discovery.read_samples(spark, disc, sub)
        if ts_samples is not None:
            series = T.sort_rows(_dicts(S.queue_timeseries(ts_samples)), "queue_timeseries")
    return chosen, series


def judge_runs(disc: discovery.Discovery, perms: list[dict[str, Any]], threshold_pct: float | None, index: Path):
    """Every comparison of the runs judged under its run's rule (harness.verdicts) on the
    repetitions' values the permutation rows carry: the rules by run, the dialog_gains,
    crossover and technique_gains rows, and the key answer."""
    rules = {r.run_id: Rule.of_run((r.meta.get("matrix") or {}).get("run"), threshold_pct) for r in disc.runs}
    judged = judge_all(perms, rules, Rule().with_threshold(threshold_pct))
    gains = T.sort_rows(C.dialog_gains(judged), "dialog_gains")
    cross = T.sort_rows(C.crossover(gains), "crossover")
    answer = key_answer(judged, [r.run_id for r in disc.runs], {r.run_id: r.meta.get("auto") for r in disc.runs},
                        report=str(index))
    return rules, gains, cross, C.technique_gains(judged), answer


#: Plots drawn by the helper process (about half the drawing time); the rest in this process.
HELPER_PLOTS = ("wait_profile", "latency", "queue_depth")


def _plot_call(name: str, args: tuple) -> list[plots.Plot]:
    """Run one plotting function by name (what the helper process executes)."""
    from harness.analysis import plots_compare as PC
    from harness.analysis import plots_scaling as PS

    return (getattr(plots, name, None) or getattr(PC, name, None) or getattr(PS, name))(*args)


def _warm_helper() -> bool:
    import harness.analysis.plots  # noqa: F401  (matplotlib's import, done while the JVM starts)

    return True


def idle_cpu() -> bool:
    """Whether the last minute's load average leaves more than one of this process's CPUs idle
    (one for this process, one for a helper)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:                  # not Linux
        cpus = os.cpu_count() or 1
    try:
        return os.getloadavg()[0] < cpus - 1
    except OSError:
        return cpus > 1


def start_plot_helper():
    """A one-process pool (spawned, so it inherits no JVM, thread or lock) that imports
    matplotlib right away and later draws :data:`HELPER_PLOTS` while this process draws the
    others. None when disabled (SSBENCH_PLOT_HELPER=0), when no CPU is idle (:func:`idle_cpu`:
    the helper's start, about 1.4 CPU-s, then only takes CPU from the JVM and the other
    processes) or it cannot start."""

    if not environment.flag("SSBENCH_PLOT_HELPER") or not idle_cpu():
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
               rules: dict[str, Rule] | None = None, helper=None, tech=(), reps=(), sweeps=()):
    """Every plot of every run, grouped by section. Returns (plots, target text per run,
    server label per (run, server)). ``helper``: a process pool from :func:`start_plot_helper`
    (its plots are drawn here instead when it fails); ``sweeps``: the scalability model's."""
    targets: dict[str, str] = {}
    server_labels: dict[tuple[str, str], str] = {}
    by_run = lambda rows, run_id: [r for r in rows if r["run_id"] == run_id]  # noqa: E731
    jobs: list[tuple[str, tuple]] = []
    skipped: list[plots.Plot] = []
    contexts = [run_context(run, by_run(perms, run.run_id)) for run in disc.runs]
    for run, ctx in zip(disc.runs, contexts):
        prow = by_run(perms, run.run_id)
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
            ("scaling_fits", (list(sweeps), ctx, plot_dir)),
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
            jobs.append(("open_loop", (by_run(reps, run.run_id), run.path, ctx, plot_dir)))
        if ((run.meta.get("matrix") or {}).get("run") or {}).get("backlog_messages"):
            jobs.append(("backlog_drain", (by_run(reps, run.run_id), ctx, plot_dir)))
        if any(t["run_id"] == run.run_id for t in tech):
            jobs.append(("technique_gains", (by_run(list(tech), run.run_id), ctx, plot_dir, threshold_pct)))
    if len(disc.runs) > 1 and perms:
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
    sections = T.group_by(skipped + [p for i in sorted(results) for p in results[i]], key=lambda p: p.section)
    return [p for group in sections.values() for p in group], targets, server_labels


def run_context(run: discovery.FoundRun, perms: list[dict[str, Any]]) -> plots.RunContext:
    """Title context of a run: the target's label and capabilities from run.json, else from the
    summaries (their label, and the capabilities of their kind's target)."""
    kind, label = run.target.get("kind"), run.target.get("label")
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


def is_synthetic(run: discovery.FoundRun, perms: list[dict[str, Any]]) -> bool:
    """run.json says ``"synthetic": true``, or the summaries' target label starts with SYNTHETIC
    (a synthetic run without its run.json)."""
    return run.synthetic or any(plots.SYNTHETIC_RE.match(p.get("target_label") or "") for p in perms
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
        path = analyze_result(args.run_dirs, out=args.out, master=args.master, threshold_pct=args.threshold,
                              log=lambda m: print(f"ssbench analyze: {m}", file=sys.stderr)).index
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
