"""The web UI's sessions: each swarm start..stop is a run of one permutation from the form.

``ssbench web`` runs one :class:`harness.load.swarm.Swarm` for its lifetime; its Locust master
asks for a plan whenever the web UI starts a swarm (the swarm protocol's SwarmRequest, with the
form's fields). :meth:`WebSessions.plan` answers it like a headless run's repetition: the
permutation comes from the form, and the same :class:`harness.repetition.Repetition` prepares
the target (every conversation and message cleared, the dialogs of the chosen strategy begun,
warm-up, broker side, collectors) and makes the plan. When the swarm has ended (the web UI's
Stop, a ramp-down to zero, or ``ssbench web`` shutting down) :meth:`WebSessions.finish` gets
the swarm's result (its recordings already written by the controller) and the same
:meth:`Repetition.finish` drains, verifies, summarizes and commits, so ``ssbench analyze``
reads a session like any run (``results/<UTC time>-web/``).

The measured window is from the end of spawning to the moment Stop was pressed (no warm-up:
the UI's user decides when to look). The session is a one-permutation :class:`Matrix` built
from the form; its ``matrix.yaml`` (written again when the session ends, with the session's
measured window) replays it with ``ssbench run``.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import yaml

from ..errors import UserError
from ..redact import error_line
from ..load.placement import split
from ..load.protocol import SwarmPlan, SwarmRequest
from ..load.swarm import SwarmResult
from ..matrix import MAX_PAYLOAD_BYTES, MAX_RATE, RUN_FIELDS, BrokerSettings, DialogStrategy, Matrix, RunSettings
from ..repetition import Repetition
from ..results import RunDir, write_atomic
from ..targets.base import Target
from .form import DEFAULT_DIALOGS, DEFAULT_PAYLOAD_BYTES
from .metrics import LiveMetrics

log = logging.getLogger(__name__)

MATRIX_NAME = "web"
#: the run settings' shortest window: a session's measured window is unknown until Stop
UNTIL_STOPPED = RUN_FIELDS["measure_seconds"][1]
#: how long a web swarm waits for the workers of the initiators it uses
WORKER_WAIT_S = 15.0


def offered_rate(rate: float, field: str) -> float:
    """A session's offered SENDs/s per initiator (0: closed loop), refused (UserError on
    ``field``) outside the matrix's ``rate`` axis bounds; ``ssbench web --rate`` is checked here too."""
    if not 0 <= rate <= MAX_RATE:
        raise UserError(f"must be 0 (closed loop) to {MAX_RATE:g} SENDs/s per initiator, got {rate:g}", field=field)
    return rate


@dataclass
class Session:
    run_dir: RunDir
    repetition: Repetition
    users: int
    spawn_rate: float
    started: float
    description: str
    initiators: list[int]
    matrix: Matrix


class WebSessions:
    """Prepare and save sessions; called from the controller's threads (one session at a time)."""

    def __init__(self, target: Target, results_root: Path, max_initiators: int, profile: str,
                 broker: BrokerSettings, metrics: LiveMetrics,
                 client_pids: Callable[[], dict[str, int]] = lambda: {},
                 sample_interval: float = 1.0, drain_timeout: float = 60.0, live=None):
        self.target = target
        self.results_root = Path(results_root)
        self.max_initiators = max_initiators
        self.profile = profile
        self.broker = broker
        self.metrics = metrics
        self.client_pids = client_pids
        self.sample_interval = sample_interval
        self.drain_timeout = drain_timeout
        self.live = live      # the live metrics endpoint's state (harness.metrics.LiveState), or None
        self.lock = threading.Lock()          # serializes calls to the target (as Runner.lock)
        self._session_lock = threading.Lock()
        self.current: Session | None = None
        self.saved: list[Path] = []
        self.idle = threading.Event()
        self.idle.set()

    # ------------------------------------------------------------------ start
    def plan(self, req: SwarmRequest) -> tuple[SwarmPlan, Path]:
        """The swarm protocol's question: prepare a session for the form and answer its plan."""
        with self._session_lock:
            if self.current is not None:  # a start that never got its end (the master was killed)
                self._finish(self.current, None, status="interrupted")
            return self._start(req)

    def _start(self, req: SwarmRequest) -> tuple[SwarmPlan, Path]:
        form = req.form or {}
        k = max(1, min(int(form.get("initiators", 1) or 1), self.max_initiators))
        users = max(1, int(req.users or 1))
        spawn_rate = float(req.spawn_rate or 1)
        try:
            strategy = DialogStrategy.parse(str(form.get("dialogs", DEFAULT_DIALOGS)))
        except ValueError as e:
            raise UserError(str(e), field="dialogs") from None
        payload = int(form.get("payload_bytes", DEFAULT_PAYLOAD_BYTES))
        if not 0 <= payload <= MAX_PAYLOAD_BYTES:
            raise UserError(f"payload bytes must be 0..{MAX_PAYLOAD_BYTES}, got {payload}", field="payload_bytes")
        rate = offered_rate(float(form.get("rate", 0) or 0), field="rate")
        per_init = {str(i): n for i, n in enumerate(split(users, k), start=1) if n > 0}
        rd = RunDir.create(self.results_root, MATRIX_NAME).hold()
        m = self._write(self._matrix(rd, k, max(per_init.values()), strategy, payload, spawn_rate, rate))
        perm = next(m.permutations())
        loop = f"open loop at {rate:g} SENDs/s per initiator" if rate else "closed loop"
        description = (f"{users} client thread(s) on {k} initiator(s), {strategy.token} dialogs, "
                       f"{payload}-byte messages, {loop}, profile {self.profile}")
        rd.begin_record(m.to_dict(), self.target.describe(), total=1,
                        web={"users": users, "spawn_rate": spawn_rate, "initiators": k,
                             "dialogs": strategy.token, "payload_bytes": payload, "rate": rate})
        self.metrics.reset()
        self.metrics.set_state("preparing", run_id=rd.run_id, description=description)
        if self.live is not None:
            self.live.begin_run(rd.run_id, MATRIX_NAME, self.target.label)
        log.info("session %s: preparing (%s)", rd.run_id, description)
        r = Repetition(target=self.target, run_dir=rd, perm=perm, rep=1, profile=self.profile, settings=m.run,
                       lock=self.lock, on_tick=self.metrics.on_tick, client_pids=self.client_pids,
                       users_expected=users, metrics=self.live)
        try:
            r.setup()
            plan = r.swarm_plan(warmup_seconds=0.0, planned_seconds=0.0, users=per_init)
            plan.worker_wait_seconds = WORKER_WAIT_S
        except BaseException as e:
            r.abort()
            rd.finish("failed", error=error_line(e))
            rd.release()
            self.metrics.set_state("idle", run_id=rd.run_id, description=f"failed: {e}")
            raise
        self.metrics.reset()
        self.idle.clear()
        self.current = Session(run_dir=rd, repetition=r, users=users, spawn_rate=spawn_rate, started=time.time(),
                               description=description, initiators=[int(i) for i in per_init], matrix=m)
        self.metrics.set_state("running", run_id=rd.run_id, description=description)
        return plan, r.partial

    def on_live(self, figures: dict) -> None:
        """The master's live figures (the swarm's ``on_live``): to the session's repetition."""
        s = self.current
        if s is not None:
            s.repetition.on_live(figures)

    # ------------------------------------------------------------------ end
    def finish(self, res: SwarmResult) -> dict:
        """The swarm ended: save the session (called on a thread of the controller)."""
        with self._session_lock:
            s = self.current
            if s is None:
                return {"ok": True, "run_dir": None, "note": "no session in progress"}
            return self._finish(s, res)

    def abandon(self) -> Path | None:
        """Save the session in progress, if any, as interrupted (ssbench web is shutting down
        and the master never reported the end)."""
        with self._session_lock:
            s = self.current
            if s is None:
                return None
            self._finish(s, None, status="interrupted")
            return s.run_dir.path

    def _finish(self, s: Session, res: SwarmResult | None, status: str = "complete") -> dict:
        self.current = None
        self.metrics.set_state("saving", run_id=s.run_dir.run_id, description=s.description)
        try:
            if res is None:   # no word from the master: what its recordings say, if any came
                res = SwarmResult(spawn_complete=None, interrupted=True,
                                  worker_files=sorted(s.repetition.partial.glob("worker-i*.json")))
            spawn = res.spawn_complete or s.started
            measure = max(float(res.stop_requested or time.time()) - float(spawn), 0.0)
            res.spawn_complete = float(spawn)
            notes = [f"the recording of worker {slot} never reached the master (its SENDs are missing from "
                     "send_rate and send latency)" for slot in res.missing]
            if not res.worker_files:
                notes.append("no worker recording reached the master")
            web = {"users": s.users, "spawn_rate": s.spawn_rate, "spawn_completed": res.spawn_complete is not None,
                   "initiators_with_users": s.initiators, "ended_by": status}
            [summary] = s.repetition.finish(res, warmup_seconds=0.0, span_seconds=measure, web=web,
                                            error_samples=notes, require_sends=False)
            m = self._write(replace(s.matrix, run=replace(s.matrix.run, measure_seconds=round(max(measure, UNTIL_STOPPED), 1))))
            s.run_dir.update_run(matrix=m.to_dict(), permutations_done=1)
            s.run_dir.finish(status, summary.messages_lost)
        except BaseException as e:
            s.run_dir.finish("failed", error=error_line(e))
            self.metrics.set_state("idle", run_id=s.run_dir.run_id, description=f"saving failed: {e}")
            self.idle.set()
            raise
        finally:
            s.run_dir.release()   # the session's run directory is no longer being written
        self.saved.append(s.run_dir.path)
        lost = summary.messages_lost
        self.metrics.set_state("idle", run_id=s.run_dir.run_id,
                               description=f"saved: {s.description}; send {summary.send_rate:,.0f} msg/s, "
                                           f"lost {lost}", run_dir=str(s.run_dir.path))
        log.info("session %s saved (%s)", s.run_dir.run_id, summary.status)
        self.idle.set()
        return {"ok": True, "run_dir": str(s.run_dir.path), "run_id": s.run_dir.run_id,
                "status": summary.status, "send_rate": summary.send_rate,
                "receive_rate": summary.receive_rate, "messages_lost": lost}

    # ------------------------------------------------------------------ helpers
    def _matrix(self, rd: RunDir, initiators: int, threads: int, dialogs: DialogStrategy, payload: int,
                spawn_rate: float, rate: float = 0.0) -> Matrix:
        """The session as a one-permutation matrix (threads per initiator; measured until Stop;
        with a ``rate``, open loop)."""
        run = RunSettings(warmup_seconds=0.0, measure_seconds=UNTIL_STOPPED, drain_timeout_seconds=self.drain_timeout,
                          sample_interval_seconds=self.sample_interval, spawn_rate=spawn_rate)
        return Matrix(path=rd.path / "matrix.yaml", name=MATRIX_NAME, sha256="", embedded_profiles={},
                      description=f"Interactive ssbench web session {rd.run_id}", run=run, broker=self.broker,
                      axes={"initiators": [initiators], "threads": [threads], "dialogs": [dialogs],
                            "payload_bytes": [payload], "server": [self.profile], **({"rate": [rate]} if rate else {})})

    @staticmethod
    def _write(m: Matrix) -> Matrix:
        """``m`` as the matrix.yaml that replays the session (``ssbench run``); returns it with that
        file's hash."""
        text = ("# Written by `ssbench web`: this session as a one-permutation matrix (the measured\n"
                "# window is the session's, from the end of spawning to Stop; threads are per initiator).\n"
                + yaml.safe_dump(m.document(), sort_keys=False))
        write_atomic(m.path, text)
        return replace(m, sha256=hashlib.sha256(text.encode("utf-8")).hexdigest())
