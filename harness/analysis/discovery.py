"""Find and read run directories (layout: docs/results.md).

:func:`discover` lists runs, permutations and complete repetitions through
:class:`harness.results.RunReader`; :func:`read_summaries` reads each summary once into its flat
row; :func:`read_samples` reads the samples with Spark and :mod:`.schemas`' explicit schema.
Problems (a damaged file, an unsupported version, corrupt lines) become :class:`Issue` rows
naming the file instead of stopping the analysis.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..results import TAIL_RE, RepRef, RunReader
from ..results.model import target_capabilities
from ..results.reader import rep_name


@dataclass(frozen=True)
class Issue:
    path: str
    problem: str

    def __str__(self) -> str:
        return f"{self.path}: {self.problem}"


@dataclass
class FoundRun:
    run_id: str                  # the directory's name (docs/results.md: run-id = directory name)
    path: Path
    meta: dict[str, Any]         # run.json, {} when missing or corrupt

    @property
    def target(self) -> dict[str, Any]:
        t = self.meta.get("target")
        return t if isinstance(t, dict) else {}

    @property
    def capabilities(self) -> dict[str, Any]:
        """What the run's target declared (run.json ``target.capabilities``,
        :func:`harness.results.model.target_capabilities`); empty without run.json."""
        return target_capabilities(self.target)

    @property
    def synthetic(self) -> bool:
        """A run written by tests/support/synth.py (run.json says ``"synthetic": true``)."""
        return bool(self.meta.get("synthetic") or self.target.get("synthetic"))


@dataclass(frozen=True)
class RepFiles(RepRef):
    """A complete repetition's files, its samples None when missing or empty."""

    samples: Path | None = None
    samples_bytes: int = 0


@dataclass
class Discovery:
    runs: list[FoundRun]
    reps: list[RepFiles]
    issues: list[Issue] = field(default_factory=list)

    @property
    def samples_bytes(self) -> int:
        return sum(r.samples_bytes for r in self.reps)


def is_run_dir(path: Path) -> bool:
    """A run directory: it has a run.json, or at least one repetition directory."""
    reader = RunReader(path)
    return reader.exists() or any(reader.rep_dirs(p) for p in reader.permutation_ids())


def discover(run_dirs: list[str | Path]) -> Discovery:
    """Walk ``run_dirs``. Raises UserError when a directory does not exist, two runs share a
    name, or there is no complete repetition at all; everything else becomes an Issue."""
    runs: list[FoundRun] = []
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
        info = FoundRun(run_id=run_id, path=path, meta=meta)
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
            reps.append(RepFiles(ref.run_id, ref.perm_id, ref.rep, ref.dir, samples, size))
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
    if not reader.exists():
        issues.append(Issue(str(path), "missing: run provenance unknown (target taken from the summaries)"))
        return {}
    try:
        return reader.record().to_json()
    except UserError as e:
        problem = f"{e.field}: {e.detail}" if e.field else e.detail
        issues.append(Issue(str(path), f"{problem}; target taken from the summaries"))
        return {}


# --------------------------------------------------------------------------- Spark readers

def read_summaries(disc: Discovery, readable: threading.Event | None = None) -> list[dict[str, Any]]:
    """One flat row per repetition (harness.results.fields.flat_row), each summary read once
    through the results model (its schema version and fields checked there). A summary that does
    not read (not JSON, nested too deep, a value of the wrong type, out of its range or not
    finite) is an issue naming its line and field, and its repetition is left out (also of
    ``disc.reps``, so its samples are not read either); none left is a UserError naming the
    first. ``readable`` is set at the first summary that reads."""
    rows, bad, first = [], set(), None
    for r in disc.reps:
        try:
            summary = r.summary()
        except UserError as e:
            bad.add((r.run_id, r.perm_id, r.rep))
            first = first or e
            problem = ": ".join(str(p) for p in (e.line and f"line {e.line}", e.field, e.detail) if p)
            disc.issues.append(Issue(str(r.summary_path), f"damaged ({problem}): repetition skipped"))
            continue
        row = summary.row()
        row.update(run_id=r.run_id, perm_id=r.perm_id, rep=r.rep)
        rows.append(row)
        if readable is not None:
            readable.set()
    disc.reps = [r for r in disc.reps if (r.run_id, r.perm_id, r.rep) not in bad]
    if not rows and first is not None:
        raise UserError(f"no readable repetition summary; the first: {first.detail}", file=first.file,
                        line=first.line, field=first.field)
    return rows


def read_samples(spark, disc: Discovery, reps: list[RepFiles] | None = None):
    """The raw samples of ``reps`` (default: all with a samples file) as one DataFrame:
    file (Spark's URI of the samples file), ts, elapsed_s, phase, family, metric, key, value,
    _bad (a corrupt or incomplete line). Returns None when there is no samples file.

    The file is kept as Spark gives it: parsing it into run_id, perm_id, rep on every row costs
    far more than the JSON parsing; :func:`with_rep_keys` does it after aggregation."""
    from pyspark.sql import functions as F

    from .schemas import CORRUPT, SAMPLES

    reps = [r for r in (disc.reps if reps is None else reps) if r.samples is not None]
    if not reps:
        return None
    raw = (spark.read.schema(SAMPLES).option("mode", "PERMISSIVE")
           .option("columnNameOfCorruptRecord", CORRUPT).json([str(r.samples) for r in reps]))
    # every field is referenced so that a line with any malformed field is caught (Spark only
    # converts the fields a query needs)
    bad = (F.col(CORRUPT).isNotNull() | F.col("ts").isNull() | F.col("elapsed_s").isNull()
           | F.col("phase").isNull() | F.col("family").isNull() | F.col("metric").isNull()
           | F.col("value").isNull())
    return raw.select(F.col("_metadata.file_path").alias("file"), "ts", "elapsed_s", "phase", "family", "metric",
                      F.coalesce(F.col("key"), F.lit("")).alias("key"), "value", bad.alias("_bad"))


#: TAIL_RE anchored at the path's start: one attempt that backtracks from the end, where the
#: unanchored pattern is tried at every character of the path (a sixth of the executor's time
#: in a paper-sized run's reduction, docs/findings/analysis-time.md); the same groups
PATH_KEYS_RE = "^(?:.*/)?" + TAIL_RE


def with_rep_keys(df):
    """Replace the ``file`` column of an (aggregated) frame by run_id, perm_id, rep, parsed from
    its path (Spark gives URL-encoded URIs)."""
    from pyspark.sql import functions as F

    path = F.url_decode(F.col("file"))
    return df.select(F.regexp_extract(path, PATH_KEYS_RE, 1).alias("run_id"),
                     F.regexp_extract(path, PATH_KEYS_RE, 2).alias("perm_id"),
                     F.regexp_extract(path, PATH_KEYS_RE, 3).cast("int").alias("rep"),
                     *[c for c in df.columns if c != "file"])


def report_sample_issues(disc: Discovery, bad_counts: list[tuple[str, str, int, int]]) -> None:
    """Add an Issue per samples file with skipped lines: (run_id, perm_id, rep, lines)."""
    by_key = {(r.run_id, r.perm_id, r.rep): r for r in disc.reps}
    for run_id, perm_id, rep, n in sorted(bad_counts):
        r = by_key.get((run_id, perm_id, rep))
        path = str(r.samples) if r and r.samples else f"{run_id}/{perm_id}/{rep_name(rep)}/samples.jsonl"
        disc.issues.append(Issue(path, f"{n} corrupt or incomplete line(s) skipped"))
