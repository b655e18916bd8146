"""Find and read run directories (layout: ``docs/results.md``).

:func:`discover` walks the run directories in plain Python (no Spark): run.json, the
permutation directories and their complete repetitions (``rep-NN/`` with a ``summary.json``;
``.rep-NN.partial/`` directories are in-progress and ignored). Problems are collected as
:class:`Issue` (the file's path and what is wrong) instead of stopping the analysis.

:func:`read_summaries` and :func:`read_samples` read all repetitions' files with Spark in one
``spark.read.json`` call each, with the explicit schemas of :mod:`.schemas`. A corrupt summary
(or a summary that does not fit the schema) is dropped and reported by name; corrupt lines of a
samples file are skipped, counted and reported by file.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UserError

REP_RE = re.compile(r"^rep-(\d+)$")
#: the tail of a samples/summary path: <run dir>/<permutation id>/rep-NN/<file>
TAIL_RE = r"([^/]+)/([^/]+)/rep-(\d+)/[^/]+$"


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
        run_id = path.name
        if run_id in seen:
            raise UserError(f"two runs are named {run_id!r} ({seen[run_id]} and {path}); "
                            "analyze them separately or rename one", file=str(raw))
        seen[run_id] = path
        meta = _read_run_json(path / "run.json", issues)
        target = meta.get("target") if isinstance(meta.get("target"), dict) else {}
        info = RunInfo(run_id=run_id, path=path, meta=meta, target_kind=target.get("kind"),
                       target_label=target.get("label"))
        if meta.get("status") not in (None, "complete"):
            issues.append(Issue(str(path / "run.json"),
                                f"run status is {meta.get('status')!r}: analyzing the repetitions completed so far"))
        runs.append(info)
        found = 0
        for perm_dir in sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith(".")):
            rep_dirs = sorted((d for d in perm_dir.iterdir() if d.is_dir() and REP_RE.match(d.name)),
                              key=lambda d: int(REP_RE.match(d.name).group(1)))
            if not rep_dirs:
                continue  # report/, or a permutation with no complete repetition yet
            for rep_dir in rep_dirs:
                summary = rep_dir / "summary.json"
                if not summary.is_file():
                    issues.append(Issue(str(summary), "missing: repetition skipped"))
                    continue
                samples = rep_dir / "samples.jsonl"
                if not samples.is_file():
                    issues.append(Issue(str(samples), "missing: no time series for this repetition "
                                                      "(waits fall back to the summary's top_waits)"))
                    samples = None
                size = 0
                if samples is not None:
                    size = samples.stat().st_size
                    if size == 0:
                        issues.append(Issue(str(samples), "empty"))
                        samples = None
                reps.append(RepFiles(run_id=run_id, perm_id=perm_dir.name,
                                     rep=int(REP_RE.match(rep_dir.name).group(1)), dir=rep_dir,
                                     summary=summary, samples=samples, samples_bytes=size))
                found += 1
        if not found:
            issues.append(Issue(str(path), "no complete repetition found"))
    if not reps:
        raise UserError("no complete repetition (rep-NN/summary.json) in "
                        + ", ".join(str(r.path) for r in runs))
    return Discovery(runs=runs, reps=reps, issues=issues)


def _read_run_json(path: Path, issues: list[Issue]) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        issues.append(Issue(str(path), "missing: run provenance unknown (target taken from the summaries)"))
        return {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        issues.append(Issue(str(path), f"corrupt ({e.__class__.__name__}: {e}); target taken from the summaries"))
        return {}
    if not isinstance(data, dict):
        issues.append(Issue(str(path), "corrupt (not a JSON object)"))
        return {}
    return data


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

    def c(name: str):
        return F.col(f"s.{name}")

    p, lat_s, lat_e, w, tgt = (c("permutation"), c("send_latency_ms"), c("e2e_latency_ms"), c("window"),
                               c("target"))
    flat = raw.select(
        "run_id", "perm_id", "rep", "file",
        (c(CORRUPT).isNotNull() | (c("schema").isNull() & c("permutation_id").isNull())).alias("_bad"),
        c("permutation_id").alias("summary_perm_id"),
        p["initiators"].alias("initiators"), p["threads"].alias("threads"),
        F.coalesce(p["total_threads"], p["initiators"] * p["threads"]).alias("total_threads"),
        p["dialogs"].alias("dialogs"), p["dialogs_every_n"].alias("dialogs_every_n"),
        p["dialogs_shared"].alias("dialogs_shared"), p["payload_bytes"].alias("payload_bytes"),
        p["server"].alias("server"), p["index"].alias("perm_index"),
        tgt["kind"].alias("target_kind"), tgt["label"].alias("target_label"),
        tgt["profile"].alias("target_profile"),
        w["measure_seconds"].alias("measure_seconds"),
        *[c(n).alias(n) for n in ("messages_sent", "messages_received", "messages_lost", "drained",
                                  "send_rate", "receive_rate")],
        lat_s["p50"].alias("send_p50_ms"), lat_s["p95"].alias("send_p95_ms"), lat_s["p99"].alias("send_p99_ms"),
        lat_e["p50"].alias("e2e_p50_ms"), lat_e["p95"].alias("e2e_p95_ms"), lat_e["p99"].alias("e2e_p99_ms"),
        *[c(n).alias(n) for n in ("top_waits", "max_xmitq_depth", "max_queue_depth", "client_cpu_percent",
                                  "client_bound", "server_cpu_percent", "errors", "status")],
    ).localCheckpoint()
    required = ["initiators", "threads", "dialogs", "payload_bytes", "server", "send_rate", "receive_rate"]
    missing_any = F.lit(False)
    for c in required:
        missing_any = missing_any | F.col(c).isNull()
    checks = (flat.where(F.col("_bad") | missing_any)
              .select("file", "run_id", "perm_id", "rep", "_bad", *[F.col(c).isNull().alias(c) for c in required])
              .collect())
    bad_files = set()
    for row in checks:
        bad_files.add(row["file"])
        skipped = (row["run_id"], row["perm_id"], row["rep"])
        disc.reps = [r for r in disc.reps if (r.run_id, r.perm_id, r.rep) != skipped]
        if row["_bad"]:
            disc.issues.append(Issue(row["file"], "corrupt (not JSON, or does not fit the "
                                                  "ssbench.summary/1 schema): repetition skipped"))
        else:
            missing = [c for c in required if row[c]]
            disc.issues.append(Issue(row["file"], f"missing field(s) {', '.join(missing)}: "
                                                  "repetition skipped"))
    good = flat.where(~(F.col("_bad") | missing_any)).drop("_bad", "file") if bad_files else flat.drop("_bad", "file")
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
