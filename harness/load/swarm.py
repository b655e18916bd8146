"""Start a real Locust swarm: a master and one worker per initiator, on loopback.

The master runs headless with ``--expect-workers`` and stops itself when the warm-up and
measured windows are over (see :mod:`harness.load.master`); each worker is bound to one
initiator through ``SSBENCH_INITIATOR``. Locust distributes users evenly over workers, so each
initiator gets exactly ``threads`` users.
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

from .spec import SwarmSpec

LOCUSTFILE = Path(__file__).with_name("locustfile.py")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def locust_env(spec_path: Path, initiator: int | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["SSBENCH_SPEC"] = str(spec_path)
    env["PYTHONUNBUFFERED"] = "1"
    if initiator is not None:
        env["SSBENCH_INITIATOR"] = str(initiator)
    return env


def worker_cmd(master_port: int, master_host: str = "127.0.0.1", locustfiles: str = str(LOCUSTFILE)) -> list[str]:
    """A Locust worker's command line (``locustfiles``: comma-separated, as ``locust -f``)."""
    return [sys.executable, "-m", "locust", "-f", locustfiles, "--worker",
            "--master-host", master_host, "--master-port", str(master_port), "--loglevel", "WARNING"]


@dataclass
class SwarmResult:
    spawn_complete: float | None
    stop_requested: float | None
    worker_files: list[Path] = field(default_factory=list)
    returncodes: dict[str, int | None] = field(default_factory=dict)
    interrupted: bool = False
    stats_csv: Path | None = None


class Swarm:
    """One headless swarm. ``start()``, then ``wait()``; ``stop()`` on interruption."""

    def __init__(self, spec: SwarmSpec, out_dir: Path, initiators: int, threads: int,
                 spawn_rate: float):
        self.spec = spec
        self.out_dir = Path(out_dir)
        self.initiators = initiators
        self.threads = threads
        self.spawn_rate = spawn_rate
        self.procs: dict[str, subprocess.Popen] = {}
        self._logs: list = []

    def worker_pids(self) -> dict[str, int]:
        return {name: p.pid for name, p in self.procs.items() if name.startswith("worker")}

    def start(self) -> "Swarm":
        self.out_dir.mkdir(parents=True, exist_ok=True)
        spec_path = self.spec.dump(self.out_dir / "swarm.json")
        port = free_port()
        users = self.initiators * self.threads
        master_cmd = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--master", "--headless",
                      "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port),
                      "--expect-workers", str(self.initiators), "--expect-workers-max-wait", "60",
                      "--users", str(users), "--spawn-rate", str(self.spawn_rate),
                      "--csv", str(self.out_dir / "locust"), "--only-summary",
                      "--exit-code-on-error", "0", "--loglevel", "WARNING"]
        self.procs["master"] = self._popen(master_cmd, locust_env(spec_path), "locust-master.log")
        for i in range(1, self.initiators + 1):
            self.procs[f"worker.i{i}"] = self._popen(worker_cmd(port), locust_env(spec_path, i),
                                                     f"locust-worker-i{i}.log")
        return self

    def _popen(self, cmd, env, log_name) -> subprocess.Popen:
        log = open(self.out_dir / log_name, "wb")
        self._logs.append(log)
        return subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)

    def running(self) -> bool:
        return any(p.poll() is None for p in self.procs.values())

    def wait(self, timeout: float) -> SwarmResult:
        deadline = time.monotonic() + timeout
        interrupted = False
        try:
            while self.running() and time.monotonic() < deadline:
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
        csv = self.out_dir / "locust_stats.csv"
        return SwarmResult(spawn_complete=master.get("spawn_complete"),
                           stop_requested=master.get("stop_requested"),
                           worker_files=sorted(self.out_dir.glob("worker-i*.json")),
                           returncodes={n: p.returncode for n, p in self.procs.items()},
                           interrupted=interrupted, stats_csv=csv if csv.exists() else None)

    def log_tail(self, lines: int = 20) -> str:
        out = []
        for name in sorted(self.out_dir.glob("locust-*.log")):
            text = name.read_text(errors="replace").splitlines()[-lines:]
            if text:
                out.append(f"--- {name.name}\n" + "\n".join(text))
        return "\n".join(out)
