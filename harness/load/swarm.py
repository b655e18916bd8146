"""Start a real Locust swarm: a master and ``workers_per_initiator`` workers per initiator.

The master runs headless with ``--expect-workers`` and stops itself when the warm-up and
measured windows are over (see :mod:`harness.load.master`). Local workers (the default) run on
this host, on loopback, each bound to its initiator and worker index through
``SSBENCH_INITIATOR`` / ``SSBENCH_WORKER``; with :class:`RemoteWorkers` the master listens on
the given address and starts no worker: ``ssbench worker`` on the client hosts connects to it.
Either way every worker proves the run's token and talks to the master over Locust's messages
only (:mod:`harness.load.channel`): the spec comes in the spawn message and the recordings go
back as messages, which the master writes here. Locust spreads users evenly over workers, so
each worker gets ``threads / workers_per_initiator`` users and each initiator ``threads``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import channel
from .auth import TOKEN_ENV, new_token
from .hosts import MASTER_HOST, MASTER_PORT, WORKER_WAIT_SECONDS
from .spec import SwarmSpec

LOCUSTFILE = Path(__file__).with_name("locustfile.py")


def die_with_parent() -> None:
    """``preexec_fn``: the child gets SIGKILL when the process that started it dies (Linux
    prctl PR_SET_PDEATHSIG), so a killed ``ssbench run`` leaves no swarm SENDing behind it.
    A no-op where prctl does not exist."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        return
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(1)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def locust_env(spec_path: Path | str, initiator: int | None = None, worker: int | None = None,
               token: str | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["SSBENCH_SPEC"] = str(spec_path)
    env["PYTHONUNBUFFERED"] = "1"
    for name, value in ((channel.INITIATOR_ENV, initiator), (channel.WORKER_ENV, worker)):
        env.pop(name, None)
        if value is not None:
            env[name] = str(value)
    if token is not None:   # a headless swarm: the channel of harness.load.channel
        env[channel.SWARM_ENV] = "1"
        env[TOKEN_ENV] = token
    return env


@dataclass
class RemoteWorkers:
    """Workers on client hosts (``ssbench worker``): the master listens on ``bind_host:port``,
    waits up to ``wait_seconds`` for them; the token comes from ``$SSBENCH_WORKER_TOKEN``."""

    bind_host: str = MASTER_HOST
    port: int = MASTER_PORT
    wait_seconds: float = WORKER_WAIT_SECONDS


def worker_cmd(master_port: int, master_host: str = "127.0.0.1", locustfiles: str = str(LOCUSTFILE)) -> list[str]:
    """A Locust worker's command line (``locustfiles``: comma-separated, as ``locust -f``)."""
    return [sys.executable, "-m", "locust", "-f", locustfiles, "--worker",
            "--master-host", master_host, "--master-port", str(master_port), "--loglevel", "WARNING"]


@dataclass
class SwarmResult:
    spawn_complete: float | None                 # epoch seconds: the last user started
    worker_files: list[Path] = field(default_factory=list)   # this swarm's recordings only
    interrupted: bool = False
    stats_csv: Path | None = None


class Swarm:
    """One headless swarm. ``start()``, then ``wait()``; ``stop()`` on interruption."""

    def __init__(self, spec: SwarmSpec, out_dir: Path, initiators: int, threads: int,
                 spawn_rate: float, workers_per_initiator: int = 1, remote: RemoteWorkers | None = None,
                 worker_wait_seconds: float = 60.0):
        self.spec = spec
        self.out_dir = Path(out_dir)
        self.initiators = initiators
        self.threads = threads
        self.spawn_rate = spawn_rate
        self.workers_per_initiator = workers_per_initiator
        self.remote = remote
        spec.initiators, spec.workers_per_initiator = initiators, workers_per_initiator
        spec.recording_via = "message"
        spec.worker_wait_seconds = remote.wait_seconds if remote else worker_wait_seconds
        self.procs: dict[str, subprocess.Popen] = {}
        self.worker_deaths: dict[str, tuple[float, int, int | None]] = {}
        self.foreign_files: list[Path] = []
        self.recorded_initiators: set[int] = set()   # initiators whose workers' recordings arrived
        self.recorded_workers: set[tuple[int, int]] = set()   # (initiator, worker) recorded
        self.missing_workers: str | None = None   # the master gave up waiting for these
        self.master_record: dict = {}
        self._logs: list = []

    def worker_pids(self) -> dict[str, int]:
        return {name: p.pid for name, p in self.procs.items() if name.startswith("worker")}

    @property
    def expected_workers(self) -> list[tuple[int, int]]:
        return [(i, w) for i in range(1, self.initiators + 1) for w in range(1, self.workers_per_initiator + 1)]

    def start(self) -> "Swarm":
        self.out_dir.mkdir(parents=True, exist_ok=True)
        spec_path = self.spec.dump(self.out_dir / "swarm.json")
        if self.remote is not None:
            from .auth import token_from_env

            token = token_from_env() or ""
            host, port = self.remote.bind_host, self.remote.port
        else:
            token, host, port = new_token(), "127.0.0.1", free_port()
        users = self.initiators * self.threads
        master_cmd = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--master", "--headless",
                      "--master-bind-host", host, "--master-bind-port", str(port),
                      "--expect-workers", str(len(self.expected_workers)),
                      # the master's own wait (harness.load.master) names the missing workers first
                      "--expect-workers-max-wait", str(int(self.spec.worker_wait_seconds + 30)),
                      "--users", str(users), "--spawn-rate", str(self.spawn_rate),
                      "--csv", str(self.out_dir / "locust"), "--only-summary",
                      "--exit-code-on-error", "0", "--loglevel", "WARNING"]
        self.procs["master"] = self._popen(master_cmd, locust_env(spec_path, token=token), "locust-master.log")
        if self.remote is None:
            for i, w in self.expected_workers:
                # workers read no spec file: the master pushes it (harness.load.channel); the
                # path in their environment only says which run they belong to (ps, tests)
                self.procs[f"worker.i{i}.w{w}"] = self._popen(worker_cmd(port), locust_env(spec_path, i, w, token),
                                                              f"locust-worker-i{i}-w{w}.log")
        return self

    def _popen(self, cmd, env, log_name) -> subprocess.Popen:
        log = open(self.out_dir / log_name, "wb")
        self._logs.append(log)
        return subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=die_with_parent)

    def running(self) -> bool:
        return any(p.poll() is None for p in self.procs.values())

    def check_workers(self) -> None:
        """Note the time of any worker's exit while the master still runs (a worker killed
        mid-window: its users stopped sending, so the window measured a smaller swarm)."""
        master = self.procs.get("master")
        if master is None or master.poll() is not None:
            return
        if self.missing_workers is None:
            try:
                self.missing_workers = json.loads((self.out_dir / "master.json").read_text()).get("missing_workers")
            except (OSError, ValueError):
                pass
            if self.missing_workers:   # the master gave up waiting for its workers: no point waiting more
                self.stop()
                return
        for name, p in self.procs.items():
            if name.startswith("worker") and p.poll() is not None and name not in self.worker_deaths:
                # a worker that quits cleanly once the master has stopped the swarm is the
                # normal end; any other exit is a death
                if p.returncode == 0 and self._stop_requested():
                    continue
                self.worker_deaths[name] = (time.time(), p.pid, p.returncode)

    def _stop_requested(self) -> bool:
        try:
            return "stop_requested" in json.loads((self.out_dir / "master.json").read_text())
        except (OSError, ValueError):
            return False

    def worker_failures(self) -> list[str]:
        """One sentence per worker that died before its master, or exited with an error."""
        out = []
        for name, p in self.procs.items():
            if not name.startswith("worker"):
                continue
            if name in self.worker_deaths:
                at, pid, rc = self.worker_deaths[name]
                how = f"signal {-rc}" if rc is not None and rc < 0 else f"exit code {rc}"
                out.append(f"Locust {name} (pid {pid}) died at {time.strftime('%H:%M:%S', time.localtime(at))} "
                           f"({how}) while the swarm was running")
            elif p.returncode not in (0, None):
                rc = p.returncode
                how = f"signal {-rc}" if rc < 0 else f"exit code {rc}"
                out.append(f"Locust {name} (pid {p.pid}) ended with {how}")
        return out

    def wait(self, timeout: float) -> SwarmResult:
        deadline = time.monotonic() + timeout
        interrupted = False
        try:
            while self.running() and time.monotonic() < deadline:
                self.check_workers()
                time.sleep(0.2)
        except KeyboardInterrupt:
            interrupted = True
        if self.running():
            self.stop()
        return self._result(interrupted)

    def stop(self, grace: float = 15) -> None:
        """Ask the master to stop (SIGTERM: Locust quits its workers), then make sure."""
        m = self.procs.get("master")
        if m and m.poll() is None:
            m.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        while self.running() and time.monotonic() < deadline:
            time.sleep(0.1)
        for p in self.procs.values():
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait(timeout=10)

    def _result(self, interrupted: bool) -> SwarmResult:
        for log in self._logs:
            log.close()
        master = {}
        mj = self.out_dir / "master.json"
        if mj.exists():
            master = json.loads(mj.read_text())
        self.missing_workers = master.get("missing_workers") or self.missing_workers
        self.master_record = master
        csv = self.out_dir / "locust_stats.csv"
        return SwarmResult(spawn_complete=master.get("spawn_complete"),
                           worker_files=self._own_worker_files(),
                           interrupted=interrupted, stats_csv=csv if csv.exists() else None)

    def _own_worker_files(self) -> list[Path]:
        """Recordings written by this swarm's workers; any other is set aside, not merged."""
        own = []
        for f in sorted(self.out_dir.glob("worker-i*.json")):
            try:
                doc = json.loads(f.read_text())
            except (OSError, ValueError):
                doc = {}
            if doc.get("swarm_id") == self.spec.swarm_id:
                own.append(f)
                self.recorded_initiators.add(int(doc["initiator"]))
                self.recorded_workers.add((int(doc["initiator"]), int(doc.get("worker", 1))))
            else:
                self.foreign_files.append(f)
                f.rename(f.with_name("foreign-" + f.name))
        return own

    def log_tail(self, lines: int = 20) -> str:
        out = []
        for name in sorted(self.out_dir.glob("locust-*.log")):
            text = name.read_text(errors="replace").splitlines()[-lines:]
            if text:
                out.append(f"--- {name.name}\n" + "\n".join(text))
        return "\n".join(out)
