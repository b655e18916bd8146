"""The Locust user of ssbench: one user per client thread, each on its own connection and dialog.

Loaded by every ssbench Locust process; ``init`` installs the swarm protocol's side of the
process on its ``Environment`` (:mod:`harness.load.master`, :mod:`harness.load.worker`). Each
user SENDs in one loop for the whole swarm (:mod:`harness.load.sendloop`): driven by gevent's hub
for a sender that can SEND in non-blocking steps (the embedded target's libpq), otherwise from an
OS thread per user (pyodbc, a finite dialog lifetime, or ``send_mode: thread``). The user's greenlet hands the finished SENDs to the recorder
(:mod:`harness.load.recorder`), the one source of a SEND's figures. When Locust stops a user,
``on_stop`` ends its loop after the SEND in flight, so a committed SEND is never uncounted; one
still running after :data:`QUIESCE_S` is counted as cut (``messages_sent_client_cut``). With a
``rate`` the loop is open (:mod:`harness.load.pacing`) and the recorder keeps the latency from
the intended time too.
"""

from __future__ import annotations

import logging
import time
from functools import partial

import gevent
from locust import User, constant, events, task
from locust.exception import StopUser

from harness.plan import member_at
from harness.load import master, worker
from harness.load.sendloop import HubLoop, ThreadLoop, backoff_waits
from harness.load.pacing import Schedule
from harness.matrix import high_priority_slot
from harness.redact import error_line
from harness.targets.base import sender_factory

log = logging.getLogger("ssbench")

#: how long a stopped user waits for its SEND in flight before it lets go of it (counted as cut)
QUIESCE_S = 30.0


@events.init_command_line_parser.add_listener
def _add_arguments(parser) -> None:
    worker.add_arguments(parser)


@events.init.add_listener
def _on_init(environment, **_kw) -> None:
    from locust.runners import MasterRunner, WorkerRunner

    if isinstance(environment.runner, MasterRunner):
        master.install(environment)
    elif isinstance(environment.runner, WorkerRunner):
        worker.install(environment)


class ConnectFailed(Exception):
    """A user could not open its connection or find its dialog (recorded as an error)."""


class ServiceBrokerUser(User):
    """One client thread: its own connection, its own dialog, SENDs in a loop of its own."""

    wait_time = constant(0)

    def on_start(self) -> None:
        side = getattr(self.environment, "ssbench", None)
        spec = side.spec if side is not None else None
        self._loop = self._sender = None
        if spec is None:            # no assignment from the master: nothing to drive
            log.error("this worker has no assignment from the master: its users cannot start")
            raise StopUser()
        self._side, self._recorder = side, side.recorder
        initiator = self._recorder.initiator
        self._user, self._slot = self._recorder.add_user(spec.usable_dialogs(initiator))
        self._payload = spec.payload()
        self._interval = spec.report_interval_seconds
        # a ``priority`` axis: is this user's dialog one of the high-priority ones?
        self._priority = (("high" if high_priority_slot(self._slot, spec.high_priority_share) else "normal")
                          if spec.high_priority_share else None)
        self._sender, self._dialog = self._connect(spec, initiator)
        pacer = None
        if spec.rate > 0:   # open loop: the worker's schedule starts with its first paced user
            if self._recorder.schedule is None:
                self._recorder.schedule = Schedule(spec.rate, spec.users_of(initiator) or 1)
            pacer = self._recorder.schedule.pacer(self._user)
        loop_kw = {}
        # the SEND paths the sender's class declares (harness.targets.sender.SendPaths)
        if spec.alternation:    # an alternated window: each SEND takes the dialog of the member whose
            # slice the wall clock is in, the same on every worker and host (harness.plan.member_at)
            slice_seconds, k = spec.slice_seconds, len(spec.alternation)
            loop_kw["choose"] = lambda: member_at(time.time(), slice_seconds, k)
        if spec.send_mode == "auto" and not spec.messages_per_dialog and self._sender.paths.pump:
            # after an error the hub loop SENDs through the blocking send (it reconnects), on the pool
            self._loop = HubLoop(partial(self._side.offload.call, self, self._sender.send), self._dialog,
                                 self._payload, pacer, pump=self._sender.pump, **loop_kw)
        else:
            self._loop = ThreadLoop(self._sender.send, self._dialog, self._payload, pacer, **loop_kw)
        self._loop.start()

    def _connect(self, spec, initiator: int):
        """Open the sender and find the dialog on the hub's threadpool; a failure is recorded
        as an error (with its message) and retried with back-off (:func:`backoff_waits`) until
        it gives up."""
        offload = self._side.offload
        sender_spec = spec.sender_specs[str(initiator)]
        factory = sender_factory(sender_spec)   # imports here, in the greenlet; the pool thread connects
        waits = backoff_waits()
        while True:
            t0 = time.perf_counter()
            sender = None
            try:
                sender = offload.call(self, factory, sender_spec)
                if spec.alternation:   # one dialog per member strategy (harness.plan)
                    dialog = [offload.call(self, sender.dialog, slot) for slot in spec.alternation_slots(self._user)]
                else:
                    dialog = offload.call(self, sender.dialog, self._slot)
                if spec.messages_per_dialog:    # a finite dialog lifetime (docs/matrices.md)
                    offload.call(self, sender.set_dialog_lifetime, spec.messages_per_dialog, spec.fire_and_forget)
                return sender, dialog
            except Exception as e:
                if sender is not None:
                    offload.call(self, sender.close)
                err = ConnectFailed(f"connecting to initiator {initiator}: {error_line(e)}")
                self._recorder.record_many([(time.time(), time.perf_counter() - t0, err, None)])
            finally:
                self._recorder.settle(self._user)     # it tried, either way: the window need not wait
            wait = next(waits, None)
            if wait is None:
                raise StopUser()
            gevent.sleep(wait)

    @task
    def collect(self) -> None:
        gevent.sleep(self._interval)
        loop = self._loop
        # finished SENDs, exactly: the recorder's deltas feed Locust's statistics too (harness.load.merge)
        self._recorder.record_many(loop.take(), self._user, self._priority)
        if loop.gave_up or loop.crashed is not None:
            raise StopUser()

    def on_stop(self) -> None:
        """The user is stopped (its greenlet killed between hand-overs): end its loop after the
        SEND in flight, report what it finished, then close the connection."""
        loop = getattr(self, "_loop", None)
        if loop is not None:
            loop.stop()
            if not loop.wait_done(timeout=QUIESCE_S):
                self._recorder.cut_at_stop += 1
                log.warning("a SEND still running %.0f s after the stop: the user is stopped now, and the SEND "
                            "may reach the database uncounted by this worker", QUIESCE_S)
            self._recorder.record_many(loop.take(), self._user, self._priority)
        sender = getattr(self, "_sender", None)
        side = getattr(self, "_side", None)
        if sender is not None and side is not None and side.offload.wait_idle(self, timeout=QUIESCE_S) \
                and (loop is None or loop.done()):
            self._sender = None
            side.offload.call(self, sender.close)
