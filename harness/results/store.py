"""Writing a run directory: the one atomic writer and :class:`RunDir`.

A file is written to a temporary name, fsynced, renamed, and its directory fsynced; a
repetition is assembled in ``.rep-NN.partial/`` and renamed to ``rep-NN/``, so it exists exactly
when it is whole.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from ..errors import UserError
from .lock import CLAIM, HeldLock, run_dir_lock
from .model import RUN_SCHEMA, RunRecord
from .reader import RepRef, RunReader, find_runs, read_json, rep_name
from .summary import summarize_permutation


def utc_now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def write_atomic(path: str | os.PathLike[str], data: bytes | str | Iterable[str], durable: bool = True) -> Path:
    """Write ``data`` (or each of its strings, in turn) to ``path`` all or nothing (temp file,
    fsync, rename, directory fsync). ``durable=False`` leaves out the two fsyncs: still all or
    nothing for a reader, not across a crash (data that can be made again: synthetic runs)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            if isinstance(data, (bytes, str)):
                f.write(data.encode() if isinstance(data, str) else data)
            else:
                for part in data:
                    f.write(part.encode())
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    if durable:
        fsync_dir(path.parent)
    return path


def fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):  # some filesystems refuse directory fsync
            os.fsync(fd)
    finally:
        os.close(fd)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_json(path: str | os.PathLike[str], obj: Any, durable: bool = True) -> Path:
    if hasattr(obj, "to_json"):
        obj = obj.to_json()
    return write_atomic(path, json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n", durable)


def write_jsonl(path: str | os.PathLike[str], rows: Iterable[dict]) -> Path:
    return write_atomic(path, (json.dumps(r, separators=(",", ":")) + "\n" for r in rows))


class RunDir(RunReader):
    """One run's directory, for writing (reading is :class:`RunReader`'s). The process that
    writes it holds its lock (:meth:`hold`) until :meth:`release` or
    its exit: a second writer is refused (UserError, exit 2) naming the first."""

    _lock: HeldLock | None = None

    def hold(self) -> "RunDir":
        """Take this directory's lock for this process (UserError naming the holder if taken)."""
        if self._lock is None:
            self._lock = run_dir_lock(self.path).acquire()
        return self

    def release(self) -> None:
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.release()

    # ------------------------------------------------------------------ creation / lookup
    @staticmethod
    def new_run_id(matrix_name: str) -> str:
        return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + f"-{matrix_name}"

    @classmethod
    def create(cls, results_root: Path, matrix_name: str, out: Path | None = None) -> "RunDir":
        """A new run's directory, claimed by this process alone: ``out``, or
        ``<results_root>/<UTC time>-<matrix>[-N]``. The claim is an exclusive create (mkdir, or the
        claim file in an ``out`` that exists empty), so two runs started in the same second never
        share a directory. The writer then takes the directory's lock (:meth:`hold`)."""
        if out is not None:
            path = Path(out)
            if path.exists() and not path.is_dir():
                raise UserError("exists and is not a directory", file=str(path))
            if not cls._claim(path):
                raise UserError("exists and is not empty (use --resume to continue that run)",
                                file=str(path))
            return cls(path)
        base = Path(results_root) / cls.new_run_id(matrix_name)
        path, n = base, 1
        while not cls._claim(path, fresh=True):
            n += 1
            path = base.with_name(f"{base.name}-{n}")
        return cls(path)

    @staticmethod
    def _claim(path: Path, fresh: bool = False) -> bool:
        """Make ``path`` this run's: create it, or (not ``fresh``) take an empty one, by creating
        its claim file exclusively. False when another run has it."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                path.mkdir()
            except FileExistsError:
                if fresh or not path.is_dir() or any(p.name != CLAIM for p in path.iterdir()):
                    return False
            try:
                os.close(os.open(path / CLAIM, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            except FileExistsError:
                return False
        except OSError as e:
            raise UserError(f"cannot create the run directory ({e.strerror or e})", file=str(path)) from None
        return True

    # ------------------------------------------------------------------ run.json
    def update_run(self, **fields: Any) -> dict:
        data = read_json(self.run_json) if self.run_json.exists() else {"schema": RUN_SCHEMA}
        data.update(fields)
        data.setdefault("run_id", self.run_id)
        # the record must stay readable: validate before replacing the file
        RunRecord.from_json(data, file=str(self.run_json))
        write_json(self.run_json, data)
        return data

    def begin_record(self, matrix: dict, target: dict, total: int, **extra: Any) -> dict:
        """Open the run's record (run.json) for a run of ``total`` repetitions: ``ssbench run`` and
        every web session write it here. Provenance is this process's; ``target`` (the target's
        description) and the command line are redacted."""
        from ..provenance import provenance
        from ..redact import redact

        prov = provenance()
        return self.update_run(run_id=self.run_id, status="running", started=utc_now_iso(), ended=None,
                               ssbench=prov["ssbench"], matrix=matrix, target=redact(target),
                               software=prov["software"], host=prov["host"], argv=redact(prov["argv"]),
                               permutations_done=0, permutations_total=total, **extra)

    def finish(self, status: str, lost: int = 0, error: str | None = None) -> dict:
        """Close the run's record: its final status, end time, messages lost and (``error``)
        why it failed or stopped."""
        why = {"error": error} if error is not None else {}
        return self.update_run(status=status, ended=utc_now_iso(), messages_lost=lost, **why)

    # ------------------------------------------------------------------ repetitions
    def damage(self, perm_id: str, rep: int) -> str | None:
        """Why a committed repetition cannot be trusted as complete (its summary does not read
        back: the reader's own one-line error), or None."""
        try:
            RepRef(self.run_id, perm_id, rep, self.rep_dir(perm_id, rep)).summary()
        except UserError as e:
            return str(e)
        return None

    def set_aside(self, perm_id: str, rep: int) -> Path:
        """Move a damaged repetition out of the run (``rep-NN.damaged-<UTC time>``: kept for a
        look, never read as a repetition), so that it is run again."""
        d = self.rep_dir(perm_id, rep)
        aside = d.with_name(f"{d.name}.damaged-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}")
        os.replace(d, aside)
        fsync_dir(d.parent)
        return aside

    def begin_rep(self, perm_id: str, rep: int) -> Path:
        """A fresh partial directory for a repetition (a leftover partial one is discarded)."""
        partial = self.perm_dir(perm_id) / f".{rep_name(rep)}.partial"
        if partial.exists():
            shutil.rmtree(partial)
        partial.mkdir(parents=True)
        return partial

    def commit_rep(self, perm_id: str, rep: int, partial: Path) -> Path:
        """Rename the assembled ``partial`` into place. A complete repetition there is never
        replaced (--resume sets a damaged one aside first): UserError, the partial kept."""
        final = self.rep_dir(perm_id, rep)
        if self.is_complete(perm_id, rep):
            raise UserError(f"a complete repetition is already there; not replaced (this one is left in "
                            f"{partial.name})", file=str(final))
        if final.exists():  # an earlier incomplete directory (no summary.json)
            shutil.rmtree(final)
        os.replace(partial, final)
        fsync_dir(final.parent)
        return final

    def write_permutation_summary(self, perm_id: str, permutation: dict) -> dict:
        data = summarize_permutation(permutation, self.summaries(perm_id)).to_json()
        write_json(self.perm_dir(perm_id) / "summary.json", data)
        return data


def latest_unfinished(results_root: str | Path, matrix_name: str) -> RunDir | None:
    """The newest run of ``matrix_name`` whose run.json does not say complete (for --resume)."""
    for run in reversed(find_runs(results_root, matrix_name)):
        try:
            status = read_json(run.run_json).get("status")
        except (UserError, AttributeError):
            continue
        if status != "complete":
            return RunDir(run.path)
    return None
