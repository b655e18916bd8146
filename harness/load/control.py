"""The controller <-> Locust master link: loopback HTTP + JSON.

The controller (``ssbench run``, ``saturate``, ``web``) owns the target (database connections,
the embedded broker, the collectors) and the results; the Locust master is a gevent process that
must never block on a database driver and never writes a result file, so it talks to the
controller over this link (the messages are :mod:`harness.load.protocol`'s; the routes are
:meth:`harness.load.swarm.Swarm.start`'s). The URL carries a random token, the server listens on
127.0.0.1 only, and the master learns the URL from ``$SSBENCH_CONTROL`` (an address, not a
spec: nothing of the swarm travels through the environment).
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

from harness.load.protocol import ProtocolError

log = logging.getLogger(__name__)

Handler = Callable[[dict], dict]
#: how often the serving loop looks for a stop request
POLL_S = 0.05
#: the environment variable that gives the Locust master the controller's URL
CONTROL_ENV = "SSBENCH_CONTROL"


class ControlServer:
    """``routes`` maps ``"GET /metrics"`` / ``"POST /session/start"`` to a function of the JSON
    body (``{}`` for GET) returning a JSON-able dict."""

    def __init__(self, routes: dict[str, Handler], host: str = "127.0.0.1", port: int = 0):
        self.routes = routes
        self.token = secrets.token_urlsafe(16)
        server = self

        class _H(BaseHTTPRequestHandler):
            def _handle(self, method: str) -> None:
                prefix = f"/{server.token}"
                route = self.path[len(prefix):] if self.path.startswith(prefix + "/") else None
                fn = server.routes.get(f"{method} {route}") if route is not None else None
                if fn is None:
                    self._reply(404, {"ok": False, "error": "not found"})
                    return

                def refuse(error: str) -> None:   # a request this side cannot read: one line, a 400
                    log.warning("control %s %s: %s", method, route, error)
                    self._reply(400, {"ok": False, "error": error})

                try:
                    n = int(self.headers.get("Content-Length") or 0)
                except ValueError:
                    refuse("bad Content-Length")
                    return
                try:
                    raw = self.rfile.read(n) if n else b""
                except OSError:
                    raw = b""
                if len(raw) < n:
                    # the caller went away mid-request (a master killed, or its greenlet ended,
                    # while it sent): nobody reads a reply, and its process watch reports why
                    log.debug("control %s %s: the request ended before its body", method, route)
                    return
                try:
                    body = json.loads(raw) if raw else {}
                except ValueError as e:
                    refuse(f"not JSON: {e}")
                    return
                try:
                    out = fn(body)
                except ProtocolError as e:   # another version or type: no traceback
                    refuse(f"{type(e).__name__}: {e}")
                    return
                except Exception as e:  # reported to the caller, logged here
                    log.exception("control %s %s", method, route)
                    out = {"ok": False, "error": f"{type(e).__name__}: {e}"}
                self._reply(200, out)

            def _reply(self, code: int, obj: Any) -> None:
                data = json.dumps(obj, default=str).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                try:
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    # the caller is gone (a killed master): the controller's own process watch
                    # reports that, in one line, not a server traceback
                    log.debug("control %s: the caller went away before the reply", self.path)

            def do_GET(self):  # noqa: N802
                self._handle("GET")

            def do_POST(self):  # noqa: N802
                self._handle("POST")

            def log_message(self, *_a):  # quiet
                pass

        self.httpd = ThreadingHTTPServer((host, port), _H)
        self.httpd.daemon_threads = True
        # stop() waits for the serving loop to notice: at most one poll interval (the default
        # 0.5 s would be paid after every repetition's swarm)
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": POLL_S},
                                        name="ssbench-control", daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/{self.token}"

    def start(self) -> "ControlServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class ControlClient:
    """Used inside the Locust master (urllib is cooperative under gevent's monkey patching)."""

    def __init__(self, url: str):
        self.url = url.rstrip("/")

    def _call(self, method: str, path: str, body: dict | None, timeout: float) -> dict:
        data = json.dumps(body or {}).encode() if method == "POST" else None
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read() or b"{}")

    def get(self, path: str, timeout: float = 5) -> dict:
        return self._call("GET", path, None, timeout)

    def post(self, path: str, body: dict, timeout: float = 60) -> dict:
        return self._call("POST", path, body, timeout)
