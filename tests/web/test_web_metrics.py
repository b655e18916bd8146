"""``ssbench web --metrics-port``: a session's live metrics come from the same swarm and
repetition as a headless run's (the workers' Progress through the web UI's long-lived master,
the session's sampler), and once the session is saved its committed figures are its summary's.

Real processes: ``ssbench web`` (a Locust master with the web UI and a local worker) on the
embedded target, driven through the web UI's own HTTP endpoints, its metrics endpoint scraped."""

from __future__ import annotations

import json
import sys

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from harness.ports import free_port
from support.embedded import wait_for
from test_web_ui import WebProcess
from support.summaries import read as read_summary

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]


def scrape(url: str) -> list[tuple[str, dict, float]]:
    text = requests.get(url, timeout=10).text
    return [(s.name, s.labels, s.value) for f in text_string_to_metric_families(text) for s in f.samples]


def total(rows, name, **labels) -> float:
    return sum(v for n, lab, v in rows if n == name and all(lab.get(k) == x for k, x in labels.items()))


def test_a_web_session_is_served_live_and_committed_as_saved(pg_server, tmp_path):
    results = tmp_path / "results"
    port = free_port()
    metrics = f"http://127.0.0.1:{port}/metrics"
    web = WebProcess(results, cmd=[sys.executable, "-m", "harness.cli", "web", "--target", "embedded", "--port", "0",
                                   "--master-port", "0", "--initiators", "1", "--results", str(results),
                                   "--metrics-port", str(port), "--metrics-linger", "0"])
    try:
        url = web.wait_ready(120)
        assert f"live metrics at {metrics}" in web.output
        s = requests.Session()
        form = {"user_count": 2, "spawn_rate": 100, "host": "ssbench:embedded", "ssbench_initiators": 1,
                "ssbench_payload_bytes": 64, "ssbench_dialogs": "per_thread"}
        assert s.post(url + "swarm", data=form, timeout=300).json().get("success")
        live = wait_for(lambda: (lambda r: r if total(r, "ssbench_sends_total", phase="measure") > 0 else None)(
            scrape(metrics)), 60, "live SENDs in the measured window", poll=0.3)
        assert total(live, "ssbench_repetition_state", state="running") == 1
        assert total(live, "ssbench_run_info", matrix="web", command="web") == 1
        assert [lab["initiator"] for n, lab, _ in live if n == "ssbench_transmission_queue_depth"] == ["1"]
        s.post(url + "stop", timeout=300)
        run = wait_for(lambda: [p.parent for p in results.glob("*-web*/run.json")
                             if json.loads(p.read_text()).get("status") == "complete"], 180, "the saved session", poll=0.3)[0]
        d = read_summary(next(run.glob("*/rep-01/summary.json")))
        rows = wait_for(lambda: (lambda r: r if total(r, "ssbench_repetition_state", state="complete") else None)(
            scrape(metrics)), 30, "the committed session", poll=0.3)
    except BaseException:
        print("---- ssbench web\n" + web.output)
        raise
    finally:
        web.kill()
    run_id = json.loads((run / "run.json").read_text())["run_id"]
    p = {"run_id": run_id, "repetition": "1"}
    assert total(rows, "ssbench_sends_total", **p) == d["messages_sent_client"] > 0
    assert total(rows, "ssbench_send_errors_total", **p) == d["errors"]
    for name in ("sent", "received", "lost", "undelivered"):
        assert total(rows, f"ssbench_repetition_messages_{name}", **p) == d[f"messages_{name}"], name
    assert total(rows, "ssbench_repetition_status", status=d["status"], **p) == 1
    assert total(rows, "ssbench_e2e_latency_seconds_count", **p) == d["e2e_latency_ms"]["count"]
