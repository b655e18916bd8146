"""After Stop the live metrics do not keep showing the last sample as if it were current: the
values are cleared and only the time (and age) of the session's last sample is kept.

The end-to-end test drives a real session (the real embedded target on the test session's
PostgreSQL, the real collectors, the real control API over HTTP) without Locust: a session's
start and stop are what the Locust master calls."""

from __future__ import annotations

import time

import pytest

from harness.collectors.base import Sample
from harness.errors import UserError
from harness.web.metrics import LiveMetrics, sampled_at, table_rows

LIVE_FIELDS = ("received_per_s", "queue_depth", "activation_tasks_running", "xmitq_total", "ts")


def _tick(m: LiveMetrics, ts: float) -> None:
    m.on_tick([Sample(ts, "throughput", "received_per_s", "", 900.0), Sample(ts, "queues", "depth", "queue", 178),
               Sample(ts, "activation", "tasks_running", "", 4), Sample(ts, "queues", "xmitq_total", "", 12)])


def test_idle_clears_the_last_sample_and_keeps_its_time():
    m = LiveMetrics("PostgreSQL 18 emulation of Service Broker")
    m.set_state("running", run_id="r1", description="4 client thread(s)")
    _tick(m, 1.0)
    live = m.snapshot()
    assert live["queue_depth"] == 178 and live["activation_tasks_running"] == 4
    ts = live["ts"]
    m.set_state("saving", run_id="r1")
    assert m.snapshot()["queue_depth"] == 178  # still the session's while it is being saved
    m.set_state("idle", run_id="r1", description="saved")
    idle = m.snapshot()
    assert not any(k in idle for k in LIVE_FIELDS), idle
    assert idle["history"] == []
    assert idle["last_sample_ts"] == ts
    rows = {r["metric"]: r["value"] for r in table_rows(idle)}
    assert rows["Target queue depth"] == "-" and rows["Activation tasks running"] == "-"
    assert rows["Sampled at (UTC)"].startswith("- (no session running; last sample ")
    assert rows["Sampled at (UTC)"].endswith(" s ago)")
    # the next session starts from nothing
    m.reset()
    m.set_state("preparing", run_id="r2")
    assert "last_sample_ts" not in m.snapshot()


def test_sampled_at_says_the_age_of_a_stale_sample():
    assert sampled_at({"ts": 3600.0, "now": 3601.0}) == "01:00:00"
    assert sampled_at({"ts": 3600.0, "now": 3640.0}) == "01:00:00 (40 s ago)"
    assert sampled_at({"last_sample_ts": 3600.0, "now": 3600.0 + 600}) == \
        "- (no session running; last sample 01:00:00, 10 min ago)"
    assert sampled_at({}) == "-"


def test_page_shows_the_tabs_rows_with_the_age_and_the_last_sample():
    """The /ssbench/ page draws the rows /ssbench/metrics carries: the tab's (table_rows), whose
    "Sampled at" says the age and the last sample (test_idle_clears_the_last_sample_and_keeps_its_time)."""
    from harness.web.page import PAGE

    assert "m.rows.map" in PAGE and "r.metric" in PAGE and "r.value" in PAGE
    assert "sampled" not in PAGE and "toISOString" not in PAGE   # no second rendering of the rows


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_metrics_endpoint_after_a_real_session_stops(pg_server, tmp_path):
    from harness.matrix import BrokerSettings
    from harness.targets.embedded.target import EmbeddedTarget
    from harness.load.control import ControlClient, ControlServer
    from harness.load.protocol import SwarmRequest
    from harness.load.swarm import SwarmResult
    from harness.web.session import WebSessions

    target = EmbeddedTarget(pg_server, prefix="ssb_idle")
    metrics = LiveMetrics(target.label)
    sessions = WebSessions(target, tmp_path / "results", 1, "durable", BrokerSettings(max_queue_readers=2),
                           metrics, sample_interval=0.5, drain_timeout=30)
    srv = ControlServer({"GET /metrics": lambda _b: metrics.snapshot()}).start()
    try:
        client = ControlClient(srv.url)
        form = {"initiators": 1, "dialogs": "per_thread", "payload_bytes": 100}
        with pytest.raises(UserError) as bad:      # refused before a run directory is made
            sessions.plan(SwarmRequest(users=2, spawn_rate=2, form=dict(form, rate=-5)))
        assert bad.value.field == "rate" and not (tmp_path / "results").exists()
        plan, _out = sessions.plan(SwarmRequest(users=2, spawn_rate=2, form=dict(form, rate=40)))
        assert plan.users == {"1": 2} and plan.spec.rate == 40     # open loop: the form's offered rate
        deadline = time.monotonic() + 30
        live = client.get("/metrics")
        while not (live.get("ts") and live.get("queue_depth") is not None) and time.monotonic() < deadline:
            time.sleep(0.3)
            live = client.get("/metrics")
        assert live["state"] == "running" and live.get("queue_depth") is not None, live
        sessions.finish(SwarmResult(spawn_complete=None))   # a swarm that ended without a recording
        idle = client.get("/metrics")
        assert idle["state"] == "idle", idle
        assert not any(k in idle for k in LIVE_FIELDS), idle
        assert idle["history"] == []
        assert live["ts"] <= idle["last_sample_ts"] <= idle["now"]
        rows = {r["metric"]: r["value"] for r in table_rows(idle)}
        assert rows["Target queue depth"] == "-" and "last sample" in rows["Sampled at (UTC)"]
        assert len(sessions.saved) == 1
    finally:
        srv.stop()
        target.close()
