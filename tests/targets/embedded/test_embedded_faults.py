"""Faults on the embedded target, for real: the broker process SIGKILLed mid-send (supervised,
restarted, every message delivered exactly once, counted in the databases) and two runs on one
server (the run lock: the second is refused naming the holder; different servers run side by
side). Real PostgreSQL, real broker processes, real signals, a real second process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import psycopg
import pytest

from harness.errors import UserError
from harness.targets.base import open_sender
from harness.targets.embedded.target import EmbeddedTarget, run_lock
from support.embedded import db, private_server, provisioned, REPO, send_many, settings, wait_for

pytestmark = pytest.mark.slow

PREFIX = "ssbf"


@pytest.fixture(scope="module")
def target(pg_server):
    with provisioned(pg_server, PREFIX, 2) as t:
        yield t


# --------------------------------------------------------------------------- the broker killed

def broker_pid(target: EmbeddedTarget) -> int | None:
    """The running broker's pid as the broker itself recorded it in the target database."""
    with db(target, target.target_db) as c:
        return c.execute("SELECT pid FROM ssb.broker_state").fetchone()[0]


def assert_exactly_once(target: EmbeddedTarget, initiators=(1, 2)) -> int:
    """Counted in the databases, independently of the harness: every sequence number of every
    dialog SENDs committed is in the drop table exactly once. Returns the messages checked."""
    with db(target, target.target_db) as t:
        seen: dict[str, list[int]] = {}
        for dlg, seq in t.execute("SELECT diag_id, msgseqnum FROM ssb.message_drop WHERE NOT warmup"):
            seen.setdefault(str(dlg), []).append(int(seq))
    total = 0
    for i in initiators:
        with db(target, target.initiator_db(i)) as c:
            for dlg, sent in c.execute("SELECT diag_id, send_seq FROM ssb.sysdesend WHERE send_seq > 0"):
                assert sorted(seen.get(str(dlg), [])) == list(range(1, int(sent) + 1)), \
                    f"dialog {dlg} of initiator {i}: not every message exactly once"
                total += int(sent)
    return total


def test_broker_killed_mid_send_is_restarted_and_delivers_exactly_once(target):
    """SIGKILL the broker process (from outside, by the pid it recorded) three times while six
    senders run: the target notices, restarts it, counts the restarts, and the drain settles
    with every message delivered exactly once. Then a crash exactly between the target's
    commit and the ACK (messages on both sides) is repaired the same way."""
    target.prepare(2, "durable", settings(max_queue_readers=3, monitor_interval_seconds=0.1,
                                          waitfor_timeout_ms=1000))
    for i in (1, 2):
        target.create_dialogs(i, 3, 1)
    target.set_queue_options(process_delay_ms=20)   # readers spend their time mid-batch
    stop = threading.Event()
    errors: list[BaseException] = []

    def sender(i: int, slot: int):
        try:
            s = open_sender(target.sender_spec(i))
            try:
                h = s.dialog(slot)
                while not stop.is_set():
                    s.send(h, b"payload " * 8)
            finally:
                s.close()
        except BaseException as e:  # pragma: no cover
            errors.append(e)

    threads = [threading.Thread(target=sender, args=(i, slot)) for i in (1, 2) for slot in (1, 2, 3)]
    try:
        target.start()
        assert target.broker_restarts() == 0
        for th in threads:
            th.start()
        for k in range(1, 4):
            time.sleep(0.8)
            pid = broker_pid(target)
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            wait_for(lambda: target.broker_restarts() == k, 30, f"restart {k}")
            new = wait_for(lambda: broker_pid(target) not in (None, pid) and broker_pid(target), 10, "new pid")
            os.kill(new, 0)                       # the restarted broker is alive
            assert target.broker_running()
        time.sleep(0.5)
        stop.set()
        for th in threads:
            th.join(10)
        assert not errors, errors
        c = target.drain(60)                      # nobody started the broker by hand
        assert c.settled and c.sent > 0, c
        for x in c.initiators:
            assert x.received == x.sent and x.xmitq == 0, x
        assert target.broker_restarts() == 3
        # crash exactly between the target's commit and the ACK: messages are on both sides
        target.stop()
        for i in (1, 2):
            send_many(target, i, 2)
        crash = subprocess.run(target.broker_command(extra=["--crash-after-enqueue", "1"]), timeout=60,
                               capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
        assert crash.returncode == -signal.SIGKILL, crash.stderr
        c = target.counts()
        assert sum(x.xmitq for x in c.initiators) > 0 and c.target_queue + c.received > 0
        target.start()
        c = target.drain(60)
        assert c.in_flight == 0 and c.sent > 0
        for x in c.initiators:
            assert x.received == x.sent, x
    finally:
        stop.set()
        target.stop()
    with db(target, target.target_db) as t:
        died = t.execute("SELECT count(*) FROM ssb.activation_tasks WHERE exit_reason = 'broker died'").fetchone()[0]
    assert died >= 1, "the kills landed while readers were running"
    n = assert_exactly_once(target)
    assert n == c.sent
    print(f"broker SIGKILLed 3x mid-send + 1 crash between commit and ACK: {n} messages, each exactly once")


# --------------------------------------------------------------------------- PostgreSQL crashed

@pytest.fixture
def crash_target():
    """A target on a private server of its own: this test crashes the server."""
    with private_server("crash") as srv:
        t = EmbeddedTarget(srv, prefix="ssbc")
        try:
            yield t
        finally:
            t.close()


@pytest.mark.untimed("a count of errors bounded by the outage's own length")
def test_postgres_crash_mid_send_senders_back_off_broker_restarts_nothing_lost(crash_target):
    """``pg_ctl stop -m immediate`` while four senders SEND (durable profile): while the server
    is down the senders back off instead of spinning (a handful of errors each, not thousands);
    once it is back they reconnect by themselves, the supervisor restarts the broker, and every
    SEND that committed - every one acknowledged to a client among them - is delivered exactly
    once (counted in the databases)."""
    t = crash_target
    t.provision(1)
    t.prepare(1, "durable", settings(max_queue_readers=2, waitfor_timeout_ms=1000))
    t.create_dialogs(1, 4, 1)
    t.start()
    stop, down, back = threading.Event(), threading.Event(), threading.Event()
    acked: dict[str, list[int]] = {}
    errors = {"before": 0, "down": 0, "after": 0}
    resumed = {"sends": 0}
    lock = threading.Lock()

    def sender(slot: int):
        s = open_sender(t.sender_spec(1))
        try:
            h = s.dialog(slot)
            mine = acked.setdefault(h, [])
            while not stop.is_set():
                try:
                    mine.append(s.send_seq(h, b"crash " * 8))
                    if back.is_set():
                        with lock:
                            resumed["sends"] += 1
                except psycopg.Error:
                    with lock:
                        errors["after" if back.is_set() else "down" if down.is_set() else "before"] += 1
        finally:
            s.close()

    threads = [threading.Thread(target=sender, args=(k,)) for k in (1, 2, 3, 4)]
    try:
        for th in threads:
            th.start()
        time.sleep(1.0)
        down.set()
        crashed = time.monotonic()
        t.server.stop(mode="immediate")          # the crash
        time.sleep(3.0)
        t.server.start()                          # crash recovery
        outage = time.monotonic() - crashed
        back.set()
        wait_for(lambda: t.broker_restarts() >= 1, 30, "the broker restarted after the crash")
        wait_for(lambda: resumed["sends"] >= 100, 30, "the senders resumed")
    finally:
        stop.set()
        for th in threads:
            th.join(30)
    assert errors["before"] == 0, errors
    # backing off (0.1 s doubling to 2 s): per sender two failures as the connection dies, ~5
    # attempts while the back-off grows, then one per 2 s of outage; with margin. Spinning on
    # the dead connection fails hundreds of thousands of SENDs in the same time.
    assert 1 <= errors["down"] + errors["after"] <= 4 * (10 + outage / 2), (errors, outage)
    c = t.drain(60)
    assert c.settled, c
    n = assert_exactly_once(t, initiators=(1,))
    assert n == c.sent
    with db(t, t.initiator_db(1)) as conn:
        committed = dict(conn.execute("SELECT handle::text, send_seq FROM ssb.sysdesend").fetchall())
    for h, seqs in acked.items():
        assert seqs and max(seqs) <= committed[h], "an acknowledged SEND was lost in the crash"
    t.stop()
    print(f"PostgreSQL crashed mid-send: {n} messages exactly once, {errors['down'] + errors['after']} "
          f"SEND errors during the outage, {t.broker_restarts()} broker restart(s)")


# --------------------------------------------------------------------------- two runs at once

HOLD = """
import sys, time
from harness.errors import UserError
from harness.targets.embedded.target import run_lock
lock = run_lock(sys.argv[1], sys.argv[2])
try:
    lock.acquire()
except UserError as e:
    print(e, file=sys.stderr)
    sys.exit(e.exit_code)
print("held", flush=True)
if sys.argv[3:] == ["hold"]:
    time.sleep(600)
"""


def other_process(data_dir, owner: str, hold: bool = False) -> subprocess.Popen:
    """Another process trying the run lock of ``data_dir`` (and holding it if ``hold``)."""
    return subprocess.Popen([sys.executable, "-c", HOLD, str(data_dir), owner] + (["hold"] if hold else []),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(
                                p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)})


def test_run_lock_refuses_a_second_run_on_the_same_server_naming_the_holder(target, tmp_path):
    data_dir = target.server.data_dir
    with target.run_lock("run A (results/x/2026-11-22T08-00-00)") as held:
        rec = held.holder()
        assert rec["pid"] == os.getpid() and rec["owner"].startswith("run A") and rec["command"]
        # a second run in another process: refused, exit 2, the holder named
        p = other_process(data_dir, "run B")
        out, err = p.communicate(timeout=60)
        assert p.returncode == 2, (out, err)
        assert "in use by run A (results/x/2026-11-22T08-00-00)" in err and f"pid {os.getpid()}" in err, err
        assert len(err.strip().splitlines()) == 1, err
        # ... and in this process too (a second acquirer is refused whoever it is)
        with pytest.raises(UserError, match="in use by run A"):
            with target.run_lock("run C"):
                pass
        # a run on another data directory is not affected, in this process and in another
        other = tmp_path / "pg-other"
        other.mkdir()
        with run_lock(other, "run D"):
            p = other_process(tmp_path, "run E")
            assert p.communicate(timeout=60)[0].strip() == "held" and p.returncode == 0
    # released: the next run gets it
    assert run_lock(data_dir, "probe").holder() is None
    p = other_process(data_dir, "run F")
    assert p.communicate(timeout=60)[0].strip() == "held" and p.returncode == 0


def test_run_lock_dies_with_its_holder(target):
    """A run killed with SIGKILL leaves no stale lock: the kernel releases it."""
    p = other_process(target.server.data_dir, "run G", hold=True)
    try:
        assert p.stdout.readline().strip() == "held"
        with pytest.raises(UserError, match=rf"in use by run G \(pid {p.pid} "):
            target.run_lock("run H").__enter__()
        p.send_signal(signal.SIGKILL)
        p.wait(10)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(10)
    with target.run_lock("run H"):
        pass


# --------------------------------------------------------------------------- provenance

def test_describe_lists_the_databases_once_provisioned(pg_server):
    """run.json's topology on a fresh server: describe() after provision() names every
    initiator database the run uses (the runner describes the target after provisioning)."""
    t = EmbeddedTarget(pg_server, prefix="ssbd")
    try:
        assert t.describe()["topology"]["initiator_databases"] == []
        t.provision(2)
        assert t.describe()["topology"]["initiator_databases"] == ["ssbd_init1", "ssbd_init2"]
        t.prepare(1, "delayed", settings())
        assert t.describe()["topology"]["initiator_databases"] == ["ssbd_init1", "ssbd_init2"]
    finally:
        t.close()
