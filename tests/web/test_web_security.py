"""``ssbench web`` off the loopback: the login, the worker token, and what crosses the wire.

Real processes throughout: ``ssbench web`` on the embedded target (a Locust master and one
local worker), and "remote" workers started with ``ssbench web --worker`` as on another host
(same machine, own environment, own temporary directory). The remote worker of the session
test reaches the master through a TCP relay that records every byte both ways: the recording
is what crossed the wire. (On the loopback a session needs no login: tests/web/test_web_parity.py.)
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests

from support import machine
from test_web_ui import REPO, WebProcess
from support.summaries import read as read_summary

USER, PASSWORD = "benchadmin", "Pw-7q2xZ-never-on-the-wire"
#: a password variable a remote worker reads on its own host (the mssql sender's kind of
#: variable); its value must never leave that host
WORKER_SECRET_ENV, WORKER_SECRET = "SSBENCH_MSSQL_PASSWORD", "Sentinel-Worker-Pw-4471"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

#: the certificate a web UI served over HTTPS is checked against, by its URL
_CA: dict[str, str] = {}


def web_session(test):
    """A test that starts ``ssbench web`` (a Locust master and its workers)."""
    return pytest.mark.swarm(pytest.mark.untimed("logins, tokens and what is written; no figure depends on the host's "
                                                 "speed, and the waits are stretched to this machine")(test))


class Relay:
    """A TCP relay 127.0.0.1:port -> target, recording everything both ways."""

    def __init__(self, target_port: int):
        self.target = ("127.0.0.1", target_port)
        self.data = bytearray()
        self._lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                a, _ = self.sock.accept()
            except OSError:
                return
            b = socket.create_connection(self.target)
            for src, dst in ((a, b), (b, a)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src, dst):
        try:
            while chunk := src.recv(65536):
                with self._lock:
                    self.data += chunk
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        self.sock.close()


def _web(tmp_path: Path, *extra: str, env: dict | None = None) -> WebProcess:
    cmd = [sys.executable, "-m", "harness.cli", "web", "--target", "embedded", "--port", "0", "--master-port", "0",
           "--results", str(tmp_path / "results"), *extra]
    return WebProcess(tmp_path / "results", cmd=cmd, env=env)


def _worker(tmp_path: Path, master_port: int, initiator: int, token: str | None, name: str) -> subprocess.Popen:
    """``ssbench web --worker`` as on another host: its own environment and temporary directory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SSBENCH_WEB")}
    env.pop("SSBENCH_WORKER_TOKEN", None)
    if token is not None:
        env["SSBENCH_WORKER_TOKEN"] = token
    env[WORKER_SECRET_ENV] = WORKER_SECRET
    tmp = tmp_path / f"{name}-tmp"
    tmp.mkdir()
    env.update(TMPDIR=str(tmp), PYTHONUNBUFFERED="1")
    out = open(tmp_path / f"{name}.out", "wb")
    return subprocess.Popen([sys.executable, "-m", "harness.cli", "web", "--worker", "--master-host", "127.0.0.1",
                             "--master-port", str(master_port), "--initiator", str(initiator)],
                            cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)


def _master_port(web: WebProcess) -> int:
    return int(re.search(r"master port (\d+)", web.output).group(1))


def _token(web: WebProcess) -> str:
    return re.search(r"SSBENCH_WORKER_TOKEN=(\S+) ssbench worker", web.output).group(1)


def _client(url: str) -> requests.Session:
    """A client of the UI at ``url``; over HTTPS every request checks the test's certificate
    (per request: $REQUESTS_CA_BUNDLE would override a session's ``verify``)."""
    s = requests.Session()
    if url in _CA:
        s.request = functools.partial(s.request, verify=_CA[url])
    return s


def _status(url: str, s: requests.Session) -> dict:
    r = s.get(url + "ssbench/status", timeout=5)
    assert r.status_code == 200, r.text
    return r.json()


def _login(url: str, password: str = PASSWORD, user: str = USER) -> requests.Session:
    s = _client(url)
    s.post(url + "ssbench/login", data={"username": user, "password": password}, timeout=10)
    return s


class Login:
    """A login to the UI at ``url`` for a series of requests (a poll's), made anew once it is
    :attr:`FRESH_S` old: a login lasts 6 s here (--login-minutes 0.1), and each one costs the
    master a scrypt check (about 0.16 CPU-s on the 2-vCPU test VM), which a login per poll paid
    every 0.3 s."""

    FRESH_S = 2.0

    def __init__(self, url: str):
        self.url, self._s, self._at = url, None, 0.0

    def __call__(self) -> requests.Session:
        if self._s is None or time.monotonic() - self._at > self.FRESH_S:
            self._s, self._at = _login(self.url), time.monotonic()
        return self._s


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _until(fn, timeout: float, what: str):
    deadline = time.monotonic() + machine.allowance(timeout)   # stretched to this machine
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


# --------------------------------------------------------------------------- no credentials, no UI

def test_exposed_ui_without_credentials_is_refused(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SSBENCH_WEB")}
    for extra in (["--web-host", "0.0.0.0"], ["--require-login"]):
        p = subprocess.run([sys.executable, "-m", "harness.cli", "web", "--port", "0", *extra], cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 2, p.stderr
        assert "SSBENCH_WEB_PASSWORD" in p.stderr and "SSBENCH_WEB_CREDENTIALS_FILE" in p.stderr, p.stderr
        assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    # a credentials file the group or others can read is refused, and its content is not echoed
    f = tmp_path / "creds"
    f.write_text(f"{USER}:{PASSWORD}\n")
    f.chmod(0o640)
    p = subprocess.run([sys.executable, "-m", "harness.cli", "web", "--port", "0", "--web-host", "0.0.0.0"],
                       cwd=REPO, env=dict(env, SSBENCH_WEB_CREDENTIALS_FILE=str(f)), capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 2 and "chmod 600" in p.stderr and PASSWORD not in p.stderr, p.stderr
    # a worker without the run's token does not start
    p = subprocess.run([sys.executable, "-m", "harness.cli", "web", "--worker", "--master-host", "127.0.0.1"],
                       cwd=REPO, env={k: v for k, v in env.items() if k != "SSBENCH_WORKER_TOKEN"},
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "SSBENCH_WORKER_TOKEN" in p.stderr, p.stderr
    # an offered rate below 0 (0 is the closed loop) is refused before anything starts
    p = subprocess.run([sys.executable, "-m", "harness.cli", "web", "--port", "0", "--rate", "-5"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and p.stderr.strip().splitlines() == [
        "ssbench: error: --rate: must be 0 (closed loop) to 1e+06 SENDs/s per initiator, got -5"], p.stderr


# --------------------------------------------------------------------------- TLS, login, tokens, the wire

@web_session
def test_tls_login_tokens_and_a_remote_worker_session_that_writes_no_secret(pg_server, tmp_path):
    """One ``ssbench web`` with a login, served over HTTPS, in three acts. TLS (``--tls-cert/
    --tls-key``, a self-signed certificate made with openssl here): the UI is served over HTTPS,
    the session cookie is Secure, and ssbench web reaches its own UI. The login and the workers:
    every route refuses the anonymous, a wrong password is refused, a worker with a wrong token and
    a plain Locust worker are refused, the right token is admitted, a login expires. Then that
    admitted worker's session, as on another host: results, logs, outputs and every byte between
    master and remote worker hold neither the web password, nor the worker's password variable,
    nor the token (only ssbench web's one line for starting remote workers shows the token)."""
    cred_file = tmp_path / "web-credentials"
    cred_file.write_text(f"# ssbench web\n{USER}:{PASSWORD}\n")
    cred_file.chmod(0o600)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SSBENCH_WEB") and k != "SSBENCH_WORKER_TOKEN"}
    env.update(SSBENCH_WEB_CREDENTIALS_FILE=str(cred_file), TMPDIR=str(tmp_path / "master-tmp"))
    env[WORKER_SECRET_ENV] = WORKER_SECRET
    (tmp_path / "master-tmp").mkdir()
    cert = _certificate(tmp_path)
    tls = ["--tls-cert", str(cert), "--tls-key", str(cert.with_name("key.pem"))] if cert else []
    web = _web(tmp_path, "--initiators", "2", "--local-workers", "1", "--require-login", "--login-minutes", "0.1",
               *tls, env=env)
    workers: list[subprocess.Popen] = []
    relay, url = None, ""
    try:
        url = web.wait_ready(120)    # ready: ssbench web polled its own UI (over HTTPS with a certificate)
        if cert:
            _tls(url, cert)
        relay = _logins_and_tokens(web, url, tmp_path, env, workers)
        _remote_worker_session(web, url, tmp_path, relay)
    except BaseException:
        print("---- ssbench web\n" + web.output)
        for f in tmp_path.glob("*.out"):
            print(f"---- {f.name}\n" + f.read_text()[-3000:])
        raise
    finally:
        for w in workers:
            _stop(w)
        web.kill()
        if relay is not None:
            relay.close()
        _CA.pop(url, None)
    if not cert:
        pytest.skip("the TLS act needs openssl to make a certificate (the others passed over HTTP)")


def _certificate(tmp_path: Path) -> Path | None:
    """A self-signed certificate for localhost and 127.0.0.1 (its key beside it), or None without openssl."""
    if not shutil.which("openssl"):
        return None
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                    "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    key.chmod(0o600)
    return cert


def _tls(url: str, cert: Path) -> None:
    """HTTPS only, a Secure session cookie; from here on the test's requests check ``cert``."""
    assert url.startswith("https://"), url
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(url, timeout=5)     # self-signed: a client that checks says so
    _CA[url] = str(cert)
    s = _client(url)
    r = s.post(url + "ssbench/login", data={"username": USER, "password": PASSWORD}, timeout=10,
               allow_redirects=False)
    assert r.status_code == 302 and "secure" in r.headers.get("Set-Cookie", "").lower(), r.headers
    st = s.get(url + "ssbench/status", timeout=5)
    assert st.status_code == 200 and len(st.json()["workers"]) == 1, st.text
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.get(url.replace("https://", "http://") + "ssbench/status", timeout=5)


def _logins_and_tokens(web: WebProcess, url: str, tmp_path: Path, env: dict, workers: list) -> Relay:
    """The login and the worker tokens; returns the relay the admitted "remote" worker uses."""
    assert "login required" in web.output
    anon = _client(url)
    # ---- without a login: only the login page
    r = anon.get(url, timeout=5, allow_redirects=False, headers={"Accept": "text/html"})
    assert r.status_code == 302 and r.headers["Location"].endswith("/login"), (r.status_code, r.headers)
    for method, path in (("GET", "stats/requests"), ("GET", "ssbench/metrics"), ("GET", "ssbench/status"),
                         ("GET", "logs"), ("POST", "stop"), ("GET", "ssbench/")):
        r = anon.request(method, url + path, timeout=5, allow_redirects=False)
        assert r.status_code in (302, 401), (path, r.status_code)
        assert "workers" not in r.text and "received" not in r.text.lower(), (path, r.text[:200])
    r = anon.post(url + "swarm", data={"user_count": 1, "spawn_rate": 1}, timeout=10, allow_redirects=False)
    assert r.status_code == 401, r.status_code
    assert not list((tmp_path / "results").glob("*-web*")), "an anonymous start prepared a session"
    assert anon.get(url + "login", timeout=5).status_code == 200
    # ---- a wrong password: refused, logged with the user name, without the password
    bad = _login(url, password="Wrong-Password-123")
    assert bad.get(url + "ssbench/status", timeout=5, allow_redirects=False).status_code in (302, 401)
    _until(lambda: "failed web UI login for user 'benchadmin'" in web.output, 10, "the failed login notice")
    assert "Wrong-Password-123" not in web.output
    # ---- the right one
    s = _login(url)
    st = _status(url, s)
    assert len(st["workers"]) == 1 and st["refused"] == [], st

    # ---- a worker with a wrong token: refused, the run reports it, the worker exits 2
    port = _master_port(web)
    wrong = _worker(tmp_path, port, 2, "W" * 43, "wrong-token")
    workers.append(wrong)
    assert wrong.wait(timeout=60) == 2
    wout = (tmp_path / "wrong-token.out").read_text()
    assert "refused this worker: wrong token" in wout, wout
    _until(lambda: re.search(r"refused worker \S+: wrong token", web.output), 15, "the refusal in ssbench web")
    login = Login(url)
    st = _status(url, login())
    assert [r["reason"] for r in st["refused"]] == ["wrong token (its $SSBENCH_WORKER_TOKEN is not this run's)"]
    assert len(st["workers"]) == 1, st

    # ---- a plain Locust worker (no token handshake at all): refused after the handshake timeout
    plain_env = {k: v for k, v in env.items() if not k.startswith("SSBENCH_WEB")}
    plain_file = tmp_path / "plain_locustfile.py"   # a Locust worker without ssbench's handshake
    plain_file.write_text("from locust import User, task\n\nclass U(User):\n    @task\n    def t(self):\n"
                          "        pass\n")
    plain = subprocess.Popen([sys.executable, "-m", "locust", "-f", str(plain_file),
                              "--worker", "--master-host", "127.0.0.1", "--master-port", str(port)],
                             cwd=REPO, env=plain_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    workers.append(plain)
    _until(lambda: re.search(r"refused worker \S+: no token proof within", web.output), 40,
           "the plain worker's refusal")
    plain.wait(timeout=30)   # told to quit
    # ---- the right token: admitted (the "remote" worker, through the recording relay)
    relay = Relay(port)
    good = _worker(tmp_path, relay.port, 2, _token(web), "remote")
    workers.append(good)
    _until(lambda: len(_status(url, login())["workers"]) == 2, 40, "the right-token worker")
    assert good.poll() is None
    st = _status(url, login())
    assert len(st["refused"]) == 2 and sorted(st["workers"].values()) == [1, 2], st

    # ---- the login expires (--login-minutes 0.1)
    assert s.get(url + "ssbench/status", timeout=5, allow_redirects=False).status_code == 401
    return relay


def _remote_worker_session(web: WebProcess, url: str, tmp_path: Path, relay: Relay) -> None:
    """A session on the local and the remote worker; nothing secret crosses the wire or is written.
    A login lasts 6 s here (--login-minutes 0.1): each step asks with a fresh enough one (:class:`Login`)."""
    token = _token(web)
    login = Login(url)
    r = login().post(url + "swarm", data={"user_count": 4, "spawn_rate": 4, "host": "ssbench:embedded",
                                              "ssbench_initiators": 2, "ssbench_payload_bytes": 64,
                                              "ssbench_dialogs": "per_thread", "ssbench_rate": 100}, timeout=300)
    assert r.json().get("success"), r.text
    _until(lambda: login().get(url + "stats/requests", timeout=5).json().get("total_rps", 0) > 0, 60,
           "RPS above 0")
    time.sleep(1)
    login().post(url + "stop", timeout=300)
    results = tmp_path / "results"
    run = _until(lambda: [p.parent for p in results.glob("*-web*/run.json")
                          if json.loads(p.read_text()).get("status") == "complete"], 120, "the saved run")[0]
    summary = read_summary(next(run.glob("*/rep-01/summary.json")))
    assert summary["messages_sent"] > 0 and summary["web"]["initiators_with_users"] == [1, 2], summary["web"]
    assert summary["permutation"]["offered_rate"] == 200, summary["permutation"]   # 100 a second on each
    recordings = sorted(p.name for p in run.glob("*/rep-01/**/*") if p.name.startswith("worker-i"))
    assert any(n.startswith("worker-i2") for n in recordings) or summary["messages_sent"] > 0

    # what crossed the wire: the spec went to the remote worker (the capture is real) ...
    wire = bytes(relay.data)
    assert b"sender_specs" in wire and b"ssbench_auth_proof" in wire, len(wire)
    # ... and no secret did
    for secret in (PASSWORD, WORKER_SECRET, token):
        assert secret.encode() not in wire, f"{secret[:4]}... crossed the wire"
    # everything written: results, the master's and workers' files (logs, specs), outputs
    written = [p for base in (results, tmp_path / "master-tmp", tmp_path / "remote-tmp")
               for p in base.rglob("*") if p.is_file()]
    written.append(tmp_path / "remote.out")
    assert any(p.name.endswith(".log") for p in written), written   # the Locust logs are in there
    for p in written:
        data = p.read_bytes()
        for secret in (PASSWORD, WORKER_SECRET, token):
            assert secret.encode() not in data, f"{secret[:4]}... in {p}"
    out = web.output
    assert PASSWORD not in out and WORKER_SECRET not in out
    assert out.count(token) == 1, "the token is printed exactly once"
