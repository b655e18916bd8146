"""Find and read run directories (layout: ``docs/results.md``).

:func:`discover` lists the runs, permutations and complete repetitions through
:class:`harness.results.RunReader` (the one reader of run directories: ``rep-NN/`` with a
``summary.json``; ``.rep-NN.partial/`` directories are in progress and never listed) and reads
each run.json as a :class:`harness.results.RunRecord`. Problems are collected as :class:`Issue`
(the file's path and what is wrong) instead of stopping the analysis.

:func:`read_summaries` and :func:`read_samples` read all repetitions' files with Spark, with the
explicit schemas of :mod:`.schemas`. A corrupt summary (or a summary that does not fit the
schema, or of another major schema version) is dropped and reported by name; corrupt lines of a
samples file are skipped, counted and reported by file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..results import DISTURBED_STATUSES, SUMMARY_SCHEMA, TAIL_RE, RunReader, RunRecord, read_json
from ..results.model import target_capabilities


@dataclass(frozen=True)
class Issue:
    path: str
    problem: str

    def __str__(self) -> str:
        return f"{self.path}: {self.problem}"


@dataclass
class RunInfo:
    run_id: str                  # the directory's name (docs/results.md: run-id = directory name)
    path: Path
    meta: dict[str, Any]         # run.json, {} when missing or corrupt
    target_kind: str | None = None
    target_label: str | None = None

    @property
    def status(self) -> str | None:
        return self.meta.get("status")

    @property
    def target(self) -> dict[str, Any]:
        t = self.meta.get("target")
        return t if isinstance(t, dict) else {}

    @property
    def capabilities(self) -> dict[str, Any]:
        """What the run's target declared (run.json ``target.capabilities``,
        :func:`harness.results.model.target_capabilities`); from the summaries' kind when the run
        has no run.json."""
        return target_capabilities(self.target or {"kind": self.target_kind})

    @property
    def synthetic(self) -> bool:
        """A run written by tests/support/synth.py (run.json says ``"synthetic": true``)."""
        return bool(self.meta.get("synthetic") or self.target.get("synthetic"))


@dataclass(frozen=True)
class RepFiles:
    run_id: str
    perm_id: str
    rep: int
    dir: Path
    summary: Path
    samples: Path | None         # None when missing
    samples_bytes: int = 0


@dataclass
class Discovery:
    runs: list[RunInfo]
    reps: list[RepFiles]
    issues: list[Issue] = field(default_factory=list)

    @property
    def samples_bytes(self) -> int:
        return sum(r.samples_bytes for r in self.reps)

    def run(self, run_id: str) -> RunInfo:
        return next(r for r in self.runs if r.run_id == run_id)


def is_run_dir(path: Path) -> bool:
    """A run directory: it has a run.json, or at least one repetition directory."""
    reader = RunReader(path)
    return reader.exists() or any(reader.rep_dirs(p) for p in reader.permutation_ids())


def discover(run_dirs: list[str | Path]) -> Discovery:
    """Walk ``run_dirs``. Raises UserError when a directory does not exist, two runs share a
    name, or there is no complete repetition at all; everything else becomes an Issue."""
    runs: list[RunInfo] = []
    reps: list[RepFiles] = []
    issues: list[Issue] = []
    seen: dict[str, Path] = {}
    for raw in run_dirs:
        path = Path(raw).expanduser().resolve()
        if not path.is_dir():
            raise UserError("not a run directory (no such directory)", file=str(raw))
        reader = RunReader(path)
        run_id = reader.run_id
        if run_id in seen:
            raise UserError(f"two runs are named {run_id!r} ({seen[run_id]} and {path}); "
                            "analyze them separately or rename one", file=str(raw))
        seen[run_id] = path
        meta = _read_run_json(reader, issues)
        target = meta.get("target") if isinstance(meta.get("target"), dict) else {}
        info = RunInfo(run_id=run_id, path=path, meta=meta, target_kind=target.get("kind"),
                       target_label=target.get("label"))
        if meta.get("status") not in (None, "complete"):
            issues.append(Issue(str(reader.run_json),
                                f"run status is {meta.get('status')!r}: analyzing the repetitions completed so far"))
        runs.append(info)
        for d in reader.incomplete_rep_dirs():
            issues.append(Issue(str(d / "summary.json"), "missing: repetition skipped"))
        found = 0
        for ref in reader.reps():
            samples: Path | None = ref.samples_path
            size = 0
            if not samples.is_file():
                issues.append(Issue(str(samples), "missing: no time series for this repetition "
                                                  "(waits fall back to the summary's top_waits)"))
                samples = None
            else:
                size = samples.stat().st_size
                if size == 0:
                    issues.append(Issue(str(samples), "empty"))
                    samples = None
            reps.append(RepFiles(run_id=run_id, perm_id=ref.perm_id, rep=ref.rep, dir=ref.dir,
                                 summary=ref.summary_path, samples=samples, samples_bytes=size))
            found += 1
        if not found:
            issues.append(Issue(str(path), "no complete repetition found"))
    if not reps:
        raise UserError("no complete repetition (rep-NN/summary.json) in "
                        + ", ".join(str(r.path) for r in runs))
    return Discovery(runs=runs, reps=reps, issues=issues)


def _read_run_json(reader: RunReader, issues: list[Issue]) -> dict[str, Any]:
    """run.json as a dict (through :class:`RunRecord`, so the schema version is checked; fields
    a newer writer added are kept); {} with an Issue when missing, corrupt or unsupported."""
    path = reader.run_json
    if not path.is_file():
        issues.append(Issue(str(path), "missing: run provenance unknown (target taken from the summaries)"))
        return {}
    try:
        return RunRecord.from_json(read_json(path), file=str(path)).to_json()
    except UserError as e:
        problem = f"{e.field}: {e.detail}" if e.field else e.detail
        issues.append(Issue(str(path), f"{problem}; target taken from the summaries"))
        return {}


# --------------------------------------------------------------------------- Spark readers

def _tail_columns(F, file_col):
    """run_id, perm_id, rep from a file path column (Spark gives URL-encoded URIs)."""
    path = F.url_decode(file_col)
    return (F.regexp_extract(path, TAIL_RE, 1).alias("run_id"),
            F.regexp_extract(path, TAIL_RE, 2).alias("perm_id"),
            F.regexp_extract(path, TAIL_RE, 3).cast("int").alias("rep"),
            path.alias("file"))


def read_summaries(spark, disc: Discovery):
    """One row per repetition with the summary's fields flattened; corrupt or schema-violating
    summaries are added to ``disc.issues`` and their repetitions left out (also from
    ``disc.reps``, so their samples are not read either). Returns a checkpointed DataFrame."""
    from pyspark.sql import functions as F

    from .schemas import CORRUPT, SUMMARY, with_corrupt

    # The files are small and many: Python reads their text (milliseconds), Spark parses it with
    # the explicit schema (from_json, PERMISSIVE, corrupt-record column) -- the same parser and
    # semantics as spark.read.json, without Spark's per-file overhead (~10 ms of CPU each).
    docs = []
    for r in disc.reps:
        try:
            text = r.summary.read_text(encoding="utf-8", errors="replace")
        except OSError as e:
            disc.issues.append(Issue(str(r.summary), f"unreadable ({e.strerror}): repetition skipped"))
            continue
        docs.append((r.run_id, r.perm_id, r.rep, str(r.summary), text))
    src = spark.createDataFrame(docs, "run_id string, perm_id string, rep int, file string, text string")
    raw = src.select("run_id", "perm_id", "rep", "file",
                     F.from_json("text", with_corrupt(SUMMARY),
                                 {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}).alias("s"))
    flat = raw.select("run_id", "perm_id", "rep", "file", *_summary_columns(F, CORRUPT)).localCheckpoint()
    return _without_bad_summaries(F, flat, disc)


def _summary_columns(F, corrupt: str) -> list:
    """The repetitions table's columns, from a parsed summary ``s``."""
    def c(name: str):
        return F.col(f"s.{name}")

    CORRUPT = corrupt
    p, lat_s, lat_e, w, tgt = (c("permutation"), c("send_latency_ms"), c("e2e_latency_ms"), c("window"),
                               c("target"))
    return [
        (c(CORRUPT).isNotNull() | (c("schema").isNull() & c("permutation_id").isNull())).alias("_bad"),
        c("schema").alias("_schema"),
        c("permutation_id").alias("summary_perm_id"),
        p["initiators"].alias("initiators"), p["threads"].alias("threads"),
        F.coalesce(p["total_threads"], p["initiators"] * p["threads"]).alias("total_threads"),
        p["dialogs"].alias("dialogs"), p["dialogs_every_n"].alias("dialogs_every_n"),
        p["dialogs_shared"].alias("dialogs_shared"), p["payload_bytes"].alias("payload_bytes"),
        p["server"].alias("server"), p["index"].alias("perm_index"),
        tgt["kind"].alias("target_kind"), tgt["label"].alias("target_label"),
        tgt["profile"].alias("target_profile"),
        # technique axes (harness.analysis.techniques; null: the axis' default)
        p["messages_per_dialog"].alias("messages_per_dialog"), p["fire_and_forget"].alias("fire_and_forget"),
        *[p["broker"][n].alias(n) for n in ("waitfor_timeout_ms", "high_priority_share", "max_queue_readers",
                                             "receive_top")],
        p["rate"].alias("rate"),
        w["measure_seconds"].alias("measure_seconds"),
        # the window's wall-clock length (harness.results.model.Window.span_seconds): its waits'
        F.when(w["measure_end"] - w["measure_start"] > 0, w["measure_end"] - w["measure_start"])
        .otherwise(w["measure_seconds"]).alias("window_seconds"),
        # an alternated window (run.alternate): its start names the window both sides shared
        F.when(c("alternation").isNotNull(), w["measure_start"]).alias("alt_window"),
        # its waits by strategy: the test's sessions sampled in each member's own slices
        (F.coalesce(F.size(c("alternation")["members"]), F.lit(0)) > 1).alias("alternated"),
        c("session_waits").alias("session_waits"),
        *[c(n).alias(n) for n in ("messages_sent", "messages_received", "messages_lost", "drained",
                                  "send_rate", "receive_rate")],
        lat_s["p50"].alias("send_p50_ms"), lat_s["p95"].alias("send_p95_ms"), lat_s["p99"].alias("send_p99_ms"),
        lat_e["p50"].alias("e2e_p50_ms"), lat_e["p95"].alias("e2e_p95_ms"), lat_e["p99"].alias("e2e_p99_ms"),
        *[c(n).alias(n) for n in ("top_waits", "max_xmitq_depth", "max_queue_depth", "client_cpu_percent",
                                  "client_bound", "server_cpu_percent", "errors", "status",
                                  "users_expected", "users_spawned", "users_active",
                                  "activation_tasks_started_per_s", "dialog_errors_lost",
                                  # a disturbed window's figures (harness.results.disturbance)
                                  "other_cpu_percent", "steal_percent", "cpu_speed", "slow_cpu",
                                  "cpu_probe_ms", "cpu_reference_ms", "cross_cpu_ns", "storage_probe_ms",
                                  "storage_reference_ms", "freeze_seconds", "receive_stall_seconds",
                                  "receive_send_ratio", "queue_growth")],
        # what the technique comparisons judge and whether their mechanism engaged
        # (harness.analysis.techniques)
        *[c(n).alias(n) for n in ("activation_tasks_started_in_window", "activation_tasks_ended_in_window",
                                  "activation_tasks_max_running", "dialogs_ended_in_window")],
        c("send_latency_high_ms")["count"].alias("high_priority_sends"),
        c("e2e_latency_high_ms")["p99"].alias("e2e_high_p99_ms"),
        c("e2e_latency_normal_ms")["p99"].alias("e2e_normal_p99_ms"),
        # harness.results.counts_in_verdicts, as a column: a disturbed repetition counts in no verdict
        F.coalesce(c("status").isin(list(DISTURBED_STATUSES)), F.lit(False)).alias("disturbed"),
    ]


def _without_bad_summaries(F, flat, disc: Discovery):
    """``flat`` without the repetitions whose summary is damaged, of another schema version or
    missing a required field; each one an issue (and out of ``disc.reps``)."""
    required = ["initiators", "threads", "dialogs", "payload_bytes", "server", "send_rate", "receive_rate"]
    family, _, major = SUMMARY_SCHEMA.partition("/")
    version_ok = F.col("_schema").isNull() | F.col("_schema").rlike(
        "^" + family.replace(".", "[.]") + "/" + major + "([.].*)?$")
    missing_any = ~version_ok
    for c in required:
        missing_any = missing_any | F.col(c).isNull()
    checks = (flat.where(F.col("_bad") | missing_any)
              .select("file", "run_id", "perm_id", "rep", "_bad", "_schema", version_ok.alias("_version_ok"),
                      *[F.col(c).isNull().alias(c) for c in required])
              .collect())
    bad_files = set()
    for row in checks:
        bad_files.add(row["file"])
        skipped = (row["run_id"], row["perm_id"], row["rep"])
        disc.reps = [r for r in disc.reps if (r.run_id, r.perm_id, r.rep) != skipped]
        if row["_bad"]:
            disc.issues.append(Issue(row["file"], "damaged (not JSON, or does not fit the "
                                                  f"{SUMMARY_SCHEMA} schema): repetition skipped"))
        elif not row["_version_ok"]:
            disc.issues.append(Issue(row["file"], f"unsupported schema version {row['_schema']!r} (this ssbench "
                                                  f"reads {SUMMARY_SCHEMA}): repetition skipped"))
        else:
            missing = [c for c in required if row[c]]
            disc.issues.append(Issue(row["file"], f"missing field(s) {', '.join(missing)}: "
                                                  "repetition skipped"))
    drop = ("_bad", "_schema", "file")
    good = flat.where(~(F.col("_bad") | missing_any)).drop(*drop) if bad_files else flat.drop(*drop)
    return good


def read_samples(spark, disc: Discovery, reps: list[RepFiles] | None = None):
    """The raw samples of ``reps`` (default: all with a samples file) as one DataFrame:
    file (Spark's URI of the samples file), ts, elapsed_s, phase, family, metric, key, value,
    _bad (a corrupt or incomplete line). Returns None when there is no samples file.

    The file is kept as Spark gives it: parsing it into run_id, perm_id, rep on every row costs
    far more than the JSON parsing; :func:`with_rep_keys` does it after aggregation."""
    from pyspark.sql import functions as F

    from .schemas import CORRUPT, SAMPLES, with_corrupt

    reps = [r for r in (disc.reps if reps is None else reps) if r.samples is not None]
    if not reps:
        return None
    raw = (spark.read.schema(with_corrupt(SAMPLES)).option("mode", "PERMISSIVE")
           .option("columnNameOfCorruptRecord", CORRUPT).json([str(r.samples) for r in reps]))
    # every field is referenced so that a line with any malformed field is caught (Spark only
    # converts the fields a query needs)
    bad = (F.col(CORRUPT).isNotNull() | F.col("ts").isNull() | F.col("elapsed_s").isNull()
           | F.col("phase").isNull() | F.col("family").isNull() | F.col("metric").isNull()
           | F.col("value").isNull())
    return raw.select(F.col("_metadata.file_path").alias("file"), "ts", "elapsed_s", "phase", "family", "metric",
                      F.coalesce(F.col("key"), F.lit("")).alias("key"), "value", bad.alias("_bad"))


def with_rep_keys(df):
    """Replace the ``file`` column of an (aggregated) frame by run_id, perm_id, rep."""
    from pyspark.sql import functions as F

    run_id, perm_id, rep, _path = _tail_columns(F, F.col("file"))
    return df.select(run_id, perm_id, rep, *[c for c in df.columns if c != "file"])


def report_sample_issues(disc: Discovery, bad_counts: list[tuple[str, str, int, int]]) -> None:
    """Add an Issue per samples file with skipped lines: (run_id, perm_id, rep, lines)."""
    by_key = {(r.run_id, r.perm_id, r.rep): r for r in disc.reps}
    for run_id, perm_id, rep, n in sorted(bad_counts):
        r = by_key.get((run_id, perm_id, rep))
        path = str(r.samples) if r and r.samples else f"{run_id}/{perm_id}/rep-{rep:02d}/samples.jsonl"
        disc.issues.append(Issue(path, f"{n} corrupt or incomplete line(s) skipped"))
