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
worker. A sender whose driver can cooperate with gevent (``send_green``: the embedded target's
libpq in non-blocking mode) sends from the greenlet itself, the cheapest path. Any other
sender (pyodbc for SQL Server) sends from its own real OS thread for the whole window
(:class:`harness.load.offload.SendLoop`): the thread loops over SENDs and the user's greenlet
takes the timed results in batches (every ``THREAD_BATCH_S``) and reports each one, so no SEND
pays a greenlet-to-thread hop. Connecting, the dialog lookup, the user's first SEND and the
close run on gevent's hub threadpool (:class:`harness.load.offload.Offload`; each function's
first call alone). ``SSBENCH_SEND_MODE`` selects the path: ``auto`` (default: green where the
sender has it, else the thread loop), ``thread`` (the thread loop for every sender: how the
SQL Server path is exercised on the embedded target) or ``offload`` (the former path: one
threadpool hop per SEND, kept for comparison). benchmarks/harness_ceiling.py measures them.

Each SEND is timed with ``time.perf_counter``, reported through Locust's ``events.request``
(so Locust's own stats and web UI see it) and kept exactly by :mod:`harness.load.recorder`.

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
#: green and offload paths: how long one task call keeps SENDing before it yields to Locust
SEND_BATCH_S = float(os.environ.get("SSBENCH_SEND_BATCH_S", "0.05"))

_state: dict = {}
_SEND_MODE = os.environ.get("SSBENCH_SEND_MODE", "auto")   # auto | thread | offload
if _SEND_MODE not in ("auto", "thread", "offload"):
    raise SystemExit(f"SSBENCH_SEND_MODE={_SEND_MODE!r}: expected auto, thread or offload")


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
        if isinstance(runner, WorkerRunner) and channel.in_swarm():
            # a headless swarm's worker (local or on a client host): token, claim, spec pushed by
            # the master, recording sent back over Locust's messages (harness.load.channel)
            _state["channel"] = channel.WorkerChannel(environment, _state["recorder"], _state)
    if isinstance(runner, MasterRunner):
        from harness.load import master

        master.install(environment, _spec, scale_out=channel.in_swarm())


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
        # a sender whose driver cooperates with gevent sends from the greenlet itself;
        # any other blocking driver sends from its own OS thread (SendLoop)
        green = getattr(self._sender, "send_green", None) if _SEND_MODE == "auto" else None
        offload = lambda d, p: self._offload.call(self, self._sender.send, d, p)  # noqa: E731
        self._send = green or offload
        self._pacer = None
        if spec.rate > 0:   # open loop: the worker's schedule starts with its first paced user
            if self._recorder.schedule is None:
                self._recorder.schedule = Schedule(spec.rate, spec.users_per_initiator or 1)
            self._pacer = self._recorder.schedule.pacer(self._user)
        self._loop = None
        if green is None and _SEND_MODE != "offload":
            # the first SEND goes through the offload (so the driver's lazy imports on its
            # first call run alone); the loop's thread takes over from the second
            self._loop = SendLoop(self._sender.send, self._dialog, self._payload, self._pacer,
                                  backoff=(BACKOFF_FIRST_S, BACKOFF_MAX_S), give_up_after=GIVE_UP_AFTER_S)

    @task
    def send(self) -> None:
        loop = self._loop
        if loop is not None and loop.started:
            gevent.sleep(THREAD_BATCH_S)
            self._report(loop.take())
            if loop.gave_up or loop.crashed is not None:
                raise StopUser()
            return
        # several SENDs per task call (for up to SEND_BATCH_S): Locust's per-task bookkeeping
        # and its yield to the hub between tasks are paid once per batch, not per SEND
        until = time.perf_counter() + SEND_BATCH_S
        while True:
            intended = self._pacer.wait(gevent.sleep) if self._pacer is not None else None
            start = time.perf_counter()
            exc = None
            try:
                self._send(self._dialog, self._payload)
            except Exception as e:  # the broker refused the SEND: reported, counted, not raised
                exc = e
            end = time.perf_counter()
            self._report([(time.time(), end - start, exc,
                           None if intended is None else self._pacer.to_epoch(intended))])
            if exc is not None:
                break
            self._failing_since = None
            if loop is not None:
                loop.start()
                return
            if end >= until:
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
        """Record and report finished SENDs: (end epoch, elapsed s, exception, intended epoch)."""
        record, fire = self._recorder.record, self.environment.events.request.fire
        user, size, ctx, prio = self._user, len(self._payload), {"dialog_slot": self._slot}, self._priority
        for end, elapsed, exc, intended in results:
            record(end, elapsed, exc, user, intended, priority=prio)
            fire(request_type="SSB", name="SEND", response_time=elapsed * 1000.0,
                 response_length=size, exception=exc, context=ctx)

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
