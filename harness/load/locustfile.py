"""Locust user classes for ssbench: one user per client thread, closed loop, one SEND per task.

Loaded by the Locust master and by every worker (``locust -f harness/load/locustfile.py``).
A worker is bound to one initiator, as the paper mapped one client machine to one initiator;
an initiator may have several worker processes (``run.workers_per_initiator``). The swarm's
shape comes from a JSON spec: the sender spec of each initiator, the payload size, the usable
dialogs per initiator and the measurement windows. In a headless swarm (``ssbench run``, local
workers or ``ssbench worker`` on client hosts) the master pushes the spec and each worker's
initiator and index over Locust's messages and the worker sends its recording back the same way
(:mod:`harness.load.channel`); under ``ssbench web`` the worker is bound by ``SSBENCH_INITIATOR``,
reads ``SSBENCH_SPEC`` / ``--ssbench-spec`` and writes its recording for the web plugin to forward.

Database drivers block. A blocking call inside a gevent greenlet would serialize the whole
worker. A sender that can SEND in non-blocking steps (``pump``: the embedded target's libpq)
is driven by gevent's hub itself (:class:`harness.load.hubloop.HubLoop`: a socket callback
finishes one SEND and begins the next, no greenlet switch per SEND), the cheapest path. A
sender whose driver cooperates with gevent (``send_green``) can also send from the user's
greenlet, one hub wait per SEND (the ``green`` mode; also the path of finite dialog
lifetimes, where each SEND depends on the previous one's result). Any other
sender (pyodbc for SQL Server) sends from its own real OS thread for the whole window
(:class:`harness.load.offload.SendLoop`): the thread loops over SENDs and the user's greenlet
takes the timed results in batches (every ``THREAD_BATCH_S``) and reports each one, so no SEND
pays a greenlet-to-thread hop. Connecting, the dialog lookup, the user's first SEND and the
close run on gevent's hub threadpool (:class:`harness.load.offload.Offload`; each function's
first call alone). ``SSBENCH_SEND_MODE`` selects the path: ``auto`` (default: the hub loop
where the sender has a pump, else green where it has ``send_green``, else the thread loop),
``green`` (the greenlet path even where a pump exists), ``thread`` (the thread loop for every sender: how the
SQL Server path is exercised on the embedded target) or ``offload`` (the former path: one
threadpool hop per SEND, kept for comparison). benchmarks/harness_ceiling.py measures them.

Each SEND is timed with ``time.perf_counter`` and kept exactly by :mod:`harness.load.recorder`;
Locust's own statistics (its table, its web UI) get the successful SENDs in batches
(:mod:`harness.load.locust_stats`) and each failed one through ``events.request``.

With a ``rate`` in the spec the loop is open: each user waits for its next slot of the
initiator's schedule before it sends (:mod:`harness.load.pacing`), and the recorder keeps the
latency from the intended time too.
"""

from __future__ import annotations

import os
import time

import gevent
from locust import User, constant, events, task
from locust.exception import StopUser

from harness.load.hubloop import HubLoop
from harness.load.locust_stats import log_batch
from harness.load.offload import Offload, SendLoop
from harness.load.pacing import Schedule
from harness.load.recorder import Recorder
from harness.load.spec import SwarmSpec
from harness.matrix import high_priority_slot
from harness.targets.base import sender_factory

#: consecutive failed SENDs: first back-off, its ceiling, and when a user gives up
BACKOFF_FIRST_S = 0.01
BACKOFF_MAX_S = 1.0
GIVE_UP_AFTER_S = 10.0

#: thread loop: how often a user's greenlet takes its thread's finished SENDs and reports them
THREAD_BATCH_S = float(os.environ.get("SSBENCH_THREAD_BATCH_S", "0.05"))
#: hub loop: the same; each wake-up of a user costs about as much as a dozen SENDs, and the
#: recording is exact whenever it is taken (50 users, null SEND, two consecutive runs of
#: benchmarks/harness_ceiling.py: every 0.05 s 20.9 us of client CPU per SEND, every 0.25 s 17.6)
HUB_BATCH_S = float(os.environ.get("SSBENCH_HUB_BATCH_S", "0.2"))
#: green and offload paths: how long one task call keeps SENDing before it yields to Locust
SEND_BATCH_S = float(os.environ.get("SSBENCH_SEND_BATCH_S", "0.05"))
#: at the end of a swarm: how long the worker waits for the SENDs in flight before Locust kills
#: its users (a SEND still running then may reach the database uncounted: said in the recording)
QUIESCE_S = 30.0

#: the worker's state: offload, recorder, spec, channel; ``quiescing`` (the worker is stopping:
#: no new SEND), ``sending`` (users inside a batch of SENDs), ``loops`` (the started thread and
#: hub SEND loops)
_state: dict = {"quiescing": False, "sending": 0, "loops": []}
_SEND_MODE = os.environ.get("SSBENCH_SEND_MODE", "auto")   # auto | green | thread | offload
if _SEND_MODE not in ("auto", "green", "thread", "offload"):
    raise SystemExit(f"SSBENCH_SEND_MODE={_SEND_MODE!r}: expected auto, green, thread or offload")


@events.init_command_line_parser.add_listener
def _add_arguments(parser) -> None:
    parser.add_argument("--ssbench-spec", type=str, env_var="SSBENCH_SPEC", default="",
                        help="ssbench swarm spec (JSON file written by ssbench run / ssbench web)",
                        include_in_web_ui=False)


@events.init.add_listener
def _on_init(environment, **_kw) -> None:
    from locust.runners import MasterRunner, WorkerRunner

    from harness.load import channel

    runner = environment.runner
    if isinstance(runner, WorkerRunner) or runner is None or not isinstance(runner, MasterRunner):
        _state["offload"] = Offload()
        _state["recorder"] = Recorder(initiator=int(os.environ.get(channel.INITIATOR_ENV, "1")))
        if runner is not None:
            _quiesce_before_stop(runner)
        if isinstance(runner, WorkerRunner) and channel.in_swarm():
            # a headless swarm's worker (local or on a client host): token, claim, spec pushed by
            # the master, recording sent back over Locust's messages (harness.load.channel)
            _state["channel"] = channel.WorkerChannel(environment, _state["recorder"], _state)
    if isinstance(runner, MasterRunner):
        from harness.load import master

        master.install(environment, _spec, scale_out=channel.in_swarm())


def _quiesce_before_stop(runner) -> None:
    """Locust stops users by killing their greenlets; a green SEND killed while it waits for the
    server is committed by the database and never counted. So before Locust's stop the worker
    quiesces: no user starts a SEND, the SENDs in flight finish and are reported, the thread
    loops end; only then are the users stopped (a swarm's end, the web UI's stop, a quit)."""
    locust_stop = runner.stop

    def stop(*args, **kwargs):
        _quiesce(QUIESCE_S)
        return locust_stop(*args, **kwargs)

    runner.stop = stop


def _busy() -> int:
    return _state["sending"] + sum(1 for lp in _state["loops"] if not lp.done())


def _quiesce(timeout: float) -> None:
    if _state["quiescing"]:
        return
    _state["quiescing"] = True
    for lp in _state["loops"]:
        lp.stop()
    deadline = time.monotonic() + timeout
    while _busy() and time.monotonic() < deadline:
        gevent.sleep(0.005)
    left = _busy()
    rec = _state.get("recorder")
    if left and rec is not None:
        rec.cut_at_stop += left
        import logging

        logging.getLogger("ssbench").warning(
            "%d SEND(s) still running %.0f s after the stop: their users are stopped now, and such a "
            "SEND may reach the database uncounted by this worker", left, timeout)


def _spec(environment) -> SwarmSpec:
    spec = _state.get("spec")
    if spec is None and "channel" in _state:   # a swarm worker reads no file: the master pushes it
        raise RuntimeError("the master pushed no swarm spec to this worker")
    if spec is None:
        path = getattr(environment.parsed_options, "ssbench_spec", "") or os.environ.get("SSBENCH_SPEC", "")
        spec = SwarmSpec.load(path)
        _state["spec"] = spec
    return spec


def _reload_spec() -> None:
    _state.pop("spec", None)


@events.test_start.add_listener
def _on_test_start(environment, **_kw) -> None:
    _reload_spec()  # ssbench web may re-provision between swarms
    _state.update(quiescing=False, sending=0, loops=[])
    rec = _state.get("recorder")
    if rec is not None:
        rec.reset()


@events.test_stop.add_listener
def _on_test_stop(environment, **_kw) -> None:
    rec: Recorder | None = _state.get("recorder")
    if rec is None:
        return
    try:
        spec = _spec(environment)
    except (RuntimeError, OSError, ValueError):   # a swarm worker that never got its spec
        return
    if spec.out_dir and spec.recording_via == "file":   # "message": harness.load.channel sends it
        rec.write(spec.out_dir, spec.swarm_id)


class ServiceBrokerUser(User):
    """One client thread: its own connection, its own dialog, SEND in a closed loop."""

    wait_time = constant(0)

    def on_start(self) -> None:
        spec = _spec(self.environment)
        self._offload: Offload = _state["offload"]
        self._recorder: Recorder = _state["recorder"]
        initiator = self._recorder.initiator
        self._user, self._slot = self._recorder.add_user(spec.usable_dialogs(initiator))
        self._payload = spec.payload()
        # a ``priority`` axis: is this user's dialog one of the high-priority ones?
        self._priority = (("high" if high_priority_slot(self._slot, spec.high_priority_share) else "normal")
                          if spec.high_priority_share else None)
        self._sender = None
        self._failing_since: float | None = None
        self._backoff = BACKOFF_FIRST_S
        sender_spec = spec.sender_specs[str(initiator)]
        # imports happen here, in the greenlet; the pool thread only connects
        self._sender = self._offload.call(self, sender_factory(sender_spec), sender_spec)
        self._dialog = self._offload.call(self, self._sender.dialog, self._slot)
        if spec.messages_per_dialog:    # a finite dialog lifetime (docs/matrices.md)
            self._offload.call(self, self._sender.set_dialog_lifetime, spec.messages_per_dialog,
                               spec.fire_and_forget)
        # a sender that can SEND without blocking is driven by the hub (HubLoop); one whose
        # driver cooperates with gevent sends from the greenlet itself; any other blocking
        # driver sends from its own OS thread (SendLoop)
        paths = self._sender.paths      # declared by the sender's class (harness.targets.sender)
        green = self._sender.send_green if paths.green and _SEND_MODE in ("auto", "green") else None
        offload = lambda d, p: self._offload.call(self, self._sender.send, d, p)  # noqa: E731
        self._send = green or offload
        self._pacer = None
        if spec.rate > 0:   # open loop: the worker's schedule starts with its first paced user
            if self._recorder.schedule is None:
                self._recorder.schedule = Schedule(spec.rate, spec.users_per_initiator or 1)
            self._pacer = self._recorder.schedule.pacer(self._user)
        self._loop = None
        if paths.pump and green is not None and _SEND_MODE == "auto" and not spec.messages_per_dialog:
            # the first SEND from the greenlet (send_green); the hub drives the connection from the
            # second (a pump repeats one SEND: a finite dialog lifetime takes the green path)
            self._loop = HubLoop(self._sender, self._dialog, self._payload, self._pacer,
                                 backoff=(BACKOFF_FIRST_S, BACKOFF_MAX_S), give_up_after=GIVE_UP_AFTER_S)
        elif green is None and _SEND_MODE != "offload":
            # the first SEND goes through the offload (so the driver's lazy imports on its
            # first call run alone); the loop's thread takes over from the second
            self._loop = SendLoop(self._sender.send, self._dialog, self._payload, self._pacer,
                                  backoff=(BACKOFF_FIRST_S, BACKOFF_MAX_S), give_up_after=GIVE_UP_AFTER_S)

    @task
    def send(self) -> None:
        loop = self._loop
        if _state["quiescing"]:          # the worker is stopping: no new SEND
            if loop is not None:
                self._report(loop.take())
            gevent.sleep(0.05)
            return
        if loop is not None and loop.started:
            gevent.sleep(HUB_BATCH_S if isinstance(loop, HubLoop) else THREAD_BATCH_S)
            self._report(loop.take())
            if loop.gave_up or loop.crashed is not None:
                raise StopUser()
            return
        # several SENDs per task call (for up to SEND_BATCH_S), reported together at its end:
        # Locust's per-task bookkeeping, its yield to the hub between tasks and the reporting
        # are paid once per batch, not per SEND
        send, dialog, payload, pacer = self._send, self._dialog, self._payload, self._pacer
        clock, wall = time.perf_counter, time.time
        until = clock() + SEND_BATCH_S
        done: list = []
        exc = None
        st = _state
        st["sending"] += 1
        try:
            while True:
                intended = None
                if pacer is not None:     # waiting for a slot is not a SEND in flight
                    st["sending"] -= 1
                    try:
                        intended = pacer.wait(gevent.sleep)
                    finally:
                        st["sending"] += 1
                    if st["quiescing"]:
                        break
                start = clock()
                try:
                    send(dialog, payload)
                except Exception as e:  # the broker refused the SEND: reported, counted, not raised
                    exc = e
                end = clock()
                done.append((wall(), end - start, exc, None if intended is None else pacer.to_epoch(intended)))
                if exc is not None or loop is not None or end >= until or st["quiescing"]:
                    break
        finally:   # a user stopped mid-batch still reports the SENDs it completed
            st["sending"] -= 1
            self._report(done)
        if exc is None or len(done) > 1:     # a SEND went through: no failing streak
            self._failing_since = None
        if exc is None:
            if loop is not None and not st["quiescing"]:
                loop.start()
                st["loops"].append(loop)
            return
        # a failing server (crashed, restarting, refusing): back off instead of spinning, and
        # give up after GIVE_UP_AFTER_S of nothing but errors
        now = time.monotonic()
        if self._failing_since is None:
            self._failing_since, self._backoff = now, BACKOFF_FIRST_S
        elif now - self._failing_since > GIVE_UP_AFTER_S:
            raise StopUser()
        gevent.sleep(self._backoff)
        self._backoff = min(self._backoff * 2, BACKOFF_MAX_S)

    def _report(self, results) -> None:
        """Record and report finished SENDs: (end epoch, elapsed s, exception, intended epoch).
        The recorder keeps them exactly; Locust's statistics get the successful ones as one
        batch (:func:`harness.load.locust_stats.log_batch`) and each failure as an event."""
        if not results:
            return
        self._recorder.record_many(results, self._user, self._priority)
        size = len(self._payload)
        log_batch(self.environment.stats, "SSB", "SEND",
                  [(end, elapsed * 1000.0) for end, elapsed, exc, _ in results if exc is None], size)
        for end, elapsed, exc, _ in results:
            if exc is not None:
                self.environment.events.request.fire(
                    request_type="SSB", name="SEND", response_time=elapsed * 1000.0, response_length=size,
                    exception=exc, context={"dialog_slot": self._slot})

    def on_stop(self) -> None:
        # wait for a SEND still running on its thread before closing the connection
        loop = getattr(self, "_loop", None)
        idle = self._offload.wait_idle(self, timeout=30)
        if loop is not None:
            loop.stop()
            idle = loop.wait_done(timeout=30) and idle
            self._report(loop.take())
        if self._sender is not None and idle:
            try:
                self._offload.call(self, self._sender.close)
            finally:
                self._sender = None
