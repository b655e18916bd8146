"""``ssbench run MATRIX [--target embedded|TOPOLOGY.yaml] [--out DIR] [--resume]``."""

from __future__ import annotations

import os
import re
import shlex
import signal
import sys
import tempfile
import threading
from collections import namedtuple
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ..errors import DiskFull, TargetError, UserError, full_disk
from ..load.hosts import MASTER_HOST, MASTER_PORT, WORKER_WAIT_SECONDS, client_hosts, parse_bind
from .common import add_run_options, metrics_endpoint


def register(sub) -> None:
    p = sub.add_parser("run", help="run a test matrix against a target and write results/",
                       description="Run every permutation of a matrix: provision, Locust load (one "
                                   "worker process per initiator by default, --workers-per-initiator N for "
                                   "more, --remote-workers for workers on client hosts; one user per client "
                                   "thread), collectors, "
                                   "drain and verify, results written atomically under results/<run-id>/; at the "
                                   "end, what limits throughput in each permutation and what to try "
                                   "(docs/diagnosis.md). Ctrl-C stops cleanly and leaves the run resumable.")
    p.add_argument("matrix", help="matrix YAML file, e.g. matrices/bench.yaml")
    add_run_options(p)
    p.set_defaults(func=cmd_run)


def parse_host_port(value: str, flag: str) -> tuple[str, int]:
    """``HOST``, ``HOST:PORT`` or ``[V6]:PORT``; a one-line UserError naming ``flag`` otherwise."""
    try:
        return parse_bind(value)
    except ValueError as e:
        raise UserError(str(e), field=flag) from None


def scale_settings(args, matrix, config=None):
    """Apply --workers-per-initiator (else the topology's client_hosts.workers_per_initiator) to
    the matrix; return the RemoteWorkers (or None): from --remote-workers and its flags, or from
    the ``client_hosts:`` section of the target's file (``config``: the target's TargetConfig,
    read from --target when not given), the flags overriding the file. Checked before anything
    starts."""
    from ..load.auth import TOKEN_ENV, token_from_env, token_problem
    from ..load.swarm import RemoteWorkers
    from ..targets.factory import target_config

    from .. import environment

    mode = os.environ.get("SSBENCH_SEND_MODE") and environment.get("SSBENCH_SEND_MODE")
    if mode:   # the environment overrides run.send_mode (docs/matrices.md)
        matrix.set_send_mode(mode)
    hosts = client_hosts(config or target_config(getattr(args, "target", None) or "embedded"))
    wpi = getattr(args, "workers_per_initiator", None)
    if wpi is None and hosts is not None and hosts.workers_per_initiator is not None:
        wpi = hosts.workers_per_initiator
    if wpi is not None:
        matrix.set_workers_per_initiator(wpi)
    wait = getattr(args, "worker_wait", None)
    if wait is not None and not 1 <= wait <= 86_400:
        raise UserError(f"must be between 1 and 86400 seconds, got {wait:g}", field="--worker-wait")
    if not getattr(args, "remote_workers", False) and hosts is None:
        for flag, value in (("--master-bind", getattr(args, "master_bind", None)), ("--worker-wait", wait)):
            if value is not None:
                raise UserError("only with --remote-workers or a topology with client_hosts: (local workers "
                                "use a free loopback port)", field=flag)
        return None
    problem = token_problem(token_from_env())
    if problem:
        raise UserError(f"{problem}; set the same token on this host and on every client host, e.g. "
                        f"export {TOKEN_ENV}=$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')",
                        field=f"${TOKEN_ENV}")
    if getattr(args, "master_bind", None):
        host, port = parse_host_port(args.master_bind, "--master-bind")
    elif hosts is not None:
        host, port = hosts.bind_host, hosts.port
    else:
        host, port = MASTER_HOST, MASTER_PORT
    if wait is None:
        wait = hosts.worker_wait_seconds if hosts is not None else WORKER_WAIT_SECONDS
    return RemoteWorkers(bind_host=host, port=port, wait_seconds=wait)


def install_sigint(stop: threading.Event) -> None:
    """First Ctrl-C (or SIGTERM): stop cleanly after tidying up. Second: abort at once; further
    ones are ignored while the run's record is closed (it must end "interrupted", resumable)."""
    def handler(signum, frame):
        if stop.is_set():
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            raise KeyboardInterrupt
        stop.set()
        print("\nssbench: stopping (Ctrl-C again to abort)...", file=sys.stderr)

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)


def resume_command(matrix: Path | str, run_dir: Path) -> str:
    """The command that resumes a run, quoted for a POSIX shell (paths with spaces or quotes)."""
    return shlex.join(["ssbench", "run", str(matrix), "--resume", "--out", str(run_dir)])


#: a run begun by :func:`open_run` (``rd``: its RunDir, ``stop``: set by Ctrl-C, ``undo``: None
#: when resumed)
OpenRun = namedtuple("OpenRun", "matrix config remote target rd stop undo")


@contextmanager
def open_run(args, command: str, check=lambda matrix: None) -> Iterator[OpenRun]:
    """The set-up of ``ssbench run`` and ``saturate``. Everything the user gave is checked
    before anything is created or started: the matrix (and ``check(matrix)``, the command's
    own), the --out/--results directories, the target (a topology file is loaded, nothing
    connects) and the matrix against it, the scale-out flags. Then the target is made, Ctrl-C
    handled and, under the target's run lock (one run at a time per target: a second one would
    reset its databases), the run directory begun; at the end the target is closed and the
    directory released. A new run that fails before its first repetition began leaves nothing
    behind (``undo``)."""
    from ..matrix import load_matrix
    from ..paths import RESULTS
    from ..runner import start_run
    from ..targets.factory import make_target, target_config

    resume = getattr(args, "resume", False)
    config = target_config(args.target)
    matrix = load_matrix(args.matrix, embedded_profiles=config.alias_profiles())
    check(matrix)
    results_root = Path(args.results or RESULTS)
    check_dir_arg(args.out, "--out", resume=resume)
    check_dir_arg(results_root, "--results")
    config.check_matrix(matrix)  # its server profiles among the target's, without connecting
    remote = scale_settings(args, matrix, config)
    target = make_target(config)
    stop = threading.Event()
    install_sigint(stop)
    undo = None if resume else _Undo(args.out, results_root, matrix.name)
    with target.run_lock(f"ssbench {command} {args.matrix} (pid {os.getpid()})"):
        try:   # the run directory is held (locked) by this process from here to the end
            rd = start_run(matrix, target, results_root, args.out, resume)
        except BaseException:
            target.close()
            if undo:
                undo.remove_unstarted(None)
            raise
        try:
            yield OpenRun(matrix, config, remote, target, rd, stop, undo)
        finally:
            try:
                target.close()
            finally:
                rd.release()


def execute(args, metrics=None) -> tuple[int, "object"]:
    """Run the matrix (:func:`open_run`); returns (exit code, RunDir). ``metrics``: the live
    endpoint's state (harness.metrics.LiveState), or None."""
    with open_run(args, "run") as run:
        code, runner = _execute_run(args, run, metrics)
        if code is None:
            run.rd.finish("complete", runner.lost_total)
    rd = run.rd
    if code is not None:
        return code, rd
    lost = runner.lost_total
    out = sys.stderr if getattr(args, "json", False) else None
    print_run_table(rd.path, out)
    if getattr(args, "diagnose", True):   # what limits throughput (ssbench bench prints it at its end)
        from ..analysis.diagnosis_view import print_runs

        print_runs([rd.path], stream=out)
    print(f"ssbench: analyze with: ssbench analyze {shlex.quote(str(rd.path))}", file=sys.stderr)
    if lost or runner.duplicated_total:
        print(f"ssbench: !!! {lost} MESSAGES LOST, {runner.duplicated_total} DUPLICATED or never sent in this run: "
              "see messages_lost, messages_duplicated and messages_phantom in the summaries !!!", file=sys.stderr)
        return 4, rd
    return 0, rd


def _execute_run(args, run: OpenRun, metrics):
    """The run proper, in its held directory: (exit code or None when it completed, Runner)."""
    from ..runner import Progress, Runner

    matrix, target, rd = run.matrix, run.target, run.rd
    print(f"ssbench: run {rd.run_id}: {len(matrix)} permutations x {matrix.run.describe_repetitions()} "
          f"on {target.label}\nssbench: results in {rd.path}", file=sys.stderr)
    _announce_remote(run.remote, matrix, run.config)
    progress = Progress(total=len(matrix) * matrix.run.planned_repetitions)
    if metrics is not None:
        metrics.begin_run(rd.run_id, matrix.name, target.label, progress)
    runner = Runner(matrix, target, rd, progress=progress, stop_event=run.stop, remote=run.remote, metrics=metrics)
    return _run(runner, rd, progress, resume_command(args.matrix, rd.path), run.undo), runner


def _announce_remote(remote, matrix, config) -> None:
    if remote is None:
        return
    print(f"ssbench: waiting for {matrix.run.workers_per_initiator} 'ssbench worker' per initiator at "
          f"{remote.bind_host}:{remote.port} (up to {remote.wait_seconds:g}s per repetition)", file=sys.stderr)
    hosts = client_hosts(config)
    if hosts is not None and hosts.hosts:
        print("ssbench: client hosts (topology): " + "; ".join(
            f"{h} drives {', '.join(i)}" for h, i in hosts.hosts.items()), file=sys.stderr)


def _run(runner, rd, progress, resume: str, undo) -> int | None:
    """The runner's loop; the exit code of a run that did not complete (None: it did). Every way
    out leaves run.json closed: interrupted (resumable), failed, or (the caller) complete."""
    from ..redact import error_line
    from ..runner import Interrupted

    try:
        runner.run()
        progress.close()
        return None
    except (Interrupted, KeyboardInterrupt):   # Ctrl-C once (clean stop), or twice (abort)
        signal.signal(signal.SIGINT, signal.SIG_IGN)   # nothing may cut the record short now
        progress.close()
        _close_record(rd, "interrupted", runner.lost_total, "interrupted (Ctrl-C or SIGTERM)")
        print(f"ssbench: interrupted; resume with: {resume}", file=sys.stderr)
        return 130
    except Exception as e:
        progress.close()
        full = e if isinstance(e, DiskFull) else None
        if isinstance(e, OSError) and full_disk(e):
            full = DiskFull(f"no space left on the device of {e.filename or rd.path}: free some space")
        if full is not None:   # resumable: run.json says interrupted (or, when it cannot, still running)
            _close_record(rd, "interrupted", runner.lost_total, error_line(full))
            print(f"ssbench: error: {full}; the repetition in progress was not kept, resume with: {resume}",
                  file=sys.stderr)
            return full.exit_code
        if undo and undo.remove_unstarted(rd.path):
            raise
        _close_record(rd, "failed", runner.lost_total, error_line(e))
        if isinstance(e, (TargetError, UserError)):   # one line, the way to go on, no traceback
            what = "target error" if isinstance(e, TargetError) else "error"
            print(f"ssbench: {what}: {e}; resume with: {resume}", file=sys.stderr)
            return e.exit_code
        print(f"ssbench: the run failed ({error_line(e)}); once mended, resume with: {resume}", file=sys.stderr)
        raise


def _close_record(rd, status: str, lost: int, error: str) -> None:
    """``rd.finish``, but a full disk leaves run.json as it was ("running", which --resume
    treats as unfinished all the same): the error that stopped the run is still the one said."""
    try:
        rd.finish(status, lost, error=error)
    except OSError as e:
        if not full_disk(e):
            raise


def check_dir_arg(path: Path | None, flag: str, resume: bool | None = None) -> None:
    """A directory argument that is, or can be created as, a directory (checked before
    anything is created). For --out (``resume`` given): a new run needs it new or empty, a
    resumed one needs its run.json."""
    from ..results.lock import in_use, run_dir_holder

    if path is None:
        return
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise UserError("exists and is not a directory", file=str(p), field=flag)
    anc = p
    while not anc.exists() and anc != anc.parent:
        anc = anc.parent
    if not anc.is_dir():
        raise UserError(f"cannot create it: {anc} is not a directory", file=str(p), field=flag)
    try:  # can a directory be made there? (/proc, a read-only mount, no permission)
        os.rmdir(tempfile.mkdtemp(prefix=".ssbench-probe-", dir=anc))
    except OSError as e:
        raise UserError(f"cannot create it in {anc}: {e.strerror or e}", file=str(p), field=flag) from None
    if resume is True and not (p / "run.json").is_file():
        raise UserError("no run.json to resume", file=str(p), field=flag)
    holder = run_dir_holder(p) if resume is not None and p.is_dir() else None
    if holder:
        raise in_use(p, holder, flag)
    if resume is False and p.is_dir() and any(p.iterdir()):
        raise UserError("exists and is not empty (use --resume to continue that run)",
                        file=str(p), field=flag)


class _Undo:
    """What a new run creates, so that a run failing before its first repetition began can
    leave nothing behind (directories that existed before are kept, emptied of the run's files)."""

    RUN_FILES = ("matrix.yaml", "run.json")

    def __init__(self, out: Path | None, results_root: Path, matrix_name: str):
        self.out = Path(out) if out is not None else None
        self.root = results_root
        self.created: list[Path] = []  # directories this run may create, deepest first
        d = self.out or results_root
        while not d.exists() and d != d.parent:
            self.created.append(d)
            d = d.parent
        try:
            self.before = set(results_root.iterdir()) if results_root.is_dir() else set()
        except OSError:
            self.before = set()
        self.name = matrix_name
        # --out may name an existing directory only if it is empty; never touch one that is not
        try:
            self.out_ok = self.out is None or not self.out.exists() or not any(self.out.iterdir())
        except OSError:
            self.out_ok = False

    def remove_unstarted(self, path: Path | None) -> bool:
        """Remove the new run directory if no repetition began in it; True if removed."""
        if not self.out_ok:
            return False
        if path is None:
            path = self.out
            if path is None and self.root.is_dir():
                new = [p for p in self.root.iterdir() if p not in self.before and p.is_dir()
                       and re.fullmatch(rf"\d{{8}}-\d{{6}}-{re.escape(self.name)}(-\d+)?", p.name)]
                path = new[0] if len(new) == 1 else None
        if path is None or not path.is_dir():
            return False
        entries = list(path.iterdir())
        if any(e.is_dir() or not (e.name in self.RUN_FILES or e.name.endswith(".tmp")) for e in entries):
            return False  # a repetition began (or someone else's files): keep it
        for e in entries:
            e.unlink(missing_ok=True)
        for d in [path] + [c for c in self.created if c != path]:
            if d == self.out and d not in self.created:
                break  # --out named an existing (empty) directory: keep it
            try:
                d.rmdir()
            except OSError:
                break
        return True


def cmd_run(args) -> int:
    with metrics_endpoint(args, "run") as live:
        code, _ = execute(args, live)
    return code


def natural_key(text: str) -> tuple:
    """'t8' before 't32': digit runs compare as numbers."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part)
                 for part in re.split(r"(\d+)", text) if part)


def row_order(r: dict) -> tuple:
    """The matrix's order (the permutation's index), then the repetition; permutation ids in
    natural order when a summary has no index."""
    index = r["perm_index"]
    return (index is None, index if index is not None else 0, natural_key(r["perm_id"]), r["rep"])


def print_run_table(run_path: Path, stream=None) -> None:
    """One line per repetition, in the matrix's order (permutation index, then repetition). Its
    top wait is the users' (the sampled senders' largest, session_waits) where measured, else
    the server's over the window (top_waits: an alternated window's strategies share it)."""
    from ..results import RunReader

    stream = stream or sys.stdout
    rows = sorted((s.row() for s in RunReader(run_path).summaries()), key=row_order)
    if not rows:
        return
    nan = float("nan")
    print(f"\n{rows[0]['target_label']}: numbers are this target's, measured on this machine", file=stream)
    w = max(36, *(len(d["perm_id"]) for d in rows))
    print(f"{'permutation':<{w}} {'rep':>3} {'send/s':>9} {'recv/s':>9} {'SEND p99 ms':>11} "
          f"{'e2e p99 ms':>10} {'lost':>5}  {'status':<12} top wait", file=stream)
    for d in rows:
        senders = (d["session_waits"] or {}).get("sender") or {}
        tw = (max(senders, key=senders.get) if senders else
              d["top_waits"][0]["wait_type"] if d["top_waits"] else "-")
        sp99, ep99 = d["send_p99_ms"], d["e2e_p99_ms"]
        print(f"{d['perm_id']:<{w}} {d['rep']:>3} {d['send_rate']:>9.0f} {d['receive_rate']:>9.0f} "
              f"{sp99 if sp99 is not None else nan:>11.2f} {ep99 if ep99 is not None else nan:>10.2f} "
              f"{d['messages_lost']:>5}  {d['status']:<12} {tw}", file=stream)
