"""`ssbench run` end to end on the embedded target: real PostgreSQL, real Locust master and
workers in distributed mode on loopback, collectors, drain and verification, atomic results,
Ctrl-C and --resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.collectors.storage import REFERENCE_S
from support.cli import ssbench_here
from support.parts import starts
from support.summaries import read as read_summary

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "tests" / "data" / "tiny.yaml"
#: the tiny matrix's two permutations, as the cases of the module's run: one measured over the
#: matrix's window (2 s), the other over its own (2.5 s)
PER, TRICK = "i2-t2-per_thread-p100-durable-rate50-short", "i2-t2-trick150-p100-durable-rate50-long"
CASES = ("cases:\n  - name: short\n    axes: {dialogs: [per_thread]}\n"
         "  - name: long\n    axes: {dialogs: [trick150]}\n    run: {measure_seconds: 2.5}\n")

pytestmark = pytest.mark.slow
#: the tests that start a swarm (all but the refusal)
untimed = pytest.mark.untimed("counts, files, exit codes and the order of recorded times; no figure depends on "
                              "the host's speed")


def ssbench(*args, env=None, **kw):
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600, **kw)


def summaries(run: Path) -> dict[str, dict]:
    return {p.parent.parent.name: read_summary(p) for p in run.glob("*/rep-*/summary.json")}


@pytest.fixture(scope="module")
@starts("swarm")
def tiny(pg_server, tmp_path_factory):
    """tests/data/tiny.yaml with 2 repetitions, run.pin_cpus, run.keep_cpus_awake and its two
    permutations as two cases (CASES), open loop at 50 SENDs/s per initiator (nothing here
    judges a rate: a closed loop's load cost 13 CPU-s more), run once for the module: started,
    interrupted (Ctrl-C) while the second permutation's first repetition runs, then resumed to
    the end. Returns the run directory, the interrupted run's record and exit code, the first
    repetition's summary as the interruption left it, and the resumed ``ssbench run``."""
    tmp_path = tmp_path_factory.mktemp("tiny")
    matrix = tmp_path / "tiny.yaml"
    matrix.write_text(TINY.read_text().replace("  repetitions: 1\n", "  repetitions: 2\n  pin_cpus: true\n"
                                                "  keep_cpus_awake: true\n")
                      .replace("  server: [durable]\n", "  server: [durable]\n  rate: [50]\n") + CASES)
    out = tmp_path / "run"
    env = dict(os.environ, SSBENCH_MSSQL_PASSWORD="not-a-real-password")
    p = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", str(matrix), "--out", str(out)],
                         cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = out / PER / "rep-01" / "summary.json"
    deadline = time.monotonic() + 300
    while not first.exists() and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.2)
    assert first.exists(), p.communicate()[1][-3000:]
    time.sleep(1.0)  # the second permutation is under way
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=180)
    interrupted = {"returncode": p.returncode, "stderr": err, "record": json.loads((out / "run.json").read_text()),
                   "second_done": (out / TRICK / "rep-01" / "summary.json").exists(),
                   "first": first.read_text()}
    resumed = ssbench("run", str(matrix), "--out", str(out), "--resume", env=env)
    return out, interrupted, resumed


@untimed
def test_tiny_matrix_end_to_end(tiny):
    out, _, r = tiny
    assert r.returncode == 0, r.stderr[-3000:]
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "complete" and run["permutations_done"] == 4     # 2 permutations x 2 repetitions
    assert run["target"]["kind"] == "embedded" and "PostgreSQL" in run["target"]["label"]
    assert run["matrix"]["sha256"] and run["ssbench"]["version"] and run["host"]["cpu_count"]
    assert run["software"]["locust"]
    assert "not-a-real-password" not in (out / "run.json").read_text()

    s = summaries(out)
    assert set(s) == {PER, TRICK}
    for p in out.glob("*/rep-*/summary.json"):
        d = read_summary(p)
        assert d["messages_lost"] == 0, d
        assert d["messages_sent"] > 0 and d["messages_sent"] == d["messages_received"]
        assert [p["initiator"] for p in d["per_initiator"]] == [1, 2]
        assert all(p["sent"] > 0 and p["lost"] == 0 for p in d["per_initiator"])
        assert d["send_rate"] > 0 and d["receive_rate"] > 0
        assert d["users_expected"] == d["users_spawned"] == d["users_active"] == 4, d
        assert d["send_latency_ms"]["p50"] > 0 and d["e2e_latency_ms"]["p99"] >= d["e2e_latency_ms"]["p50"]
        assert d["activation_tasks_started"] >= 1
        # the wait sampler's figures reach the summary: the readers' WAITFOR in every window (a
        # benign wait); an open loop's other waits (WRITELOG) are too rare to be sampled each time
        assert d["waits"]["broker_waits"]["BROKER_RECEIVE_WAITFOR"] > 0 and d["waits"]["session_wait_samples"] > 0, d
        rep = p.parent
        samples = [json.loads(line) for line in (rep / "samples.jsonl").read_text().splitlines()]
        fams = {x["family"] for x in samples}
        assert {"waits", "queues", "activation", "broker", "throughput", "host"} <= fams
        assert {x["phase"] for x in samples} >= {"measure"}
        queue_keys = {x["key"] for x in samples if x["family"] == "queues" and x["metric"] == "depth"}
        assert queue_keys == {"xmitq.i1", "xmitq.i2", "queue"}
        assert any(x["family"] == "activation" and x["metric"] == "tasks_running" and x["value"] > 0
                   for x in samples)
        # the swarm's first SEND waits for the probes' idle references (the first REFERENCE_S
        # of the collectors); a worker's buckets are keyed by tenths of a second
        first_send = min(int(b) for w in rep.glob("worker-*.json") for b in json.loads(w.read_text())["buckets"]) / 10
        assert first_send >= samples[0]["ts"] + REFERENCE_S - 0.1, (first_send - samples[0]["ts"])
        lat = json.loads((rep / "latency.json").read_text())
        assert sum(lat["send"].values()) == d["send_latency_ms"]["count"]
        assert (rep / "locust_stats.csv").exists()
        assert (rep / "locust-master.log").exists() and (rep / "locust-worker-i1-w1.log").exists()
    # one master and its workers served the run's swarms (harness.load.series): Locust's own
    # summary, printed as that master exits, is whole in the run's logs once the run has returned
    assert "Aggregated" in (out / ".locust" / "locust-master.log").read_text()
    assert s[TRICK]["dialogs_created"] == 2 * 2 * 150
    assert not list(out.glob("*/.rep-*.partial"))


@untimed
def test_interrupt_then_resume_completes_only_missing(tiny):
    out, interrupted, r = tiny
    assert interrupted["returncode"] == 130, interrupted["stderr"][-3000:]
    assert interrupted["record"]["status"] == "interrupted"
    assert not interrupted["second_done"]
    assert r.returncode == 0, r.stderr[-3000:]
    first = out / PER / "rep-01" / "summary.json"
    assert first.read_text() == interrupted["first"]  # the complete repetition was not redone
    s = summaries(out)
    assert set(s) == {PER, TRICK}
    assert json.loads((out / "run.json").read_text())["status"] == "complete"
    assert not list(out.glob("*/.rep-*.partial"))


def test_resume_refuses_a_changed_matrix(pg_server, tmp_path):
    """In a process of its own: ``ssbench run`` has installed its SIGINT and SIGTERM handlers
    by the time it reads the run's record (they would stay in the test's process)."""
    out = tmp_path / "run"
    out.mkdir()
    (out / "run.json").write_text(json.dumps({"schema": "ssbench.run/1", "status": "interrupted",
                                              "matrix": {"sha256": "something-else"}}))
    r = ssbench("run", str(TINY), "--out", str(out), "--resume")
    assert r.returncode == 2 and "matrix file changed" in r.stderr


@untimed
def test_repetitions_are_interleaved_and_cpus_pinned(tiny, pg_server):
    """run.order interleaved (the default): rep 1 of both permutations, then rep 2 of both
    (A B A B), so drift hits both alike, also across an interruption and its resume;
    run.pin_cpus puts server and swarm on separate CPUs."""
    out, _, r = tiny
    assert r.returncode == 0, r.stderr[-3000:]
    starts = []
    for p in sorted(out.glob("*/rep-*/summary.json")):
        d = read_summary(p)
        starts.append((d["window"]["measure_start"], d["permutation"]["dialogs"], d["repetition"]))
        if len(os.sched_getaffinity(0)) >= 2:
            assert d["cpu_pinning"]["server"] and d["cpu_pinning"]["client"], d.get("cpu_pinning")
            assert not set(d["cpu_pinning"]["server"]) & set(d["cpu_pinning"]["client"])
    order = [(dialogs, rep) for _, dialogs, rep in sorted(starts)]
    assert order == [("per_thread", 1), ("trick150", 1), ("per_thread", 2), ("trick150", 2)], order
    assert "analyze with: ssbench analyze" in r.stderr
    assert PER in r.stdout.split("measured on this machine")[-1]
    import psutil

    # the shared server got every CPU back
    srv = psutil.Process(pg_server.info().pid)
    assert len(srv.cpu_affinity()) == len(os.sched_getaffinity(0))


@untimed
def test_a_case_is_measured_over_its_own_window(tiny, capsys):
    """A case's ``run:`` windows (docs/matrices.md): the runner measures its permutations over
    them, the other case over the matrix's, and each summary records the window it had;
    run.keep_cpus_awake is held for the run where this process may (root), else says why not."""
    out, _, r = tiny
    assert r.returncode == 0, r.stderr[-3000:]
    awake = json.loads((out / "run.json").read_text())["cpu_awake"]
    assert awake == {"held": True} if os.access("/dev/cpu_dma_latency", os.W_OK) else "reason" in awake, awake
    reps = list(out.glob("*/rep-*/summary.json"))
    assert len(reps) == 4, reps
    for p in reps:
        d = read_summary(p)
        want = {PER: 2.0, TRICK: 2.5}[p.parent.parent.name]
        w = d["window"]
        assert w["measure_seconds"] == want and w["warmup_seconds"] == 1.0, w
        assert abs(w["measure_end"] - w["measure_start"] - want) < 0.01, w
    _, listing, _ = ssbench_here(capsys, "matrix", str(out.parent / "tiny.yaml"))
    assert "# case long: warm-up 1s, measured 2.5s" in listing, listing
