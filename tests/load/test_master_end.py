"""The master ends a headless swarm as soon as every worker has stopped its users and sent its
recording, without waiting for Locust's own ``test_stop`` (its master polls the workers' user
count once a second), and a late ``test_stop`` does not end it twice; a web UI swarm keeps
Locust's own end (harness.load.master). Only the end's logic, on a fake runner, in a subprocess
(it imports locust, which patches with gevent)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from support.embedded import REPO

SCENARIOS = textwrap.dedent("""
    import os
    import traceback
    from types import SimpleNamespace

    import gevent
    import gevent.event

    from harness.load.master import MasterSide
    from harness.load.placement import Slot

    def master(headless):
        m = MasterSide.__new__(MasterSide)   # no Locust, no controller: the end's logic only
        m.runner = SimpleNamespace(user_count=3, clients={"c1": SimpleNamespace(state="stopping")})
        m.plan, m.merge, m.phase, m.facts = SimpleNamespace(swarm_id="s"), None, "stopping", {}
        m.headless = headless                    # a run's master is headless; the web UI's is not
        m.placed = {"c1": Slot(initiator=1, worker=1, users=3, first_user=1)}
        m.recorded, m.forwarding, m._ending, m._timer = set(), set(), False, None
        ended = []
        m._set_phase = lambda phase: setattr(m, "phase", phase)
        m._collect_and_end = lambda: (ended.append("collected"), setattr(m, "phase", "ended"))
        return m, ended

    def scenarios():
        # headless: ends once the users are stopped and the recording is in, before test_stop
        m, ended = master(headless=True)
        m._on_test_stopping()
        gevent.sleep(0.2)
        assert ended == [], "ended while users still ran"
        m.runner.user_count = 0
        gevent.sleep(0.2)
        assert ended == [], "ended while a recording was due"
        m.recorded.add(m.placed["c1"].name)
        gevent.sleep(0.2)
        assert ended == ["collected"], ended
        m._on_test_stop()                        # Locust's own, a second later
        gevent.sleep(0.1)
        assert ended == ["collected"], "ended twice"

        # the web UI's swarm: only Locust's test_stop ends it
        m, ended = master(headless=False)
        m.runner.user_count = 0
        m.recorded.add(m.placed["c1"].name)
        m._on_test_stopping()
        gevent.sleep(0.2)
        assert ended == [], "a web swarm ended early"
        assert m.facts["stop_requested"], "the web UI's Stop does not end its window"
        m._on_test_stop()
        gevent.sleep(0.1)
        assert ended == ["collected"], ended

        # a run's master ends each swarm as early ...
        m, ended = master(headless=True)
        m.runner.user_count = 0
        m.recorded.add(m.placed["c1"].name)
        m._on_test_stopping()
        gevent.sleep(0.2)
        assert ended == ["collected"], f"a series' swarm did not end early: {ended}"
        # ... and opens its next swarm (Command.start) only once Locust's own test_stop came:
        # a late one would end the new swarm
        opened = []
        m.open_swarm = lambda users, rate: opened.append((users, rate))     # None: placed
        m.runner.start = lambda users, rate: opened.append("spawned")
        m._locust_stopped, m.opened = gevent.event.Event(), False
        gevent.spawn(m._start_next, 4, 50.0)
        gevent.sleep(0.2)
        assert opened == [], "the next swarm opened before Locust's test_stop"
        m._locust_stopped.set()
        gevent.sleep(0.1)
        assert opened == [(4, 50.0), "spawned"] and m.opened, opened
        # a worker Locust told to stop is placed only once it says it is ready again (its
        # statistics may count no user before): until then it is named as still stopping
        m.claims = {"c1": SimpleNamespace(host="h1", pid=7, initiator=1, worker=None)}
        m.runner.clients["c1"].state = "running"
        m._on_test_stopping()
        assert m._connected_claims() == {}, "a worker still stopping was placed"
        m.plan = SimpleNamespace(workers_per_initiator=1, worker_wait_seconds=60, users_of=lambda i: 3)
        m.guard = SimpleNamespace(refused=[])
        assert "still stopping the last swarm: h1 (pid 7)" in m._missing_text([m.placed["c1"]], {})
        m.runner.send_message = lambda *a, **kw: None
        m._on_connect("c1")                      # Locust's worker_connect: its client_ready
        assert list(m._connected_claims()) == ["c1"]
        # the window's timer stops the swarm, and the swarm's end kills that timer: Locust's stop
        # (it waits for the workers' users, then fires test_stop) must go on all the same
        m, ended = master(headless=True)
        m.phase, fired = "running", []
        m.runner.stop = lambda: (gevent.sleep(0.3), fired.append("test_stop"))
        m._timer = gevent.spawn(m.stop_swarm)
        gevent.sleep(0.05)
        m._timer.kill(block=False)
        gevent.sleep(0.5)
        assert fired == ["test_stop"], "killing the window's timer cut Locust's stop short"

        # a worker Locust marked missing (no heartbeat for 3 s) after the stop: a loaded machine
        # can delay a worker that still sends its recording, which is awaited MISSING_GRACE_S
        import time
        from harness.load.master import MISSING_GRACE_S
        m, ended = master(headless=True)
        m.runner.clients["c1"].state, m.lost = "missing", set()
        m._on_test_stopping()                    # the stop: now
        m.runner.user_count = 0                  # Locust counts no users on a missing worker
        gevent.sleep(0.2)
        assert ended == [], "a missing worker's recording was not awaited after the stop"
        m.recorded.add(m.placed["c1"].name)      # it came after all
        gevent.sleep(0.2)
        assert ended == ["collected"], ended
        m, ended = master(headless=True)
        m.runner.clients["c1"].state, m.lost = "missing", set()
        m.facts["stop_requested"] = time.time() - MISSING_GRACE_S - 1
        assert not m._awaited(), "a missing worker awaited beyond the grace"
        m.facts["stop_requested"] = time.time()
        m.lost = {m.placed["c1"].name}           # missing while the swarm ran: reported lost
        assert not m._awaited(), "a worker lost while the swarm ran awaited after the stop"
        m.runner.clients["c1"].state = "stopping"
        assert m._awaited(), "a worker that is there is awaited up to RECORDING_WAIT_S"
        del m.runner.clients["c1"]
        assert not m._awaited(), "a worker Locust removed is not awaited"

        # a worker that sent its last delta and quit at once (Locust removes it from its
        # clients) while the master still forwards its recording: awaited until it is in
        m, ended = master(headless=True)
        m.runner.user_count = 0
        posting = gevent.event.Event()
        m.merge = SimpleNamespace(swarm_id="s", slots={"i1.w1": SimpleNamespace(initiator=1, worker=1)},
                                  recording=lambda name: {}, live=None)
        m._post = lambda route, rec, timeout=30: (posting.wait(), {"ok": True})[1]
        m.forwarding.add("i1.w1")                # as the last delta's handler does, before it spawns
        gevent.spawn(m._forward_recording, "i1.w1")
        gevent.sleep(0.05)
        del m.runner.clients["c1"]               # the worker quit
        m._on_test_stopping()
        gevent.sleep(0.3)
        assert ended == [], "ended while a recording was being forwarded"
        posting.set()
        gevent.sleep(0.3)
        assert ended == ["collected"] and m.recorded == {m.placed["c1"].name}, (ended, m.recorded)

        # a worker without a slot in this swarm is kept for the next one, never told to quit
        from harness.load.protocol import Claim
        m, ended = master(headless=True)
        m.phase, m.claims, m.unslotted, sent = "running", {}, set(), []
        m.runner.send_message = lambda kind, data, client_id: sent.append((kind, client_id))
        late = SimpleNamespace(node_id="c9", data=Claim(initiator=3, host="h", pid=9).to_wire())
        m._on_claim(None, late)
        m._no_slot("c9")
        assert sent == [], f"an idle worker was told to quit: {sent}"

        # the "ended" status carries Locust's CSVs; a heartbeat posting while it is under way
        # must not post "ended" without them (the controller keeps the first "ended")
        import harness.load.master as master_module
        master_module._locust_csv = lambda env: {"stats_csv": "csv"}
        m, ended = master(headless=True)
        m.env, m.merge = None, SimpleNamespace(live=None)
        m.runner.quit = lambda: None
        m.recorded.add(m.placed["c1"].name)
        posted = []

        def post(route, message, timeout=30):
            posted.append((message.phase, "stats_csv" in message.facts))
            if len(posted) == 1:
                m._post_status()                 # the heartbeat, while the "ended" post is under way
            return {}
        m._post = post
        master_module.MasterSide._collect_and_end(m)
        assert m.plan is None and ("ended", True) in posted, posted
        assert ("ended", False) not in posted, f"an ended status without Locust's CSVs: {posted}"

    # the interpreter's shutdown would wait on what importing the master started: exit at once
    try:
        scenarios()
    except BaseException:
        traceback.print_exc()
        os._exit(1)
    print("ok", flush=True)
    os._exit(0)
""")


def test_the_swarm_ends_once_users_are_stopped_and_recordings_are_in():
    r = subprocess.run([sys.executable, "-c", SCENARIOS], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]



QUITTING = textwrap.dedent("""
    from types import SimpleNamespace

    import gevent
    from locust.log import setup_logging
    from locust.stats import RequestStats

    from harness.load.master import MasterSide

    setup_logging("WARNING")                     # as Locust's main does: the summary's logger

    m = MasterSide.__new__(MasterSide)           # no Locust process, no controller
    sent, clients = [], {"c1": SimpleNamespace(id="c1", state="ready")}
    stats = RequestStats()
    stats.log_request("SEND", "broker", 2.0, 0)

    def send_message(kind, data=None, client_id=None):
        sent.append(kind)
        gevent.spawn_later(0.05, clients.pop, "c1")     # the worker quits, Locust drops it
    m.runner = SimpleNamespace(send_message=send_message, stats=stats, errors={}, exceptions={},
                               clients=type("Clients", (), {"all": property(lambda _s: list(clients.values()))})())
    m.env = SimpleNamespace(process_exit_code=None, parsed_options=SimpleNamespace(exit_code_on_error=0))
    m.headless, m.forwarding = True, set()
    for phase in ("running", "stopping", "placing"):   # a swarm left to end: Locust's own shutdown
        m.phase = phase
        m._on_quitting()
    assert sent == [], sent
    m.headless, m.phase = False, "idle"                 # the web UI's master: Locust's own too
    m._on_quitting()
    assert sent == [], sent
    m.headless, m.phase = True, "ended"
    print("quitting", flush=True)
    m._on_quitting()                                    # exits
    print("not exited", flush=True)
""")


def test_a_master_with_no_swarm_left_quits_its_workers_prints_the_summary_and_exits():
    """Locust's shutdown of a series' master (SIGTERM, at a run's end) whose swarms have all
    ended: the workers are told to quit and awaited, Locust's summary is printed as its own
    shutdown prints it, and the process exits with Locust's code, without Locust's two 0.5 s
    pauses for statistics nobody reads (docs/findings/run-cost.md); with a swarm left to end, or
    on the web UI's master, Locust's own shutdown goes on."""
    r = subprocess.run([sys.executable, "-c", QUITTING], cwd=REPO, capture_output=True, text=True, timeout=60)
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "quitting" in r.stdout and "not exited" not in out, out[-3000:]
    assert "Aggregated" in out, out[-3000:]
