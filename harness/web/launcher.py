"""The ``ssbench web`` process: target, sessions, and a Locust master with the web UI.

A controller like ``ssbench run``: it owns the target, the collectors and the results
(:mod:`harness.web.session`) and drives one :class:`harness.load.swarm.Swarm` for its whole
lifetime through the swarm protocol: a Locust master serving the web UI (with the pages of
:mod:`harness.web.locust_plugin`) and a local worker per initiator unless ``--local-workers``
says fewer (the others: ``ssbench worker`` on other hosts). Each swarm the UI starts is a
session (:class:`WebSessions`), saved when it ends. The master admits only workers holding the
run's token (:mod:`harness.load.auth`); off loopback the UI asks for a login
(:mod:`harness.web.auth`); TLS with ``--tls-cert``/``--tls-key``.

Ctrl-C stops a session in progress as the UI's Stop would (it is saved), then the master and
its workers quit and the target's broker side stops; the shared embedded PostgreSQL server is
left running (``ssbench server stop`` stops it).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from ..errors import TargetError, UserError
from ..load.auth import TOKEN_ENV, new_token, token_from_env
from ..load.hosts import MASTER_PORT
from ..load.swarm import Swarm
from ..ports import free_port
from ..targets.base import Target
from .auth import MASTER_ENV, Credentials, is_loopback
from .form import DEFAULT_WEB_PORT
from .metrics import LiveMetrics
from .session import WebSessions

#: the web UI's master loads the web pages next to ssbench's locustfile (workers do not)
PLUGIN = Path(__file__).with_name("locust_plugin.py")


@dataclass
class WebOptions:
    """``ssbench web``'s options: its flags' values (their defaults are the flags')."""

    initiators: int
    local_workers: int | None             # None: one per initiator
    web_host: str
    port: int | None                      # 0: any free port
    master_bind_host: str
    master_port: int | None
    users: int
    spawn_rate: float
    payload_bytes: int
    dialogs: str
    rate: float                           # offered SENDs/s per initiator (0: closed loop)
    profile: str | None
    max_queue_readers: int | None
    results: Path | None
    credentials: Credentials | None       # the web UI asks for a login when set
    session_minutes: float                # a login lasts this long
    tls_cert: str | None
    tls_key: str | None
    metrics: object                       # the live metrics endpoint's state (harness.metrics.LiveState)
    ready_timeout: float = 120.0

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


class WebApp:
    def __init__(self, target: Target, opts: WebOptions):
        from ..paths import RESULTS

        self.target = target
        self.opts = opts
        self.results = Path(opts.results or RESULTS)
        self.state_dir = Path(tempfile.mkdtemp(prefix="ssbench-web-"))
        self.swarm: Swarm | None = None
        self.sessions: WebSessions | None = None
        self.web_port = 0
        self.master_port = 0
        # the run token, checked by ssbench web before anything starts: workers must prove they hold it
        self.token = token_from_env() or new_token()

    # ------------------------------------------------------------------ pieces
    def _profile(self) -> str:
        profiles = self.target.profiles()
        if self.opts.profile:
            if self.opts.profile not in profiles:
                raise UserError(f"server profile {self.opts.profile!r} is not defined for the {self.target.kind} "
                                f"target (known: {', '.join(profiles)})", field="--profile")
            return self.opts.profile
        return "durable" if "durable" in profiles else profiles[0]

    def worker_pids(self) -> dict[str, int]:
        return self.swarm.worker_pids() if self.swarm is not None else {}

    def _master_args(self) -> tuple[list[str], dict[str, str]]:
        o = self.opts
        args = ["--web-host", o.web_host, "--web-port", str(self.web_port), "--host", f"ssbench:{self.target.kind}",
                "--ssbench-initiators", str(o.initiators), "--ssbench-payload-bytes", str(o.payload_bytes),
                "--ssbench-dialogs", o.dialogs, "--ssbench-rate", f"{o.rate:g}"]
        env: dict[str, str] = {}
        if o.credentials is not None:
            env[MASTER_ENV] = o.credentials.encoded()
            env["SSBENCH_WEB_SESSION_MINUTES"] = f"{o.session_minutes:g}"
            args.append("--web-login")
        if o.tls_cert:
            args += ["--tls-cert", o.tls_cert, "--tls-key", o.tls_key]
        return args, env

    def _local_url(self, path: str) -> str:
        """The master's web UI as reached from this host."""
        h = self.opts.web_host
        host = "127.0.0.1" if h in ("", "*", "0.0.0.0") else "[::1]" if h == "::" else \
            f"[{h}]" if ":" in h else h
        return f"{self.opts.scheme}://{host}:{self.web_port}{path}"

    def _status(self) -> dict | None:
        """The master's /ssbench/status, asked by ssbench web itself: it passes the login with
        the private control token (honoured from loopback only)."""
        import ssl

        from .auth import INTERNAL_HEADER

        req = urllib.request.Request(self._local_url("/ssbench/status"),
                                     headers={INTERNAL_HEADER: self.swarm.control.token})
        ctx = ssl._create_unverified_context() if self.opts.tls_cert else None   # our own certificate
        try:
            with urllib.request.urlopen(req, timeout=2, context=ctx) as r:
                return json.loads(r.read())
        except Exception:
            return None

    @staticmethod
    def _notice(text: str) -> None:
        print(f"ssbench web: {text}", file=sys.stderr, flush=True)

    # ------------------------------------------------------------------ run
    def run(self) -> int:
        o = self.opts
        local = o.initiators if o.local_workers is None else max(0, min(o.local_workers, o.initiators))
        self.web_port = _pick_port(o.web_host, o.port, DEFAULT_WEB_PORT, "web UI", may_move=True)
        self.master_port = _pick_port(o.master_bind_host, o.master_port, MASTER_PORT, "Locust master",
                                      may_move=local == o.initiators)
        print(f"ssbench web: provisioning {self.target.label} for {o.initiators} initiator(s)...",
              file=sys.stderr, flush=True)
        self.target.provision(o.initiators)
        metrics = LiveMetrics(self.target.label)
        # 2 queue readers per core (the paper's rule) and the target's interactive settings
        broker = self.target.interactive_broker(o.max_queue_readers or max(2, 2 * (os.cpu_count() or 1)))
        self.sessions = WebSessions(self.target, self.results, o.initiators, self._profile(), broker, metrics,
                                    client_pids=self.worker_pids, live=o.metrics)
        extra, env = self._master_args()
        self.swarm = Swarm(self.state_dir, self.sessions.plan, users=o.users, spawn_rate=o.spawn_rate,
                           local_claims=[(i, None) for i in range(1, local + 1)], token=self.token,
                           master_extra=extra, master_env=env, headless=False, on_ended=self.sessions.finish,
                           on_notice=self._notice, routes={"GET /metrics": lambda _b: metrics.snapshot()},
                           on_live=self.sessions.on_live,
                           bind=(o.master_bind_host, self.master_port), master_files=[str(PLUGIN)]).start()
        self._wait_ready(local)
        self._print_ready(local)
        while self.swarm.master_alive():
            time.sleep(0.5)
        print("ssbench web: the Locust master exited:\n" + self.swarm.log_tail(10), file=sys.stderr)
        return 3

    def _wait_ready(self, local: int) -> None:
        deadline = time.monotonic() + self.opts.ready_timeout
        while True:
            if not self.swarm.master_alive():
                raise TargetError("the Locust master exited:\n" + self.swarm.log_tail())
            st = self._status()
            if st is not None and len(st.get("workers", {})) >= local:
                return
            if time.monotonic() > deadline:
                raise TargetError(f"the Locust web UI and {local} worker(s) were not ready within "
                                  f"{self.opts.ready_timeout:g}s:\n" + self.swarm.log_tail())
            time.sleep(0.3)

    def _print_ready(self, local: int) -> None:
        o = self.opts
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
            print(f"ssbench web: start remote workers with: {TOKEN_ENV}={self.token} ssbench worker "
                  f"--master {mhost}:{self.master_port} --initiator N", flush=True)
        print("ssbench web: ready. Ctrl-C stops everything.", flush=True)

    # ------------------------------------------------------------------ shutdown
    def shutdown(self) -> None:
        """Graceful: stop a running swarm as the web UI's Stop would (the session is saved),
        then quit the master (it tells its workers to quit)."""
        s, sw = self.sessions, self.swarm
        if s is not None and sw is not None and s.current is not None and sw.master_alive():
            print("ssbench web: stopping the swarm and saving the session...", file=sys.stderr, flush=True)
            sw.stop()
            if not s.idle.wait(timeout=180):
                print("ssbench web: the session was not saved within 180 s", file=sys.stderr)
        if sw is not None:
            sw.close()
        if s is not None:
            path = s.abandon()
            if path:
                print(f"ssbench web: session saved as interrupted: {path}", file=sys.stderr)

    def close(self) -> None:
        if self.swarm is not None:
            self.swarm.close(grace=4)
        try:
            self.target.stop()
        except Exception as e:  # pragma: no cover - best effort
            print(f"ssbench web: stopping the target: {e}", file=sys.stderr)
        try:
            self.target.close()
        except Exception:  # pragma: no cover
            pass
        shutil.rmtree(self.state_dir, ignore_errors=True)


def serve(target: Target, opts: WebOptions) -> int:
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
            app.close()
        finally:
            lock.__exit__(None, None, None)
            signal.signal(signal.SIGINT, signal.default_int_handler)
    saved = app.sessions.saved if app.sessions else []
    for p in saved:
        print(f"ssbench web: saved run {p}", file=sys.stderr)
    print(" ".join(["ssbench web: stopped.", target.closing_note()]).strip(), file=sys.stderr)
    return code
