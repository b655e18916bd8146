"""``ssbench web`` end to end, driven from a real (headless) Chromium.

Starts ``ssbench web`` on the embedded target as a subprocess with ``--require-login``, checks
that the browser gets only the login page (and stays there with a wrong password), logs in,
fills Locust's start form
(ssbench's own parameters included), starts a swarm, checks that requests per second rise above
zero and that the "Broker metrics" tab shows live, changing broker metrics, stops the swarm,
saves a screenshot (test-artifacts/web-ui.png), checks the saved run directory, then Ctrl-C's
the process and checks that nothing it started is left running.

Uses the system's Chromium and chromedriver (Debian packages); never downloads a browser.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from harness.results.model import SUMMARY_SCHEMA
from harness.results.fields import DISTURBED_STATUSES
from harness.saturate import NEUTRAL_STATUSES
from support.summaries import read as read_summary

from support.browser import chromium, require_chromium

from support import machine

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"

USERS, PAYLOAD, DIALOGS = 3, 256, "trick150"
#: the sessions' offered SENDs/s (open loop: nothing here judges a rate, and a closed loop's load
#: took both cores for the length of the browser's steps); ``ssbench web --rate`` pre-fills the first
RATE, RATE2 = 100, 60
WEB_USER, WEB_PASSWORD = "browser-admin", "Br0wser-Test-Pw"


class WebProcess:
    """``ssbench web`` as a subprocess; its output is collected by a thread."""

    def __init__(self, results: Path, cmd: list[str] | None = None, env: dict | None = None):
        cmd = cmd or [sys.executable, "-m", "harness.cli", "web", "--target", "embedded", "--port", "0",
               "--master-port", "0", "--initiators", "1", "--results", str(results)]
        env = dict(os.environ if env is None else env, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, text=True, start_new_session=True)
        self.lines: list[str] = []
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_ready(self, timeout: float) -> str:
        deadline = time.monotonic() + machine.allowance(timeout)
        while time.monotonic() < deadline:
            if "ssbench web: ready" in self.output:
                m = re.search(r"Locust web UI at (https?://\S+/)", self.output)
                assert m, self.output
                return m.group(1)
            assert self.proc.poll() is None, f"ssbench web exited early:\n{self.output}"
            time.sleep(0.2)
        raise AssertionError(f"ssbench web not ready within {timeout}s:\n{self.output}")

    def kill(self) -> None:
        """After a failure: Ctrl-C first, then the process and everything it started."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        if self.proc.poll() is None:
            try:
                kids = psutil.Process(self.proc.pid).children(recursive=True)
            except psutil.NoSuchProcess:
                kids = []
            for p in [psutil.Process(self.proc.pid), *kids]:
                try:
                    p.kill()
                except psutil.NoSuchProcess:
                    pass
            self.proc.wait(timeout=10)


def _until(fn, timeout: float, what: str, poll: float = 0.25):
    deadline = time.monotonic() + machine.allowance(timeout)   # stretched to this machine
    last = None
    while time.monotonic() < deadline:
        try:
            last = fn()
        except Exception as e:  # the React UI re-renders: stale elements, not-yet-present ones
            last = e
        else:
            if last:
                return last
        time.sleep(poll)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def _type(el, value) -> None:
    from selenium.webdriver.common.keys import Keys

    el.send_keys(Keys.CONTROL, "a")
    el.send_keys(Keys.DELETE)
    el.send_keys(str(value))


def _header(driver, label: str) -> str:
    """A value of Locust's navbar (Status, Workers, RPS, Failures)."""
    from selenium.webdriver.common.by import By

    el = driver.find_element(By.XPATH, f"//*[normalize-space(text())='{label}']/following-sibling::*[1]")
    return el.text.strip()


def _button(driver, text: str):
    from selenium.webdriver.common.by import By

    found = [b for b in driver.find_elements(By.TAG_NAME, "button")
             if b.is_displayed() and b.text.strip().lower() == text.lower()]
    assert found, f"no {text!r} button"
    return found[0]


def _tab(driver, title: str):
    from selenium.webdriver.common.by import By

    found = [t for t in driver.find_elements(By.CSS_SELECTOR, "[role=tab]") if t.text.strip().lower() == title]
    assert found, f"no {title!r} tab"
    return found[0]


def _start_swarm(driver, users: int, payload: int, dialogs: str, rate: float | None = None) -> None:
    """Fill Locust's start form (the page's, or the "New" dialog's) and start; the offered
    rate as the form holds it unless ``rate`` is given."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    field = _until(lambda: [e for e in driver.find_elements(By.NAME, "userCount") if e.is_displayed()], 30,
                   "the start form")[0]
    _type(field, users)
    _type(driver.find_element(By.NAME, "spawnRate"), users)
    _until(lambda: _button(driver, "Custom parameters"), 10, "the custom parameters section").click()
    _until(lambda: driver.find_element(By.NAME, "ssbenchPayloadBytes").is_displayed(), 10, "custom parameters")
    _type(driver.find_element(By.NAME, "ssbenchInitiators"), 1)
    _type(driver.find_element(By.NAME, "ssbenchPayloadBytes"), payload)
    Select(driver.find_element(By.NAME, "ssbenchDialogs")).select_by_value(dialogs)
    if rate is not None:
        _type(driver.find_element(By.NAME, "ssbenchRate"), rate)
    driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()


def _log_in(driver, user: str, password: str) -> None:
    """Locust's login page (``--web-login``): user name, password, submit."""
    from selenium.webdriver.common.by import By

    _until(lambda: driver.find_element(By.NAME, "username").is_displayed(), 30, "the login form")
    _type(driver.find_element(By.NAME, "username"), user)
    _type(driver.find_element(By.NAME, "password"), password)
    driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()


def _stop_swarm(driver) -> None:
    _button(driver, "stop").click()
    try:
        _until(lambda: _header(driver, "Status").upper() == "STOPPED", 60, "status STOPPED")
    except AssertionError as e:
        # seen once in eight runs beside three CPU hogs (and in two CI-equivalent runs): the page kept
        # STOPPING and stopped refreshing (its broker metrics too) while the session had been saved:
        # Locust's page polls no more once a poll says "stopping", which the master now never
        # answers (harness.web.polls). Say what the server answers the page's own session now, and
        # how fast, to tell a stalled page from a master that never reached STOPPED.
        raise AssertionError(f"{e}; the server, asked from the page: {_fetch_from_page(driver, 'stats/requests')}")


def _fetch_from_page(driver, path: str) -> str:
    """``path`` fetched by the page (its cookies, its connections), 10 s at most: status, time, text."""
    js = ("const done = arguments[arguments.length - 1], t0 = performance.now(), c = new AbortController();"
          "setTimeout(() => c.abort(), 10000);"
          f"fetch({path!r}, {{signal: c.signal}}).then(r => r.text().then(t => done("
          "r.status + ' in ' + Math.round(performance.now() - t0) + ' ms: ' + t.slice(0, 300))))"
          ".catch(err => done('no answer in ' + Math.round(performance.now() - t0) + ' ms: ' + err));")
    try:
        return driver.execute_async_script(js)
    except Exception as err:  # the diagnosis of a failure must not hide it
        return f"(could not ask: {err})"


def _saved_runs(results: Path) -> list[Path]:
    """Complete runs, oldest first."""
    out = []
    for rj in sorted(results.glob("*-web*/run.json")):
        if json.loads(rj.read_text()).get("status") == "complete":
            out.append(rj.parent)
    return out


def _broker_table(driver) -> dict[str, str]:
    """The Broker metrics tab's rows, read in one go (React re-renders the table every poll)."""
    rows = driver.execute_script(
        "return Array.from(document.querySelectorAll('table tbody tr')).map("
        "tr => Array.from(tr.querySelectorAll('td')).map(td => td.innerText.trim()));")
    return {r[0]: r[1] for r in rows if len(r) >= 2}


BROKER_ROWS = ("Messages received/s at the target", "Transmission queue depth (all initiators)",
               "Target queue depth", "Activation tasks running", "Sampled at (UTC)")


def _num(text: str) -> float:
    return float(text.replace(",", "")) if text not in ("", "-") else float("nan")


def _diagnose(web: WebProcess, url: str | None, driver) -> None:
    """Printed on failure (pytest shows it): ssbench web's output, Locust's stats, the page."""
    import urllib.request

    print("---- ssbench web output\n" + web.output)
    if url:
        for path in ("stats/requests", "ssbench/status"):
            try:
                with urllib.request.urlopen(url + path, timeout=5) as r:
                    print(f"---- {path}\n" + r.read().decode()[:4000])
            except Exception as e:
                print(f"---- {path}: {e}")
    if driver is not None:
        try:
            print("---- page text\n" + driver.find_element("tag name", "body").text[:3000])
            ARTIFACTS.mkdir(exist_ok=True)
            driver.save_screenshot(str(ARTIFACTS / "web-ui-failure.png"))
        except Exception as e:
            print(f"---- page: {e}")


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.swarm
@pytest.mark.untimed("what the page shows and the saved runs' counts; its waits are stretched to this machine")
def test_web_ui_session_in_a_browser(pg_server, tmp_path):
    require_chromium()
    results = tmp_path / "results"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SSBENCH_WEB")}
    env.update(SSBENCH_WEB_USER=WEB_USER, SSBENCH_WEB_PASSWORD=WEB_PASSWORD)
    web = WebProcess(results, cmd=[sys.executable, "-m", "harness.cli", "web", "--target", "embedded", "--port", "0",
                                   "--master-port", "0", "--initiators", "1", "--results", str(results),
                                   "--require-login", "--rate", str(RATE)], env=env)
    driver = None
    try:
        url = web.wait_ready(timeout=120)
        driver = chromium(tmp_path / "chromium-profile")
        driver.get(url)

        # ---- the login page only; a wrong password keeps it so
        from selenium.webdriver.common.by import By

        _until(lambda: driver.current_url.rstrip("/").endswith("/login"), 30, "the redirect to the login page")
        assert not driver.find_elements(By.NAME, "userCount")
        _log_in(driver, WEB_USER, "not-the-password")
        _until(lambda: "Invalid username or password" in driver.find_element(By.TAG_NAME, "body").text, 30,
               "the failed login's message")
        assert not driver.find_elements(By.NAME, "userCount") and driver.current_url.rstrip("/").endswith("/login")
        driver.get(url + "ssbench/")   # ssbench's own pages are behind the login too
        _until(lambda: driver.current_url.rstrip("/").endswith("/login"), 10, "the login page for /ssbench/")
        _until(lambda: "failed web UI login for user 'browser-admin'" in web.output, 10, "the failed login notice")
        assert "not-the-password" not in web.output
        # ---- log in
        driver.get(url)
        _log_in(driver, WEB_USER, WEB_PASSWORD)

        # ---- the start form, with ssbench's own parameters (the offered rate pre-filled by --rate)
        assert driver.find_element(By.NAME, "ssbenchRate").get_attribute("value") in (str(RATE), f"{RATE:.1f}")
        _start_swarm(driver, USERS, PAYLOAD, DIALOGS)

        # ---- load: Locust's requests per second above zero
        _until(lambda: _header(driver, "Status").upper() == "RUNNING", 90, "status RUNNING")
        _until(lambda: _num(_header(driver, "RPS")) > 0, 60, "RPS above zero")

        # ---- the Broker metrics tab: live and changing
        _until(lambda: _tab(driver, "broker metrics"), 10, "the Broker metrics tab").click()
        first = _until(lambda: (lambda r: r if all(k in r for k in BROKER_ROWS)
                                and _num(r["Messages received/s at the target"]) > 0 else None)(
            _broker_table(driver)), 30, "messages received/s above zero in the Broker metrics tab")
        assert "Top wait 1" in " ".join(first) or first.get("Top waits") == "-", first
        assert "PostgreSQL" in first["Target"] and "SQL Server" not in first["Target"], first["Target"]

        def changed():
            now = _broker_table(driver)
            moved = [k for k in first if not k.startswith("State") and now.get(k) != first[k]]
            return now if now.get("Sampled at (UTC)") != first["Sampled at (UTC)"] and len(moved) >= 2 else None

        later = _until(changed, 8, "the broker metrics to change (updated at least every 2 s)")
        assert _num(later["Messages processed (session)"]) > _num(first["Messages processed (session)"])
        time.sleep(1.5)
        ARTIFACTS.mkdir(exist_ok=True)
        shot = ARTIFACTS / "web-ui.png"
        driver.save_screenshot(str(shot))
        assert shot.stat().st_size > 10_000

        # ---- stop the swarm: the session is saved as a run
        _stop_swarm(driver)
        run = _until(lambda: _saved_runs(results)[0] if _saved_runs(results) else None, 90,
                     "the session's run directory")
        rep = next(run.glob("*/rep-01"))
        assert rep.parent.name == f"i1-t{USERS}-{DIALOGS}-p{PAYLOAD}-durable-rate{RATE}"
        summary = read_summary(rep / "summary.json")
        assert summary["schema"] == SUMMARY_SCHEMA
        assert summary["permutation"]["dialogs"] == DIALOGS and summary["permutation"]["payload_bytes"] == PAYLOAD
        assert summary["permutation"]["total_threads"] == USERS
        assert summary["permutation"]["rate"] == RATE and summary["permutation"]["offered_rate"] == RATE
        assert summary["dialogs_created"] == USERS * 150 and summary["usable_dialogs"] == USERS
        assert summary["send_rate"] > 0 and summary["messages_sent"] > 0
        assert summary["messages_lost"] == 0 and summary["drained"], summary
        assert summary["errors"] == 0, summary["error_samples"]
        # a busy host's or disk's status included, and a disturbance: beside a loaded suite the
        # collectors' ticks can stall for 2 s (server_frozen, as CI saw at a load average of 9)
        assert summary["status"] in NEUTRAL_STATUSES + DISTURBED_STATUSES, summary
        assert summary["window"]["measure_seconds"] > 1
        families = {json.loads(line)["family"] for line in (rep / "samples.jsonl").read_text().splitlines()}
        assert {"queues", "throughput", "waits", "activation"} <= families, families
        lat = json.loads((rep / "latency.json").read_text())
        assert lat["schema"] == "ssbench.latency/1" and sum(lat["send"].values()) > 0
        assert "SEND" in (rep / "locust_stats.csv").read_text()
        assert (run / rep.parent.name / "summary.json").is_file()
        from harness.matrix import load_matrix

        m = load_matrix(run / "matrix.yaml")
        assert [p.id for p in m.permutations()] == [rep.parent.name]
        rj = json.loads((run / "run.json").read_text())
        assert rj["schema"] == "ssbench.run/1" and rj["permutations_done"] == 1 and rj["messages_lost"] == 0
        assert rj["web"]["rate"] == RATE and rj["web"]["dialogs"] == DIALOGS, rj["web"]
        assert "SQL Server" not in rj["target"]["label"]

        # ---- a second session with another strategy: the dialogs are provisioned anew
        _button(driver, "new").click()
        _start_swarm(driver, 2, 100, "shared", rate=RATE2)
        _until(lambda: _header(driver, "Status").upper() == "RUNNING", 90, "status RUNNING (second session)")
        _tab(driver, "broker metrics").click()   # the header's RPS may still be the first session's
        _until(lambda: (lambda r: r.get("State", "").startswith("running") and "shared dialogs" in r.get("Session", "")
                        and _num(r.get("Messages received/s at the target", "-")) > 0)(_broker_table(driver)),
               60, "the second session's messages at the target")
        time.sleep(1)
        _stop_swarm(driver)
        runs = _until(lambda: (lambda r: r if len(r) == 2 else None)(_saved_runs(results)), 90, "the second run")
        s2 = read_summary(next(runs[1].glob("*/rep-01/summary.json")))
        assert s2["permutation_id"] == f"i1-t2-shared-p100-durable-rate{RATE2}", s2["permutation_id"]
        assert s2["dialogs_created"] == 1 and s2["usable_dialogs"] == 1, s2
        assert s2["send_rate"] > 0 and s2["messages_lost"] == 0 and s2["drained"], s2

        # ---- Ctrl-C: everything ssbench web started is gone
        driver.quit()
        driver = None
        children = psutil.Process(web.proc.pid).children(recursive=True)
        assert any("locust" in " ".join(c.cmdline()) for c in children), [c.cmdline() for c in children]
        web.proc.send_signal(signal.SIGINT)
        rc = web.proc.wait(timeout=60)
        web._t.join(timeout=5)
        assert rc == 0, web.output
        left = []
        for c in children:
            try:
                if c.is_running() and c.status() != psutil.STATUS_ZOMBIE:
                    left.append(c.cmdline())
            except psutil.NoSuchProcess:
                pass
        assert not left, f"left running after Ctrl-C: {left}"
        assert "embedded PostgreSQL server keeps running" in web.output, web.output
    except BaseException:
        _diagnose(web, url if "url" in locals() else None, driver)
        raise
    finally:
        if driver is not None:
            try:
                driver.quit()
            except Exception:
                pass
        web.kill()
        shutil.rmtree(tmp_path / "chromium-profile", ignore_errors=True)


# --------------------------------------------------------------------------- fast pieces

def test_live_metrics_table_rows():
    """The Broker metrics tab's rows from one collector tick; waits averaged over recent ticks."""
    from harness.collectors.base import Sample
    from harness.web.metrics import LiveMetrics, table_rows

    m = LiveMetrics("PostgreSQL 18 emulation of Service Broker")
    m.set_state("running", run_id="r1", description="4 client thread(s)")
    m.on_tick([Sample(1.0, "throughput", "received_per_s", "", 1234.5),
               Sample(1.0, "queues", "depth", "xmitq.i1", 7), Sample(1.0, "queues", "depth", "queue", 3),
               Sample(1.0, "queues", "xmitq_total", "", 7), Sample(1.0, "activation", "tasks_running", "", 2),
               Sample(1.0, "waits", "wait_ms_per_s", "WRITELOG", 800.0)])
    m.on_tick([Sample(2.0, "throughput", "received_per_s", "", 1000.0)])   # no wait flush this tick
    snap = m.snapshot()
    assert snap["top_waits"] == [{"wait_type": "WRITELOG", "wait_ms_per_s": 400.0}]
    rows = {r["metric"]: r["value"] for r in table_rows(snap)}
    assert rows["State"] == "running (run r1)"
    assert rows["Messages received/s at the target"] == "1,000.0"
    assert rows["Top wait 1: WRITELOG"] == "400.0 ms/s"
    assert len(snap["history"]) == 2


def test_control_api_roundtrip():
    from harness.load.control import ControlClient, ControlServer

    calls = []

    def start(body):
        calls.append(body)
        return {"ok": True, "echo": body}

    def boom(body):
        raise RuntimeError("no target")

    srv = ControlServer({"POST /session/start": start, "GET /metrics": boom}).start()
    try:
        c = ControlClient(srv.url)
        assert c.post("/session/start", {"users": 3}) == {"ok": True, "echo": {"users": 3}}
        assert c.get("/metrics") == {"ok": False, "error": "RuntimeError: no target"}
        bad = ControlClient(srv.url.rsplit("/", 1)[0] + "/wrong-token")
        import urllib.error

        with pytest.raises(urllib.error.HTTPError):
            bad.get("/metrics")
    finally:
        srv.stop()
    assert calls == [{"users": 3}]
