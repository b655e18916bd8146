"""The results directory of one run (layout and schemas: docs/results.md).

Everything is written atomically: a file goes to a temporary name in its directory, is
flushed and fsynced, then renamed; a repetition is assembled in ``.rep-NN.partial/`` and
renamed to ``rep-NN/`` when complete, so a repetition exists exactly when it is whole.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from .errors import UserError

RUN_SCHEMA = "ssbench.run/1"
SUMMARY_SCHEMA = "ssbench.summary/1"
PERMUTATION_SCHEMA = "ssbench.permutation/1"


def utc_now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def write_atomic(path: Path, data: bytes | str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_json(path: Path, obj: Any) -> None:
    write_atomic(path, json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n")


def write_jsonl(path: Path, rows: Iterable[dict]) -> None:
    write_atomic(path, "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows))


def read_json(path: Path) -> Any:
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UserError("no such file", file=str(path)) from None
    except ValueError as e:
        raise UserError(f"not valid JSON ({e})", file=str(path)) from None


def rep_name(rep: int) -> str:
    return f"rep-{rep:02d}"


class RunDir:
    """One run's directory."""

    def __init__(self, path: Path):
        self.path = Path(path)

    # ------------------------------------------------------------------ creation / lookup
    @staticmethod
    def new_run_id(matrix_name: str) -> str:
        return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + f"-{matrix_name}"

    @classmethod
    def create(cls, results_root: Path, matrix_name: str, out: Path | None = None) -> "RunDir":
        if out is not None:
            path = Path(out)
            if path.exists() and any(path.iterdir()):
                raise UserError("exists and is not empty (use --resume to continue that run)",
                                file=str(path))
        else:
            path = Path(results_root) / cls.new_run_id(matrix_name)
            n = 1
            while path.exists():
                n += 1
                path = Path(results_root) / f"{cls.new_run_id(matrix_name)}-{n}"
        path.mkdir(parents=True, exist_ok=True)
        return cls(path)

    @classmethod
    def latest_for(cls, results_root: Path, matrix_name: str) -> "RunDir | None":
        """The newest run of ``matrix_name`` that is not complete (for --resume)."""
        candidates = []
        for p in Path(results_root).glob(f"*-{matrix_name}*"):
            rj = p / "run.json"
            if rj.is_file():
                try:
                    st = json.loads(rj.read_text()).get("status")
                except ValueError:
                    continue
                if st != "complete":
                    candidates.append(p)
        return cls(sorted(candidates)[-1]) if candidates else None

    # ------------------------------------------------------------------ run.json
    @property
    def run_json(self) -> Path:
        return self.path / "run.json"

    @property
    def run_id(self) -> str:
        return self.path.name

    def read_run(self) -> dict:
        return read_json(self.run_json)

    def update_run(self, **fields: Any) -> dict:
        data = read_json(self.run_json) if self.run_json.exists() else {"schema": RUN_SCHEMA}
        data.update(fields)
        write_json(self.run_json, data)
        return data

    # ------------------------------------------------------------------ repetitions
    def perm_dir(self, perm_id: str) -> Path:
        return self.path / perm_id

    def rep_dir(self, perm_id: str, rep: int) -> Path:
        return self.perm_dir(perm_id) / rep_name(rep)

    def is_complete(self, perm_id: str, rep: int) -> bool:
        return (self.rep_dir(perm_id, rep) / "summary.json").is_file()

    def begin_rep(self, perm_id: str, rep: int) -> Path:
        """A fresh partial directory for a repetition (a leftover partial one is discarded)."""
        partial = self.perm_dir(perm_id) / f".{rep_name(rep)}.partial"
        if partial.exists():
            shutil.rmtree(partial)
        partial.mkdir(parents=True)
        return partial

    def commit_rep(self, perm_id: str, rep: int, partial: Path) -> Path:
        final = self.rep_dir(perm_id, rep)
        if final.exists():  # an earlier incomplete directory (no summary.json)
            shutil.rmtree(final)
        os.replace(partial, final)
        self._fsync_dir(final.parent)
        return final

    @staticmethod
    def _fsync_dir(path: Path) -> None:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def rep_summaries(self, perm_id: str) -> list[dict]:
        out = []
        for d in sorted(self.perm_dir(perm_id).glob("rep-*")):
            s = d / "summary.json"
            if s.is_file():
                out.append(json.loads(s.read_text()))
        return out

    def write_permutation_summary(self, perm_id: str, permutation: dict) -> dict:
        reps = self.rep_summaries(perm_id)

        def med(key: str, sub: str | None = None):
            vals = []
            for r in reps:
                v = r.get(key)
                if sub is not None:
                    v = (v or {}).get(sub)
                if v is not None:
                    vals.append(v)
            return statistics.median(vals) if vals else None

        data = {
            "schema": PERMUTATION_SCHEMA, "permutation": permutation,
            "repetitions": [r["repetition"] for r in reps],
            "median": {"send_rate": med("send_rate"), "receive_rate": med("receive_rate"),
                       "send_p50_ms": med("send_latency_ms", "p50"),
                       "send_p99_ms": med("send_latency_ms", "p99"),
                       "e2e_p99_ms": med("e2e_latency_ms", "p99")},
            "messages_lost": sum(r.get("messages_lost", 0) for r in reps),
            "errors": sum(r.get("errors", 0) for r in reps),
        }
        write_json(self.perm_dir(perm_id) / "summary.json", data)
        return data

    def all_summaries(self) -> list[dict]:
        out = []
        for s in sorted(self.path.glob("*/rep-*/summary.json")):
            out.append(json.loads(s.read_text()))
        return out
