"""Workers on client hosts of their own, tested for real on one machine.

Two Linux network namespaces stand for two client hosts, each joined to the controller (the root
namespace) by a veth pair on a bridge, on a private /24; each worker also gets a UTS namespace
of its own, so it reports its own host name. The controller runs ``ssbench run --remote-workers
--master-bind <bridge address>``; ``ssbench worker --master <bridge address>`` runs in each
namespace. Between them: real TCP over the veth pairs (a namespace has no other route to the
master) carrying Locust's messages, the token handshake, the spec and the recordings. The
embedded PostgreSQL listens on 127.0.0.1 and on its Unix socket; the workers' SEND connections
use the socket, which the namespaces share through the file system (network namespaces do not
separate Unix sockets bound to a path).

Skipped, with the reason, where network namespaces cannot be created (not root, no ``ip``, a
container without CAP_NET_ADMIN)."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from harness.load.master import RECORDING_WAIT_S
from support.summaries import read as read_summary

REPO = Path(__file__).resolve().parents[2]
untimed = pytest.mark.untimed("users, hosts, counts and exit codes; the one time bound is the recording timeout")
TOKEN = "netns-test-token-" + "x" * 32

MATRIX = """\
name: netns
axes:
  initiators: [2]
  threads: [4]
  dialogs: [per_thread]
  payload_bytes: [100]
  server: [durable]
  rate: [50]                    # open loop: the same users, messages and recordings, not both cores
run:
  warmup_seconds: 3             # every user connected before the window, even on a loaded machine
  measure_seconds: 2
  repetitions: {reps}
  drain_timeout_seconds: 30
  sample_interval_seconds: 0.25
  workers_per_initiator: {wpi}
broker:
  max_queue_readers: 2
  waitfor_timeout_ms: 300
  monitor_interval_seconds: 0.2
"""


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=30)


class Net:
    """A bridge in the root namespace (the controller, 10.X.Y.1/24) and one namespace per client."""

    def __init__(self, clients: int):
        tag = f"{os.getpid() % 10000}{random.randrange(100)}"
        self.subnet = f"10.{random.randrange(200, 250)}.{random.randrange(1, 250)}"
        self.bridge = f"sbr{tag}"[:15]
        self.master_ip = f"{self.subnet}.1"
        self.namespaces = [f"ssbench-{tag}-c{k}" for k in range(1, clients + 1)]
        self.veths = [f"sv{tag}c{k}"[:15] for k in range(1, clients + 1)]

    def up(self) -> "Net":
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.master_ip}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for k, (ns, veth) in enumerate(zip(self.namespaces, self.veths), start=2):
            _ip("netns", "add", ns)
            _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("link", "set", veth, "master", self.bridge)
            _ip("link", "set", veth, "up")
            _ip("-n", ns, "addr", "add", f"{self.subnet}.{k}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            _ip("-n", ns, "link", "set", "lo", "up")
        return self

    def down(self) -> None:
        for ns, veth in zip(self.namespaces, self.veths):
            subprocess.run(["ip", "link", "del", veth], capture_output=True)
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)

    def free_port(self) -> int:
        for _ in range(50):
            port = random.randrange(20000, 40000)
            with socket.socket() as s:
                try:
                    s.bind((self.master_ip, port))
                except OSError:
                    continue
                return port
        raise RuntimeError("no free port")


@pytest.fixture
def net():
    if os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("unshare") is None:
        pytest.skip("network namespaces need root, iproute2's ip and util-linux's unshare")
    n = Net(2)
    try:
        n.up()
    except subprocess.CalledProcessError as e:
        n.down()
        pytest.skip(f"cannot create network namespaces here: {' '.join(e.cmd)}: {e.stderr.strip()}")
    yield n
    n.down()


def _env() -> dict[str, str]:
    return dict(os.environ, SSBENCH_WORKER_TOKEN=TOKEN, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def _worker_in(ns: str, hostname: str, master: str, *args: str, log: Path) -> subprocess.Popen:
    """``ssbench worker`` in a namespace, with a host name of its own (a UTS namespace)."""
    cmd = ["ip", "netns", "exec", ns, "unshare", "--uts", "sh", "-c",
           f'hostname {hostname} && exec "$0" "$@"', sys.executable, "-m", "harness.cli", "worker",
           "--master", master, "--runs", "1", "--retry-seconds", "0.5", *args]
    return subprocess.Popen(cmd, cwd=REPO, env=_env(), stdout=log.open("wb"), stderr=subprocess.STDOUT,
                            start_new_session=True)


def _stop(procs) -> None:
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, 9)
            p.wait(timeout=10)


@pytest.mark.slow
@pytest.mark.swarm
@untimed
def test_remote_workers_from_two_hosts_named_unassigned_and_a_stray(pg_server, net, tmp_path):
    """Two client namespaces, two workers each: the first host's name their initiator (1), the
    second's name none and the master places them (initiator 2); a stray worker for an initiator
    the permutation does not use (3), from the controller's own host and connected first, gets no
    users and waits, connected, to the run's end. Two repetitions on one master: each ``ssbench
    worker --runs 1`` starts one Locust worker, which serves both. Every user active, sent =
    received, the run exact."""
    m = tmp_path / "netns.yaml"
    m.write_text(MATRIX.format(wpi=2, reps=2))
    port = net.free_port()
    master = f"{net.master_ip}:{port}"
    out = tmp_path / "run"
    # the stray worker first, so that it is among the first connected
    stray = subprocess.Popen([sys.executable, "-m", "harness.cli", "worker", "--master", master, "--initiator", "3",
                              "--runs", "1", "--retry-seconds", "30"], cwd=REPO, env=_env(),
                             stdout=(tmp_path / "stray.log").open("wb"), stderr=subprocess.STDOUT,
                             start_new_session=True)
    run = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", str(m), "--out", str(out),
                            "--remote-workers", "--master-bind", master, "--worker-wait", "90"],
                           cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ns1, ns2 = net.namespaces
    workers = [_worker_in(ns1, "client-1", master, "--initiator", "1", log=tmp_path / f"worker1{j}.log") for j in (1, 2)]
    workers += [_worker_in(ns2, "client-2", master, log=tmp_path / f"worker2{j}.log") for j in (1, 2)]
    try:
        stdout, stderr = run.communicate(timeout=400)
        for w in [*workers, stray]:
            w.wait(timeout=60)
    finally:
        _stop([run, stray, *workers])
    logs = "\n".join(f"--- worker {p.name}\n" + p.read_text()[-1500:] for p in sorted(tmp_path.glob("worker*.log")))
    assert run.returncode == 0, stderr[-3000:] + logs
    assert [w.returncode for w in workers] == [0, 0, 0, 0], logs
    # one master for the run: each worker's one Locust worker process served both repetitions
    # (a master per repetition would end it after the first, and --runs 1 would leave none)
    for p in [*tmp_path.glob("worker*.log"), tmp_path / "stray.log"]:
        text = p.read_text()
        assert text.count("ssbench worker: master 1 ended") == 1 and "reconnecting" not in text, (p.name, text[-1500:])
    reps = sorted(out.glob("*/rep-0*/summary.json"))
    assert [sp.parent.name for sp in reps] == ["rep-01", "rep-02"], reps
    for sp in reps:
        d = read_summary(sp)
        assert (d["users_expected"], d["users_spawned"], d["users_active"]) == (8, 8, 8), (d["status"], d["workers"])
        assert d["messages_lost"] == 0 and d["messages_sent"] > 0 and d["messages_sent"] == d["messages_received"], d
        assert all(p["sent"] > 0 and p["sent"] == p["received"] for p in d["per_initiator"])
        # each client "host" drove its initiator, two processes of two users each, the stray none
        assert sorted((w["initiator"], w["worker"]) for w in d["workers"]) == [(1, 1), (1, 2), (2, 1), (2, 2)]
        assert {(w["initiator"], w["host"]) for w in d["workers"]} == {(1, "client-1"), (2, "client-2")}
        assert all(w["users"] == w["users_active"] == 2 and w["sends"] > 0 for w in d["workers"]), d["workers"]
    # the same Locust worker processes recorded both repetitions
    pids = [{r.name: json.loads(r.read_text())["pid"] for r in sp.parent.glob("worker-i*.json")} for sp in reps]
    assert pids[0] == pids[1] and len(set(pids[0].values())) == 4, pids
    # and reported its own CPU and memory
    hosts = {h["host"]: h for h in d["client_hosts"]}
    assert {h: v["workers"] for h, v in hosts.items()} == {"client-1": 2, "client-2": 2}
    assert all(h["cpu_percent"] is not None and h["memory_used_bytes"] > 0 for h in hosts.values())
    # the recordings came over the wire: the workers had no spec file and wrote nothing
    rep = sp.parent
    assert sorted(p.name for p in rep.glob("worker-i*.json")) == [
        "worker-i1-w1.json", "worker-i1-w2.json", "worker-i2-w1.json", "worker-i2-w2.json"]
    rec = json.loads((rep / "worker-i2-w1.json").read_text())
    assert rec["host"] == "client-2" and rec["samples"]
    print(f"\nnetns: send {d['send_rate']:.0f}/s, sent {d['messages_sent']} = received {d['messages_received']}, "
          + ", ".join(f"{h}: {v['cpu_percent']}% CPU" for h, v in hosts.items()))


@pytest.mark.slow
@pytest.mark.swarm
@untimed
def test_remote_workers_missing_are_named(pg_server, tmp_path):
    """Only initiator 1's worker comes: the repetition fails after --worker-wait, naming initiator 2."""
    m = tmp_path / "netns.yaml"
    m.write_text(MATRIX.format(wpi=1, reps=1))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    master = f"127.0.0.1:{port}"
    run = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", str(m), "--out", str(tmp_path / "run"),
                            "--remote-workers", "--master-bind", master, "--worker-wait", "5"],
                           cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log = tmp_path / "worker.log"
    w = subprocess.Popen([sys.executable, "-m", "harness.cli", "worker", "--master", master, "--initiator", "1",
                          "--runs", "1"], cwd=REPO, env=_env(), stdout=log.open("wb"), stderr=subprocess.STDOUT,
                         start_new_session=True)
    try:
        _stdout, stderr = run.communicate(timeout=300)
    finally:
        _stop([run, w])
    assert run.returncode == 3, stderr[-3000:]
    line = [x for x in stderr.splitlines() if "Locust worker(s) missing" in x]
    assert line and "1 of 2 Locust worker(s) missing after 5s: initiator 2: worker(s) 1 of 1; connected: " \
        in line[0] and "(initiator 1, worker 1)" in line[0], stderr[-3000:]


@pytest.mark.slow
@pytest.mark.swarm
@untimed
def test_remote_workers_killed_mid_window_fails_the_repetition(pg_server, tmp_path):
    """A client host's Locust worker killed mid-window: the repetition fails (exit 3) naming the
    worker whose recording is missing, without waiting out the recording timeout; nothing is kept."""
    import psutil

    m = tmp_path / "netns.yaml"
    m.write_text(MATRIX.format(wpi=1, reps=1).replace("measure_seconds: 2", "measure_seconds: 8"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    master = f"127.0.0.1:{port}"
    out = tmp_path / "run"
    workers = {k: subprocess.Popen([sys.executable, "-m", "harness.cli", "worker", "--master", master, "--initiator",
                                    str(k), "--runs", "1"], cwd=REPO, env=_env(),
                                   stdout=(tmp_path / f"w{k}.log").open("wb"), stderr=subprocess.STDOUT,
                                   start_new_session=True) for k in (1, 2)}
    run = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", str(m), "--out", str(out),
                            "--remote-workers", "--master-bind", master, "--worker-wait", "60"],
                           cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(run.stderr), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:   # the swarm has spawned: messages are being received
            if any(re.search(r"running: [1-9][\d,]* msg/s received", x) for x in list(lines)):
                break
            time.sleep(0.2)
        else:
            pytest.fail("the swarm never got going:\n" + "".join(lines[-20:]))
        time.sleep(1)
        [victim] = psutil.Process(workers[2].pid).children()
        victim.kill()
        killed = time.monotonic()
        run.wait(timeout=300)
        reader.join(10)
        stderr = "".join(lines)
        took = time.monotonic() - killed
    finally:
        _stop([run, *workers.values()])
    assert run.returncode == 3, stderr[-3000:]
    # the master's heartbeat names the lost worker; when the window ends first, its missing recording
    assert re.search(r"Locust worker i2\.w1 \(\S+, pid \d+\) stopped answering while the swarm was running"
                     r"|no recording from the Locust worker\(s\) i2\.w1\b", stderr), stderr[-3000:]
    assert "Traceback" not in stderr
    assert not list(out.glob("*/rep-*/summary.json"))
    # Locust's missing-worker beat (3 s), not the recording timeout: waiting that out would take
    # all of it after the 8 s window, whatever the machine's speed
    assert took < RECORDING_WAIT_S, took
