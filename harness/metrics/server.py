"""The HTTP endpoint: ``GET /metrics`` in the Prometheus text format, or OpenMetrics when the
scraper asks for it (``prometheus_client``'s WSGI app chooses), on its own thread.

Off by default. On loopback (the default address) it is open, like the web UI. On any other
address it needs the web UI's login (``$SSBENCH_WEB_USER``/``$SSBENCH_WEB_PASSWORD``) as HTTP
basic auth (Prometheus's ``basic_auth``): one scheme for one person's two views; the command
refuses to start without it (:func:`harness.commands.common.metrics_settings`). A refused request is logged with the client's address, never what it sent,
and answered after a second (slows down guessing). TLS with a certificate and key.

The accepting thread only accepts TCP: the TLS handshake runs in the connection's own thread,
bounded by :data:`HANDSHAKE_S`, and every read by :data:`IDLE_S`, so a health check or port
scanner that opens a socket and waits holds one thread for a few seconds, never the scrapes
or the exit (:meth:`Endpoint.close` returns within ``SHUTDOWN_POLL_S`` plus a scrape in flight).

The endpoint exposes figures only: no connection string, no password (the families
pass every label value through :func:`harness.redact.redact_string`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import math
import socket
import ssl
import threading
import time
from typing import Callable
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from .families import SsbenchCollector
from .live import LiveState
from .settings import EndpointSettings

log = logging.getLogger("ssbench.metrics")

PATH = "/metrics"
REFUSED_DELAY_S = 1.0
SCRAPERS_RECENT_S = 600.0     # at the end, the scrapers seen this recently are waited for
HANDSHAKE_S = 5.0             # a connection's TLS handshake, in its own thread
IDLE_S = 30.0                 # a connection silent this long is closed (a read's timeout)
SHUTDOWN_POLL_S = 0.2         # how often the accepting thread looks for close()
LATE_SHARE = 0.8              # a scrape answered after this share of its timeout may have been dropped


class _Quiet(WSGIRequestHandler):
    timeout = IDLE_S

    def log_message(self, *_a):
        pass


class _Server(ThreadingWSGIServer):
    """Accepts plain TCP; with a TLS context, each connection's handshake runs in its handler
    thread with a timeout (a silent client holds that thread only), and a failed one is closed
    quietly."""

    tls: ssl.SSLContext | None = None

    def process_request_thread(self, request, client_address):
        if self.tls is not None:
            try:
                request.settimeout(HANDSHAKE_S)
                request = self.tls.wrap_socket(request, server_side=True)
            except (OSError, ValueError):      # ssl.SSLError, a timeout, a reset: not a scrape
                self.shutdown_request(request)
                return
        super().process_request_thread(request, client_address)


class _Served:
    """A response body that calls ``done`` once the server has written all of it (a run may exit
    right after its last scrape counts, so it counts only once delivered), then ``finished``
    when the server closes it, whether or not it was all written (WSGI's ``close``)."""

    def __init__(self, body: list[bytes], done, finished):
        self.body, self.done, self.finished = body, done, finished

    def __len__(self) -> int:           # wsgiref sets Content-Length for a body of one block
        return len(self.body)

    def __iter__(self):
        yield from self.body
        self.done()

    def close(self) -> None:
        self.finished()


class Endpoint:
    """One command's endpoint: serves its :class:`LiveState` (``live``, what the runner and the
    repetitions feed); :meth:`start`, :attr:`url`, :meth:`close`."""

    def __init__(self, live: LiveState, settings: EndpointSettings):
        self.live, self.settings = live, settings
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(SsbenchCollector(live))
        self._metrics = make_wsgi_app(self.registry)
        self._httpd = None
        self._thread: threading.Thread | None = None
        self._cond = threading.Condition()
        self.scrapes = 0
        #: scrapes whose response is being written: its scraper may have read its last byte
        #: before the server counts it (close() waits for them)
        self._in_flight = 0
        self.last_scrape: float | None = None    # epoch seconds: when the last counted scrape began
        #: each scraper (address and user agent: two Prometheus servers, or a test and Prometheus)
        #: -> its last scrape, epoch seconds
        self.scrapers: dict[tuple[str, str], float] = {}
        self._logins: set[bytes] = set()         # digests of basic-auth logins already checked

    # ------------------------------------------------------------------ the WSGI app
    def app(self, environ, start_response):
        if environ.get("PATH_INFO") != PATH:
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"ssbench: the metrics are at /metrics\n"]
        if self.settings.guarded and not self._authorized(environ.get("HTTP_AUTHORIZATION", "")):
            log.warning("metrics endpoint: refused a scrape from %s (no valid login)",
                        environ.get("REMOTE_ADDR", "?"))
            time.sleep(REFUSED_DELAY_S)
            start_response("401 Unauthorized", [("Content-Type", "text/plain"),
                                                ("WWW-Authenticate", 'Basic realm="ssbench metrics"')])
            return [b"ssbench: the web UI's login is required (HTTP basic auth)\n"]
        began = time.time()
        body = self._metrics(environ, start_response)
        with self._cond:
            self._in_flight += 1
        return _Served(body, lambda: self._served(environ, began), self._finished)

    def _finished(self) -> None:
        with self._cond:
            self._in_flight -= 1
            self._cond.notify_all()

    def _served(self, environ, began: float) -> None:
        """A scrape's last byte is written: it counts, as of when it began collecting, unless it
        took so long that Prometheus (which says its timeout in a header) had given it up."""
        try:
            timeout = float(environ.get("HTTP_X_PROMETHEUS_SCRAPE_TIMEOUT_SECONDS", "inf"))
        except ValueError:
            timeout = math.inf
        if time.time() - began >= LATE_SHARE * timeout:
            log.info("metrics endpoint: a scrape took longer than %.0f %% of its %g s timeout",
                     100 * LATE_SHARE, timeout)
            return
        with self._cond:
            self.scrapes += 1
            self.last_scrape = began
            self.scrapers[(environ.get("REMOTE_ADDR", ""), environ.get("HTTP_USER_AGENT", ""))] = began
            self._cond.notify_all()

    def _authorized(self, header: str) -> bool:
        scheme, _, value = header.partition(" ")
        if scheme.lower() != "basic" or self.settings.login is None:
            return False
        try:
            user, sep, password = base64.b64decode(value.strip(), validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        if not sep:
            return False
        # a password hash costs ~0.1 s of CPU: a login checked once is remembered (its digest)
        digest = hashlib.sha256(f"{user}\0{password}".encode()).digest()
        if any(hmac.compare_digest(digest, d) for d in self._logins):
            return True
        if self.settings.login(user, password):
            self._logins.add(digest)
            return True
        return False

    # ------------------------------------------------------------------ the server
    def start(self) -> "Endpoint":
        s = self.settings

        class Server(_Server):
            address_family = socket.AF_INET6 if ":" in s.host else socket.AF_INET

        self._httpd = make_server(s.host, s.port, self.app, Server, handler_class=_Quiet)
        if s.tls_cert:
            self._httpd.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self._httpd.tls.load_cert_chain(s.tls_cert, s.tls_key)
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(SHUTDOWN_POLL_S,),
                                        name="ssbench-metrics", daemon=True)
        self._thread.start()
        return self

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        host = self.settings.host
        shown = f"[{host}]" if ":" in host else host
        return f"{'https' if self.settings.tls_cert else 'http'}://{shown}:{self.port}{PATH}"

    def wait_for_scrape(self, after: float, timeout: float, recent: float = SCRAPERS_RECENT_S) -> bool:
        """Wait up to ``timeout`` until every scraper seen in the last ``recent`` seconds has
        scraped after ``after`` (epoch); False if one did not. Returns at once when nothing
        scraped (no one is watching)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                waiting = [t for t in self.scrapers.values() if after - recent < t <= after]
                if not waiting:
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)

    def close(self, say: Callable[[str], None] = lambda text: None, linger: bool = False) -> None:
        """Stop serving; first, with ``linger`` and if anything has scraped, wait up to the
        linger time for one more scrape, so the last repetition's final figures are collected."""
        end, wait = time.time(), self.settings.linger_seconds
        if linger and wait > 0:
            with self._cond:        # a scrape being written counts once written
                self._cond.wait_for(lambda: not self._in_flight, SHUTDOWN_POLL_S)
            if self.last_scrape is not None:
                say(f"waiting up to {wait:g} s for a last scrape of {self.url}")
                self.wait_for_scrape(end, wait)
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
