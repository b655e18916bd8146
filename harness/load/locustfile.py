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
worker, so every driver call runs on a real thread of gevent's hub threadpool
(:class:`harness.load.offload.Offload`); the greenlet only waits for it. A sender whose driver
can cooperate with gevent (``send_green``: the embedded target's libpq in non-blocking mode)
sends from the greenlet itself, which costs less client CPU per SEND; ``SSBENCH_SEND_MODE=thread``
forces the thread path for every SEND (benchmarks/send_vs_pgbench.py compares the two).

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

from harness.load.offload import Offload
from harness.load.pacing import Schedule
from harness.load.recorder import Recorder
from harness.matrix import high_priority_slot
from harness.load.spec import SwarmSpec
from harness.targets.base import sender_factory

#: consecutive failed SENDs: first back-off, its ceiling, and when a user gives up
BACKOFF_FIRST_S = 0.01
BACKOFF_MAX_S = 1.0
GIVE_UP_AFTER_S = 10.0

_state: dict = {}
# SSBENCH_SEND_MODE=thread forces every SEND through the thread offload (for comparison)
_GREEN = os.environ.get("SSBENCH_SEND_MODE", "auto") != "thread"


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
        # any other blocking driver goes through a real thread
        green = getattr(self._sender, "send_green", None) if _GREEN else None
        self._send = green if green is not None else \
            (lambda d, p: self._offload.call(self, self._sender.send, d, p))
        self._pacer = None
        if spec.rate > 0:   # open loop: the worker's schedule starts with its first paced user
            if self._recorder.schedule is None:
                self._recorder.schedule = Schedule(spec.rate, spec.users_per_initiator or 1)
            self._pacer = self._recorder.schedule.pacer(self._user)

    @task
    def send(self) -> None:
        intended = self._pacer.wait(gevent.sleep) if self._pacer is not None else None
        start = time.perf_counter()
        exc = None
        try:
            self._send(self._dialog, self._payload)
        except Exception as e:  # the broker refused the SEND: reported, counted, not raised
            exc = e
        elapsed = time.perf_counter() - start
        self._recorder.record(time.time(), elapsed, exc, self._user,
                              None if intended is None else self._pacer.to_epoch(intended),
                              priority=self._priority)
        self.environment.events.request.fire(
            request_type="SSB", name="SEND", response_time=elapsed * 1000.0,
            response_length=len(self._payload), exception=exc, context={"dialog_slot": self._slot})
        if exc is None:
            self._failing_since = None
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

    def on_stop(self) -> None:
        # wait for a SEND still running on its thread before closing the connection
        self._offload.wait_idle(self, timeout=30)
        if self._sender is not None:
            try:
                self._offload.call(self, self._sender.close)
            finally:
                self._sender = None
