"""The endpoint in a real run, scraped by a real Prometheus server (Debian's ``prometheus``).

One ``ssbench run`` of tests/data/tiny.yaml in open loop, ``--metrics-port P --metrics-host
0.0.0.0`` (real PostgreSQL, real Locust master and workers; off loopback, so the web UI's login
guards it; open loop: every figure and series is there without the swarm taking both cores);
while it runs, this test scrapes the endpoint itself and a real Prometheus scrapes it every
0.5 s with that login as basic auth. Then:

* the endpoint-vs-summary equality test: at the end of each repetition the endpoint's totals
  (SENDs per phase and per worker, errors, the exact window percentiles, the histogram counts,
  the accounting, the status) are the summary's and Locust's own statistics' (its
  locust_stats.csv: one stream of figures, merged once in the master), and its last gauges are
  samples.jsonl's last rows (needs no Prometheus);
* Prometheus's HTTP API finds the SEND and receive rates, the queue depths and each
  repetition's message total;
* every query of dashboards/ssbench.json returns data from that Prometheus (the one panel that
  needs failed SENDs returns none, as it must).
"""

from __future__ import annotations

import base64
import csv
import json
import math
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from harness.ports import free_port

from support.dashboard import APT, dashboard, queries, substitute
from support.summaries import read as read_summary

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "tests" / "data" / "tiny.yaml"
#: the rate axis added to tiny.yaml: 100 SENDs/s per initiator
RATE = "  rate: [100]\n"
USER, PASSWORD = "prom", "prometheus-test-password"
BASIC = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()

# timing: beside other tests (c5, c6; at 1e9f195 too, -n 3) a permutation's SEND rate stayed 0 in
# Prometheus while it was scraped every 0.5 s; alone it passes
pytestmark = [pytest.mark.slow, pytest.mark.swarm, pytest.mark.timing]


class Scraper(threading.Thread):
    """Scrapes the endpoint every 0.2 s, keeping every scrape: [(epoch, [(name, labels, value)])]."""

    def __init__(self, url: str):
        super().__init__(daemon=True)
        self.url, self.scrapes, self.stop = url, [], threading.Event()

    def run(self) -> None:
        req = urllib.request.Request(self.url, headers={"Authorization": BASIC})
        while not self.stop.is_set():
            try:
                with urllib.request.urlopen(req, timeout=5) as r:
                    text = r.read().decode()
            except OSError:
                text = None
            if text is not None:
                rows = [(s.name, s.labels, s.value) for f in text_string_to_metric_families(text) for s in f.samples]
                self.scrapes.append((time.time(), rows))
            self.stop.wait(0.2)


def start_prometheus(tmp: Path, target_port: int) -> tuple[subprocess.Popen, str]:
    port = free_port()
    cfg = tmp / "prometheus.yml"
    cfg.write_text(f"""global: {{scrape_interval: 500ms, scrape_timeout: 500ms}}
scrape_configs:
  - job_name: ssbench
    basic_auth: {{username: {USER}, password: {PASSWORD}}}
    static_configs: [{{targets: ["127.0.0.1:{target_port}"]}}]
""")
    log = open(tmp / "prometheus.log", "wb")
    p = subprocess.Popen([shutil.which("prometheus"), f"--config.file={cfg}", f"--storage.tsdb.path={tmp / 'tsdb'}",
                          f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                         stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as r:
                if r.status == 200:
                    return p, url
        except OSError:
            time.sleep(0.2)
    p.kill()
    raise AssertionError("Prometheus did not become ready:\n" + (tmp / "prometheus.log").read_text()[-2000:])


@pytest.fixture(scope="module")
def observed(pg_server, tmp_path_factory):
    """The run, the test's own scrapes and (when installed) Prometheus's store of them."""
    tmp = tmp_path_factory.mktemp("prom")
    port = free_port()
    prom = prom_url = None
    if shutil.which("prometheus"):
        prom, prom_url = start_prometheus(tmp, port)
    out = tmp / "run"
    matrix = tmp / "tiny.yaml"
    matrix.write_text(TINY.read_text().replace("\nrun:\n", "\n" + RATE + "run:\n", 1))
    assert RATE in matrix.read_text()
    env = dict(os.environ, PYTHONPATH=str(REPO), SSBENCH_WEB_USER=USER, SSBENCH_WEB_PASSWORD=PASSWORD)
    t0 = time.time()
    p = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", str(matrix), "--out", str(out), "--metrics-port",
                          str(port), "--metrics-host", "0.0.0.0", "--metrics-linger", "20"], cwd=REPO, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    scraper = Scraper(f"http://127.0.0.1:{port}/metrics")
    scraper.start()
    try:
        stdout, stderr = p.communicate(timeout=600)
    finally:
        scraper.stop.set()
        scraper.join(10)
    t1 = time.time()
    try:
        assert p.returncode == 0, stderr[-3000:]
        assert f"live metrics at http://0.0.0.0:{port}/metrics" in stderr
        yield {"out": out, "scrapes": scraper.scrapes, "prom": prom_url, "t0": t0, "t1": t1, "stderr": stderr,
               "run_id": json.loads((out / "run.json").read_text())["run_id"]}
    finally:
        if prom is not None:
            prom.terminate()
            prom.wait(30)


def summaries(out: Path) -> dict[str, dict]:
    return {p.parent.parent.name: read_summary(p) for p in out.glob("*/rep-01/summary.json")}


def values(rows, name, **labels) -> list[tuple[dict, float]]:
    return [(lab, v) for n, lab, v in rows if n == name and all(lab.get(k) == x for k, x in labels.items())]


def total(rows, name, **labels) -> float:
    return sum(v for _, v in values(rows, name, **labels))


def last_committed_scrape(scrapes, perm: str):
    """The last scrape that shows the repetition committed (its final figures)."""
    got = [rows for _, rows in scrapes if values(rows, "ssbench_repetition_state", permutation=perm, state="complete")]
    assert got, f"no scrape saw {perm} committed"
    return got[-1]


def test_endpoint_totals_equal_the_summaries(observed):
    s = summaries(observed["out"])
    assert len(s) == 2
    for perm, d in s.items():
        rows = last_committed_scrape(observed["scrapes"], perm)
        p = dict(permutation=perm, repetition="1", run_id=observed["run_id"])
        assert total(rows, "ssbench_sends_total", **p) == d["messages_sent_client"]
        assert total(rows, "ssbench_sends_total", phase="measure", **p) == d["send_latency_ms"]["count"] > 0
        assert total(rows, "ssbench_send_latency_seconds_count", phase="measure", **p) == d["send_latency_ms"]["count"]
        assert total(rows, "ssbench_send_errors_total", **p) == d["errors"]
        # Locust's statistics (its web UI, console and CSV) count the same SENDs and failures
        [locust] = [r for r in csv.DictReader((observed["out"] / perm / "rep-01" / "locust_stats.csv").open())
                    if r["Name"] == "Aggregated"]
        assert (int(locust["Request Count"]), int(locust["Failure Count"])) == (
            total(rows, "ssbench_sends_total", **p) + total(rows, "ssbench_send_errors_total", **p),
            total(rows, "ssbench_send_errors_total", **p)) == (d["messages_sent_client"] + d["errors"], d["errors"])
        for w in d["workers"]:
            assert total(rows, "ssbench_sends_total", phase="measure", initiator=str(w["initiator"]),
                         worker=str(w["worker"]), **p) == w["sends"]
        for what, field in (("send", "send_latency_ms"), ("e2e", "e2e_latency_ms")):
            q = {lab["quantile"]: v * 1000 for lab, v in values(rows, f"ssbench_{what}_latency_quantile_seconds",
                                                                  phase="measure", **p)}
            assert q == pytest.approx({"0.5": d[field]["p50"], "0.95": d[field]["p95"], "0.99": d[field]["p99"]},
                                      rel=1e-9), (perm, what)
        assert total(rows, "ssbench_e2e_latency_seconds_count", **p) == d["e2e_latency_ms"]["count"]
        for name in ("sent", "received", "lost", "undelivered", "sent_client"):
            assert total(rows, f"ssbench_repetition_messages_{name}", **p) == d[f"messages_{name}"], name
        assert [lab["status"] for lab, _ in values(rows, "ssbench_repetition_status", **p)] == [d["status"]]
        # the gauges' last values are the last tick's samples in samples.jsonl
        samples = [json.loads(line) for line in (observed["out"] / perm / "rep-01" / "samples.jsonl").read_text()
                   .splitlines()]
        last = {}
        for x in samples:
            last[(x["family"], x["metric"], x["key"])] = x["value"]
        for i in (1, 2):
            assert total(rows, "ssbench_transmission_queue_depth", initiator=str(i), **p) == \
                last[("queues", "depth", f"xmitq.i{i}")]
            assert total(rows, "ssbench_worker_cpu_percent", initiator=str(i), worker="1", **p) == \
                last[("worker", "cpu_percent", f"i{i}.w1")]
        assert total(rows, "ssbench_messages_processed_total", **p) == last[("throughput", "processed_total", "")]
        assert total(rows, "ssbench_target_queue_depth", **p) == last[("queues", "depth", "queue")]
    # the last scrape of this run's endpoint: once the run has closed it, its port is free, and a
    # process of another test may listen there (seen once in CI: a last scrape with no families,
    # an endpoint before its run began)
    ours = [rows for _, rows in observed["scrapes"] if values(rows, "ssbench_run_info", run_id=observed["run_id"])]
    final = ours[-1]
    assert total(final, "ssbench_run_repetitions_done") == total(final, "ssbench_run_repetitions") == 2
    assert total(final, "ssbench_run_messages_lost_total") == 0
    assert "waiting up to 20 s for a last scrape" in observed["stderr"]


def prom_api(observed, path: str, **params) -> list[dict]:
    """The result of one query to Prometheus's HTTP API (``path``: query or query_range)."""
    if observed["prom"] is None:
        pytest.skip(f"prometheus not found: {APT}")
    with urllib.request.urlopen(f"{observed['prom']}/api/v1/{path}?{urllib.parse.urlencode(params)}",
                                timeout=30) as r:
        body = json.loads(r.read())
    assert body["status"] == "success", body
    return body["data"]["result"]


def prom_query(observed, expr: str, step: float = 0.5) -> list[dict]:
    return prom_api(observed, "query_range", query=expr, start=observed["t0"] - 5, end=observed["t1"] + 5, step=step)


def stored(observed, selector: str) -> list[float]:
    """Every sample Prometheus stored for ``selector`` over the run (a range vector: raw samples,
    not a range query's steps, which can fall either side of a series seen in one scrape only)."""
    span = math.ceil(observed["t1"] - observed["t0"] + 10)
    return series_values(prom_api(observed, "query", query=f"{selector}[{span}s]", time=observed["t1"] + 5))


def series_values(result) -> list[float]:
    return [float(v) for s in result for _, v in s["values"] if not math.isnan(float(v))]


def test_prometheus_finds_rates_queue_depths_and_message_totals(observed):
    run = observed["run_id"]
    s = summaries(observed["out"])
    for perm, d in s.items():
        sel = f'run_id="{run}", permutation="{perm}"'
        sends = prom_query(observed, f"sum(rate(ssbench_sends_total{{{sel}}}[2s]))")
        assert max(series_values(sends)) > 0, perm
        received = prom_query(observed, f"sum(rate(ssbench_messages_processed_total{{{sel}}}[2s]))")
        assert max(series_values(received)) > 0, perm
        xmitq = prom_query(observed, f"ssbench_transmission_queue_depth{{{sel}}}")
        assert {r["metric"]["initiator"] for r in xmitq} == {"1", "2"}
        assert prom_query(observed, f"ssbench_target_queue_depth{{{sel}}}")
        # the last repetition's total is exposed from its commit to the run's last scrape
        assert set(stored(observed, f"ssbench_repetition_messages_sent{{{sel}}}")) == {d["messages_sent"]}, perm
        measured = prom_query(observed, f'sum(ssbench_sends_total{{{sel}, phase="measure"}})')
        assert max(series_values(measured)) == d["send_latency_ms"]["count"], perm


def test_every_dashboard_query_returns_data_from_prometheus(observed):
    empty, errors = [], []
    for title, expr in queries(dashboard()):
        got = series_values(prom_query(observed, substitute(expr, run_id=observed["run_id"])))
        if not got:
            empty.append(title)
        if title == "SEND errors":
            errors += got
    assert empty == [], empty
    # no SEND failed: the panel shows the counters' 0, not "no data"
    assert errors and not any(errors), errors
