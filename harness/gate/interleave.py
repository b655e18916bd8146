"""Interleaved gating: the baseline revision and the candidate run alternately on one machine,
so slow drift (thermal state, neighbours, updates) falls on both sides alike.

The baseline's code is checked out with ``git worktree add --detach`` into a temporary
directory (removed at the end, also on errors, Ctrl-C and SIGTERM); the matrix is copied with one
repetition; each round runs both sides once, in an order counterbalanced over pairs of rounds
(:func:`~harness.plan.side_orders`, seeded), each side as ``python -m harness.cli run``
with that side's checkout on ``PYTHONPATH`` and as ``SSBENCH_HOME``. A round that left a
repetition out of the comparison gets a replacement round, up to :data:`MAX_REPLACEMENTS`.
Each run is added to its side's run directory as it ends (``<out>/baseline``,
``<out>/candidate``, round i as ``rep-i``), and the two are compared (:mod:`harness.gate.compare`).
docs/gate.md ("The interleaved mode") has the layout and ``interleave.json``. The command that
runs one side is injectable (``runner=``) for tests.
"""

from __future__ import annotations

import json
import logging
import os
import random
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

import yaml

from ..errors import TargetError, Terminated, UserError
from ..results import (RunDir, RunReader, counts_in_verdicts, find_runs, read_json, utc_now_iso, write_atomic,
                       write_json)
from .compare import compare_runs
from ..plan import SIDES, side_orders, side_windows
from ..verdicts.regression import GateSettings
from .report import GateReport, write_report
from .rundata import load_run

log = logging.getLogger(__name__)

#: replacement rounds at most, for repetitions kept out of the comparison (both sides together)
MAX_REPLACEMENTS = 2
INTERLEAVE_SCHEMA = "ssbench.gate-interleave/1"


class GateRunError(UserError):
    """One side's ``ssbench run`` failed (exit 2, naming its log)."""


@dataclass(frozen=True)
class Side:
    name: str                 # "baseline" or "candidate"
    code_root: Path           # the checkout whose harness/ and workloads/ this side uses
    commit: str | None = None
    dirty: bool = False


class SideRunner(Protocol):
    """Runs one repetition round of one side and returns the run directory it wrote."""

    def __call__(self, side: Side, matrix: Path, out: Path, round_no: int) -> Path: ...


# --------------------------------------------------------------------------- git

def _git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=check)
    except FileNotFoundError:
        raise UserError("git is not installed (the interleaved gate checks the baseline out with git worktree)") from None
    except subprocess.CalledProcessError as e:
        raise UserError(f"git {' '.join(args)} failed in {repo}: {(e.stderr or e.stdout).strip()}") from None


def repo_root(path: Path) -> Path:
    res = _git(path, "rev-parse", "--show-toplevel", check=False)
    if res.returncode != 0:
        raise UserError(f"{path} is not a git checkout (the interleaved gate needs git to check out the baseline)")
    return Path(res.stdout.strip())


def resolve_revision(repo: Path, ref: str) -> str:
    res = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
    if res.returncode != 0 or not res.stdout.strip():
        raise UserError(f"unknown git revision {ref!r} in {repo}")
    return res.stdout.strip()


def candidate_state(repo: Path) -> tuple[str | None, bool]:
    head = _git(repo, "rev-parse", "--verify", "--quiet", "HEAD", check=False).stdout.strip() or None
    dirty = bool(_git(repo, "status", "--porcelain", check=False).stdout.strip())
    return head, dirty


class Worktree:
    """``git worktree add --detach`` into a fresh temporary directory; removed on exit."""

    def __init__(self, repo: Path, commit: str, keep: bool = False):
        self.repo = repo
        self.commit = commit
        self.keep = keep
        self.tmp: Path | None = None
        self.path: Path | None = None

    def __enter__(self) -> Path:
        self.tmp = Path(tempfile.mkdtemp(prefix="ssbench-gate-baseline-"))
        self.path = self.tmp / "src"
        _git(self.repo, "worktree", "add", "--detach", str(self.path), self.commit)
        return self.path

    def __exit__(self, *exc: Any) -> None:
        if self.keep or self.path is None or self.tmp is None:
            return
        res = _git(self.repo, "worktree", "remove", "--force", str(self.path), check=False)
        if res.returncode != 0:
            log.warning("git worktree remove %s failed: %s", self.path, res.stderr.strip())
        shutil.rmtree(self.tmp, ignore_errors=True)
        _git(self.repo, "worktree", "prune", check=False)


# --------------------------------------------------------------------------- the real runner

def find_run_dir(out: Path) -> Path | None:
    """The run directory ``ssbench run --out OUT`` wrote: OUT itself when it holds run.json,
    else the single sub-directory of OUT that does (``OUT/<run-id>/``)."""
    if RunReader(out).exists():
        return out
    found = find_runs(out)
    return found[-1].path if found else None


class SubprocessRunner:
    """Runs ``python -m harness.cli run MATRIX --target T --out OUT`` in a side's checkout.

    The environment gets ``PYTHONPATH=<checkout>`` (ahead of the editable install, which
    Python consults after ``sys.path``), ``SSBENCH_HOME=<checkout>`` (workloads/), and
    ``SSBENCH_RESULTS=<OUT's parent>``; everything else (``SSBENCH_PGDATA`` ...) is inherited.
    Output goes to ``OUT.log``.
    """

    def __init__(self, target: str = "embedded", python: str | None = None,
                 extra_args: tuple[str, ...] = (), env: dict[str, str] | None = None,
                 side_env: dict[str, dict[str, str]] | None = None):
        self.target = target
        self.python = python or sys.executable
        self.extra_args = tuple(extra_args)
        self.env = dict(os.environ if env is None else env)
        self.side_env = side_env or {}

    def env_for(self, side: Side, out: Path | None = None) -> dict[str, str]:
        env = dict(self.env)
        root = str(side.code_root)
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env["SSBENCH_HOME"] = root
        if out is not None:
            env["SSBENCH_RESULTS"] = str(out.parent)
        env.update(self.side_env.get(side.name, {}))
        return env

    def command(self, matrix: Path, out: Path) -> list[str]:
        return [self.python, "-m", "harness.cli", "run", str(matrix), "--target", self.target,
                "--out", str(out), *self.extra_args]

    def preflight(self, side: Side) -> None:
        """Check that the side's interpreter imports its own harness package (not the
        candidate's editable install); UserError if not."""
        probe = ("import json, sys, harness, harness.cli\n"
                 "mods = {n: getattr(m, '__file__', None) or list(getattr(m, '__path__', []) or [])"
                 " for n, m in list(sys.modules.items()) if n == 'harness' or n.startswith('harness.')}\n"
                 "print(json.dumps(mods))\n")
        res = subprocess.run([self.python, "-c", probe], cwd=side.code_root, env=self.env_for(side),
                             capture_output=True, text=True)
        if res.returncode != 0:
            raise GateRunError(f"{side.name}: cannot import its harness package from {side.code_root}: "
                               f"{res.stderr.strip().splitlines()[-1] if res.stderr.strip() else res.returncode}")
        root = side.code_root.resolve()
        mods = json.loads(res.stdout.strip().splitlines()[-1])
        for name, where in mods.items():
            paths = where if isinstance(where, list) else [where]
            for p in paths:
                if p and not Path(p).resolve().is_relative_to(root):
                    raise GateRunError(f"{side.name}: module {name} loads from {p}, not from its checkout "
                                       f"{side.code_root}; the comparison would not be of its code")

    def __call__(self, side: Side, matrix: Path, out: Path, round_no: int) -> Path:
        out.parent.mkdir(parents=True, exist_ok=True)
        logfile = out.with_name(out.name + ".log")
        cmd = self.command(matrix, out)
        with open(logfile, "w", encoding="utf-8") as f:
            f.write(f"# round {round_no} {side.name} ({side.commit or 'working tree'}): "
                    f"cwd={side.code_root}\n# {' '.join(cmd)}\n")
            f.flush()
            proc = subprocess.Popen(cmd, cwd=side.code_root, env=self.env_for(side, out),
                                    stdout=f, stderr=subprocess.STDOUT)
            try:
                rc = proc.wait()
            except KeyboardInterrupt as e:
                # Ctrl-C reached the child too (same process group); a SIGTERM did not: pass it
                # on. Either way the child stops cleanly (its run ends "interrupted").
                if isinstance(e, Terminated):
                    proc.terminate()
                try:
                    proc.wait(timeout=120)
                except (subprocess.TimeoutExpired, KeyboardInterrupt):
                    proc.kill()
                    proc.wait()
                raise
        if rc == 130:
            raise KeyboardInterrupt
        run_dir = find_run_dir(out)
        if run_dir is None or not RunReader(run_dir).reps():
            # one line: the log's last words (the run's own error line), and where the rest is
            said = [ln.strip() for ln in logfile.read_text(encoding="utf-8", errors="replace").splitlines()
                    if ln.strip() and not ln.startswith("# ")]
            tail = said[-1][:200] if said else "(no output)"
            if rc == TargetError.exit_code:
                raise TargetError(f"round {round_no}: the {side.name}'s `ssbench run` could not use the "
                                  f"target ({tail}); full log {logfile}")
            raise GateRunError(f"round {round_no}: the {side.name}'s `ssbench run` (exit {rc}) wrote no "
                               f"complete repetition under {out} ({tail}); full log {logfile}")
        if rc != 0:
            log.warning("round %d: the %s's ssbench run exited %d (results kept; see %s)",
                        round_no, side.name, rc, logfile)
        return run_dir


# --------------------------------------------------------------------------- combining

def single_rep_matrix(matrix_file: Path, dest: Path) -> tuple[dict[str, Any], int]:
    """Write a copy of the matrix with ``run.repetitions: 1``; return (document, repetitions).
    The user's own document, edited: the baseline's revision loads it, and may know other run
    settings or other defaults than Matrix.document() would write."""
    try:
        doc = yaml.safe_load(matrix_file.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise UserError(f"cannot read the matrix: {e}", file=str(matrix_file)) from None
    if not isinstance(doc, dict):
        raise UserError("a matrix is a mapping", file=str(matrix_file))
    run = doc.get("run") if isinstance(doc.get("run"), dict) else {}
    auto = run.get("repetitions") == "auto"   # the rounds of an auto matrix: its maximum
    reps = int(run.get("max_repetitions", 10) if auto else run.get("repetitions", 1))
    doc["run"] = {**{k: v for k, v in run.items() if k not in ("min_repetitions", "max_repetitions", "budget_minutes")},
                  "repetitions": 1}
    write_atomic(dest, "# written by ssbench gate --interleave: one repetition per invocation\n"
                 + yaml.safe_dump(doc, sort_keys=False))
    return doc, reps


def add_round(dest: Path, round_no: int, run_dir: Path, *, side: str, matrix_file: Path | None = None) -> Path:
    """Add one round's single-repetition run to its side's run directory, as the gate goes:
    each repetition becomes ``rep-<round>`` of its permutation (so an interrupted gate leaves
    a valid run of the rounds so far, and the sides' repetition numbers are their rounds), its
    summary gains ``"interleave": {"round": i, "side": ..., "source": ...}``; run.json is the
    first round's with a ``gate_interleave`` section listing the rounds."""
    out = (RunDir(dest) if dest.exists() else RunDir.create(dest.parent, dest.name, dest)).hold()
    try:
        _add_reps(out, dest, round_no, run_dir, side, matrix_file)
    finally:
        out.release()
    return dest


def _add_reps(out: RunDir, dest: Path, round_no: int, run_dir: Path, side: str, matrix_file: Path | None) -> None:
    src = RunReader(run_dir)
    run = src.record().to_json()
    for ref in src.reps():
        target = out.rep_dir(ref.perm_id, round_no)
        shutil.copytree(ref.dir, target, copy_function=_link_or_copy)
        summary = ref.summary().replace(repetition=round_no)
        summary.extra["interleave"] = {"round": round_no, "side": side, "source": str(ref.dir)}
        write_json(target / "summary.json", summary)
        out.write_permutation_summary(ref.perm_id, summary.permutation)
    combined = read_json(out.run_json) if out.run_json.exists() else dict(run, gate_interleave={"side": side,
                                                                                                "rounds": []})
    combined["run_id"] = f"{dest.parent.name}-{side}"
    combined["gate_interleave"]["rounds"].append({"round": round_no, "run_dir": str(run_dir),
                                                  "run_id": run.get("run_id"), "status": run.get("status")})
    statuses = [r["status"] for r in combined["gate_interleave"]["rounds"]]
    combined["status"] = next((s for s in statuses if s not in (None, "complete")), "complete")
    write_json(out.run_json, combined)
    if matrix_file is not None and not (dest / "matrix.yaml").exists():
        write_atomic(dest / "matrix.yaml", Path(matrix_file).read_bytes())


def _link_or_copy(src: str, dst: str) -> None:
    """Hard-link (no second copy of samples.jsonl and latency.json) or copy across devices.
    Files rewritten afterwards are replaced by rename, so the round's original is untouched."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


# --------------------------------------------------------------------------- the driver

@dataclass
class InterleaveResult:
    report: GateReport
    out_dir: Path
    baseline_dir: Path
    candidate_dir: Path
    gate_json: Path
    record: dict[str, Any] = field(default_factory=dict)


def _absolute_target(target: str) -> str:
    """``--target`` with its file (a topology file, or NAME:FILE) made absolute: each side runs
    in its own checkout."""
    name, sep, arg = target.partition(":")
    if os.path.isfile(target):
        return os.path.abspath(target)
    return f"{name}:{os.path.abspath(arg)}" if sep and os.path.isfile(arg) else target


def run_interleaved(baseline_ref: str, matrix: str | os.PathLike[str], *,
                    settings: GateSettings = GateSettings(), rounds: int | None = None,
                    seed: int | None = None, out_dir: str | os.PathLike[str] | None = None,
                    repo: str | os.PathLike[str] | None = None, runner: SideRunner | None = None,
                    target: str = "embedded", keep_worktree: bool = False,
                    echo: Callable[[str], None] = print) -> InterleaveResult:
    """Run the baseline revision and the candidate alternately and gate on the result."""
    from ..matrix import load_matrix

    settings.validate()
    # the sides run with their own checkout as the working directory: make paths absolute
    matrix_file = Path(matrix).absolute()
    target = _absolute_target(target)
    m = load_matrix(matrix_file)  # validates (UserError names file, line, field)
    code_root = Path(repo) if repo is not None else Path(__file__).resolve().parents[2]   # the candidate
    git_root = repo_root(code_root)
    baseline_commit = resolve_revision(git_root, baseline_ref)
    cand_commit, cand_dirty = candidate_state(git_root)
    n_rounds = m.run.most_repetitions if rounds is None else rounds
    if n_rounds < 1:
        raise UserError(f"--rounds must be at least 1, got {n_rounds}")
    if not settings.can_judge(n_rounds, n_rounds):
        echo(f"note: {n_rounds} round(s): too few for the significance test (at least {settings.min_reps} "
             "a side): the verdict will be inconclusive unless an integrity check fails")
    if seed is None:
        seed = secrets.randbelow(2 ** 32)
    if out_dir is None:
        from ..paths import RESULTS
        out_dir = RESULTS / f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-gate-{m.name}"
    out = Path(out_dir).absolute()
    if out.exists() and any(out.iterdir()):
        raise UserError("output directory exists and is not empty", file=str(out))
    out.mkdir(parents=True, exist_ok=True)
    lock = RunDir(out).hold()    # this gate writes it (and its sides' run directories) to the end
    try:
        return _interleave(out, baseline_ref, baseline_commit, cand_commit, cand_dirty, git_root, matrix_file, m,
                           n_rounds, seed, settings, runner, target, keep_worktree, echo)
    finally:
        lock.release()


def _interleave(out, baseline_ref, baseline_commit, cand_commit, cand_dirty, git_root, matrix_file, m, n_rounds,
                seed, settings, runner, target, keep_worktree, echo) -> "InterleaveResult":
    matrix_copy = out / "matrix-1rep.yaml"
    single_rep_matrix(matrix_file, matrix_copy)
    orders = side_orders(random.Random(seed), n_rounds)   # reproducible from the seed
    record: dict[str, Any] = {
        "schema": INTERLEAVE_SCHEMA, "baseline_ref": baseline_ref, "baseline_commit": baseline_commit,
        "candidate_commit": cand_commit, "candidate_dirty": cand_dirty, "candidate_root": str(git_root),
        "matrix": str(matrix_file), "matrix_sha256": m.sha256, "rounds": n_rounds, "seed": seed,
        "orders": [list(o) for o in orders], "target": target, "started": utc_now_iso(), "runs": [],
        "status": "running"}
    write_json(out / "interleave.json", record)
    if runner is None:
        runner = SubprocessRunner(target=target)
    echo(f"gate: interleaving baseline {baseline_ref} ({baseline_commit[:12]}) and candidate "
         f"({(cand_commit or 'no commit')[:12]}{', working tree changes' if cand_dirty else ''}) "
         f"on {matrix_file}: {n_rounds} round(s), seed {seed}, out {out}")
    _run_rounds(Worktree(git_root, baseline_commit, keep=keep_worktree), runner, orders, record, out,
                matrix_copy, (baseline_commit, git_root, cand_commit, cand_dirty), echo)
    record["worktree_removed"] = not keep_worktree
    baseline_dir, candidate_dir = out / "baseline", out / "candidate"
    # same machine, same interpreter and packages by construction; the workload versions in
    # run.json differ exactly when the change under test is in workloads/: no provenance warnings
    report = compare_runs(load_run(baseline_dir), load_run(candidate_dir), settings, check_provenance=False,
                          paired=True)
    report.mode = "interleaved"
    record["status"] = "complete"
    record["ended"] = utc_now_iso()
    report.interleave = {k: v for k, v in record.items() if k != "schema"}
    gate_json = write_report(report)
    record["verdict"] = report.verdict
    record["gate_json"] = str(gate_json)
    write_json(out / "interleave.json", record)
    return InterleaveResult(report=report, out_dir=out, baseline_dir=baseline_dir,
                            candidate_dir=candidate_dir, gate_json=gate_json, record=record)


def _run_rounds(wt: "Worktree", runner, orders, record: dict[str, Any], out: Path, matrix_copy: Path,
                commits: tuple, echo: Callable[[str], None]) -> None:
    """Each round's two sides in the round's order; interleave.json updated after every run
    (and closed as interrupted or failed if a run raises)."""
    baseline_commit, git_root, cand_commit, cand_dirty = commits
    runs: dict[str, list[tuple[int, Path]]] = {s: [] for s in SIDES}
    try:
        with wt as wt_path:
            record["worktree"] = str(wt_path)
            sides = {"baseline": Side("baseline", wt_path, baseline_commit, False),
                     "candidate": Side("candidate", git_root, cand_commit, cand_dirty)}
            preflight = getattr(runner, "preflight", None)
            if preflight is not None:
                for s in SIDES:
                    preflight(sides[s])

            def one(i: int, name: str, what: str) -> None:
                side_out = out / "rounds" / f"round-{i:02d}-{name}"
                t0 = time.monotonic()
                echo(f"gate: round {what}: {name}")
                run_dir = Path(runner(sides[name], matrix_copy, side_out, i))
                runs[name].append((i, run_dir))
                add_round(out / name, i, run_dir, side=name, matrix_file=Path(record["matrix"]))
                record["runs"].append({"round": i, "side": name, "run_dir": str(run_dir),
                                       "seconds": round(time.monotonic() - t0, 3)})
                write_json(out / "interleave.json", record)

            for w in side_windows(orders):
                one(w.rep, w.members[0], f"{w.rep}/{len(orders)}")
            record["replacements"] = []
            i = len(orders)
            while len(record["replacements"]) < MAX_REPLACEMENTS and _short_rounds(runs, len(orders)):
                i += 1
                record["replacements"].append({"round": i})
                for w in side_windows([SIDES if i % 2 else SIDES[::-1]], first_round=i):
                    one(w.rep, w.members[0], f"{i} (a replacement: a round kept out of the comparison)")
    except BaseException as e:
        record["status"] = "interrupted" if isinstance(e, KeyboardInterrupt) else "failed"
        record["error"] = str(e)
        record["ended"] = utc_now_iso()
        write_json(out / "interleave.json", record)
        raise


def _short_rounds(runs: dict[str, list[tuple[int, Path]]], planned: int) -> bool:
    """Has some permutation fewer than ``planned`` rounds in which both sides count in the
    comparison (``counts_in_verdicts``: the rounds the paired comparison reads)?"""
    counted: dict[str, dict[str, set[int]]] = {name: {} for name in SIDES}
    perms: set[str] = set()
    for name in SIDES:
        for rnd, run_dir in runs[name]:
            reader = RunReader(run_dir)
            for perm in reader.permutation_ids():
                perms.add(perm)
                if any(counts_in_verdicts(s.status) for s in reader.readable_summaries(perm)):
                    counted[name].setdefault(perm, set()).add(rnd)
    return any(len(counted["baseline"].get(p, set()) & counted["candidate"].get(p, set())) < planned for p in perms)
