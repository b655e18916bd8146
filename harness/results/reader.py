"""The one reader of run directories (layout: docs/results.md): :class:`RunReader`.

Nothing else globs a run directory. A repetition is complete exactly when
``rep-NN/summary.json`` exists; ``.rep-NN.partial/`` directories are never listed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UserError
from .model import PermutationSummary, RepetitionSummary, RunRecord

REP_RE = re.compile(r"^rep-(\d+)$")
#: the tail of a file path inside a run: <run dir>/<permutation id>/rep-NN/<file> (for Spark,
#: which reads the files itself and gets their paths back)
TAIL_RE = r"([^/]+)/([^/]+)/rep-(\d+)/[^/]+$"
#: directories of a run that are not permutations
NOT_PERMUTATIONS = {"report"}


def rep_name(rep: int) -> str:
    return f"rep-{rep:02d}"


#: the deepest nesting of arrays and objects a results file may have (a summary has 4 levels)
MAX_DEPTH = 64
#: a JSON string (skipped whole), a bracket, or one of the constants Python's json accepts
_TOKEN_RE = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]|NaN|-?Infinity')


class _Constant(ValueError):
    """NaN, Infinity or -Infinity met while parsing: not JSON, and no number a result can be."""


def _refuse_constant(name: str) -> Any:
    raise _Constant(name)


def read_json(path: Path) -> Any:
    """Parse a JSON file; a missing or corrupt file is a one-line UserError naming it
    (:func:`parse_json`)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError("no such file", file=str(path)) from None
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"not valid JSON ({e})", file=str(path)) from None
    return parse_json(text, str(path))


def parse_json(text: str, file: str) -> Any:
    """A results file's JSON, or a one-line UserError naming the file (and the line and field
    where they are known): not JSON, nested deeper than :data:`MAX_DEPTH` (refused by a scan of
    its brackets before the parser recurses), or holding ``NaN``/``Infinity`` (which Python's
    json would otherwise accept)."""
    if text.count("[") + text.count("{") > MAX_DEPTH:
        _check_depth(text, file)
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except _Constant as e:
        raise UserError(f"{e.args[0]} is not a number (a finite number is required)", file=file,
                        line=_line_of(text, e.args[0]), field=_path_of_constant(text)) from None
    except RecursionError:
        raise UserError(f"nested deeper than {MAX_DEPTH} levels", file=file) from None
    except ValueError as e:
        raise UserError(f"not valid JSON ({e})", file=file) from None


def _check_depth(text: str, file: str) -> None:
    depth = 0
    for m in _TOKEN_RE.finditer(text):
        c = m.group(0)
        if c in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise UserError(f"nested deeper than {MAX_DEPTH} levels", file=file,
                                line=text.count("\n", 0, m.start()) + 1)
        elif c in "]}":
            depth -= 1


def _line_of(text: str, constant: str) -> int | None:
    """The line of the first ``constant`` outside a string."""
    for m in _TOKEN_RE.finditer(text):
        if m.group(0) == constant:
            return text.count("\n", 0, m.start()) + 1
    return None


_MARK = object()


def _path_of_constant(text: str) -> str | None:
    """The dotted path (``accounting.messages_lost``, ``per_initiator[2].lost``) of the first
    non-finite constant of a document no deeper than :data:`MAX_DEPTH`."""
    def find(v: Any, path: str) -> str | None:
        if v is _MARK:
            return path or None
        items = v.items() if isinstance(v, dict) else enumerate(v) if isinstance(v, list) else ()
        for k, x in items:
            if (hit := find(x, f"{path}[{k}]" if isinstance(k, int) else f"{path}.{k}" if path else str(k))):
                return hit
        return None

    return find(json.loads(text, parse_constant=lambda _name: _MARK), "")


@dataclass(frozen=True)
class RepRef:
    """One complete repetition's files."""

    run_id: str
    perm_id: str
    rep: int
    dir: Path

    @property
    def summary_path(self) -> Path:
        return self.dir / "summary.json"

    @property
    def samples_path(self) -> Path:
        return self.dir / "samples.jsonl"

    @property
    def latency_path(self) -> Path:
        return self.dir / "latency.json"

    def summary(self) -> RepetitionSummary:
        return RepetitionSummary.from_json(read_json(self.summary_path), file=str(self.summary_path))


class RunReader:
    """Read-only view of one run directory."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def run_json(self) -> Path:
        return self.path / "run.json"

    def exists(self) -> bool:
        return self.run_json.is_file()

    def perm_dir(self, perm_id: str) -> Path:
        return self.path / perm_id

    def rep_dir(self, perm_id: str, rep: int) -> Path:
        return self.perm_dir(perm_id) / rep_name(rep)

    def is_complete(self, perm_id: str, rep: int) -> bool:
        return (self.rep_dir(perm_id, rep) / "summary.json").is_file()

    def record(self) -> RunRecord:
        return RunRecord.from_json(read_json(self.run_json), file=str(self.run_json))

    def permutation_ids(self) -> list[str]:
        if not self.path.is_dir():
            return []
        return sorted(p.name for p in self.path.iterdir()
                      if p.is_dir() and not p.name.startswith(".") and p.name not in NOT_PERMUTATIONS)

    def rep_dirs(self, perm_id: str) -> list[tuple[int, Path]]:
        """Every ``rep-NN`` directory of a permutation, complete or not, in repetition order."""
        d = self.perm_dir(perm_id)
        if not d.is_dir():
            return []
        out = [(int(m.group(1)), p) for p in d.iterdir() if p.is_dir() and (m := REP_RE.match(p.name))]
        return sorted(out)

    def reps(self, perm_id: str | None = None) -> list[RepRef]:
        """Complete repetitions (those with a summary.json), of one permutation or of all."""
        perms = [perm_id] if perm_id is not None else self.permutation_ids()
        return [RepRef(self.run_id, p, n, d) for p in perms for n, d in self.rep_dirs(p) if self.is_complete(p, n)]

    def incomplete_rep_dirs(self) -> list[Path]:
        """``rep-NN`` directories without a summary.json (left by an older writer)."""
        return [d for p in self.permutation_ids() for n, d in self.rep_dirs(p) if not self.is_complete(p, n)]

    def summaries(self, perm_id: str | None = None) -> list[RepetitionSummary]:
        return [r.summary() for r in self.reps(perm_id)]

    def readable_summaries(self, perm_id: str | None = None) -> list[RepetitionSummary]:
        """The summaries that read and fit the schema; the others are left out (for views that
        come after a reader which reports them, such as the Spark analysis' issues)."""
        out = []
        for r in self.reps(perm_id):
            try:
                out.append(r.summary())
            except UserError:
                continue
        return out

    def permutation_summary(self, perm_id: str) -> PermutationSummary | None:
        p = self.perm_dir(perm_id) / "summary.json"
        if not p.is_file():
            return None
        return PermutationSummary.from_json(read_json(p), file=str(p))


def find_runs(results_root: str | Path, matrix_name: str | None = None) -> list[RunReader]:
    """Run directories (with a run.json) under ``results_root``, oldest first."""
    root = Path(results_root)
    if not root.is_dir():
        return []
    runs = []
    for p in sorted(root.iterdir()):
        if not p.is_dir() or not (p / "run.json").is_file():
            continue
        if matrix_name is not None and not (p.name.endswith(f"-{matrix_name}")
                                            or re.search(rf"-{re.escape(matrix_name)}-\d+$", p.name)):
            continue
        runs.append(RunReader(p))
    return runs
