"""harness.metrics.live and .families without processes: real recorders, their real deltas, the
master's real merge (harness.load.merge) and its recordings, the real window merge; the
exposition written by prometheus_client and read back by its parser.

The central property: whatever the SENDs, however the workers' deltas cut them, and whenever
the window becomes known, the live counts and latency of the measured window are the summary's
(harness.load.window.merge_workers over the recordings), exactly."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from harness.collectors.base import Sample
from harness.load.merge import Buckets, SwarmMerge
from harness.load.protocol import Delta, SwarmPlan
from harness.load.recorder import Recorder
from harness.load.spec import SwarmSpec
from harness.load.window import merge_workers
from harness.metrics.live import LiveState
from harness.metrics.families import METRICS, SsbenchCollector, exposed_names
from harness.results import Histogram
from support.recording import delta

T0 = 1_700_000_000.0     # epoch seconds, on a bucket boundary

#: (completion s, latency us, failed); some SENDs slow (1 s or more: kept with their start, and
#: counted in the window's latency when in flight across its end)
sends = st.lists(st.tuples(st.floats(0.0, 6.0), st.one_of(st.integers(1, 40_000), st.integers(1_000_000, 2_500_000)),
                           st.booleans()), max_size=120)


def scrape(live: LiveState) -> dict[str, list]:
    """name -> [(labels, value)] as a scraper reads them."""
    from prometheus_client import CollectorRegistry

    reg = CollectorRegistry(auto_describe=False)
    reg.register(SsbenchCollector(live))
    out: dict[str, list] = {}
    for fam in text_string_to_metric_families(generate_latest(reg).decode()):
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def merge_of(warmup: float, measure: float, now) -> SwarmMerge:
    """The master's merge of a swarm whose live window is ``warmup``, ``measure`` (0: until the
    stop), on the clock ``now()``."""
    plan = SwarmPlan(spec=SwarmSpec(sender_specs={"1": {}, "2": {}}), users={"1": 1, "2": 1},
                     live_window=[warmup, measure])
    return SwarmMerge(plan, clock=now)


@settings(max_examples=80, deadline=None)
@given(a=sends, b=sends, cuts=st.lists(st.floats(0.0, 6.0), max_size=4), known_at=st.floats(0.0, 6.0),
       warmup=st.floats(0.0, 2.0), measure=st.floats(0.5, 3.0), spawn=st.floats(0.0, 1.0),
       until_stopped=st.booleans())
# a delta between the window's last bucket boundary and the stop, before the stop is known
@example(a=[(1.005, 1000, False)], b=[], cuts=[1.01], known_at=0.0, warmup=0.0, measure=1.02, spawn=0.0,
         until_stopped=True)
# a slow SEND started inside the window, completed after it: in the window's percentiles
@example(a=[(2.5, 2_000_000, False), (0.7, 300, False)], b=[], cuts=[1.5], known_at=0.0, warmup=0.0, measure=1.0,
         spawn=0.0, until_stopped=False)
def test_live_window_equals_the_summary_window(tmp_path_factory, a, b, cuts, known_at, warmup, measure, spawn,
                                               until_stopped):
    """``until_stopped``: a window that ends when the swarm is stopped (the web UI, the backlog
    fill), at ``spawn + measure``: the master knows the stop once it happened; the deltas are
    taken at the cuts (the workers' clock, the master's)."""
    tmp = tmp_path_factory.mktemp("rec")
    live = LiveState(command="run")
    feed = live.repetition("run", "perm", 1)
    spawn_complete = T0 + spawn
    if until_stopped:
        warmup, stop = 0.0, spawn_complete + measure
    else:
        stop = None
    feed.window(warmup, 0.0 if until_stopped else measure)
    now = [T0]
    merge = merge_of(warmup, 0.0 if until_stopped else measure, lambda: now[0])
    recs = {1: Recorder(1, bucket_seconds=0.1), 2: Recorder(2, bucket_seconds=0.1)}
    events = sorted([(t, 1, us, err) for t, us, err in a] + [(t, 2, us, err) for t, us, err in b])
    cut_times = sorted(cuts) + [7.0]   # the last one (the final delta) knows the window
    seq, i = 0, 0
    for cut in cut_times:           # the deltas cut the SENDs anywhere
        while i < len(events) and events[i][0] < cut:
            t, ini, us, err = events[i]
            recs[ini].record_many([(T0 + t, us / 1e6, RuntimeError("x") if err else None, None)])
            i += 1
        now[0] = T0 + cut
        seq += 1
        merge.live.window(spawn_complete if cut >= known_at else None,
                          stop if stop is not None and now[0] >= stop else None)
        for r in recs.values():
            assert merge.add(delta(r, seq, now=now[0], final=cut == cut_times[-1])) is None
        feed.client(json.loads(json.dumps(merge.live.snapshot(final=cut == cut_times[-1]))))
    files = []
    for name in merge.slots:
        files.append(tmp / f"{name}.json")
        files[-1].write_text(json.dumps(merge.recording(name)))
    start = spawn_complete + warmup
    wd = merge_workers(files, start, start + measure)
    fig = merge.live
    assert fig.exact.get("measure", Histogram()).counts == wd.latency.counts
    assert sum(n for (_, _, ph), n in fig.sends.items() if ph == "measure") == wd.count
    assert sum(fig.sends.values()) == wd.sends_total
    assert sum(fig.errors.values()) == wd.errors_total
    assert sum(n for (_, _, ph), n in fig.errors.items() if ph == "measure") == sum(w["errors"] for w in wd.workers)
    got = scrape(live)
    q = {s[0]["quantile"]: s[1] for s in got.get("ssbench_send_latency_quantile_seconds", [])
         if s[0]["phase"] == "measure"}
    reported = Histogram().merge(wd.latency).merge(wd.latency_in_flight)    # the summary's send_latency_ms
    if reported.count:
        want = reported.summary_ms()
        assert q == pytest.approx({"0.5": want["p50"] / 1000, "0.95": want["p95"] / 1000, "0.99": want["p99"] / 1000},
                                  rel=1e-12)
        counts = [v for lab, v in got["ssbench_send_latency_seconds_count"] if lab["phase"] == "measure"]
        assert sum(counts) == wd.count
    else:
        assert q == {}
    total = sum(v for _, v in got.get("ssbench_sends_total", []))
    assert total == wd.sends_total


def test_histogram_buckets_are_cumulative_and_a_bound_is_inside_its_bucket():
    h = Histogram({100: 2, 250: 1, 1000: 4, 1001: 1, 50_000_000: 3})
    buckets, total = Buckets.of(h).cumulative()
    b = dict(buckets)
    assert b["0.0001"] == 2 and b["0.00025"] == 3 and b["0.001"] == 7 and b["0.0025"] == 8
    assert b["30.0"] == 8 and b["+Inf"] == 11
    assert [v for _, v in buckets] == sorted(v for _, v in buckets)
    assert abs(total - (200 + 250 + 4000 + 1001 + 150_000_000) / 1e6) < 1e-9


def tick(ts: float, *rows) -> list[Sample]:
    return [Sample(ts, f, m, k, v) for f, m, k, v in rows]


def test_sampler_ticks_become_gauges_with_bounded_labels():
    live = LiveState(command="run")
    live.begin_run("run-1", "tiny", "a target")
    feed = live.repetition("run-1", "i2-t2", 1)
    feed.window(1.0, 2.0)
    feed.status("preparing (2 x 2 dialogs)")
    waits = [("waits", "wait_ms_per_s", f"WAIT_{i}", float(i)) for i in range(1, 9)]
    feed.tick(tick(T0, ("queues", "depth", "xmitq.i1", 5), ("queues", "depth", "xmitq.i2", 7),
                   ("queues", "depth", "queue", 11), ("queues", "xmitq_total", "", 12),
                   ("throughput", "processed_total", "", 100), ("throughput", "received_per_s", "", 50),
                   ("activation", "tasks_running", "", 2), ("activation", "tasks_started_per_s", "", 0.5),
                   ("broker", "sql_sends_per_s", "Broker Statistics", 40),
                   ("host", "cpu_percent", "client", 30), ("host", "cpu_percent", "server", 60),
                   ("host", "cpu_percent", "worker.i1.w1", 20), ("host", "rss_bytes", "server", 1e8),
                   ("dialogs", "endpoints", "initiator.CO", 4),
                   ("session_waits", "waiting", "sender/LCK_M_X", 5.5), ("session_waits", "waiting", "reader/WRITELOG", 1),
                   *waits))
    feed.status("running")
    got = scrape(live)

    def one(name, **labels):
        vals = [v for lab, v in got[name] if all(lab.get(k) == x for k, x in labels.items())]
        assert len(vals) == 1, (name, labels, got.get(name))
        return vals[0]

    assert one("ssbench_transmission_queue_depth", initiator="1") == 5
    assert one("ssbench_transmission_queue_depth", initiator="2") == 7
    assert one("ssbench_target_queue_depth") == 11
    assert one("ssbench_messages_processed_total") == 100
    assert one("ssbench_received_messages_per_second") == 50
    assert one("ssbench_activation_tasks_running") == 2
    assert one("ssbench_activation_tasks_started_per_second") == 0.5
    assert one("ssbench_perf_counter", object="Broker Statistics", counter="sql_sends_per_s") == 40
    assert one("ssbench_process_cpu_percent", role="server") == 60
    assert one("ssbench_sessions_waiting", role="sender", wait_type="LCK_M_X") == 5.5
    assert one("ssbench_sessions_waiting", role="reader", wait_type="WRITELOG") == 1
    assert one("ssbench_repetition_state", state="running") == 1
    assert one("ssbench_repetition_phase", phase="warmup") == 1       # the end of spawning is not known yet
    assert one("ssbench_run_info", run_id="run-1", matrix="tiny", command="run") == 1
    assert {lab["wait_type"] for lab, _ in got["ssbench_wait_time_ms_per_second"]} == \
        {f"WAIT_{i}" for i in range(4, 9)}                               # the top 5 only
    # every label is one of the documented, bounded ones (no key of a per-worker host sample, no endpoint state)
    allowed = {"run_id", "permutation", "repetition", "phase", "initiator", "worker", "host", "wait_type",
               "state", "status", "quantile", "le", "role", "object", "counter", "count", "matrix", "target",
               "command"}
    for name, series in got.items():
        for lab, _ in series:
            assert set(lab) <= allowed, (name, lab)
    names = set(got)
    assert names <= exposed_names(), names - exposed_names()


def test_a_workers_counters_start_at_zero_so_a_phase_reached_in_one_step_shows_a_rise():
    """Seen once in CI: a 2 s measured phase reached the endpoint in one step, its series
    appeared at its total and Prometheus's rate() over it was 0 throughout. Every known
    worker's SEND and error counters are exposed from 0 in every phase before any SEND."""
    live = LiveState(command="run")
    feed = live.repetition("run", "perm", 1)
    feed.window(1.0, 2.0)
    merge = merge_of(1.0, 2.0, lambda: T0 + 9.0)
    rec = Recorder(1, bucket_seconds=0.1)
    merge.add(delta(rec, 1, now=T0 + 0.5))                      # the worker is known, no SEND yet
    feed.client(merge.live.snapshot())
    first = scrape(live)
    for name in ("ssbench_sends_total", "ssbench_send_errors_total"):
        assert sorted((lab["phase"], v) for lab, v in first[name]) == \
            [("drain", 0.0), ("measure", 0.0), ("warmup", 0.0)], name
    for i in range(30):                                            # the whole measured phase at once
        rec.record_many([(T0 + 1.05 + i * 0.05, 0.001, None, None)])
    merge.live.window(T0, T0 + 3.0)
    merge.add(delta(rec, 2, final=True))
    feed.client(merge.live.snapshot(final=True))
    second = {lab["phase"]: v for lab, v in scrape(live)["ssbench_sends_total"]}
    assert second == {"warmup": 0.0, "measure": 30.0, "drain": 0.0}


def test_a_placed_slots_counters_start_at_zero_before_its_first_delta():
    """A slot is exposed from 0 once the master places it, not when its first delta (which may
    carry a whole short window's SENDs under load) arrives."""
    live = LiveState(command="run")
    feed = live.repetition("run", "perm", 1)
    feed.window(1.0, 2.0)
    merge = merge_of(1.0, 2.0, lambda: T0 + 9.0)
    merge.live.place([(1, 1, "host", 2)])
    feed.client(merge.live.snapshot())
    got = scrape(live)
    assert sorted((lab["phase"], v) for lab, v in got["ssbench_sends_total"]) == \
        [("drain", 0.0), ("measure", 0.0), ("warmup", 0.0)]


def test_only_the_repetition_in_progress_and_the_last_committed_are_exposed():
    live = LiveState(command="run")
    live.begin_run("r", "m", "t")

    class Summary:
        status, messages_sent, messages_received, messages_sent_client = "ok", 10, 10, 10
        messages_lost, messages_undelivered, send_rate, receive_rate = 0, 0, 5.0, 5.0

    for rep in (1, 2, 3):
        feed = live.repetition("r", "p", rep)
        feed.tick(tick(T0 + rep, ("queues", "depth", "queue", rep)))
        feed.committed(Summary(), Histogram({1000: 10}))
    feed = live.repetition("r", "p", 4)
    got = scrape(live)
    assert {lab["repetition"] for lab, _ in got["ssbench_repetition_state"]} == {"3", "4"}
    assert [v for _, v in got["ssbench_run_repetitions_done"]] == [3]
    assert [lab["status"] for lab, _ in got["ssbench_repetition_status"]] == ["ok"]
    assert [v for _, v in got["ssbench_e2e_latency_seconds_count"]] == [10]
    feed.aborted()
    assert ({"state": "aborted"}.items() <=
            [lab for lab, _ in scrape(live)["ssbench_repetition_state"] if lab["repetition"] == "4"][0].items())


def test_no_secret_reaches_a_label():
    """A connection string or a password in anything that becomes a label value (a target
    label, a host name, a key of a sample) is redacted before it is exposed."""
    secret = "Sup3rS3cret"
    live = LiveState(command="run")
    live.begin_run("r", "m", f"SQL Server (Driver={{ODBC}};Server=db1;PWD={secret};)")
    feed = live.repetition("r", "p", 1)
    feed.tick(tick(T0, ("broker", "sends_per_s", f"Broker Statistics;password={secret}", 1),
                   ("waits", "wait_ms_per_s", f"WAIT;pwd={secret}", 3)))
    merge = merge_of(0.0, 1.0, lambda: T0)
    merge.add(Delta(swarm_id="s", initiator=1, worker=1, seq=1, host=f"h;token={secret}", users=1,
                    samples=[[T0, 1, 2, 3, 4]]))
    feed.client(merge.live.snapshot())
    text = generate_latest(_registry(live)).decode()
    assert secret not in text
    assert "PWD=***" in text and "password=***" in text and "token=***" in text


def _registry(live):
    from prometheus_client import CollectorRegistry

    reg = CollectorRegistry(auto_describe=False)
    reg.register(SsbenchCollector(live))
    return reg


def test_every_metric_is_documented():
    doc = (__import__("pathlib").Path(__file__).resolve().parents[2] / "docs" / "monitoring.md").read_text()
    missing = [name for name in METRICS if f"`{name}" not in doc]
    assert not missing, f"docs/monitoring.md does not explain {missing}"


def test_the_matrix_progress_is_the_runners_with_auto_rounds():
    """``repetitions: auto``: the runner's Progress grows by each added round (``add_total``);
    the endpoint's done/total/ETA are that Progress's at each scrape, never a copy."""
    from harness.progress import Progress as RunProgress

    progress = RunProgress(total=4, force_plain=True)      # the first round: 2 permutations x 2
    live = LiveState(command="run")
    live.begin_run("r", "m", "t", progress)
    got = scrape(live)
    assert [v for _, v in got["ssbench_run_repetitions"]] == [4]
    assert [v for _, v in got["ssbench_run_repetitions_done"]] == [0] and "ssbench_run_eta_seconds" not in got
    progress.mark_start()
    for _ in range(4):
        progress.advance()
    progress.add_total(1)                                   # round 3: one comparison still undecided
    got = scrape(live)
    assert [v for _, v in got["ssbench_run_repetitions"]] == [5]
    assert [v for _, v in got["ssbench_run_repetitions_done"]] == [4]
    assert [v for _, v in got["ssbench_run_eta_seconds"]] == [pytest.approx(progress.eta_seconds(), abs=0.5)]
