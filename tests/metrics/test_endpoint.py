"""The metrics endpoint's HTTP side, served for real on a free port: the exposition formats,
who may scrape (loopback open; the web UI's login off loopback), the settings from
flags and environment (one-line errors, exit 2 through the CLI, nothing written), and the last
scrape it waits for at the end."""

from __future__ import annotations

import base64
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.collectors.base import Sample
from harness.errors import UserError
from harness.metrics.live import LiveState
from harness.metrics.server import Endpoint
from harness.metrics.settings import EndpointSettings
from support import machine

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "tests" / "data" / "tiny.yaml"

def _login(user: str = "prom", password: str = "a-long-password"):
    """The web UI's login as the endpoint checks it, and the basic-auth header that passes."""
    from harness.web.auth import Credentials

    creds = Credentials.from_password(user, password)
    return creds.check, "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def get(url: str, headers: dict | None = None) -> tuple[int, dict, str]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


def counted(e: Endpoint, n: int) -> int:
    """The endpoint's count of scrapes once it reaches ``n`` (it counts a scrape after writing
    its last byte, which the client may have read first), or after 5 s."""
    deadline = time.monotonic() + 5
    while e.scrapes < n and time.monotonic() < deadline:
        time.sleep(0.01)
    return e.scrapes


@pytest.fixture
def endpoint():
    started = []

    def start(**kw) -> Endpoint:
        live = LiveState(command="run")
        live.begin_run("run-x", "tiny", "a target")
        live.repetition("run-x", "perm", 1)
        e = Endpoint(live, EndpointSettings(port=0, **kw)).start()
        started.append(e)
        return e

    yield start
    for e in started:
        e.close()


def test_prometheus_text_and_openmetrics_on_request(endpoint):
    e = endpoint()
    code, headers, body = get(e.url)
    assert code == 200 and headers["Content-Type"].startswith("text/plain")
    assert 'ssbench_run_info{command="run",matrix="tiny",run_id="run-x",target="a target"} 1.0' in body
    code, headers, body = get(e.url, {"Accept": "application/openmetrics-text; version=1.0.0"})
    assert code == 200 and headers["Content-Type"].startswith("application/openmetrics-text")
    assert body.rstrip().endswith("# EOF")
    assert get(e.url.replace("/metrics", "/"))[0] == 404
    assert counted(e, 2) == 2


@pytest.mark.untimed("a lower bound: a slower host only lengthens the wait")
def test_the_web_login_as_basic_auth(endpoint):
    creds_check, basic = _login()
    calls = []

    def check(user, password):
        calls.append(user)
        return creds_check(user, password)

    e = endpoint(login=check)
    t0 = time.monotonic()
    code, headers, body = get(e.url)
    assert code == 401 and "Basic" in headers["WWW-Authenticate"] and "ssbench_" not in body
    assert time.monotonic() - t0 >= 0.9          # a refusal is answered after a second
    assert get(e.url, {"Authorization": "Bearer " + "u" * 40})[0] == 401        # no other scheme
    assert get(e.url, {"Authorization": basic})[0] == 200
    assert get(e.url, {"Authorization": basic})[0] == 200
    assert calls == ["prom"]                     # the password hash is checked once, then remembered
    wrong = "Basic " + base64.b64encode(b"prom:not-the-password").decode()
    assert get(e.url, {"Authorization": wrong})[0] == 401
    assert get(e.url, {"Authorization": "Basic !!!"})[0] == 401
    assert counted(e, 2) == 2


def args(**kw) -> SimpleNamespace:
    base = dict(metrics_port=None, metrics_host=None, metrics_linger=30.0, metrics_tls_cert=None, metrics_tls_key=None)
    return SimpleNamespace(**{**base, **kw})


def test_settings_from_flags_and_environment():
    from harness.commands.common import metrics_settings

    assert metrics_settings(args(), env={}) is None                              # off by default
    s = metrics_settings(args(), env={"SSBENCH_METRICS_PORT": "9464"})
    assert (s.port, s.host, s.guarded) == (9464, "127.0.0.1", False)
    login = {"SSBENCH_WEB_USER": "u", "SSBENCH_WEB_PASSWORD": "long-enough"}
    s = metrics_settings(args(metrics_port=0), env={"SSBENCH_METRICS_PORT": "9464", **login})
    assert (s.port, s.guarded) == (0, False)                      # the flag wins; loopback stays open
    s = metrics_settings(args(metrics_port=1, metrics_host="0.0.0.0"), env=login)
    assert s.guarded and s.host == "0.0.0.0" and s.login("u", "long-enough") and not s.login("u", "wrong")
    for bad, env, where in (
            (args(metrics_port=70000), {}, "--metrics-port"),
            (args(), {"SSBENCH_METRICS_PORT": "http"}, "$SSBENCH_METRICS_PORT"),
            (args(metrics_port=1, metrics_host="0.0.0.0"), {}, "--metrics-host"),
            (args(metrics_port=1, metrics_tls_cert="c.pem"), {}, "--metrics-tls-key"),
            (args(metrics_port=1, metrics_linger=-1), {}, "--metrics-linger")):
        with pytest.raises(UserError) as e:
            metrics_settings(bad, env=env)
        assert e.value.field == where, (bad, str(e.value))


def test_off_loopback_it_serves_only_with_the_login(endpoint):
    """Bound to every interface (reached here through loopback): the login is required."""
    check, basic = _login()
    e = endpoint(host="0.0.0.0", login=check)
    url = f"http://127.0.0.1:{e.port}/metrics"
    assert get(url)[0] == 401 and get(url, {"Authorization": basic})[0] == 200


@pytest.mark.untimed("lower bounds are the endpoint's own waits; its time bounds are stretched to this machine "
                     "(support.machine.allowance)")
def test_the_end_waits_for_a_last_scrape_only_when_someone_scrapes():
    m = Endpoint(LiveState(command="run"), EndpointSettings(port=0, linger_seconds=5)).start()
    t0 = time.monotonic()
    m.close(linger=True)                         # never scraped: nobody to wait for
    assert time.monotonic() - t0 < machine.allowance(1)
    m = Endpoint(LiveState(command="run"), EndpointSettings(port=0, linger_seconds=10)).start()
    assert get(m.url)[0] == 200
    said = []
    threading.Timer(1.0, lambda: get(m.url)).start()
    t0 = time.monotonic()
    m.close(said.append, linger=True)
    waited = time.monotonic() - t0
    assert 0.9 <= waited < machine.allowance(5), waited             # returned at the next scrape, not after 10 s
    assert said and "last scrape" in said[0]


@pytest.mark.untimed("the lower bound is the endpoint's own wait for the next scrape")
def test_a_scrape_read_whole_before_the_server_counted_it_still_makes_the_end_wait():
    """The scraper can read a response's last byte before the server's thread counts the scrape
    (seen under a CPU quota: the end then waited for nobody). The count is held back here by
    0.05 s; close() waits for the scrape being written, so it counts and the end waits."""
    m = Endpoint(LiveState(command="run"), EndpointSettings(port=0, linger_seconds=10)).start()
    served = m._served
    m._served = lambda environ, began: (time.sleep(0.05), served(environ, began))
    assert get(m.url)[0] == 200
    url = m.url
    threading.Timer(1.0, lambda: get(url)).start()
    t0 = time.monotonic()
    m.close(linger=True)
    assert time.monotonic() - t0 >= 0.9 and m.scrapes == 2


def _cli(*a, env=None, cwd=None):
    return subprocess.run([sys.executable, "-m", "harness.cli", *a], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=60)


def test_bad_endpoint_settings_are_refused_before_anything_starts(tmp_path):
    """Exit 2, one line naming the flag or variable, nothing written, no server started."""
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    pg = tmp_path / "pg"
    base = dict(os.environ, PYTHONPATH=str(REPO), SSBENCH_PGDATA=str(pg))
    for k in ("SSBENCH_WEB_USER", "SSBENCH_WEB_PASSWORD", "SSBENCH_WEB_CREDENTIALS_FILE"):
        base.pop(k, None)
    cases = [
        (("run", str(TINY), "--metrics-port", "70000"), {}, "ssbench: error: --metrics-port: must be 0..65535"),
        (("run", str(TINY), "--metrics-port", "0", "--metrics-host", "0.0.0.0"), {},
         "ssbench: error: --metrics-host: the metrics endpoint on 0.0.0.0 (not loopback) needs"),
        (("saturate", str(TINY)), {"SSBENCH_METRICS_PORT": "x"}, "ssbench: error: $SSBENCH_METRICS_PORT: not a port"),
        (("bench", "--matrix", str(TINY), "--metrics-port", str(port)), {},
         f"ssbench: error: --metrics-port: cannot serve the metrics endpoint on 127.0.0.1:{port}"),
        (("web", "--metrics-port", "1", "--metrics-tls-cert", "nope.pem", "--metrics-tls-key", "nope.pem"), {},
         "ssbench: error: --metrics-tls-cert: nope.pem: no such file"),
    ]
    try:
        for a, extra, want in cases:
            work = tmp_path / f"w{len(list(tmp_path.iterdir()))}"
            work.mkdir()
            r = _cli(*a, env={**base, **extra}, cwd=work)
            assert r.returncode == 2, (a, r.stderr)
            assert r.stderr.splitlines() == [r.stderr.strip()] and r.stderr.startswith(want), (a, r.stderr)
            assert not any(work.iterdir()) and not pg.exists(), a
    finally:
        busy.close()


@pytest.fixture
def cert(tmp_path) -> tuple[Path, Path]:
    """A throwaway self-signed certificate for 127.0.0.1 and its key, made with openssl (as
    tests/web's TLS test makes one)."""
    if not shutil.which("openssl"):
        pytest.skip("needs openssl to make a certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    key.chmod(0o600)
    return cert, key


def test_tls(endpoint, cert):
    """--metrics-tls-cert/--metrics-tls-key: HTTPS."""
    import ssl

    check, basic = _login()
    e = endpoint(tls_cert=str(cert[0]), tls_key=str(cert[1]), login=check)
    assert e.url.startswith("https://")
    with pytest.raises(urllib.error.URLError):
        get(e.url)                                            # a client that checks the certificate says so
    req = urllib.request.Request(e.url, headers={"Authorization": basic})
    with urllib.request.urlopen(req, timeout=10, context=ssl.create_default_context(cafile=str(cert[0]))) as r:
        assert r.status == 200 and b"ssbench_run_info" in r.read()


def test_off_loopback_with_tls_needs_the_web_login_and_exposes_no_secret(cert, monkeypatch):
    """What ``--metrics-host 0.0.0.0 --metrics-tls-cert C --metrics-tls-key K`` starts (the
    commands' own ``metrics_endpoint``), with the web UI's credentials from the environment as
    ``ssbench web`` reads them: HTTPS only; a scrape without credentials, with a wrong password
    or another scheme, or in plain HTTP is refused and shows no figure; the login is let in; and
    the exposition holds no password or connection string, though one was planted in a target
    label, a host name, a counter's object and a wait type."""
    import ssl

    from harness.commands.common import metrics_endpoint

    password, secret = "web-Pa55word-xyz", "Sup3rS3cretConn"
    for k in [k for k in os.environ if k.startswith(("SSBENCH_WEB", "SSBENCH_METRICS"))]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("SSBENCH_WEB_USER", "prom")
    monkeypatch.setenv("SSBENCH_WEB_PASSWORD", password)
    # no linger at the end: what it waits for is test_the_end_waits_for_a_last_scrape_only_when_someone_scrapes's
    a = args(metrics_port=0, metrics_host="0.0.0.0", metrics_linger=0, metrics_tls_cert=str(cert[0]),
             metrics_tls_key=str(cert[1]))
    tls = ssl.create_default_context(cafile=str(cert[0]))

    def scrape(headers: dict | None = None, scheme: str = "https") -> tuple[int, str]:
        req = urllib.request.Request(f"{scheme}://127.0.0.1:{port}/metrics", headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=10, context=tls if scheme == "https" else None) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    endpoint = metrics_endpoint(a, "run")
    with endpoint as live:
        live.begin_run("run-x", "tiny", f"SQL Server (Driver={{ODBC}};Server=db1;PWD={secret};)")
        feed = live.repetition("run-x", "perm", 1)
        feed.tick([Sample(ts=time.time(), family="broker", metric="sends_per_s",
                          key=f"Broker Statistics;password={secret}", value=1.0),
                   Sample(ts=time.time(), family="waits", metric="wait_ms_per_s", key=f"WAIT;pwd={secret}", value=3.0)])
        feed.client({"workers": [[1, 1, f"h;token={secret}", 1, [time.time(), 1, 2, 3, 4]]]})
        port = endpoint.metrics.port
        refused = [scrape(),
                   scrape({"Authorization": "Basic " + base64.b64encode(b"prom:not-the-password").decode()}),
                   scrape({"Authorization": "Bearer " + "u" * 40})]
        assert [code for code, _ in refused] == [401, 401, 401]
        assert not any("ssbench_" in body for _, body in refused)
        with pytest.raises((urllib.error.URLError, ConnectionError)):
            scrape(scheme="http")                                 # TLS only: plain HTTP gets no answer
        bodies = []
        auth = "Basic " + base64.b64encode(f"prom:{password}".encode()).decode()
        for accept in ("text/plain", "application/openmetrics-text; version=1.0.0"):
            code, body = scrape({"Authorization": auth, "Accept": accept})
            assert code == 200 and "ssbench_run_info" in body and "ssbench_worker_users" in body
            bodies.append(body)
    for body in bodies:
        for leak in (secret, password, "Server=db1;PWD=S"):
            assert leak not in body
        assert "PWD=***" in body and "password=***" in body and "token=***" in body


@pytest.mark.untimed("lower bounds are the endpoint's own waits; its time bounds are stretched to this machine "
                     "(support.machine.allowance)")
def test_every_recent_scraper_gets_its_last_scrape():
    """Two scrapers (Prometheus and another, or two Prometheus servers): the end waits for both."""
    m = Endpoint(LiveState(command="run"), EndpointSettings(port=0, linger_seconds=10)).start()
    assert get(m.url, {"User-Agent": "Prometheus/2.42"})[0] == 200
    assert get(m.url, {"User-Agent": "other"})[0] == 200
    threading.Timer(0.5, lambda: get(m.url, {"User-Agent": "other"})).start()
    threading.Timer(1.5, lambda: get(m.url, {"User-Agent": "Prometheus/2.42"})).start()
    t0 = time.monotonic()
    m.close(linger=True)
    assert 1.4 <= time.monotonic() - t0 < machine.allowance(5)


@pytest.mark.untimed("lower bounds are the endpoint's own waits; its time bounds are stretched to this machine "
                     "(support.machine.allowance)")
def test_a_last_scrape_counts_only_if_it_collected_after_the_end_within_its_timeout():
    """CI once lost the last repetition's figures in Prometheus: the scrape the end waited for
    was not one that delivered them. Not counted: a scrape that began collecting before the end
    (here held on the state's lock), nor one answered after most of the timeout Prometheus
    sends in its header (Prometheus dropped it)."""
    m = Endpoint(LiveState(command="run"), EndpointSettings(port=0, linger_seconds=10)).start()
    prom = {"User-Agent": "Prometheus/2.42", "X-Prometheus-Scrape-Timeout-Seconds": "10"}
    assert get(m.url, prom)[0] == 200
    held = threading.Event()

    def hold(seconds: float) -> None:
        with m.live.lock:
            held.set()
            time.sleep(seconds)

    threading.Thread(target=hold, args=(0.8,)).start()
    held.wait(5)
    before = threading.Thread(target=get, args=(m.url, prom))   # collects once the lock is let go
    before.start()
    time.sleep(0.2)
    given_up = dict(prom, **{"X-Prometheus-Scrape-Timeout-Seconds": "0.000001"})
    threading.Timer(0.9, lambda: get(m.url, given_up)).start()
    threading.Timer(1.6, lambda: get(m.url, prom)).start()
    t0 = time.monotonic()
    m.close(linger=True)
    assert 1.5 <= time.monotonic() - t0 < machine.allowance(5)
    before.join(5)


@pytest.mark.untimed("a scrape takes milliseconds and close() a fraction of a second; the bounds are seconds, "
                     "stretched to this machine (support.machine.allowance)")
@pytest.mark.parametrize("idle", [1, 5])
def test_idle_connections_hold_neither_the_scrapes_nor_the_exit(endpoint, cert, idle):
    """A health check or port scanner opens TCP to the HTTPS endpoint and sends nothing: the
    scrapes are still answered at once, and close() (the run's exit) returns at once, with the
    silent sockets still open."""
    import ssl

    e = endpoint(tls_cert=str(cert[0]), tls_key=str(cert[1]))
    tls = ssl.create_default_context(cafile=str(cert[0]))
    silent = [socket.create_connection(("127.0.0.1", e.port), timeout=5) for _ in range(idle)]
    try:
        time.sleep(0.3)                                   # the accepting thread has taken them
        bound = machine.allowance(5.0)
        for _ in range(3):
            t0 = time.monotonic()
            with urllib.request.urlopen(e.url, timeout=bound, context=tls) as r:
                assert r.status == 200 and b"ssbench_run_info" in r.read()
            assert time.monotonic() - t0 < bound
        closing = threading.Thread(target=e.close, daemon=True)
        t0 = time.monotonic()
        closing.start()
        closing.join(machine.allowance(3.0))
        assert not closing.is_alive(), f"close() still waiting after {time.monotonic() - t0:.1f} s"
    finally:
        for s in silent:
            s.close()
