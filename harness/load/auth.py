"""The master/worker channel's guard: only workers that hold the run's token get users.

A run makes a random token (:func:`new_token`) and gives it to its Locust master and workers
through :data:`TOKEN_ENV` (never on a command line). The token never crosses the wire: on
Locust's own messages, after the worker's ``client_ready`` (acknowledged, but the worker stays
pending: no users, its messages dropped), the worker says hello with a nonce, the master
answers with a challenge and its proof (an HMAC over the worker's nonce), and the worker, if
the master's proof holds, proves itself over the master's nonce; the master then admits it.
A wrong proof on either side, or none within :data:`HANDSHAKE_TIMEOUT`, ends the handshake:
a worker quits, a refused worker is told why and reported through ``on_refused``.
Authenticated, not encrypted (docs/web.md, "The master/worker channel").

From a locustfile's ``init`` listener (Locust imports only)::

    if isinstance(runner, MasterRunner): MasterGuard(runner, token, on_refused=...).install()
    if isinstance(runner, WorkerRunner): WorkerAuth(runner, token, master="host:port").install()
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
import secrets
import time
from typing import Callable

log = logging.getLogger("ssbench.auth")

TOKEN_ENV = "SSBENCH_WORKER_TOKEN"
HELLO = "ssbench_auth_hello"
CHALLENGE = "ssbench_auth_challenge"
PROOF = "ssbench_auth_proof"
REFUSED = "ssbench_auth_refused"
HANDSHAKE_TIMEOUT = 15.0
MIN_TOKEN_CHARS = 32
_TOKEN_RE = re.compile(r"^[A-Za-z0-9_-]+$")


def new_token() -> str:
    """A fresh run token (256 random bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def token_problem(token: str | None) -> str | None:
    """Why ``token`` cannot be a run token, or None."""
    if not token:
        return f"${TOKEN_ENV} is not set"
    if len(token) < MIN_TOKEN_CHARS or not _TOKEN_RE.match(token):
        return f"${TOKEN_ENV} must be at least {MIN_TOKEN_CHARS} characters of A-Z a-z 0-9 _ -"
    return None


def token_from_env(env=None) -> str | None:
    value = (os.environ if env is None else env).get(TOKEN_ENV, "").strip()
    return value or None


def mac(token: str, role: str, client_id: str, nonce: str) -> str:
    """The proof that ``role`` ("master" or "worker") holds ``token``, bound to the worker's id
    and the other side's nonce (a recorded proof is worth nothing in another handshake)."""
    msg = f"ssbench-worker-auth/1|{role}|{client_id}|{nonce}".encode()
    return hmac.new(token.encode(), msg, hashlib.sha256).hexdigest()


def _same(a, b: str) -> bool:
    return isinstance(a, str) and hmac.compare_digest(a.encode(), b.encode())


class MasterGuard:
    """Locust master side: admit only workers that prove the token (see the module doc)."""

    def __init__(self, runner, token: str, on_refused: Callable[[str, str], None] | None = None,
                 timeout: float = HANDSHAKE_TIMEOUT):
        self.runner = runner
        self._token = token
        self.on_refused = on_refused
        self.timeout = timeout
        self.pending: dict[str, dict] = {}
        self.admitted: set[str] = set()
        self.refused: list[dict] = []      # {"worker", "reason", "time"}, for status pages and tests
        self._refused_ids: set[str] = set()
        self._dropped_logged: set[str] = set()
        self._orig = None

    def install(self) -> "MasterGuard":
        import gevent
        from locust.rpc import Message

        runner = self.runner
        self._orig = runner.handle_message
        runner.handle_message = self.handle_message
        # a worker that got in before this hook (between runner creation and init) starts over
        for client_id in list(runner.clients.keys()):
            node = runner.clients.pop(client_id)
            if runner._users_dispatcher is not None:
                runner._users_dispatcher.remove_worker(node)
            self.pending[client_id] = {"msg": Message("client_ready", None, client_id), "since": time.monotonic(),
                                       "nonce": None}
        gevent.spawn(self._reaper)
        runner.environment.events.quitting.add_listener(self._quitting)
        return self

    def _quitting(self, **_kw) -> None:
        for client_id in list(self.pending):
            self._send("quit", None, client_id)

    # ------------------------------------------------------------------ messages
    def handle_message(self, client_id: str, msg) -> None:
        if client_id in self.admitted:
            if msg.node_id != client_id:
                self._drop(client_id, msg, "a message in another worker's name")
                return
            if msg.type in (HELLO, PROOF):
                return
            if msg.type == "quit":
                self.admitted.discard(client_id)
            self._orig(client_id, msg)
            return
        t = msg.type
        if client_id in self._refused_ids:
            if t == "client_ready":
                self._send("quit", None, client_id)
            return
        if t == "client_ready":
            p = self.pending.setdefault(client_id, {"msg": None, "since": time.monotonic(), "nonce": None})
            p["msg"] = msg
            self._send("ack", {"index": self.runner.get_worker_index(client_id)}, client_id)
            log.info("worker %s connected; waiting for it to prove the run token", client_id)
        elif t == HELLO:
            p = self.pending.setdefault(client_id, {"msg": None, "since": time.monotonic(), "nonce": None})
            nonce_w = (msg.data or {}).get("nonce")
            if not nonce_w:
                self.refuse(client_id, f"no token (${TOKEN_ENV} is not set on the worker's host)")
                return
            p["nonce"] = secrets.token_hex(16)
            self._send(CHALLENGE, {"nonce": p["nonce"], "proof": mac(self._token, "master", client_id, str(nonce_w))},
                       client_id)
        elif t == PROOF:
            p = self.pending.get(client_id)
            if not p or not p.get("nonce"):
                self.refuse(client_id, "a token proof without a challenge")
            elif _same((msg.data or {}).get("proof"), mac(self._token, "worker", client_id, p["nonce"])):
                self._admit(client_id)
            else:
                self.refuse(client_id, f"wrong token (its ${TOKEN_ENV} is not this run's)")
        elif t == "quit":
            if self.pending.pop(client_id, None) is not None:
                log.info("worker %s left before proving the run token", client_id)
        elif t in ("heartbeat", "stats"):   # Locust's worker sends these from its start, before it can prove anything
            return
        else:
            self._drop(client_id, msg, "a message from a worker that has not proved the run token")

    def _admit(self, client_id: str) -> None:
        from locust import __version__
        from locust.rpc import Message

        p = self.pending.pop(client_id)
        self.admitted.add(client_id)
        log.info("worker %s proved the run token: admitted", client_id)
        msg = p.get("msg") or Message("client_ready", __version__, client_id)
        if msg.data is None:
            msg = Message("client_ready", __version__, client_id)
        self._orig(client_id, msg)

    def refuse(self, client_id: str, reason: str) -> None:
        import gevent

        self.pending.pop(client_id, None)
        if len(self._refused_ids) > 10_000:   # bounded, whatever knocks at the port
            self._refused_ids.clear()
        self._refused_ids.add(client_id)
        self.refused.append({"worker": client_id, "reason": reason, "time": time.time()})
        del self.refused[:-100]
        log.warning("refused worker %s: %s", client_id, reason)
        self._send(REFUSED, {"reason": reason}, client_id)
        self._send("quit", None, client_id)
        if self.on_refused is not None:
            gevent.spawn(self._report, client_id, reason)

    def _report(self, client_id: str, reason: str) -> None:
        try:
            self.on_refused(client_id, reason)
        except Exception:  # pragma: no cover - reporting is best effort
            log.exception("reporting a refused worker")

    def _drop(self, client_id: str, msg, why: str) -> None:
        if client_id not in self._dropped_logged:
            self._dropped_logged.add(client_id)
            log.warning("dropped %s message from %s: %s (further ones dropped silently)", msg.type, client_id, why)

    def _send(self, msg_type: str, data, client_id: str) -> None:
        try:
            self.runner.send_message(msg_type, data, client_id=client_id)
        except Exception as e:  # the worker is gone
            log.debug("sending %s to %s: %s", msg_type, client_id, e)

    def _reaper(self) -> None:
        import gevent

        while True:
            gevent.sleep(1.0)
            now = time.monotonic()
            for client_id, p in list(self.pending.items()):
                if now - p["since"] > self.timeout:
                    self.refuse(client_id, f"no token proof within {self.timeout:g}s (a worker without "
                                           f"ssbench's token handshake, or ${TOKEN_ENV} not set)")


class WorkerAuth:
    """Locust worker side: prove the token, and take no spawn before the master proved it."""

    def __init__(self, runner, token: str | None, master: str = ""):
        self.runner = runner
        self._token = token
        self.master = master or f"{getattr(runner, 'master_host', '?')}:{getattr(runner, 'master_port', '?')}"
        self._nonce = secrets.token_hex(16)
        self.verified = False
        self.refused: str | None = None
        self._orig = None

    def install(self) -> "WorkerAuth":
        runner = self.runner
        runner.register_message(CHALLENGE, self._on_challenge)
        runner.register_message(REFUSED, self._on_refused)
        self._orig = runner.handle_message
        runner.handle_message = self.handle_message
        if not self._token:
            log.error("$%s is not set: the master will refuse this worker", TOKEN_ENV)
        runner.send_message(HELLO, {"nonce": self._nonce} if self._token else {})
        return self

    def handle_message(self, msg) -> None:
        if not self.verified and msg.type in ("spawn", "update_user_class"):
            log.warning("ignored a %s message: the master at %s has not proved the run token", msg.type, self.master)
            return
        self._orig(msg)

    def _on_challenge(self, environment, msg, **_kw) -> None:
        data = msg.data or {}
        client_id = self.runner.client_id
        proof = mac(self._token or "", "worker", client_id, str(data.get("nonce", "")))
        if not self._token or not _same(data.get("proof"), mac(self._token, "master", client_id, self._nonce)):
            import gevent

            log.error("the master at %s did not prove this worker's token: this worker's $%s is not the "
                      "run's, or that is not the master this worker was told to use; quitting", self.master,
                      TOKEN_ENV)
            self.refused = "the master did not prove the run token"
            environment.process_exit_code = 2
            # our (useless) proof lets a genuine master report the mismatch; it then sends quit
            if self._token:
                self.runner.send_message(PROOF, {"proof": proof})
            gevent.spawn_later(3.0, self.runner.quit)   # outside the runner's own greenlets
            return
        self.verified = True
        log.info("the master at %s proved the run token", self.master)
        self.runner.send_message(PROOF, {"proof": proof})

    def _on_refused(self, environment, msg, **_kw) -> None:
        self.refused = str((msg.data or {}).get("reason", "refused"))
        log.error("the master at %s refused this worker: %s", self.master, self.refused)
        environment.process_exit_code = 2
