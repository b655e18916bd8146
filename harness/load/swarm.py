"""The controller's side of a swarm: the Locust master, local workers, and the protocol's state.

One :class:`Swarm` runs one Locust master on this host and, unless the workers are remote
(:class:`RemoteWorkers`: ``ssbench worker`` on client hosts), one local Locust worker per slot.
It answers the master's messages (:mod:`harness.load.protocol`) on a loopback link
(:mod:`harness.load.control`): ``/swarm`` with the plan, ``/status`` with a Command (its live
figures go to ``on_live``), ``/recording`` by writing the slot's recording atomically (this
process is the only writer of result files), ``/failure`` and ``/notice``.

It serves ``ssbench run``, ``saturate`` and the backlog fill (one master for all of a run's
swarms: :class:`harness.load.series.SwarmSeries`) and ``ssbench web`` (a swarm per session).
Every worker command line is built by :func:`worker_cmd`. A master that exits before its swarm
ended, or a local worker that exits while its users run, fails the swarm at once, naming it
(exit 3, resumable).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from ..ports import free_port
from .auth import TOKEN_ENV, new_token
from .control import CONTROL_ENV, ControlServer
from .hosts import MASTER_HOST, MASTER_PORT, WORKER_WAIT_SECONDS
from .protocol import (LOCUST_CSV, Command, Failure, Notice, Recording, Status, SwarmPlan,
                       SwarmRequest, recording_file)

log = logging.getLogger(__name__)

LOCUSTFILE = Path(__file__).with_name("locustfile.py")
#: how a Locust process is started: Locust's own main, its start cheaper (harness.load.launch)
LOCUST_CMD = [sys.executable, "-m", "harness.load.launch"]
REBINDS = 2                   # a master that lost its own port to another listener: new ports tried
INTERRUPT_GRACE_S = 20.0      # Ctrl-C: how long the swarm may take to stop as at its end


#: the threads closing the masters a series ended (Swarm.wait_closed)
_CLOSING: list[threading.Thread] = []
_CLOSING_LOCK = threading.Lock()


class SwarmFailed(RuntimeError):
    """The swarm cannot be trusted (workers missing or lost, the master died): one sentence."""


def die_with_parent() -> None:
    """``preexec_fn``: the child gets SIGKILL when the process that started it dies (Linux
    prctl PR_SET_PDEATHSIG), so a killed controller leaves no swarm SENDing behind it.
    A no-op where prctl does not exist."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        return
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(1)


@dataclass
class RemoteWorkers:
    """Workers on client hosts (``ssbench worker``): the master listens on ``bind_host:port``,
    waits up to ``wait_seconds`` for them; the token comes from ``$SSBENCH_WORKER_TOKEN``."""

    bind_host: str = MASTER_HOST
    port: int = MASTER_PORT
    wait_seconds: float = WORKER_WAIT_SECONDS


def worker_cmd(master_host: str, master_port: int, initiator: int | None = None, worker: int | None = None,
               loglevel: str = "WARNING") -> list[str]:
    """A Locust worker's command line: the one place it is built (local workers, ``ssbench
    worker``). The token travels in ``$SSBENCH_WORKER_TOKEN``, never on a command line."""
    cmd = [*LOCUST_CMD, "-f", str(LOCUSTFILE), "--worker", "--master-host", master_host,
           "--master-port", str(master_port), "--loglevel", loglevel]
    if initiator:
        cmd += ["--ssbench-initiator", str(int(initiator))]
    if worker:
        cmd += ["--ssbench-worker", str(int(worker))]
    return cmd


def child_env(token: str, extra: dict[str, str] | None = None, drop: tuple[str, ...] = ()) -> dict[str, str]:
    """The environment of a Locust process: this one's, the run token, unbuffered output, minus
    ``drop`` (secrets a Locust process has no business with)."""
    env = {k: v for k, v in os.environ.items() if k not in drop and k != CONTROL_ENV}
    env.update(PYTHONUNBUFFERED="1", **{TOKEN_ENV: token}, **(extra or {}))
    return env


@dataclass
class SwarmResult:
    """What the controller knows when a swarm ended."""

    spawn_complete: float | None                 # epoch seconds: the last user started
    worker_files: list[Path] = field(default_factory=list)   # this swarm's recordings
    interrupted: bool = False
    stats_csv: Path | None = None
    stop_requested: float | None = None
    missing: list[str] = field(default_factory=list)        # placed slots whose recording never came
    workers: dict = field(default_factory=dict)             # slot -> host, pid


@dataclass
class _Current:
    """One swarm's state, as the master's messages tell it (guarded by Swarm._lock)."""

    plan: SwarmPlan
    out_dir: Path
    phase: str = "placing"
    facts: dict = field(default_factory=dict)
    files: dict[str, Path] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    write_error: OSError | None = None
    ended: threading.Event = field(default_factory=threading.Event)


class Swarm:
    """A Locust master (and local workers) driven through the swarm protocol. ``plan_for``
    answers a SwarmRequest with ``(plan, directory for its recordings)``; ``on_ended`` is called
    (on a thread of its own) with each swarm's result (the web UI's sessions)."""

    def __init__(self, logs_dir: Path, plan_for: Callable[[SwarmRequest], tuple[SwarmPlan, Path]], *,
                 users: int, spawn_rate: float, remote: RemoteWorkers | None = None,
                 local_claims: list[tuple[int | None, int | None]] = (), token: str | None = None,
                 master_extra: list[str] = (), master_env: dict[str, str] | None = None,
                 headless: bool = True, on_ended: Callable[[SwarmResult], None] | None = None,
                 on_notice: Callable[[str], None] | None = None, routes: dict | None = None,
                 bind: tuple[str, int] | None = None, master_files: list[str] = (),
                 expected_workers: int = 0, worker_wait: float = 60.0,
                 on_live: Callable[[dict], None] | None = None):
        self.logs_dir = Path(logs_dir)
        self.plan_for = plan_for
        self.users, self.spawn_rate = users, spawn_rate
        self.remote = remote
        self.local_claims = list(local_claims)
        self.token = token or new_token()
        self.master_extra, self.master_env = list(master_extra), dict(master_env or {})
        self.headless = headless
        self.on_ended, self.on_notice, self.on_live = on_ended, on_notice, on_live
        self.extra_routes = dict(routes or {})
        self.bind = bind or ((remote.bind_host, remote.port) if remote else ("127.0.0.1", free_port()))
        self._own_port, self._rebinds = bind is None and remote is None, 0   # a port it chose itself
        self.master_files = [str(LOCUSTFILE), *master_files]
        self.expected_workers = expected_workers or len(self.local_claims)
        self.worker_wait = remote.wait_seconds if remote else worker_wait
        self.procs: dict[str, subprocess.Popen] = {}
        self.current: _Current | None = None
        self.control: ControlServer | None = None
        self._lock = threading.Lock()
        self._stop = False        # the controller asked the swarm to stop
        self._quit = False
        self._logs: list = []
        self._start = Command()   # the series' last start asked for (Command.start: its number)

    # ------------------------------------------------------------------ processes
    @property
    def port(self) -> int:
        return self.bind[1]

    def start(self) -> "Swarm":
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        self.control = ControlServer({"POST /swarm": self._on_swarm, "POST /status": self._on_status,
                                      "POST /recording": self._on_recording, "POST /failure": self._on_failure,
                                      "POST /notice": self._on_notice, **self.extra_routes}).start()
        host, port = self.bind
        cmd = [*LOCUST_CMD, "-f", ",".join(self.master_files), "--master",
               "--master-bind-host", host, "--master-bind-port", str(port),
               "--users", str(self.users), "--spawn-rate", str(self.spawn_rate), "--loglevel", "WARNING"]
        if self.headless:
            # Locust's own wait; the master's placement (harness.load.master) names the missing first
            cmd += ["--headless", "--expect-workers", str(max(1, self.expected_workers)),
                    "--expect-workers-max-wait", str(int(self.worker_wait + 30)), "--exit-code-on-error", "0",
                    "--only-summary"]
        cmd += self.master_extra
        self._spawn(cmd)
        return self

    def _spawn(self, cmd: list[str]) -> None:
        master_log = self.logs_dir / "locust-master.log"     # where this master's lines begin
        self._master_cmd, self._master_log_at = cmd, master_log.stat().st_size if master_log.exists() else 0
        port = self.bind[1]
        env = child_env(self.token, {CONTROL_ENV: self.control.url, **self.master_env})
        self.procs["master"] = self._popen(cmd, env, "locust-master.log")
        for i, w in self.local_claims:
            name = "worker" + (f".i{i}" if i else "") + (f".w{w}" if w else "")
            self.procs[name] = self._popen(worker_cmd("127.0.0.1", port, i, w), child_env(self.token),
                                           f"locust-{name.replace('.', '-')}.log")

    def _rebound(self) -> bool:
        """Whether the master died because another listener took the port this swarm chose
        between the choice and the bind (harness.ports: rare, not impossible): then the set
        starts again on a new port, before any swarm ran on it, at most REBINDS times."""
        if not self._own_port or self._rebinds >= REBINDS or self.current is not None:
            return False
        with (self.logs_dir / "locust-master.log").open("rb") as f:
            f.seek(self._master_log_at)
            if b"Address already in use" not in f.read():
                return False
        self._rebinds += 1
        cpus = {}       # the CPUs a worker was pinned to (run.pin_cpus), for its successor
        for name, p in self.procs.items():
            with contextlib.suppress(OSError):
                cpus[name] = os.sched_getaffinity(p.pid)
        self.kill()
        old, self.bind = self.bind[1], (self.bind[0], free_port())
        cmd = self._master_cmd
        cmd[cmd.index("--master-bind-port") + 1] = str(self.bind[1])
        with (self.logs_dir / "locust-master.log").open("a") as f:
            f.write(f"ssbench: port {old} was taken before the master bound it; starting again on {self.bind[1]}\n")
        self._spawn(cmd)
        for name, p in self.procs.items():
            with contextlib.suppress(OSError, KeyError):
                os.sched_setaffinity(p.pid, cpus[name])
        return True

    def _popen(self, cmd, env, log_name) -> subprocess.Popen:
        f = open(self.logs_dir / log_name, "ab")
        self._logs.append(f)
        return subprocess.Popen(cmd, env=env, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, preexec_fn=die_with_parent)

    def worker_pids(self) -> dict[str, int]:
        """The local workers' pids (once the swarm is placed, of its placed slots only: a series'
        idle workers are not this swarm's clients)."""
        local = {p.pid: n for n, p in self.procs.items() if n.startswith("worker") and p.poll() is None}
        cur = self.current
        placed = (cur.facts.get("workers") or {}) if cur is not None else {}
        if not placed:
            return {n: pid for pid, n in local.items()}
        return {f"worker.{slot}": w["pid"] for slot, w in placed.items() if w.get("pid") in local}

    def alive(self) -> bool:
        return any(p.poll() is None for p in self.procs.values())

    def master_alive(self) -> bool:
        m = self.procs.get("master")
        return m is not None and m.poll() is None

    def stop(self) -> None:
        """Ask the master to stop the swarm now (its recordings still come back)."""
        self._stop = True

    def close(self, grace: float = 15, terminate: bool = False) -> None:
        """Quit the master (it tells its workers to quit), then make sure every process is gone:
        SIGTERM (Locust quits too), SIGKILL. ``terminate``: SIGTERM at once, for a master whose
        swarms have all ended (its shutdown then ends at once: MasterSide._on_quitting)."""
        self._quit = True
        m = self.procs.get("master")
        if terminate and m is not None and m.poll() is None:
            m.send_signal(signal.SIGTERM)
        for sig in (None, signal.SIGTERM):
            deadline = time.monotonic() + grace / 2
            while self.alive() and time.monotonic() < deadline:
                time.sleep(0.02)
            if sig is not None and m is not None and m.poll() is None:
                m.send_signal(sig)
        self.kill()
        if self.control is not None:
            self.control.stop()
        for f in self._logs:
            f.close()

    def next_swarm(self, plan_for: Callable[[SwarmRequest], tuple[SwarmPlan, Path]], users: int, spawn_rate: float,
                   on_live: Callable[[dict], None] | None = None) -> None:
        """A series' next swarm on this master and its workers (:mod:`harness.load.series`): the
        master asks for the plan at its next heartbeat (Command.start), once its last swarm ended."""
        with self._lock:
            self.current = None
            self.plan_for, self.on_live = plan_for, on_live
            self._stop = False
            self._start = Command(start=self._start.start + 1, users=int(users), spawn_rate=float(spawn_rate))

    def log_offsets(self) -> dict[str, int]:
        """The size of each process log now (a swarm's part of them begins there)."""
        return {f.name: Path(f.name).stat().st_size for f in self._logs if Path(f.name).exists()}

    def copy_logs(self, offsets: dict[str, int], into: Path) -> None:
        """What each process log got since ``offsets`` (:meth:`log_offsets`), into ``into`` under
        the log's own name: a series' swarm gets its part of the logs of the run's processes."""
        for f in self._logs:
            path = Path(f.name)
            try:
                if not f.closed:
                    f.flush()
                with open(path, "rb") as src, open(Path(into) / path.name, "ab") as dst:
                    src.seek(offsets.get(f.name, 0))
                    shutil.copyfileobj(src, dst)
            except OSError as e:   # a log is an aid, never a reason to fail the repetition
                log.warning("copying %s into %s: %s", path.name, into, e)

    def close_in_background(self) -> None:
        """:meth:`close` (``terminate``) on a thread of its own: the next master's start or the
        run's end waits for it (:meth:`wait_closed`)."""
        closing = threading.Thread(target=self.close, kwargs={"terminate": True}, name="ssbench-swarm-close")
        with _CLOSING_LOCK:
            _CLOSING.append(closing)
        closing.start()

    def kill(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait(timeout=10)

    def log_tail(self, lines: int = 20) -> str:
        out = []
        for name in sorted(self.logs_dir.glob("locust-*.log")):
            text = name.read_text(errors="replace").splitlines()[-lines:]
            if text:
                out.append(f"--- {name.name}\n" + "\n".join(text))
        return "\n".join(out)

    # ------------------------------------------------------------------ the master's messages
    def _on_swarm(self, body: dict) -> dict:
        req = SwarmRequest.from_wire(body)
        self._stop = False
        try:
            plan, out_dir = self.plan_for(req)
        except Exception as e:   # the web UI shows it as the start request's error
            log.warning("the swarm could not be prepared: %s", e)
            return SwarmPlan(error=f"{type(e).__name__}: {e}").to_wire()
        with self._lock:
            self.current = _Current(plan=plan, out_dir=Path(out_dir))
        return plan.to_wire()

    def _on_status(self, body: dict) -> dict:
        st = Status.from_wire(body)
        ended = None
        with self._lock:
            cur = self.current
            # after "ended" the master's heartbeat may still post an earlier phase: not kept
            if cur is not None and st.swarm_id == cur.plan.swarm_id and not cur.ended.is_set():
                if st.live is not None and self.on_live is not None:
                    try:
                        self.on_live(st.live)
                    except Exception:  # live figures never fail a swarm
                        log.exception("live figures")
                cur.phase = st.phase
                cur.facts.update(st.facts)
                if st.phase == "ended":
                    self._write_locust_csv(cur)
                    cur.ended.set()
                    ended = cur
        if ended is not None and self.on_ended is not None:
            threading.Thread(target=self._ended, args=(ended,), name="ssbench-swarm-ended", daemon=True).start()
        return replace(self._start, stop=self._stop, quit=self._quit).to_wire()

    def _on_recording(self, body: dict) -> dict:
        from harness.results.store import write_atomic

        rec, cur = Recording.from_wire(body), self.current
        if cur is None or rec.swarm_id != cur.plan.swarm_id:
            return {"ok": False, "error": "not this swarm's recording"}
        data = dict(rec.data, initiator=rec.initiator, worker=rec.worker, swarm_id=rec.swarm_id)
        try:
            path = write_atomic(cur.out_dir / recording_file(rec.initiator, rec.worker), json.dumps(data))
        except OSError as e:
            with self._lock:
                cur.write_error = cur.write_error or e
            return {"ok": False, "error": f"writing the recording: {e}"}
        with self._lock:
            cur.files[rec.slot] = path
        return {"ok": True}

    def _on_failure(self, body: dict) -> dict:
        f = Failure.from_wire(body)
        with self._lock:
            if self.current is not None:
                self.current.failures.append(f.text)
        return {"ok": True}

    def _on_notice(self, body: dict) -> dict:
        text = Notice.from_wire(body).text
        (self.on_notice or (lambda t: log.warning("%s", t)))(text)
        return {"ok": True}

    def _write_locust_csv(self, cur: _Current) -> None:
        """Locust's statistics: out of the swarm's facts, into their files."""
        from harness.results.store import write_atomic

        for key, name in LOCUST_CSV.items():
            text = cur.facts.pop(key, None)
            if text:
                try:
                    write_atomic(cur.out_dir / name, text)
                except OSError as e:
                    cur.write_error = cur.write_error or e

    def _ended(self, cur: _Current) -> None:
        try:
            self.on_ended(self.result(cur))
        except Exception:  # pragma: no cover - reported by the callback's own logging
            log.exception("saving the swarm")

    def result(self, cur: _Current | None = None, interrupted: bool = False) -> SwarmResult:
        cur = cur or self.current
        f = cur.facts
        csv = cur.out_dir / LOCUST_CSV["stats_csv"]
        return SwarmResult(spawn_complete=f.get("spawn_complete"), worker_files=sorted(cur.files.values()),
                           interrupted=interrupted, stats_csv=csv if csv.exists() else None,
                           stop_requested=f.get("stop_requested"), missing=list(f.get("missing") or []),
                           workers=dict(f.get("workers") or {}))

    # ------------------------------------------------------------------ a headless swarm
    @staticmethod
    def wait_closed() -> None:
        """Wait until every master :meth:`close_in_background` closes has its processes gone and
        their logs whole (the next master's start, the end of a run)."""
        while True:
            with _CLOSING_LOCK:
                if not _CLOSING:
                    return
                t = _CLOSING.pop(0)
            t.join()

    def wait(self, plan: SwarmPlan, stop_event: threading.Event, until: Callable[[], bool] | None) -> SwarmResult:
        """Until the swarm of ``plan`` ended (``until()`` true stops it early: the backlog fill);
        :class:`SwarmFailed` when it cannot be trusted, ``interrupted`` when ``stop_event`` was set."""
        spawn_budget = sum(plan.users.values()) / max(self.spawn_rate, 0.1) + 60
        deadline = time.monotonic() + self.worker_wait + spawn_budget + plan.warmup_seconds \
            + plan.planned_seconds + 90
        interrupted_at = None
        no_plan_by = time.monotonic() + self.worker_wait + 30
        while True:
            cur = self.current
            if cur is not None and cur.ended.is_set():
                break
            problem = self._problem(cur)
            if problem is not None:
                self.kill()
                raise SwarmFailed(problem)
            if cur is not None and cur.write_error is not None:
                self.kill()
                raise cur.write_error
            if stop_event.is_set() and interrupted_at is None:
                interrupted_at = time.monotonic()   # the swarm stops as at its end; not kept
                self.stop()
            if until is not None and not self._stop and until():
                self.stop()
            if time.monotonic() > deadline or (cur is None and time.monotonic() > no_plan_by):
                self.kill()
                raise SwarmFailed(f"the swarm did not end within its time ({self._phase()}):\n" + self.log_tail())
            if interrupted_at is not None and time.monotonic() - interrupted_at > INTERRUPT_GRACE_S:
                break
            time.sleep(0.1)
        cur = self.current
        interrupted = interrupted_at is not None or stop_event.is_set()
        if interrupted:
            return self.result(cur, interrupted=True) if cur is not None else SwarmResult(None, interrupted=True)
        if cur.write_error is not None:
            raise cur.write_error
        if cur.failures:    # reported as the swarm ended: the cause of the recording it lacks
            raise SwarmFailed("; ".join(cur.failures))
        if cur.facts.get("missing"):
            raise SwarmFailed("no recording from the Locust worker(s) " + ", ".join(cur.facts["missing"])
                              + ":\n" + self.log_tail())
        return self.result(cur)

    def _phase(self) -> str:
        return f"phase {self.current.phase}" if self.current else "no plan asked for"

    def _problem(self, cur: _Current | None) -> str | None:
        """Why the swarm cannot go on, or None: a failure the master reported, the master's
        death, a local worker's death while its users run."""
        if cur is not None and cur.failures:
            return "; ".join(cur.failures)
        for name, p in self.procs.items():
            rc = p.poll()
            if rc is None:
                continue
            if name == "master":
                if self._rebound():
                    return None
                return (f"the Locust master (pid {p.pid}) died at {time.strftime('%H:%M:%S')} ({_how(rc)}) "
                        f"before its swarm ended:\n" + self.log_tail())
            # a local worker leaves when its master quits, after the swarm ended: before, a death
            return (f"Locust {name} (pid {p.pid}) died at {time.strftime('%H:%M:%S')} ({_how(rc)}) before its "
                    "swarm ended")
        return None


def _how(rc: int) -> str:
    return f"signal {-rc}" if rc < 0 else f"exit code {rc}"

