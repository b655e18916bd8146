"""The Locust worker's side of the swarm protocol (:mod:`harness.load.protocol`).

Installed on every ssbench Locust worker (local, or on a client host through ``ssbench worker``)
as ``environment.ssbench`` (:class:`WorkerSide`): it proves the run's token
(:class:`harness.load.auth.WorkerAuth`), answers the master's welcome with its ``Claim`` (host,
pid, the slot it asks for), takes its ``Assignment`` before its users spawn (the recorder
starts afresh), sends a ``Delta`` every sample interval while its users run (what its recorder
took, :meth:`harness.load.recorder.Recorder.take_delta`, and its CPU and memory) and, at
``test_stop``, its last one (``final``), which completes its recording in the master's merge.

If the master's heartbeats stop for :data:`MASTER_SILENT_S` while users run, the worker stops
its users and quits rather than SEND on for Locust's own 60 s timeout.
"""

from __future__ import annotations

import logging
import os
import socket
import time

import gevent
from gevent.event import Event

from .auth import WorkerAuth, token_from_env
from .blocking import Offload
from .protocol import LOCUST_TYPES, WELCOME, Assignment, Claim, Delta, Failure
from .recorder import Recorder
from .spec import SwarmSpec

log = logging.getLogger("ssbench.worker")

MASTER_SILENT_S = 5.0
INITIATOR_OPTION = "ssbench_initiator"
WORKER_OPTION = "ssbench_worker"


def add_arguments(parser) -> None:
    """The worker's claim, on its Locust command line (``ssbench worker`` sets them)."""
    parser.add_argument("--ssbench-initiator", type=int, default=None, include_in_web_ui=False,
                        help="ssbench: the initiator this worker asks to drive (default: the master chooses)")
    parser.add_argument("--ssbench-worker", type=int, default=None, include_in_web_ui=False,
                        help="ssbench: this worker's index among its initiator's workers (default: the master chooses)")


class HostProbe:
    """This worker process's CPU (percent of one core) and its host's CPU (percent of the
    machine) and memory, since the last sample: ``[ts, process CPU, host CPU, host memory
    percent, host memory used]``."""

    def __init__(self):
        import psutil

        self._psutil, self._me = psutil, psutil.Process()
        self.start()

    def start(self) -> None:
        self._me.cpu_percent(None)
        self._psutil.cpu_percent(None)

    def sample(self) -> list[float]:
        vm = self._psutil.virtual_memory()
        return [round(time.time(), 4), round(self._me.cpu_percent(None), 2), round(self._psutil.cpu_percent(None), 2),
                round(vm.percent, 2), float(vm.total - vm.available)]


class WorkerSide:
    def __init__(self, environment):
        self.env = environment
        self.runner = environment.runner
        opts = environment.parsed_options
        # read now: the master's spawn messages overwrite custom options with its own values
        self.claim = Claim(initiator=_positive(getattr(opts, INITIATOR_OPTION, None)),
                           worker=_positive(getattr(opts, WORKER_OPTION, None)),
                           host=socket.gethostname(), pid=os.getpid())
        self.auth = WorkerAuth(self.runner, token_from_env()).install()
        self.offload = Offload()
        self.recorder = Recorder(initiator=self.claim.initiator or 1)
        self.probe = HostProbe()
        self.assignment: Assignment | None = None
        self._deltas = None                     # (greenlet, stop event) sending the deltas
        self._seq = 0
        self.runner.register_message(WELCOME, self._on_welcome)
        self.runner.register_message(LOCUST_TYPES["assignment"], self._on_assignment)
        environment.events.test_stop.add_listener(self._on_test_stop)
        gevent.spawn(self._watch_master)

    @property
    def spec(self) -> SwarmSpec | None:
        return self.assignment.spec if self.assignment is not None else None

    def _on_welcome(self, environment, msg, **_kw) -> None:
        self.runner.send_message(LOCUST_TYPES["claim"], self.claim.to_wire())

    def _on_assignment(self, environment, msg, **_kw) -> None:
        try:
            a = Assignment.from_wire(msg.data)
        except ValueError as e:
            log.error("the master's assignment: %s", e)
            self.runner.send_message(LOCUST_TYPES["failure"], Failure(what="worker", text=str(e)).to_wire())
            return
        self._stop_deltas()
        self.assignment = a
        rec = self.recorder
        rec.reset(a.first_user)
        rec.initiator, rec.worker = a.initiator, a.worker
        self.offload.ensure_capacity(a.users + 8)
        self.probe.start()
        self._seq = 0
        stop = Event()
        self._deltas = (gevent.spawn(self._delta_loop, a, max(0.05, float(a.spec.sample_interval_seconds)), stop),
                        stop)

    def _delta_loop(self, a: Assignment, interval: float, stop) -> None:
        while not stop.wait(interval):        # never killed mid-send: a delta taken is a delta sent
            self._send_delta(a, final=False)

    def _send_delta(self, a: Assignment, final: bool) -> None:
        rec = self.recorder
        self._seq += 1
        self.runner.send_message(LOCUST_TYPES["delta"], Delta(
            swarm_id=a.spec.swarm_id, initiator=a.initiator, worker=a.worker, seq=self._seq, final=final,
            bucket_seconds=rec.bucket_seconds, host=self.claim.host, pid=self.claim.pid, ready_at=rec.ready_at(a.users),
            samples=[self.probe.sample()], **rec.take_delta(final=final)).to_wire())

    def _stop_deltas(self) -> None:
        running, self._deltas = self._deltas, None
        if running is not None:
            g, stop = running
            stop.set()
            g.join()

    def _on_test_stop(self, **_kw) -> None:
        a = self.assignment
        if a is None:
            return
        self._stop_deltas()
        self._send_delta(a, final=True)      # the last delta: the recording is complete
        self.assignment = None

    def _watch_master(self) -> None:
        from locust.runners import STATE_RUNNING, STATE_SPAWNING

        while True:
            gevent.sleep(1.0)
            last = getattr(self.runner, "last_heartbeat_timestamp", None)
            # while its users run: a stopping worker handles the master's stop message (each user
            # finishing its SEND in flight) and reads no heartbeat meanwhile
            if (last and self.runner.state in (STATE_RUNNING, STATE_SPAWNING)
                    and time.time() - last > MASTER_SILENT_S):
                log.error("no heartbeat from the master for %.0f s while the swarm runs: stopping this worker's "
                          "users and quitting", MASTER_SILENT_S)
                self.env.process_exit_code = 3
                self.runner.stop()
                self.runner.quit()
                return


def _positive(v) -> int | None:
    try:
        v = int(v)
    except (TypeError, ValueError):
        return None
    return v if v > 0 else None


def install(environment) -> WorkerSide:
    environment.ssbench = WorkerSide(environment)
    return environment.ssbench
