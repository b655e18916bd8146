"""The web UI drives the same swarm and repetition as a headless run, so what a run does a web
session does too: a ramp-down to fewer users stops the surplus users after their SEND in flight
(the client's count equals the database's, nothing cut), the per-worker figures are in the
summary, and the run lock keeps a headless run off the target while the web UI holds it.

Real processes: ``ssbench web`` (a Locust master with the web UI and two local workers) on the
embedded target, driven through the web UI's own HTTP endpoints."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
import requests

from test_web_ui import REPO, WebProcess
from support.summaries import read as read_summary

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]


def _until(fn, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def test_ramp_down_quiesces_and_a_session_has_per_worker_figures(pg_server, tmp_path):
    results = tmp_path / "results"
    web = WebProcess(results, cmd=[sys.executable, "-m", "harness.cli", "web", "--target", "embedded", "--port", "0",
                                   "--master-port", "0", "--initiators", "2", "--results", str(results)])
    try:
        url = web.wait_ready(120)
        s = requests.Session()
        form = {"user_count": 8, "spawn_rate": 100, "host": "ssbench:embedded", "ssbench_initiators": 2,
                "ssbench_payload_bytes": 64, "ssbench_dialogs": "per_thread"}
        assert s.post(url + "swarm", data=form, timeout=300).json().get("success")
        _until(lambda: s.get(url + "stats/requests", timeout=5).json().get("user_count") == 8, 60, "8 users")
        _until(lambda: s.get(url + "stats/requests", timeout=5).json().get("total_rps", 0) > 0, 60, "RPS above 0")
        # the run lock: a headless run on the same target is refused while the web UI holds it
        m = tmp_path / "m.yaml"
        m.write_text((REPO / "tests" / "data" / "tiny.yaml").read_text())
        r = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(m), "--out", str(tmp_path / "headless")],
                           cwd=REPO, capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and "ssbench web" in r.stderr, r.stderr
        time.sleep(2)
        # a ramp-down while running: 8 -> 2 users (the surplus users are stopped mid-load)
        assert s.post(url + "swarm", data=dict(form, user_count=2), timeout=60).json().get("success")
        _until(lambda: s.get(url + "stats/requests", timeout=5).json().get("user_count") == 2, 60, "2 users")
        time.sleep(2)
        s.post(url + "stop", timeout=300)
        run = _until(lambda: [p.parent for p in results.glob("*-web*/run.json")
                              if json.loads(p.read_text()).get("status") == "complete"], 180, "the saved session")[0]
        d = read_summary(next(run.glob("*/rep-01/summary.json")))
    except BaseException:
        print("---- ssbench web\n" + web.output)
        raise
    finally:
        web.kill()
    # every SEND the database committed was counted by a worker, the ramped-down users' included
    assert d["messages_lost"] == 0 and d["messages_sent"] > 0, d
    assert d["messages_sent_client"] == d["messages_sent"], (d["messages_sent_client"], d["messages_sent"])
    assert not d.get("messages_sent_client_cut")
    # one local worker per initiator, each with its figures
    workers = {(w["initiator"], w["worker"]): w for w in d["workers"]}
    assert set(workers) == {(1, 1), (2, 1)}, d["workers"]
    assert all(w["sends"] > 0 and w["cpu_percent"] is not None for w in workers.values()), d["workers"]
    assert d["users_spawned"] == 8
