"""The master starts a swarm's window (the ``spawn_complete`` fact, the warm-up counted from it)
once Locust has spawned every user AND each placed worker says its users have all tried their
first connect (``Delta.ready_at``, from :meth:`harness.load.recorder.Recorder.ready_at`): on a
loaded host a connect slower than the warm-up was measured as idle users, and a short window
completed no SEND. A worker that never says so (a hung connect) waits READY_WAIT_S at most.
Only the window's logic, on a fake runner, in a subprocess (it imports locust, which patches
with gevent)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from harness.load.recorder import Recorder
from support.embedded import REPO


def test_a_worker_is_ready_once_each_of_its_users_tried_its_first_connect():
    rec = Recorder(initiator=1)
    users = [rec.add_user(4)[0] for _ in range(3)]
    assert rec.ready_at(3) is None
    rec.settle(users[0])
    rec.settle(users[1])
    assert rec.ready_at(3) is None, "ready before its third user tried"
    rec.settle(users[2])
    first = rec.ready_at(3)
    rec.settle(users[2])                 # a retry does not move it
    assert first is not None and rec.ready_at(3) == first == max(rec.settled.values())
    assert rec.ready_at(0) == 0.0        # a worker with no users waits for nothing
    rec.reset()
    assert rec.ready_at(3) is None, "the next swarm's users must try again"


SCENARIO = textwrap.dedent("""
    import time
    from types import SimpleNamespace

    import gevent

    import harness.load.master as master_mod
    from harness.load.master import MasterSide
    from harness.load.placement import Slot

    def master(warmup=0.2, planned=0.3):
        m = MasterSide.__new__(MasterSide)   # no Locust, no controller: the window's logic only
        m.plan = SimpleNamespace(swarm_id="s", warmup_seconds=warmup, planned_seconds=planned)
        m.placed = {"c1": Slot(initiator=1, worker=1, users=2, first_user=0),
                    "c2": Slot(initiator=1, worker=2, users=2, first_user=2)}
        m.facts, m._ready, m._spawned, m._timer, m.merge = {}, {}, None, None, None
        m.phase, stopped = "spawning", []
        m._set_phase = lambda phase: setattr(m, "phase", phase)
        m.stop_swarm = lambda: stopped.append(time.time())
        return m, stopped

    def ready(m, name, at):          # what _on_delta does with a delta's ready_at
        m._ready[name] = at
        m._open_window()

    # spawned, but the users' connects are still running: no window yet
    m, stopped = master()
    t0 = time.time()
    m._on_spawned(user_count=4)
    assert "spawn_complete" not in m.facts and m.phase == "spawning", m.facts
    ready(m, "i1.w1", t0 + 0.05)
    assert "spawn_complete" not in m.facts, "opened before the second worker was ready"
    late = time.time() + 0.1
    ready(m, "i1.w2", late)
    assert m.facts["spawn_complete"] == late and m.phase == "running", m.facts
    assert m.facts["user_count"] == 4
    gevent.sleep(0.1 + 0.2 + 0.3 + master_mod.STOP_MARGIN_S + 0.3)
    assert len(stopped) == 1 and stopped[0] >= late + 0.2 + 0.3 + master_mod.STOP_MARGIN_S - 0.02, \\
        (stopped, late)

    # ready before Locust's end of spawning: the window starts at the spawn
    m, stopped = master()
    ready(m, "i1.w1", time.time() - 1)
    ready(m, "i1.w2", time.time() - 1)
    assert "spawn_complete" not in m.facts, "opened before Locust's end of spawning"
    t1 = time.time()
    m._on_spawned(user_count=4)
    assert t1 <= m.facts["spawn_complete"] <= time.time()

    # a worker that never says: the window starts READY_WAIT_S after the spawn all the same
    master_mod.READY_WAIT_S = 0.3
    m, stopped = master(planned=0)       # until stopped (the web UI): no timer
    ready(m, "i1.w1", time.time())
    t2 = time.time()
    m._on_spawned(user_count=4)
    gevent.sleep(0.15)
    assert "spawn_complete" not in m.facts
    gevent.sleep(0.35)
    assert m.facts["spawn_complete"] >= t2 + 0.29 and m.phase == "running" and m._timer is None, m.facts
    late_one = m.facts["spawn_complete"]
    ready(m, "i1.w2", time.time())       # late: the window has its origin already
    assert m.facts["spawn_complete"] == late_one
    print("ok")
""")


def test_the_window_opens_when_every_worker_is_ready_or_after_the_wait():
    out = subprocess.run([sys.executable, "-c", SCENARIO], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stdout[-2000:] + out.stderr[-3000:]
