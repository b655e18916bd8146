"""The worker side of a headless swarm's message channel (``ssbench run``, local or remote workers).

Every worker of a headless swarm, on this host or on a client host of its own (``ssbench
worker``), talks to the master over Locust's own messages (msgpack over ZeroMQ), never over a
shared disk:

1. It proves the run's token (:mod:`harness.load.auth`, ``$SSBENCH_WORKER_TOKEN``).
2. Once admitted, the master sends ``ssbench_welcome``; the worker answers ``ssbench_claim``
   ``{initiator, worker, host, pid}`` (initiator and worker index: ``$SSBENCH_INITIATOR`` /
   ``$SSBENCH_WORKER`` or ``ssbench worker --initiator/--worker``; None lets the master choose).
3. The master pushes the swarm spec and every worker's assignment (initiator, worker index) in
   the spawn message's options (:data:`SPEC_OPTION`, :data:`ASSIGN_OPTION`); the worker reads
   them at ``test_start``, before its users start.
4. At ``test_stop`` (after its users stopped) the worker sends ``ssbench_recording``: its exact
   histograms, per-user counts, and the CPU and memory of its process and host sampled every
   ``sample_interval_seconds`` (:class:`HostProbe`). The master writes it into the repetition
   directory as ``worker-i<K>-w<W>.json`` (:mod:`harness.load.master`).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time

log = logging.getLogger("ssbench.channel")

SWARM_ENV = "SSBENCH_SWARM"          # set: this Locust process belongs to a headless swarm
INITIATOR_ENV = "SSBENCH_INITIATOR"
WORKER_ENV = "SSBENCH_WORKER"
WELCOME = "ssbench_welcome"
CLAIM = "ssbench_claim"
RECORDING = "ssbench_recording"
SPEC_OPTION = "ssbench_spec_inline"
ASSIGN_OPTION = "ssbench_assign"


def recording_name(initiator: int, worker: int) -> str:
    return f"worker-i{int(initiator)}-w{int(worker)}.json"


def in_swarm() -> bool:
    return bool(os.environ.get(SWARM_ENV))


def _env_int(name: str) -> int | None:
    v = os.environ.get(name, "").strip()
    return int(v) if v.isdigit() and int(v) > 0 else None


class HostProbe:
    """Samples this worker process's CPU (percent of one core) and its host's CPU (percent of
    the machine) and memory, every ``interval`` seconds, in a greenlet."""

    def __init__(self, interval: float = 1.0):
        self.interval = max(0.05, float(interval))
        self.samples: list[list[float]] = []   # [ts, proc_cpu, host_cpu, host_mem_percent, host_mem_used]
        self._g = None

    def start(self) -> None:
        import gevent
        import psutil

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


class WorkerChannel:
    """Install on a Locust worker of a headless swarm (from the locustfile's ``init``)."""

    def __init__(self, environment, recorder, state: dict):
        from harness.load.auth import WorkerAuth, token_from_env

        self.environment = environment
        self.runner = environment.runner
        self.recorder = recorder
        self.state = state        # the locustfile's state: "spec" is set here from the push
        self.probe = HostProbe()
        self.spec = None
        self.claim = {"initiator": _env_int(INITIATOR_ENV), "worker": _env_int(WORKER_ENV),
                      "host": socket.gethostname(), "pid": os.getpid()}
        self.auth = WorkerAuth(self.runner, token_from_env()).install()
        self.runner.register_message(WELCOME, self._on_welcome)
        environment.events.test_start.add_listener(self._on_test_start)
        environment.events.test_stop.add_listener(self._on_test_stop)

    def _on_welcome(self, environment, msg, **_kw) -> None:
        self.runner.send_message(CLAIM, self.claim)

    def _on_test_start(self, environment, **_kw) -> None:
        from harness.load.spec import SwarmSpec

        opts = environment.parsed_options
        inline = getattr(opts, SPEC_OPTION, "") if opts is not None else ""
        if not inline:
            log.error("the master pushed no swarm spec: this worker's users cannot start")
            return
        self.spec = SwarmSpec.from_dict(json.loads(inline))
        assign = json.loads(getattr(opts, ASSIGN_OPTION, "") or "{}").get(self.runner.client_id)
        if assign is None:
            log.error("the master gave this worker (%s) no initiator", self.runner.client_id)
        else:
            self.recorder.initiator, self.recorder.worker = int(assign[0]), int(assign[1])
            per_worker = self.spec.users_per_initiator // max(1, self.spec.workers_per_initiator)
            self.recorder.number_users_from((self.recorder.worker - 1) * per_worker)
        self.state["spec"] = self.spec
        self.probe.interval = self.spec.sample_interval_seconds
        self.probe.start()

    def _on_test_stop(self, environment, **_kw) -> None:
        self.probe.stop()
        spec, self.spec = self.spec, None
        if spec is None or spec.recording_via != "message":
            return
        data = self.recorder.to_json(spec.swarm_id)
        data.update(host=self.claim["host"], client_id=self.runner.client_id, samples=self.probe.samples)
        try:
            self.runner.send_message(RECORDING, data)
        except Exception:  # pragma: no cover - the master is gone
            log.exception("sending the recording to the master")
