"""The gate's view of a run directory, read through :class:`harness.results.RunReader`.

Per complete repetition it keeps the metrics the gate compares and the integrity fields; the
results model refuses a malformed file naming the file and field.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..results import RepetitionSummary, RepRef, RunReader, counts_in_verdicts
from ..verdicts.comparison_metrics import METRICS, Metric


@dataclass
class Rep:
    """One complete repetition: the compared metrics and its summary (every other field:
    ``summary``)."""

    repetition: int
    path: Path
    values: dict[str, float | None]
    summary: RepetitionSummary

    @property
    def messages_lost(self) -> int:
        return self.summary.get("messages_lost", 0)

    @property
    def messages_duplicated(self) -> int:
        """Exactly-once broken: tallies beyond a message's first and messages never sent."""
        return (self.summary.get("messages_duplicated") or 0) + (self.summary.get("messages_phantom") or 0)

    @property
    def round(self) -> int:
        """The round an interleaved gate ran it in (its side's runs combined: ``interleave``),
        else its repetition: what pairs the two sides."""
        return int((self.summary.extra.get("interleave") or {}).get("round", self.repetition))


@dataclass
class PermData:
    id: str
    reps: list[Rep]

    def samples(self, metric: str) -> list[tuple[int, float]]:
        """(round, value) of the repetitions that count in verdicts
        (:func:`harness.results.counts_in_verdicts`); a permutation may have any number."""
        return [(r.round, r.values[metric]) for r in self.reps  # type: ignore[misc]
                if r.values.get(metric) is not None and counts_in_verdicts(r.summary.status)]

    def kept_out(self) -> list[Rep]:
        return [r for r in self.reps if not counts_in_verdicts(r.summary.status)]


@dataclass
class RunData:
    path: Path
    run: dict[str, Any]           # run.json (validated as a RunRecord)
    perms: dict[str, PermData]
    notes: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return str(self.run.get("run_id") or self.path.name)


def metric_value(summary: RepetitionSummary, metric: Metric, file: str) -> float | None:
    """The metric's value in a summary (None for a latency without data); a value that is not
    a finite number is a UserError naming the file and field."""
    cur = summary.get(metric.name)
    if cur is None:
        return None
    if not math.isfinite(cur):
        raise UserError(f"must be a finite number, got {cur!r}", file=file,
                        field=".".join(metric.field.path or (metric.name,)))
    return float(cur)


def load_rep(ref: RepRef) -> Rep:
    """Read one ``rep-NN/summary.json``; UserError naming the file when it is malformed or of
    an unsupported schema version."""
    summary = ref.summary()
    file = str(ref.summary_path)
    values = {m.name: metric_value(summary, m, file) for m in METRICS}
    return Rep(repetition=ref.rep, path=ref.dir, values=values, summary=summary)


def load_run(path: str | os.PathLike[str]) -> RunData:
    """Load a run directory (``results/<run-id>/``): run.json and every complete repetition.

    Raises UserError when the directory or run.json is missing, a file is malformed (naming
    it), or there is no complete repetition at all.
    """
    p = Path(path)
    if not p.exists():
        raise UserError("no such run directory", file=str(p))
    if not p.is_dir():
        raise UserError("not a directory (give a run directory, results/<run-id>/)", file=str(p))
    reader = RunReader(p)
    if not reader.exists():
        raise UserError("not an ssbench run directory: no run.json", file=str(p))
    record = reader.record()
    data = RunData(path=p, run=record.to_json(), perms={})
    if record.status != "complete":
        data.notes.append(f"{p}: run status is {record.status!r}, comparing its complete repetitions only")
    for d in reader.incomplete_rep_dirs():
        data.notes.append(f"{d}: no summary.json (incomplete repetition), ignored")
    for perm in reader.permutation_ids():
        reps = [load_rep(ref) for ref in reader.reps(perm)]
        if reps:
            data.perms[perm] = PermData(id=perm, reps=reps)
    if not data.perms:
        raise UserError("no complete repetition (no <permutation>/rep-NN/summary.json)", file=str(p))
    return data
