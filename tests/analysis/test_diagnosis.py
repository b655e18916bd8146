"""What limits throughput (harness.analysis.diagnosis, docs/diagnosis.md) on summaries built
here: each stage's test at its thresholds, the mixed cases, the repetitions' vote, the remedies,
where users look (table rows, terminal, report), and the queue-growth detector's error rates,
simulated. Fast: no Spark, no server."""

from __future__ import annotations

import json

import numpy as np
import pytest

from harness.analysis import diagnosis as D
from harness.analysis import diagnosis_view as V
from harness.collectors.queues import growth
from harness.results.records import LatencySummary, TargetRef, WorkerResult
from support.summaries import grows, summary

def one(**kw) -> D.RepDiagnosis:
    return D.diagnose_rep(summary(**kw))


# --------------------------------------------------------------------------- each stage at its thresholds

def test_send_waits_name_their_kind_and_the_remedy():
    lock = one(perm={"dialogs": "shared", "dialogs_shared": True}, waits={"LCK_M_X": 6000.0, "WRITELOG": 900.0})
    assert (lock.stage, lock.detail, lock.confidence) == ("SEND", "row lock of the shared dialog", D.CLEAR)
    assert "6,000 ms/s" in lock.primary.evidence and "75 % of their time" in lock.primary.evidence
    assert D.REMEDIES[lock.primary.remedy].axis == "dialogs: [per_thread]"
    log = one(waits={"WRITELOG": 7000.0, "LOGBUFFER": 500.0, "PAGELATCH_EX": 300.0})
    assert (log.stage, log.detail) == ("SEND", "log flush") and log.primary.remedy == "log flush"
    latch = one(waits={"PAGELATCH_EX": 2500.0, "PAGELATCH_SH": 500.0},
                page_latch_objects={"ssb_init1.sys.sysdesend": 3.1, "page 7:1:99": 0.4})
    assert latch.detail == "page latch on ssb_init1.sys.sysdesend"
    assert "ssb_init1.sys.sysdesend (3.1 tasks)" in latch.primary.evidence
    assert D.REMEDIES[latch.primary.remedy].axis == "dialogs: [trick150]"


def test_a_wait_holding_less_than_a_quarter_of_the_users_time_names_nothing():
    below = one(waits={"WRITELOG": 0.24 * 8 * 1000})
    above = one(waits={"WRITELOG": 0.26 * 8 * 1000})
    assert (below.stage, below.detail, below.confidence) == ("SEND", "no wait or CPU limit stands out", D.MIXED)
    assert (above.stage, above.detail, above.confidence) == ("SEND", "log flush", D.CLEAR)


def test_an_alternated_members_waits_are_per_second_of_the_whole_window():
    """An alternated window (run.alternate) spans every member's slices; its waits are the
    window's, in each member's summary, while the member's measure_seconds is its own slices.
    Per member's seconds, 3 members' 6,000 ms/s of log flush read 18,000 ms/s: "18.0 of 8 users
    waiting, 225 % of their time" (a make bench run of 2026-11-28 printed 142 % at 32 users)."""
    from support.summaries import T
    alt = one(waits={"WRITELOG": 6000.0 * 3},          # top_waits hold 3 T of the window's waits
              measure_end=3 * T, span_seconds=3 * T,
              alternation={"members": ["a", "b", "c"], "slice_seconds": 0.5, "member": 1})
    assert "6,000 ms/s" in alt.primary.evidence and "75 % of their time" in alt.primary.evidence
    assert "the alternated window's waits: its 3 strategies' together" in alt.primary.evidence
    assert "strategies" not in one(waits={"WRITELOG": 6000.0}).primary.evidence


def test_sampled_session_waits_tell_an_alternated_windows_strategies_apart():
    """make bench of 2026-11-28: in one alternated window, shared at 32 threads ran at 1,819
    msg/s and per_thread at 11,614, yet both read "log flush waits 45,503 ms/s": the server's
    waits are the window's. The users' sampled waits in each member's own slices are not; the
    readers' waits (same window) count against nobody's users."""
    from support.summaries import T
    common = dict(waits={"WRITELOG": 3 * 6000.0, "LCK_M_X": 3 * 2000.0}, measure_end=3 * T, span_seconds=3 * T)
    shared = one(perm={"dialogs": "shared", "dialogs_shared": True}, **common,
                 alternation={"members": ["p", "t", "s"], "slice_seconds": 0.5, "member": 2},
                 session_waits={"sender": {"LCK_M_X": 6.5, "WRITELOG": 0.9}, "reader": {"WRITELOG": 3.0}},
                 session_wait_samples=60)
    per_thread = one(**common, alternation={"members": ["p", "t", "s"], "slice_seconds": 0.5, "member": 0},
                     session_waits={"sender": {"WRITELOG": 5.2, "LCK_M_X": 0.1}, "reader": {"WRITELOG": 3.0}},
                     session_wait_samples=60)
    assert (shared.stage, shared.detail) == ("SEND", "row lock of the shared dialog")
    assert D.REMEDIES[shared.primary.remedy].axis == "dialogs: [per_thread]"
    assert shared.primary.evidence.startswith("lock waits 6,500 ms/s (LCK_M_X the largest): 6.5 of 8 users waiting, "
                                              "81 % of their time (the users' sessions, 60 samples in this "
                                              "strategy's slices)"), shared.primary.evidence
    assert (per_thread.stage, per_thread.detail) == ("SEND", "log flush")
    assert "5.2 of 8 users waiting, 65 % of their time" in per_thread.primary.evidence
    # without samples (older summaries, a target that cannot tell): the server's waits, said so
    assert one(**common).primary.evidence.startswith("log flush waits 6,000 ms/s")
    # sampled, nobody of the users waiting: no SEND wait, whatever the server's waits say
    idle = one(waits={"WRITELOG": 7000.0}, session_waits={"reader": {"WRITELOG": 2.0}}, session_wait_samples=40)
    assert idle.detail != "log flush"


@pytest.mark.parametrize("kw, says", [
    ({"workers": [WorkerResult(initiator=1, worker=1, cpu_percent=91.0)]}, "a Locust worker at 91 % of a core"),
    ({"client_cpu_demand": 95.0}, "on a CPU or waiting for one 95 % of the time"),
    ({"users_active": 5}, "only 5 of 8 users sending"),
    ({"send_latency_ms": LatencySummary(count=5000, mean=4.0, p50=3.0)}, "users inside a SEND 50 % of the time"),
    ({"client_bound": True}, "flagged client_bound"),
])
def test_client_evidence(kw, says):
    d = one(**kw)
    assert (d.stage, d.confidence) == ("client", D.CLEAR) and says in d.primary.evidence, d.primary.evidence
    assert D.REMEDIES[d.primary.remedy].axis.startswith("run.workers_per_initiator")


def test_client_on_a_saturated_host_taking_more_cpu_than_the_server():
    embedded = TargetRef("embedded", "PostgreSQL emulation", "delayed")
    kw = dict(target=embedded, server_on_host=True, host_cpu_utilization=1.0, other_cpu_percent=168.0,
              client_cpu_demand=87.0,
              waits={"PAGELATCH_EX": 12.0})
    d = one(worker_cpu_percent={"worker.i1.w1": 14.6}, server_cpu_percent=9.2, **kw)
    assert d.stage == "client"
    assert "the Locust workers taking more of them (15 % of a core) than the database server (9 %)" in d.primary.evidence
    assert one(worker_cpu_percent={"worker.i1.w1": 8.0}, server_cpu_percent=23.0, **kw).stage != "client"
    assert one(worker_cpu_percent={"worker.i1.w1": 14.6}, server_cpu_percent=9.2,
               **dict(kw, host_cpu_utilization=0.85)).stage != "client"


def test_client_thresholds():
    assert one(workers=[WorkerResult(initiator=1, worker=1, cpu_percent=89.0)], client_cpu_demand=89.0).stage != "client"
    # open loop: users idle between their slots by design, their duty cycle says nothing
    d = one(offered_rate=1000.0, send_latency_ms=LatencySummary(count=5000, mean=1.0, p50=1.0))
    assert d.stage == "offered load" and d.confidence == D.CLEAR


def test_a_client_at_its_limit_with_the_server_waiting_too_is_mixed():
    d = one(client_cpu_demand=97.0, waits={"WRITELOG": 6000.0})
    assert (d.stage, d.confidence) == ("client", D.MIXED)
    assert [f.stage for f in d.findings] == ["client", "SEND"]


def test_transmission_names_the_transport_rate():
    d = one(send_rate=1500.0, receive_rate=800.0, xmitq_depth_growth=grows(700.0), transport_rate=798.0)
    assert (d.stage, d.confidence) == ("transmission", D.CLEAR)
    assert "the transmission queue grew 700 msg/s [95 % CI 560, 840]" in d.primary.evidence
    assert "the transport moved 798 msg/s" in d.primary.evidence


@pytest.mark.parametrize("per_s, low, fires", [
    (99.0, 80.0, False),        # below 10 % of the SEND rate
    (101.0, 29.0, False),       # its interval reaches below 3 %
    (101.0, 31.0, True),
])
def test_growth_thresholds(per_s, low, fires):
    d = one(queue_depth_growth=grows(per_s, low))
    assert (d.stage == "receive") is fires


def test_processing_against_receive_by_the_readers_time():
    proc = one(receive_rate=900.0, queue_depth_growth=grows(580.0), activation_tasks_running=1.0,
               activation_max_readers=1, procedure_busy=0.96, procedure_us_per_message=1063.0)
    assert (proc.stage, proc.confidence) == ("processing", D.CLEAR)
    assert "1,063 µs per message" in proc.primary.evidence and "96 % of the readers' time" in proc.primary.evidence
    recv = one(queue_depth_growth=grows(500.0), activation_tasks_running=4.0, procedure_busy=0.2,
               activation_at_max_share=1.0, activation_task_limit_per_s=1.8)
    assert (recv.stage, recv.detail, recv.primary.remedy) == ("receive", "readers at MAX_QUEUE_READERS", "readers")
    assert "Task Limit Reached 1.8/s" in recv.primary.evidence and "only 5 % of their time" in recv.primary.evidence
    between = one(queue_depth_growth=grows(500.0), activation_tasks_running=2.0, procedure_busy=1.1)   # 55 %
    assert (between.stage, between.confidence) == ("processing", D.MIXED)
    assert [f.stage for f in between.findings[:2]] == ["processing", "receive"]


@pytest.mark.parametrize("kw, detail, remedy", [
    ({"broker_waits": {"SERVICE_BROKER_WAITFOR_MANAGER": 900.0}}, "readers queue on the WAITFOR manager latch",
     "fewer_readers"),
    ({"activation_tasks_started_per_s": 0.4,
      "permutation": None, "perm": {"broker": {"waitfor_timeout_ms": 50, "monitor_interval_seconds": 5.0,
                                               "max_queue_readers": 4, "receive_top": 10000}}},
     "activation tasks churn under a short WAITFOR", "waitfor"),
    ({"perm": {"dialogs": "shared", "dialogs_shared": True}}, "one conversation group: one reader at a time",
     "one_group"),
    ({"messages_per_receive": 1.0, "perm": {"broker": {"receive_top": 1, "max_queue_readers": 4,
                                                       "waitfor_timeout_ms": 3000, "monitor_interval_seconds": 5.0}}},
     "one message per RECEIVE", "receive_top"),
    ({"messages_per_receive": 0.6, "perm": {"messages_per_dialog": 1}},
     "one message per RECEIVE: too few messages per dialog", "reuse"),
    ({"activation_at_max_share": 1.0}, "readers at MAX_QUEUE_READERS", "readers"),
    ({"activation_tasks_running": 1.0, "activation_at_max_share": 0.0}, "activation has not started enough readers",
     "waitfor"),
])
def test_receive_reasons_in_the_papers_order(kw, detail, remedy):
    kw = dict(kw)
    kw.pop("permutation", None)
    d = one(queue_depth_growth=grows(500.0), procedure_busy=0.1, **kw)
    assert (d.stage, d.detail, d.primary.remedy) == ("receive", detail, remedy)


def test_two_queues_growing_is_mixed():
    d = one(receive_rate=300.0, xmitq_depth_growth=grows(400.0), queue_depth_growth=grows(300.0), procedure_busy=0.1)
    assert (d.stage, d.confidence) == ("transmission", D.MIXED)
    assert {f.stage for f in d.findings} >= {"transmission", "receive"}


def test_server_cpu_remote_and_local():
    remote = one(server_cpu_utilization=0.9)
    assert (remote.stage, remote.confidence) == ("server CPU", D.CLEAR)
    assert "the busiest database server's CPUs 90 % busy" in remote.primary.evidence
    embedded = TargetRef("embedded", "PostgreSQL 18.1 emulation of Service Broker", "durable")
    local = one(target=embedded, server_on_host=True, server_cpu_percent=150.0, worker_cpu_percent={"worker.i1.w1": 30.0},
                other_cpu_percent=10.0, host_cpu_utilization=0.95)
    assert local.stage == "server CPU"
    assert "the host's 2 CPUs 95 % busy" in local.primary.evidence
    assert "server 150 %, Locust workers 30 %, other processes 10 % of a core" in local.primary.evidence
    # a saturated host: the server's limit only when it takes more than the workers and a quarter of a core
    assert one(target=embedded, server_on_host=True, server_cpu_percent=40.0, worker_cpu_percent={"worker.i1.w1": 50.0},
               host_cpu_utilization=1.0).stage != "server CPU"
    assert one(target=embedded, server_on_host=True, server_cpu_percent=20.0, worker_cpu_percent={"worker.i1.w1": 5.0},
               host_cpu_utilization=1.0).stage != "server CPU"
    assert one(target=embedded, server_on_host=True, server_cpu_percent=150.0,
               host_cpu_utilization=0.85).stage != "server CPU"
    # a local server in a container: its cgroup's CPU quota is its limit, however idle the host
    boxed = one(target=embedded, server_on_host=True, server_cpu_percent=70.0, worker_cpu_percent={"worker.i1.w1": 25.0},
                host_cpu_utilization=0.5, server_cpu_utilization=0.96, server_cpu_quota=1.0)
    assert boxed.stage == "server CPU"
    assert "the server's cgroup CPU quota of 1 CPUs 96 % used" in boxed.primary.evidence
    assert one(target=embedded, server_on_host=True, server_cpu_percent=70.0, worker_cpu_percent={"worker.i1.w1": 25.0},
               host_cpu_utilization=0.5, server_cpu_utilization=0.8, server_cpu_quota=1.0).stage != "server CPU"
    # a remote server's CPU is its own figure, whatever this host's
    assert one(server_cpu_percent=150.0, host_cpu_utilization=1.0, server_cpu_utilization=0.5).stage != "server CPU"
    # a SEND wait that explains the time outranks a busy CPU (not a rival)
    both = one(server_cpu_utilization=0.9, waits={"LCK_M_X": 6000.0})
    assert (both.stage, both.confidence) == ("SEND", D.CLEAR)


def test_not_enough_data_and_older_summaries():
    assert one(send_rate=0.0).confidence == D.NO_DATA
    bare = one(xmitq_depth_growth=None, queue_depth_growth=None, top_waits=[], server_cpu_utilization=None)
    assert (bare.stage, bare.confidence, bare.reason) == (None, D.NO_DATA, "no wait, queue or CPU figures")
    # without growth figures the rates speak: 20 % behind, the deeper queue says where
    old = one(xmitq_depth_growth=None, queue_depth_growth=None, receive_rate=800.0, max_xmitq_depth=10, max_queue_depth=5000)
    assert (old.stage, old.detail) == ("receive", "a backlog (no growth figures in this summary)")
    assert "80" not in old.primary.evidence or "20 % behind" in old.primary.evidence


# --------------------------------------------------------------------------- a permutation: the repetitions' vote

def test_the_repetitions_vote_and_the_median_one_speaks():
    reps = [summary(rep=n, waits={"WRITELOG": w}) for n, w in ((1, 3000.0), (2, 6000.0), (3, 4000.0))]
    d = D.diagnose_permutation(reps)
    assert (d.stage, d.detail, d.confidence, d.reps) == ("SEND", "log flush", D.CLEAR, 3)
    assert "(rep 3; 3 of 3 repetitions name SEND)" in d.evidence and "4,000 ms/s" in d.evidence
    assert d.limit == "SEND: log flush" and d.remedy == D.REMEDIES["log flush"]


def test_disagreeing_repetitions_are_mixed_and_name_the_other_stage():
    reps = [summary(rep=1, waits={"WRITELOG": 4000.0}), summary(rep=2, waits={"WRITELOG": 4000.0}),
            summary(rep=3, client_cpu_demand=99.0)]
    d = D.diagnose_permutation(reps)
    assert (d.stage, d.confidence) == ("SEND", D.MIXED) and "client" in d.also
    assert d.rep_stages == ["SEND", "SEND", "client"]
    # two repetitions name SEND with different waits, one the client: SEND, mixed, its stronger kind
    split = D.diagnose_permutation([summary(rep=1, waits={"LCK_M_X": 2700.0}), summary(rep=2, client_cpu_demand=99.0),
                                    summary(rep=3, waits={"WRITELOG": 3500.0})])
    assert (split.stage, split.detail, split.confidence) == ("SEND", "log flush", D.MIXED)
    assert "(rep 3; 2 of 3 repetitions name SEND)" in split.evidence and split.also == "client"
    tie = D.diagnose_permutation(reps[1:])
    # a tie: the stronger of the two (log flush waits at twice their threshold, the client 1.1 times)
    assert (tie.stage, tie.confidence) == ("SEND", D.MIXED)


def test_no_repetition_with_figures_is_not_enough_data():
    d = D.diagnose_permutation([summary(send_rate=0.0)])
    assert (d.stage, d.confidence, d.limit, d.remedy) == (None, D.NO_DATA, D.NO_DATA, None)


def test_noisy_host_is_said():
    d = D.diagnose_permutation([summary(waits={"WRITELOG": 4000.0}, noisy_host=True, other_cpu_percent=80.0)])
    assert d.evidence.endswith("noisy host: other processes took 80 % of a core")


def test_processing_remedy_asks_for_less_work_when_readers_are_two_per_core():
    embedded = TargetRef("embedded", "PostgreSQL emulation", "delayed")
    kw = dict(target=embedded, server_on_host=True, queue_depth_growth=grows(500.0), procedure_busy=3.8,
              activation_tasks_running=4.0)
    few = D.diagnose_permutation([summary(**kw, host_cpus=4)])
    many = D.diagnose_permutation([summary(**kw, host_cpus=2)])
    assert few.remedy.technique.startswith("more readers") and many.remedy.technique.startswith("less work")


# --------------------------------------------------------------------------- where users look

def test_table_rows_match_their_schemas_and_the_limit_moves():
    perms = []
    for i, (t, waits, cpu) in enumerate(((1, {"WRITELOG": 10.0}, 99.0), (8, {"WRITELOG": 7000.0}, None),
                                         (32, {"WRITELOG": 30000.0}, None)), start=1):
        p = {"id": f"i1-t{t}-per_thread-p100-durable", "index": i, "threads": t, "total_threads": t}
        perms.append(summary(perm=p, waits=waits, client_cpu_demand=cpu, users_active=t, users_expected=t,
                             send_latency_ms=LatencySummary(count=5000, mean=float(t), p50=float(t))))
    diags = D.diagnose(perms)
    rows = V.rows(diags)
    assert len({tuple(r) for r in rows}) == 1 and {"stage", "evidence", "technique"} <= set(rows[0])
    assert all(list(r) == ["run_id", "perm_id", "limit", "limit_stage", "limit_confidence", "limit_remedy"]
               for r in V.limit_columns(diags))
    moves = V.limit_moves(diags)
    assert moves == [{"run_id": "r", "context": "i1 per_thread p100 durable",
                      "moves": "1: client -> 8: SEND (log flush) -> 32: SEND (log flush)"}]
    text = V.terminal_text(diags, width=200)
    assert "i1-t8-per_thread-p100-durable: SEND: log flush  [clear, 1 repetition]" in text
    assert "try: DELAYED_DURABILITY" in text and "Where the limit moves" in text
    assert "PostgreSQL emulation" not in text            # a SQL Server run
    html = V.report_section(diags)
    assert html.startswith("<h2>What limits throughput, and what to try</h2>")
    assert "1: client -&gt; 8: SEND (log flush)" in html
    json.dumps(rows)                                      # plain data


def test_terminal_says_embedded_numbers_are_the_emulations():
    embedded = TargetRef("embedded", "PostgreSQL emulation", "durable")
    text = V.terminal_text(D.diagnose([summary(target=embedded, waits={"WRITELOG": 4000.0})]))
    assert "PostgreSQL emulation: the limits found are the emulation's, not SQL Server's" in text
    assert V.terminal_text([]) == ""


# --------------------------------------------------------------------------- the growth detector's error rates

def _depths(rng, n: int, dt: float, grow: float, amp: float, model: str, send: float = 1000.0):
    t = np.arange(n) * dt + rng.uniform(0, dt)
    if model == "batches":       # the transport's and the readers' batches: a depth anywhere in [0, amp]
        noise = rng.uniform(0, amp, n)
    else:                        # "ar1": correlated from one sample to the next (0.8)
        x, noise = rng.normal(0, amp / 3), np.zeros(n)
        for i in range(n):
            x = 0.8 * x + rng.normal(0, amp / 5)
            noise[i] = x + amp / 2
    return list(zip(t.tolist(), np.maximum(0, grow * send * t + noise).tolist()))


def _rate(rng, trials: int, grow: float, **kw) -> float:
    send = 1000.0
    hits = 0
    for _ in range(trials):
        g = growth(_depths(rng, grow=grow, **kw))
        hits += D._growing(g, send)
    return hits / trials


@pytest.mark.parametrize("n, dt, model, amp, max_fp, min_power", [
    (20, 0.25, "batches", 1000.0, 0.01, 0.80),   # 5 s window, a depth swinging by 1 s of SENDs
    (10, 1.0, "batches", 1000.0, 0.01, 0.95),    # 10 s window, 1 s samples
    (20, 0.25, "ar1", 500.0, 0.05, 0.85),
])
def test_growth_detector_error_rates(n, dt, model, amp, max_fp, min_power):
    """Simulated: a queue whose depth only fluctuates is seldom called growing (false positives
    at most ``max_fp``), one growing at 25 % of the SEND rate almost always is; docs/diagnosis.md
    gives these figures, and where the detector is weaker (a depth wandering like a random walk:
    a stage exactly at its capacity, whose queue neither grows nor drains)."""
    rng = np.random.default_rng(20251124)
    fp = _rate(rng, 600, 0.0, n=n, dt=dt, amp=amp, model=model)
    power = _rate(rng, 300, 0.25, n=n, dt=dt, amp=amp, model=model)
    assert fp <= max_fp and power >= min_power, (fp, power)


def test_signal_wait_is_cpu_pressure_not_the_resource_it_followed():
    """Issue 52, item 7: wait_time_ms includes signal_wait_time_ms (sys.dm_os_wait_stats). On a
    CPU-bound server WRITELOG carries the time its tasks then spent runnable: 7,000 ms/s of
    which 6,400 signal. The SEND stage reads the resource wait (600 ms/s: no log flush stands
    out) and the signal wait as CPU pressure, not DELAYED_DURABILITY."""
    from harness.results.records import TopWait
    from support.summaries import T
    cpu = one(top_waits=[TopWait("WRITELOG", 7000.0 * T, 100, 1.0, signal_wait_ms=6400.0 * T)],
              signal_wait_ms_per_s=6400.0)
    assert (cpu.stage, cpu.detail) == ("server CPU", "tasks waiting for a CPU (signal wait)"), cpu
    assert "signal wait 6,400 ms/s" in cpu.primary.evidence and cpu.primary.remedy == "server CPU"
    assert all(f.remedy != "log flush" for f in cpu.findings)
    # sampled sessions: a runnable request is counted as RUNNABLE, the CPU category too
    sampled = one(session_waits={"sender": {"RUNNABLE": 5.0, "WRITELOG": 0.5}}, session_wait_samples=40)
    assert sampled.stage == "server CPU"
