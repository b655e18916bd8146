"""The embedded broker process, supervised: started, watched, restarted when it dies.

SQL Server's broker never stops while the server runs; the emulation's is a separate process,
so :class:`BrokerSupervisor` restarts it when it dies unasked (after its sessions are gone),
counting restarts. The transport's ACK protocol makes a restart safe: every message is still
delivered exactly once.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable

from ... import paths
from ...errors import TargetError, first_line
from .server import log_tail

log = logging.getLogger(__name__)

POLL_S = 0.2               # how often the supervisor looks at the process
RESTART_BACKOFF_S = (0.5, 5.0)   # first and longest pause after a failed restart


class BrokerSupervisor:
    """One broker process at a time, restarted while it is wanted.

    ``is_up(pid)`` says whether the process ``pid`` has taken its post (the broker records its
    pid in ``ssb.broker_state`` once it holds its lock and its threads run); ``reap()`` waits
    until no database session of a previous broker is left.
    """

    def __init__(self, log_path: Path, is_up: Callable[[int], bool], reap: Callable[[], None], *,
                 poll_s: float = POLL_S, start_timeout: float = 30.0):
        self.log_path = log_path
        self._is_up = is_up
        self._reap = reap
        self.poll_s = poll_s
        self.start_timeout = start_timeout
        self._lock = threading.RLock()
        self._proc: subprocess.Popen | None = None
        self._cmd: list[str] | None = None
        self._wanted = False
        self._halt = threading.Event()        # stop() in progress: the watcher leaves
        self._watcher: threading.Thread | None = None
        #: restarts (a death the supervisor repaired) since the owner last set it to 0
        self.restarts = 0

    # ------------------------------------------------------------------ state
    def running(self) -> bool:
        proc = self._proc
        return proc is not None and proc.poll() is None

    # ------------------------------------------------------------------ lifecycle
    def start(self, cmd: list[str], timeout: float | None = None) -> None:
        """Start the broker (``cmd``) and supervise it. Returns once it is up; raises
        TargetError if it exits or does not come up within ``timeout``."""
        with self._lock:
            if self.running():
                return
            self._cmd = list(cmd)
            self._halt.clear()
            self._launch(timeout or self.start_timeout)
            self._wanted = True
            if self._watcher is None or not self._watcher.is_alive():
                self._watcher = threading.Thread(target=self._watch, name="broker-supervisor", daemon=True)
                self._watcher.start()

    def stop(self, timeout: float = 15.0) -> None:
        """Stop supervising, then stop the process: SIGTERM (readers are cancelled; their batches
        roll back and stay queued), SIGKILL after ``timeout``. Idempotent."""
        self._halt.set()
        watcher = self._watcher
        if watcher is not None and watcher is not threading.current_thread():
            watcher.join(self.start_timeout + 15)
        with self._lock:
            self._wanted = False
            self._watcher = None
            proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            try:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                log.warning("broker %d did not stop in %.0f s: SIGKILL", proc.pid, timeout)
                proc.kill()
                proc.wait(10)
            except ProcessLookupError:  # pragma: no cover
                pass
        self._reap()

    # ------------------------------------------------------------------ internals
    def _launch(self, timeout: float) -> None:
        """Start the process (callers hold the lock) and wait until it is up."""
        self._reap()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(paths.REPO_ROOT), env.get("PYTHONPATH")) if p)
        with open(self.log_path, "ab") as logf:
            proc = subprocess.Popen(self._cmd, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                                    env=env, cwd=str(paths.REPO_ROOT), start_new_session=True)
        self._proc = proc
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                self._proc = None
                raise TargetError(f"the broker process exited ({proc.returncode}) at start" + log_tail(self.log_path))
            try:
                if self._is_up(proc.pid):
                    return
            except Exception as e:  # the database is unreachable: not up yet
                last = e
            else:
                last = None
            if time.monotonic() > deadline or self._halt.is_set():
                self._proc = None
                proc.kill()
                proc.wait(10)
                why = f" ({first_line(last)})" if last else ""
                raise TargetError(f"the broker process did not come up in time{why}" + log_tail(self.log_path))
            time.sleep(0.05)

    def _watch(self) -> None:
        backoff = RESTART_BACKOFF_S[0]
        failures = 0
        while not self._halt.wait(self.poll_s):
            with self._lock:
                if self._halt.is_set() or not self._wanted:
                    break
                proc = self._proc
                if proc is not None and proc.poll() is None:
                    continue
                if proc is not None:
                    log.warning("the broker process %d died (exit %s): restarting it", proc.pid, proc.returncode)
                    self._proc = None
                try:
                    self._launch(self.start_timeout)
                except Exception as e:
                    failed = first_line(e)
                else:
                    self.restarts += 1
                    log.warning("broker restarted (pid %d; %d restart(s) so far%s)", self._proc.pid, self.restarts,
                                f"; after {failures} failed attempt(s)" if failures else "")
                    backoff, failures = RESTART_BACKOFF_S[0], 0
                    continue
            if self._halt.is_set():
                break
            failures += 1
            # one line per outage, not one per attempt (the database server may be down a while)
            (log.error if failures == 1 else log.debug)(
                "broker restart failed, retrying every %.0f s at most until it works: %s",
                RESTART_BACKOFF_S[1], failed)
            self._halt.wait(backoff)
            backoff = min(backoff * 2, RESTART_BACKOFF_S[1])
