"""The Locust worker's side of the swarm protocol (:mod:`harness.load.protocol`).

Installed on every ssbench Locust worker (local, or on a client host through ``ssbench worker``)
as ``environment.ssbench`` (:class:`WorkerSide`), from Locust's ``init`` event:

1. it proves the run's token (:class:`harness.load.auth.WorkerAuth`, ``$SSBENCH_WORKER_TOKEN``);
2. once admitted, the master says welcome and the worker answers with its ``Claim`` (host, pid,
   and the slot asked for: ``--ssbench-initiator`` / ``--ssbench-worker``, None: any);
3. before its users spawn, the ``Assignment`` arrives (Locust delivers the master's messages in
   order): the spec, the worker's slot, its users and its first user's index; the recorder and
   the host probe start afresh;
4. while its users run, when the spec asks for it (``progress_interval_seconds``: the live
   metrics endpoint is on), a ``Progress`` every interval: the SENDs its recorder took since
   the last one, and its probe's new samples;
5. at ``test_stop`` (its users stopped, each after finishing its SEND in flight: see
   :class:`harness.load.locustfile.ServiceBrokerUser`) it sends its last ``Progress`` (if any),
   then its ``Recording``: Locust delivers them in this order, so the live totals are complete
   when the recording arrives.

If the master stops sending heartbeats for :data:`MASTER_SILENT_S` while users run (the master
died, or its host is unreachable), the worker stops its users and quits, instead of SENDing on
for Locust's own 60 s timeout.
"""

from __future__ import annotations

import logging
import os
import socket
import time

import gevent
from gevent.event import Event

from .auth import WorkerAuth, token_from_env
from .offload import Offload
from .protocol import LOCUST_TYPES, WELCOME, Assignment, Claim, Failure, Progress, Recording
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
    """Samples this worker process's CPU (percent of one core) and its host's CPU (percent of
    the machine) and memory, every ``interval`` seconds, in a greenlet."""

    def __init__(self, interval: float = 1.0):
        self.interval = max(0.05, float(interval))
        self.samples: list[list[float]] = []   # [ts, proc_cpu, host_cpu, host_mem_percent, host_mem_used]
        self._g = None

    def start(self) -> None:
        import psutil

        self.stop()
        self.samples = []
        me = psutil.Process()
        me.cpu_percent(None)
        psutil.cpu_percent(None)

        def loop():
            while True:
                gevent.sleep(self.interval)
                vm = psutil.virtual_memory()
                self.samples.append([round(time.time(), 4), round(me.cpu_percent(None), 2),
                                     round(psutil.cpu_percent(None), 2), round(vm.percent, 2),
                                     float(vm.total - vm.available)])

        self._g = gevent.spawn(loop)

    def stop(self) -> None:
        if self._g is not None:
            self._g.kill(block=False)
            self._g = None


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
        self._progress = None                   # (greenlet, stop event) sending Progress messages
        self._progress_seq = 0
        self._probe_sent = 0                    # probe samples already sent in a Progress
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
        self.assignment = a
        rec = self.recorder
        rec.reset()
        rec.initiator, rec.worker = a.initiator, a.worker
        rec.number_users_from(a.first_user)
        self.offload.ensure_capacity(a.users + 8)
        self.probe.interval = max(0.05, float(a.spec.sample_interval_seconds))
        self.probe.start()
        self._stop_progress()
        self._progress_seq = self._probe_sent = 0
        if a.spec.progress_interval_seconds > 0:
            rec.track_progress()
            stop = Event()
            self._progress = (gevent.spawn(self._progress_loop, a, max(0.05, float(a.spec.progress_interval_seconds)),
                                           stop), stop)

    def _progress_loop(self, a: Assignment, interval: float, stop) -> None:
        while not stop.wait(interval):        # never killed mid-send: a delta taken is a delta sent
            self._send_progress(a, final=False)

    def _send_progress(self, a: Assignment, final: bool) -> None:
        rec = self.recorder
        samples = self.probe.samples[self._probe_sent:]
        self._probe_sent += len(samples)
        self._progress_seq += 1
        self.runner.send_message(LOCUST_TYPES["progress"], Progress(
            swarm_id=a.spec.swarm_id, initiator=a.initiator, worker=a.worker, seq=self._progress_seq, final=final,
            bucket_seconds=rec.bucket_seconds, users=len(rec.users), host=self.claim.host, samples=samples,
            **rec.take_progress(final=final)).to_wire())

    def _stop_progress(self) -> bool:
        """Stop the Progress greenlet; True if there was one."""
        running, self._progress = self._progress, None
        if running is None:
            return False
        g, stop = running
        stop.set()
        g.join()
        return True

    def _on_test_stop(self, **_kw) -> None:
        a = self.assignment
        if a is None:
            return
        self.probe.stop()
        if self._stop_progress():
            self._send_progress(a, final=True)   # before the Recording: the live totals complete
        data = self.recorder.to_json(a.spec.swarm_id)
        data.update(host=self.claim.host, samples=self.probe.samples)
        self.runner.send_message(LOCUST_TYPES["recording"], Recording(
            swarm_id=a.spec.swarm_id, initiator=a.initiator, worker=a.worker, data=data).to_wire())
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
