"""Several Locust worker processes per initiator, end to end: ``ssbench run --workers-per-initiator 2``
on the embedded target (real PostgreSQL, a real Locust master and four real worker processes on
loopback, the recordings sent over Locust's messages and written by the master), and the
validation of the setting."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import ssbench_here
from support.parts import starts
from support.summaries import read as read_summary, window

REPO = Path(__file__).resolve().parents[2]

MATRIX = """\
name: wpi
axes:
  initiators: [2]
  threads: [4]
  dialogs: [per_thread]
  payload_bytes: [100]
  server: [durable]
  rate: [50]                    # open loop: every user sends, without taking both cores
run:
  warmup_seconds: 3             # every user connected before the window, even on a loaded machine
  measure_seconds: 1            # 25 SENDs per process and 4 CPU samples: more than the checks need
  repetitions: 1
  drain_timeout_seconds: 30
  sample_interval_seconds: 0.25
{extra}
broker:
  max_queue_readers: 2
  waitfor_timeout_ms: 300
  monitor_interval_seconds: 0.2
"""


def ssbench(*args, env=None):
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=REPO, env=env or dict(os.environ),
                          capture_output=True, text=True, timeout=600)


def write_matrix(tmp_path: Path, extra: str = "") -> Path:
    p = tmp_path / "wpi.yaml"
    p.write_text(MATRIX.format(extra=extra))
    return p


#: the even split and the uneven one, as cases of one run (one master, one warm-up of each set)
CASES = """cases:
  - name: even
    axes: {initiators: [2], threads: [4]}
  - name: uneven
    axes: {initiators: [1], threads: [1, 3]}
"""
EVEN = "i2-t4-per_thread-p100-durable-rate50-even"


@pytest.fixture(scope="module")
@starts("swarm")
def wpi_run(pg_server, tmp_path_factory):
    """One ``ssbench run --workers-per-initiator 2`` of both cases, shared by the module's tests:
    2 initiators x 4 threads, then 1 initiator with 1 and 3 threads. The matrix's own
    ``run.workers_per_initiator`` sets the same field (the paper matrix's count below reads it)."""
    tmp_path = tmp_path_factory.mktemp("wpi")
    out = tmp_path / "run"
    (tmp_path / "wpi.yaml").write_text(MATRIX.format(extra="") + CASES)
    r = ssbench("run", str(tmp_path / "wpi.yaml"), "--workers-per-initiator", "2", "--out", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    return out


@pytest.mark.slow
@pytest.mark.untimed("users, processes and counts")
def test_workers_per_initiator_two_processes_every_user_active(wpi_run):
    out = wpi_run
    [summary_path] = list(out.glob(f"{EVEN}/rep-01/summary.json"))
    d = read_summary(summary_path)
    rep = summary_path.parent
    # 2 initiators x 2 processes, each process 4 / 2 = 2 users, each recording written by the master
    assert sorted(p.name for p in rep.glob("worker-i*.json")) == [
        "worker-i1-w1.json", "worker-i1-w2.json", "worker-i2-w1.json", "worker-i2-w2.json"]
    assert (d["users_expected"], d["users_spawned"], d["users_active"]) == (8, 8, 8), (d["status"], d["workers"])
    # worker W numbers its users from (W-1) x 2: each user of an initiator has its own dialog slot
    users = {p.name: sorted(json.loads(p.read_text())["users"]) for p in rep.glob("worker-i*.json")}
    assert users == {"worker-i1-w1.json": ["0", "1"], "worker-i1-w2.json": ["2", "3"],
                     "worker-i2-w1.json": ["0", "1"], "worker-i2-w2.json": ["2", "3"]}, users
    assert d["messages_lost"] == 0 and d["messages_sent"] > 0
    assert d["messages_sent"] == d["messages_received"], d
    assert all(p["sent"] > 0 and p["sent"] == p["received"] for p in d["per_initiator"]), d["per_initiator"]
    workers = {(w["initiator"], w["worker"]): w for w in d["workers"]}
    assert set(workers) == {(1, 1), (1, 2), (2, 1), (2, 2)}
    for w in workers.values():
        assert w["users"] == w["users_active"] == 2, w
        assert w["sends"] > 0 and w["errors"] == 0, w
    # the per-initiator figures are the per-process ones merged exactly
    assert sum(w["sends"] for w in workers.values()) == d["send_latency_ms"]["count"]
    assert len(d["client_hosts"]) == 1 and d["client_hosts"][0]["workers"] == 4
    # each process's CPU as its own probe and the host collector saw it: every process has both
    # series, and the summary holds each one's mean over the window's ticks (none where a loaded
    # host ticked outside the 1 s window: seen once in CI), the client host's over the same ticks
    w = window(rep, d)
    own = {s.key for s in w.samples if s.family == "worker" and s.metric == "cpu_percent"}
    host = {s.key for s in w.samples
            if s.family == "host" and s.metric == "cpu_percent" and s.key.startswith("worker.")}
    assert own == {"i1.w1", "i1.w2", "i2.w1", "i2.w2"} and host == {f"worker.{k}" for k in own}
    assert any(s.family == "client_host" and s.key == d["client_hosts"][0]["host"] for s in w.samples)

    def mean(family: str, key: str, digits: int) -> float | None:
        inside = w.series(family, "cpu_percent", key)
        return round(statistics.fmean(inside), digits) if inside else None

    for (i, n), wr in workers.items():
        assert wr["cpu_percent"] == mean("worker", f"i{i}.w{n}", 2), wr
    assert (d["client_hosts"][0]["cpu_percent"] is None) == all(wr["cpu_percent"] is None for wr in workers.values())
    assert d["worker_cpu_percent"] == {k: m for k in host if (m := mean("host", k, 1)) is not None}
    run = json.loads((out / "run.json").read_text())
    assert run["matrix"]["run"]["workers_per_initiator"] == 2
    print(f"\n2 processes per initiator: send {d['send_rate']:.0f}/s, sent {d['messages_sent']} = received "
          f"{d['messages_received']}, per process " + ", ".join(
              f"i{w['initiator']}.w{w['worker']}: {w['users']} users {w['sends']} SENDs {w['cpu_percent']}% CPU"
              for w in d["workers"]))


@pytest.mark.slow
@pytest.mark.untimed("users, processes and counts")
def test_three_threads_over_two_processes_split_three_and_none_is_lost(wpi_run):
    """Threads split as evenly as possible (3 over 2: 2 + 1), each user on its own dialog slot;
    an initiator with 1 thread gets one process, not two."""
    out = wpi_run
    for perm, want in (("i1-t1-", {"worker-i1-w1.json": ["0"]}),
                       ("i1-t3-", {"worker-i1-w1.json": ["0", "1"], "worker-i1-w2.json": ["2"]})):
        [summary_path] = list(out.glob(f"{perm}*-uneven/rep-01/summary.json"))
        d = read_summary(summary_path)
        users = {p.name: sorted(json.loads(p.read_text())["users"]) for p in summary_path.parent.glob("worker-i*.json")}
        assert users == want, users
        n = sum(len(v) for v in want.values())
        assert (d["users_expected"], d["users_spawned"], d["users_active"]) == (n, n, n), d["status"]
        assert d["messages_lost"] == 0 and d["messages_sent"] == d["messages_received"] > 0, d
        assert sorted(w["users"] for w in d["workers"]) == sorted(len(v) for v in want.values())


def test_the_papers_matrix_with_two_processes_per_initiator_is_528(tmp_path, capsys):
    m = tmp_path / "paper2.yaml"
    text = (REPO / "matrices" / "paper.yaml").read_text()
    assert "workers_per_initiator" not in text
    m.write_text(text.replace("\nrun:\n", "\nrun:\n  workers_per_initiator: 2\n", 1))
    code, out, err = ssbench_here(capsys, "matrix", str(m), "--count")
    assert code == 0 and out.strip() == "528", err


@pytest.mark.parametrize("extra, args, where", [
    ("  workers_per_initiator: 0", [], "run.workers_per_initiator: must be between 1 and 64"),
    ("  workers_per_initiator: two", [], "run.workers_per_initiator: must be an integer"),
    ("", ["--workers-per-initiator", "0"], "--workers-per-initiator: must be an integer between 1 and 64"),
    ("", ["--master-bind", "0.0.0.0:5557"], "--master-bind: only with --remote-workers"),
])
def test_workers_per_initiator_bad_values_are_one_line_errors(tmp_path, extra, args, where, capsys):
    m = write_matrix(tmp_path, extra)
    code, _, err = ssbench_here(capsys, "run", str(m), "--out", str(tmp_path / "out"), *args)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert where in lines[0], lines[0]
    assert not (tmp_path / "out").exists()


def test_workers_per_initiator_figures_per_process_and_host():
    """Per-process CPU is the window mean of the process's own samples; client_bound is judged
    per process (one process at >= 90% of a core, whatever the others do); a host's figures
    count each tick once however many workers it has."""
    from harness.results.summary import worker_results

    def samples(cpu):   # [ts, process CPU, host CPU, host memory %, host memory used]
        return [[t, cpu, 50.0 + t, 40.0, 1e9 + t] for t in range(10)]

    workers = [{"initiator": 1, "worker": 2, "host": "a", "users": 2, "users_active": 2, "sends": 5, "errors": 0,
                "samples": samples(95.0)},
               {"initiator": 1, "worker": 1, "host": "a", "users": 2, "users_active": 1, "sends": 7, "errors": 1,
                "samples": samples(10.0)},
               {"initiator": 2, "worker": 1, "host": "b", "users": 2, "users_active": 2, "sends": 6, "errors": 0,
                "samples": []}]
    per, hosts = worker_results(workers, 2.0, 6.0, 90.0)
    assert [(w.initiator, w.worker) for w in per] == [(1, 1), (1, 2), (2, 1)]
    assert [w.cpu_percent for w in per] == [10.0, 95.0, None]
    assert [w.client_bound for w in per] == [False, True, False]
    assert per[0].users_active == 1 and per[0].errors == 1
    a, b = hosts
    assert (a.host, a.workers, a.cpu_percent, a.memory_used_bytes) == ("a", 2, 53.5, 1e9 + 5)
    assert (b.host, b.workers, b.cpu_percent) == ("b", 1, None)
