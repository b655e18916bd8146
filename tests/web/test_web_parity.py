"""The web UI drives the same swarm and repetition as a headless run, so what a run does a web
session does too: a ramp-down to fewer users stops the surplus users after their SEND in flight
(the client's count equals the database's, nothing cut), the per-worker figures are in the
summary, and the run lock keeps a headless run off the target while the web UI holds it.
``ssbench web --metrics-port``: the session's live metrics come from the same swarm and
repetition as a headless run's (the live figures of the web UI's long-lived master's merge, the
session's sampler), and once the session is saved its committed figures are its summary's.
On loopback without ``--require-login`` the session needs no login, even with credentials set.

Real processes: one ``ssbench web`` session (a Locust master with the web UI and two local
workers) on the embedded target, driven through the web UI's own HTTP endpoints, its metrics
endpoint scraped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from harness.ports import free_port
from support import machine
from support.summaries import read as read_summary, window
from test_web_ui import REPO, WebProcess

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400), pytest.mark.swarm]


def scrape(url: str) -> list[tuple[str, dict, float]]:
    text = requests.get(url, timeout=10).text
    return [(s.name, s.labels, s.value) for f in text_string_to_metric_families(text) for s in f.samples]


def total(rows, name, **labels) -> float:
    return sum(v for n, lab, v in rows if n == name and all(lab.get(k) == x for k, x in labels.items()))


def _until(fn, timeout: float, what: str):
    deadline = time.monotonic() + machine.allowance(timeout)   # stretched to this machine
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


@pytest.mark.untimed("counts (client against database, per worker, scraped against the summary) and the run "
                     "lock's refusal; no figure depends on the host's speed")
def test_a_session_ramps_down_has_per_worker_figures_and_serves_its_metrics_live_then_as_saved(pg_server, tmp_path):
    results = tmp_path / "results"
    port = free_port()
    metrics = f"http://127.0.0.1:{port}/metrics"
    # on 127.0.0.1 without --require-login: no login, even with credentials set, and no token line
    # (all workers are local, the master port is on loopback); every request below is anonymous
    env = {k: v for k, v in os.environ.items() if not k.startswith("SSBENCH_WEB") and k != "SSBENCH_WORKER_TOKEN"}
    env.update(SSBENCH_WEB_USER="benchadmin", SSBENCH_WEB_PASSWORD="Pw-7q2xZ-loopback")
    web = WebProcess(results, cmd=[sys.executable, "-m", "harness.cli", "web", "--target", "embedded", "--port", "0",
                                   "--master-port", "0", "--initiators", "2", "--results", str(results),
                                   "--metrics-port", str(port), "--metrics-linger", "0"], env=env)
    try:
        url = web.wait_ready(120)
        assert f"live metrics at {metrics}" in web.output
        assert "login required" not in web.output and "SSBENCH_WORKER_TOKEN=" not in web.output
        assert requests.get(url, timeout=5, allow_redirects=False).status_code == 200
        st = requests.get(url + "ssbench/status", timeout=5, allow_redirects=False)
        assert st.status_code == 200 and len(st.json()["workers"]) == 2, st.text
        # the run lock: a headless run on the same target is refused while the web UI holds it
        # (from its start on: checked before the swarm, so the session and its replay below are shorter)
        m = tmp_path / "m.yaml"
        m.write_text((REPO / "tests" / "data" / "tiny.yaml").read_text())
        r = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(m), "--out", str(tmp_path / "headless")],
                           cwd=REPO, capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and "ssbench web" in r.stderr, r.stderr
        s = requests.Session()
        form = {"user_count": 4, "spawn_rate": 100, "host": "ssbench:embedded", "ssbench_initiators": 2,
                "ssbench_payload_bytes": 64, "ssbench_dialogs": "per_thread"}
        assert s.post(url + "swarm", data=form, timeout=300).json().get("success")
        _until(lambda: s.get(url + "stats/requests", timeout=5).json().get("user_count") == 4, 60, "4 users")
        _until(lambda: s.get(url + "stats/requests", timeout=5).json().get("total_rps", 0) > 0, 60, "RPS above 0")
        page = _until(lambda: (lambda p: p if p.get("state") == "running" else None)(   # what the /ssbench/
            s.get(url + "ssbench/metrics", timeout=5).json()), 30, "the running session's metrics")   # page draws
        assert [r["metric"] for r in page["rows"]][:3] == ["State", "Target", "Session"], page
        live = _until(lambda: (lambda r: r if total(r, "ssbench_sends_total", phase="measure") > 0 else None)(
            scrape(metrics)), 60, "live SENDs in the measured window")
        assert total(live, "ssbench_repetition_state", state="running") == 1
        assert total(live, "ssbench_run_info", matrix="web", command="web") == 1
        assert sorted(lab["initiator"] for n, lab, _ in live if n == "ssbench_transmission_queue_depth") == ["1", "2"]
        time.sleep(2)   # the session's window is its replay's below: ticks enough for every host figure
        # a ramp-down while running: 4 -> 2 users (the surplus users are stopped mid-load)
        assert s.post(url + "swarm", data=dict(form, user_count=2), timeout=60).json().get("success")
        _until(lambda: s.get(url + "stats/requests", timeout=5).json().get("user_count") == 2, 60, "2 users")
        time.sleep(2)
        s.post(url + "stop", timeout=300)
        run = _until(lambda: [p.parent for p in results.glob("*-web*/run.json")
                              if json.loads(p.read_text()).get("status") == "complete"], 180, "the saved session")[0]
        d = read_summary(next(run.glob("*/rep-01/summary.json")))
        rows = _until(lambda: (lambda r: r if total(r, "ssbench_repetition_state", state="complete") else None)(
            scrape(metrics)), 30, "the committed session")
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
    assert d["users_spawned"] == 4
    # the saved session's committed figures, scraped, are its summary's
    run_id = json.loads((run / "run.json").read_text())["run_id"]
    p = {"run_id": run_id, "repetition": "1"}
    assert total(rows, "ssbench_sends_total", **p) == d["messages_sent_client"] > 0
    assert total(rows, "ssbench_send_errors_total", **p) == d["errors"]
    for name in ("sent", "received", "lost", "undelivered"):
        assert total(rows, f"ssbench_repetition_messages_{name}", **p) == d[f"messages_{name}"], name
    assert total(rows, "ssbench_repetition_status", status=d["status"], **p) == 1
    assert total(rows, "ssbench_e2e_latency_seconds_count", **p) == d["e2e_latency_ms"]["count"]
    # the session's matrix.yaml replayed headless: the same permutation, a summary with the same
    # fields (each as present or absent as the session's; the web section is the session's own)
    replay = tmp_path / "replay"
    r = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(run / "matrix.yaml"), "--out", str(replay)],
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    [hp] = list(replay.glob("*/rep-01/summary.json"))
    h = read_summary(hp)
    assert hp.parent.parent.name == next(run.glob("*/rep-01")).parent.name   # the same permutation
    present = lambda doc: {k for k, v in doc.items() if v is not None and k != "web"}  # noqa: E731
    # the queues' growth needs 3 of the collector's ticks inside the window: on a loaded host one
    # side may have fewer (seen beside four other test processes), so each side is checked
    # against its own ticks
    for doc, rep in ((d, next(run.glob("*/rep-01"))), (h, hp.parent)):
        ticks = {ts for ts, _ in window(rep, doc).points("queues", "xmitq_total")}
        assert {"xmitq_depth_growth", "queue_depth_growth"} <= present(doc) if len(ticks) >= 3 else \
            not {"xmitq_depth_growth", "queue_depth_growth"} & present(doc), (len(ticks), present(doc))
    growth = {"xmitq_depth_growth", "queue_depth_growth"}
    assert present(h) - growth == present(d) - growth, (present(h) ^ present(d))
