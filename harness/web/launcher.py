"""The ``ssbench web`` process: target, control API, Locust master (web UI) and workers.

Processes (all started here, all stopped on Ctrl-C):

* this process: owns the target (provisioning, dialogs, the embedded broker's transport and
  queue monitor via ``Target.start``/``stop``), the collectors and the results
  (:mod:`harness.web.session`), behind a private loopback control API
  (:mod:`harness.web.control`);
* a Locust master serving the web UI (``--web-host``/``--port``), with the ssbench hooks of
  :mod:`harness.web.locust_plugin`;
* one Locust worker per initiator (``SSBENCH_INITIATOR=i``), unless ``--local-workers`` says
  fewer (the others then run on other hosts: ``ssbench web --worker``, docs/web.md).

Security: the master admits only workers that prove the run's token (``SSBENCH_WORKER_TOKEN``:
taken from the environment or made here, given to local workers through their environment and
printed once for remote ones; :mod:`harness.load.auth`). A web UI on any interface but loopback
(or with ``--require-login``) asks for a login (:mod:`harness.web.auth`): the master gets the
user name and a password hash, never the password; TLS with ``--tls-cert``/``--tls-key``.

Ctrl-C: a session in progress is stopped through the web UI's own Stop (so it is saved like
any other), then the master quits (taking its workers with it), stragglers are killed, and the
target's broker side is stopped. The embedded PostgreSQL server is left running: it is shared
and reused by every ssbench command (``ssbench server stop`` stops it).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from ..errors import TargetError, UserError
from ..load.auth import TOKEN_ENV, new_token, token_from_env, token_problem
from ..load.hosts import MASTER_PORT
from ..load.spec import SwarmSpec
from ..load.swarm import LOCUSTFILE, die_with_parent, free_port, worker_cmd
from ..matrix import BrokerSettings
from ..targets.base import Target
from .auth import FILE_ENV, MASTER_ENV, PASSWORD_ENV, USER_ENV, Credentials, is_loopback
from .control import ControlServer

#: the web UI's Locust processes load ssbench's locustfile and the web plugin
LOCUSTFILES = f"{LOCUSTFILE},{Path(__file__).with_name('locust_plugin.py')}"
from .metrics import LiveMetrics
from .session import WebSessions

DEFAULT_WEB_PORT = 8089
DEFAULT_MASTER_PORT = MASTER_PORT


@dataclass
class WebOptions:
    initiators: int = 1
    local_workers: int | None = None      # None: one per initiator
    web_host: str = "127.0.0.1"
    port: int | None = DEFAULT_WEB_PORT   # 0: any free port
    master_bind_host: str = "127.0.0.1"
    master_port: int | None = DEFAULT_MASTER_PORT
    users: int = 8
    spawn_rate: float = 8.0
    payload_bytes: int = 100
    dialogs: str = "per_thread"
    profile: str | None = None
    max_queue_readers: int | None = None
    results: Path | None = None
    ready_timeout: float = 120.0
    credentials: Credentials | None = None   # the web UI asks for a login when set
    session_minutes: float = 480.0           # a login lasts this long
    tls_cert: str | None = None
    tls_key: str | None = None

    @property
    def scheme(self) -> str:
        return "https" if self.tls_cert else "http"


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host if host not in ("", "*") else "0.0.0.0", port))
        except OSError:
            return False
    return True


def _pick_port(host: str, wanted: int | None, default: int, what: str, may_move: bool) -> int:
    if not wanted:
        return free_port() if wanted == 0 else default
    if _port_free(host, wanted):
        return wanted
    if wanted == default and may_move:
        port = free_port()
        print(f"ssbench web: {what} port {wanted} is busy, using {port}", file=sys.stderr)
        return port
    raise UserError(f"{what} port {wanted} on {host} is already in use")


def default_broker(target: Target, max_queue_readers: int | None) -> BrokerSettings:
    """Interactive defaults: 2 queue readers per core (the paper's rule), and the target's own
    interactive settings (the embedded target: a 1 s queue monitor, so activation reacts within
    a second in the UI)."""
    return target.interactive_broker(max_queue_readers or max(2, 2 * (os.cpu_count() or 1)))


class WebApp:
    def __init__(self, target: Target, opts: WebOptions):
        from ..paths import RESULTS

        self.target = target
        self.opts = opts
        self.results = Path(opts.results or RESULTS)
        self.procs: dict[str, subprocess.Popen] = {}
        self._logs: list = []
        self.state_dir = Path(tempfile.mkdtemp(prefix="ssbench-web-"))
        self.control: ControlServer | None = None
        self.sessions: WebSessions | None = None
        self.web_port = 0
        self.master_port = 0
        token = token_from_env()
        if token is not None and token_problem(token):
            raise UserError(token_problem(token), field=TOKEN_ENV)
        self.token = token or new_token()   # the run token: workers must prove they hold it

    # ------------------------------------------------------------------ pieces
    def _profile(self) -> str:
        profiles = self.target.profiles()
        if self.opts.profile:
            if self.opts.profile not in profiles:
                raise UserError(f"server profile {self.opts.profile!r} is not defined for the {self.target.kind} "
                                f"target (known: {', '.join(profiles)})", field="--profile")
            return self.opts.profile
        return "durable" if "durable" in profiles else profiles[0]

    def _popen(self, name: str, cmd: list[str], env: dict[str, str]) -> subprocess.Popen:
        log = open(self.state_dir / f"{name}.log", "wb")
        self._logs.append(log)
        p = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             preexec_fn=die_with_parent,
                             start_new_session=True)
        self.procs[name] = p
        return p

    def _base_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONUNBUFFERED"] = "1"
        # no Locust process sees the web UI's password (the master gets a hash) or stale settings
        for k in ("SSBENCH_SPEC", "SSBENCH_INITIATOR", "SSBENCH_WEB_CONTROL", PASSWORD_ENV, USER_ENV, FILE_ENV,
                  MASTER_ENV, TOKEN_ENV, "SSBENCH_WEB_SESSION_MINUTES"):
            env.pop(k, None)
        env[TOKEN_ENV] = self.token
        return env

    def worker_pids(self) -> dict[str, int]:
        return {n: p.pid for n, p in self.procs.items() if n.startswith("worker") and p.poll() is None}

    def start_master(self) -> None:
        o = self.opts
        env = self._base_env()
        env["SSBENCH_WEB_CONTROL"] = self.control.url
        cmd = [sys.executable, "-m", "locust", "-f", LOCUSTFILES, "--master",
               "--master-bind-host", o.master_bind_host, "--master-bind-port", str(self.master_port),
               "--web-host", o.web_host, "--web-port", str(self.web_port),
               "--host", f"ssbench:{self.target.kind}", "--users", str(o.users), "--spawn-rate", str(o.spawn_rate),
               "--ssbench-initiators", str(o.initiators), "--ssbench-payload-bytes", str(o.payload_bytes),
               "--ssbench-dialogs", o.dialogs, "--loglevel", "INFO"]
        if o.credentials is not None:
            env[MASTER_ENV] = o.credentials.encoded()
            env["SSBENCH_WEB_SESSION_MINUTES"] = f"{o.session_minutes:g}"
            cmd.append("--web-login")
        if o.tls_cert:
            cmd += ["--tls-cert", o.tls_cert, "--tls-key", o.tls_key]
        self._popen("master", cmd, env)

    def start_worker(self, initiator: int) -> None:
        env = self._base_env()
        env["SSBENCH_INITIATOR"] = str(initiator)
        env["SSBENCH_SPEC"] = str(placeholder_spec(self.state_dir, initiator))
        self._popen(f"worker.i{initiator}", worker_cmd(self.master_port, locustfiles=LOCUSTFILES), env)

    def _local_url(self, path: str) -> str:
        """The master's web UI as reached from this host."""
        h = self.opts.web_host
        host = "127.0.0.1" if h in ("", "*", "0.0.0.0") else "[::1]" if h == "::" else \
            f"[{h}]" if ":" in h else h
        return f"{self.opts.scheme}://{host}:{self.web_port}{path}"

    def _internal(self, path: str, data: bytes | None = None, timeout: float = 2):
        """A request of ssbench web itself to its master's UI: it passes the login with the
        private control token (honoured from loopback only)."""
        import ssl

        from .auth import INTERNAL_HEADER

        req = urllib.request.Request(self._local_url(path), data=data, method="POST" if data is not None else "GET",
                                     headers={INTERNAL_HEADER: self.control.token})
        ctx = ssl._create_unverified_context() if self.opts.tls_cert else None   # our own certificate
        return urllib.request.urlopen(req, timeout=timeout, context=ctx)

    def _status(self) -> dict | None:
        try:
            with self._internal("/ssbench/status") as r:
                return json.loads(r.read())
        except Exception:
            return None

    def _notice(self, body: dict) -> dict:
        print(f"ssbench web: {body.get('text', '')}", file=sys.stderr, flush=True)
        return {"ok": True}

    def log_tail(self, lines: int = 30) -> str:
        out = []
        for f in sorted(self.state_dir.glob("*.log")):
            text = f.read_text(errors="replace").splitlines()[-lines:]
            if text:
                out.append(f"--- {f.name}\n" + "\n".join(text))
        return "\n".join(out)

    # ------------------------------------------------------------------ run
    def run(self) -> int:
        o = self.opts
        local = o.initiators if o.local_workers is None else max(0, min(o.local_workers, o.initiators))
        self.web_port = _pick_port(o.web_host, o.port, DEFAULT_WEB_PORT, "web UI", may_move=True)
        self.master_port = _pick_port(o.master_bind_host, o.master_port, DEFAULT_MASTER_PORT, "Locust master",
                                      may_move=local == o.initiators)
        profile = self._profile()
        broker = default_broker(self.target, o.max_queue_readers)
        print(f"ssbench web: provisioning {self.target.label} for {o.initiators} initiator(s)...",
              file=sys.stderr, flush=True)
        self.target.provision(o.initiators)
        metrics = LiveMetrics(self.target.label)
        self.sessions = WebSessions(self.target, self.results, o.initiators, profile, broker, metrics,
                                    client_pids=self.worker_pids)
        s = self.sessions
        self.control = ControlServer({
            "POST /session/start": s.start,
            "POST /session/stop": s.stop,
            "GET /metrics": lambda _b: metrics.snapshot(),
            "POST /notice": self._notice,
        }).start()
        self.start_master()
        for i in range(1, local + 1):
            self.start_worker(i)
        deadline = time.monotonic() + o.ready_timeout
        while True:
            if self.procs["master"].poll() is not None:
                raise TargetError("the Locust master exited:\n" + self.log_tail())
            st = self._status()
            if st is not None and len(st.get("workers", {})) >= local:
                break
            if time.monotonic() > deadline:
                raise TargetError(f"the Locust web UI and {local} worker(s) were not ready within "
                                  f"{o.ready_timeout:g}s:\n" + self.log_tail())
            time.sleep(0.3)
        url = self._local_url("/")
        remote = o.initiators - local
        print(f"ssbench web: Locust web UI at {url}  (live broker metrics: "
              f"'Broker metrics' tab, or {url}ssbench/)", flush=True)
        if o.credentials is not None:
            print(f"ssbench web: login required (user {o.credentials.user!r}; a login lasts "
                  f"{o.session_minutes:g} min)", flush=True)
        print(f"ssbench web: master port {self.master_port}; {local} local worker(s)"
              + (f", waiting for {remote} worker(s) from other hosts" if remote else "")
              + f"; sessions are saved under {self.results}/", flush=True)
        if remote or not is_loopback(o.master_bind_host):
            mhost = socket.gethostname() if o.master_bind_host in ("", "*", "0.0.0.0", "::") else o.master_bind_host
            # printed once, here: the only place the token is shown
            print(f"ssbench web: start remote workers with: {TOKEN_ENV}={self.token} ssbench web --worker "
                  f"--master-host {mhost} --master-port {self.master_port} --initiator N", flush=True)
        print("ssbench web: ready. Ctrl-C stops everything.", flush=True)
        while self.procs["master"].poll() is None:
            time.sleep(0.5)
        print("ssbench web: the Locust master exited:\n" + self.log_tail(10), file=sys.stderr)
        return 3

    # ------------------------------------------------------------------ shutdown
    def shutdown(self) -> None:
        """Graceful: stop a running swarm through the UI (the session is saved), quit the master
        (it tells its workers to quit), then make sure nothing is left."""
        master = self.procs.get("master")
        if self.sessions is not None and self.sessions.current is not None and master and master.poll() is None:
            print("ssbench web: stopping the swarm and saving the session...", file=sys.stderr, flush=True)
            try:
                with self._internal("/stop", data=b"", timeout=180) as r:
                    r.read()
            except Exception as e:
                print(f"ssbench web: stopping the swarm: {e}", file=sys.stderr)
        if master and master.poll() is None:
            master.send_signal(signal.SIGTERM)
        self._wait_all(15)
        if self.sessions is not None:
            path = self.sessions.abandon()
            if path:
                print(f"ssbench web: session saved as interrupted: {path}", file=sys.stderr)

    def _wait_all(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while any(p.poll() is None for p in self.procs.values()) and time.monotonic() < deadline:
            time.sleep(0.1)

    def kill_all(self) -> None:
        """Whatever is still running: SIGTERM, then SIGKILL, each process group."""
        for sig, grace in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
            alive = [p for p in self.procs.values() if p.poll() is None]
            if not alive:
                break
            for p in alive:
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    pass
            self._wait_all(grace)
        for p in self.procs.values():
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:  # pragma: no cover
                pass

    def close(self) -> None:
        try:
            self.target.stop()
        except Exception as e:  # pragma: no cover - best effort
            print(f"ssbench web: stopping the target: {e}", file=sys.stderr)
        try:
            self.target.close()
        except Exception:  # pragma: no cover
            pass
        if self.control is not None:
            self.control.stop()
        for log in self._logs:
            log.close()
        shutil.rmtree(self.state_dir, ignore_errors=True)


def placeholder_spec(state_dir: Path, initiator: int) -> Path:
    """A worker's spec before its first session (the real one comes inline from the master);
    it keeps an idle worker's end-of-swarm hook quiet."""
    out = state_dir / f"worker-i{initiator}"
    out.mkdir(parents=True, exist_ok=True)
    return SwarmSpec(sender_specs={}, out_dir=str(out)).dump(state_dir / f"worker-i{initiator}-spec.json")


def serve(target: Target, opts: WebOptions) -> int:
    def _term(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _term)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started with SIGINT ignored
    app = WebApp(target, opts)
    code = 0
    # one run or web session at a time per target, for the web UI's whole lifetime
    lock = target.run_lock(f"ssbench web (pid {os.getpid()})")
    lock.__enter__()
    try:
        try:
            code = app.run()
        except KeyboardInterrupt:
            print("\nssbench web: stopping...", file=sys.stderr, flush=True)
            try:
                app.shutdown()
            except KeyboardInterrupt:
                print("ssbench web: aborting", file=sys.stderr)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)   # finish tidying up whatever happens
        try:
            app.kill_all()
            app.close()
        finally:
            lock.__exit__(None, None, None)
            signal.signal(signal.SIGINT, signal.default_int_handler)
    saved = app.sessions.saved if app.sessions else []
    for p in saved:
        print(f"ssbench web: saved run {p}", file=sys.stderr)
    print(" ".join(["ssbench web: stopped.", target.closing_note()]).strip(), file=sys.stderr)
    return code


def run_worker(master_host: str, master_port: int, initiator: int) -> int:
    """``ssbench web --worker``: one Locust worker for ``initiator`` on this host, for a master
    started by ``ssbench web`` on another host. Runs until the master quits or Ctrl-C."""
    problem = token_problem(token_from_env())
    if problem:
        raise UserError(f"{problem}: set it to the token 'ssbench web' printed on the master host "
                        f"(export {TOKEN_ENV}=...; never on the command line)", field=TOKEN_ENV)
    state = Path(tempfile.mkdtemp(prefix="ssbench-web-worker-"))
    env = dict(os.environ)
    for k in (PASSWORD_ENV, FILE_ENV, MASTER_ENV):   # the web UI's secrets are none of a worker's business
        env.pop(k, None)
    env.update(PYTHONUNBUFFERED="1", SSBENCH_INITIATOR=str(initiator),
               SSBENCH_SPEC=str(placeholder_spec(state, initiator)))
    env.pop("SSBENCH_WEB_CONTROL", None)
    cmd = worker_cmd(master_port, master_host, locustfiles=LOCUSTFILES)
    cmd[cmd.index("--loglevel") + 1] = "INFO"
    print(f"ssbench web: worker for initiator {initiator} -> master {master_host}:{master_port}", file=sys.stderr)
    p = subprocess.Popen(cmd, env=env, start_new_session=True, preexec_fn=die_with_parent)
    try:
        return p.wait()
    except KeyboardInterrupt:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        return 130
    finally:
        shutil.rmtree(state, ignore_errors=True)
