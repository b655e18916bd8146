"""One interactive session (a swarm start..stop in the web UI) as a saved run.

A session is one permutation with one repetition, run through the same lifecycle as a
repetition of ``ssbench run`` (:class:`harness.repetition.Repetition`), so ``ssbench analyze``
reads it like any run. This module keeps only the session's bookkeeping:

1. on swarm start: a new run directory ``results/<UTC time>-web/`` (run.json, matrix.yaml), then
   :meth:`Repetition.setup` (prepare, dialogs, warm-up, broker side, drain, collectors) and the
   swarm spec for the web UI's own Locust swarm;
2. on swarm stop: the workers' recordings are awaited, then :meth:`Repetition.finish` (drain,
   verify, summary, samples, latency, commit) and run.json is completed.

The measured window is from the end of spawning to the moment Stop was pressed (no warm-up
window: the UI's user decides when to look). ``matrix.yaml`` is a one-permutation matrix that
``ssbench run`` can replay with the same settings and the session's duration.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import yaml

from ..errors import UserError
from ..load.swarm import SwarmResult
from ..matrix import MAX_PAYLOAD_BYTES, BrokerSettings, DialogStrategy, Permutation, RunSettings, load_matrix
from ..provenance import provenance
from ..redact import redact
from ..repetition import Repetition
from ..results import RunDir, utc_now_iso, write_atomic
from ..targets.base import Target
from .metrics import LiveMetrics

log = logging.getLogger(__name__)

MATRIX_NAME = "web"


@dataclass
class Session:
    run_dir: RunDir
    repetition: Repetition
    users: int
    spawn_rate: float
    started: float
    description: str

    @property
    def perm(self) -> Permutation:
        return self.repetition.perm

    @property
    def partial(self) -> Path:
        return self.repetition.partial


class WebSessions:
    """Start and save sessions; called from the control API's threads (one at a time)."""

    def __init__(self, target: Target, results_root: Path, max_initiators: int, profile: str,
                 broker: BrokerSettings, metrics: LiveMetrics,
                 client_pids: Callable[[], dict[str, int]] = lambda: {},
                 sample_interval: float = 1.0, drain_timeout: float = 60.0):
        self.target = target
        self.results_root = Path(results_root)
        self.max_initiators = max_initiators
        self.profile = profile
        self.broker = broker
        self.metrics = metrics
        self.client_pids = client_pids
        self.sample_interval = sample_interval
        self.drain_timeout = drain_timeout
        self.lock = threading.Lock()          # serializes calls to the target (as Runner.lock)
        self._session_lock = threading.Lock()
        self.current: Session | None = None
        self.saved: list[Path] = []

    # ------------------------------------------------------------------ start
    def start(self, params: dict) -> dict:
        with self._session_lock:
            if self.current is not None:  # a start that never got its stop (killed mid-start)
                self._finish(self.current, {}, status="interrupted")
            return self._start(params)

    def _start(self, params: dict) -> dict:
        t = self.target
        k = max(1, min(int(params.get("initiators", 1)), self.max_initiators))
        users = max(1, int(params.get("users", 1)))
        spawn_rate = float(params.get("spawn_rate", 1) or 1)
        try:
            strategy = DialogStrategy.parse(str(params.get("dialogs", "per_thread")))
        except ValueError as e:
            raise UserError(str(e), field="dialogs") from None
        payload = int(params.get("payload_bytes", 100))
        if not 0 <= payload <= MAX_PAYLOAD_BYTES:
            raise UserError(f"payload bytes must be 0..{MAX_PAYLOAD_BYTES}, got {payload}", field="payload_bytes")
        threads = math.ceil(users / k)   # client threads per initiator (the busiest one)
        perm = Permutation(index=1, initiators=k, threads=threads, dialogs=strategy, payload_bytes=payload,
                           server=self.profile, broker=self.broker)
        description = (f"{users} client thread(s) on {k} initiator(s), {strategy.token} dialogs, "
                       f"{payload}-byte messages, profile {self.profile}")
        rd = RunDir.create(self.results_root, MATRIX_NAME)
        self._write_matrix(rd, perm, spawn_rate, measure=None)
        prov = provenance()
        rd.update_run(run_id=rd.run_id, status="running", started=utc_now_iso(),
                      ended=None, ssbench=prov["ssbench"], matrix=load_matrix(rd.path / "matrix.yaml").to_dict(),
                      target=redact(t.describe()), software=prov["software"], host=prov["host"],
                      argv=redact(prov["argv"]), permutations_done=0, permutations_total=1,
                      web={"users": users, "spawn_rate": spawn_rate, "initiators": k,
                           "dialogs": strategy.token, "payload_bytes": payload})
        self.metrics.reset()
        self.metrics.set_state("preparing", run_id=rd.run_id, description=description)
        log.info("session %s: preparing (%s)", rd.run_id, description)
        settings = RunSettings(warmup_seconds=0.0, measure_seconds=0.5, repetitions=1,
                               drain_timeout_seconds=self.drain_timeout,
                               sample_interval_seconds=self.sample_interval, spawn_rate=spawn_rate)
        r = Repetition(target=t, run_dir=rd, perm=perm, rep=1, profile=self.profile, settings=settings,
                       lock=self.lock, on_tick=self.metrics.on_tick, client_pids=self.client_pids,
                       users_expected=users)
        try:
            r.setup()
            spec = r.swarm_spec(warmup_seconds=0.0, measure_seconds=0.0)
            spec_path = spec.dump(r.partial / "swarm.json")
        except BaseException as e:
            r.abort()
            rd.update_run(error=f"{type(e).__name__}: {e}")
            rd.finish("failed")
            self.metrics.set_state("idle", run_id=rd.run_id, description=f"failed: {e}")
            raise
        self.metrics.reset()
        self.current = Session(run_dir=rd, repetition=r, users=users, spawn_rate=spawn_rate,
                               started=time.time(), description=description)
        self.metrics.set_state("running", run_id=rd.run_id, description=description)
        return {"ok": True, "run_id": rd.run_id, "out_dir": str(r.partial), "spec_path": str(spec_path),
                "spec": asdict(spec), "description": description}

    # ------------------------------------------------------------------ stop
    def stop(self, info: dict) -> dict:
        with self._session_lock:
            s = self.current
            if s is None:
                return {"ok": True, "run_dir": None, "note": "no session in progress"}
            return self._finish(s, info)

    def abandon(self) -> Path | None:
        """Save the session in progress, if any, as interrupted (ssbench web is shutting down
        and the master never reported the stop)."""
        with self._session_lock:
            s = self.current
            if s is None:
                return None
            self._finish(s, {}, status="interrupted")
            return s.run_dir.path

    def _finish(self, s: Session, info: dict, status: str = "complete") -> dict:
        self.current = None
        self.metrics.set_state("saving", run_id=s.run_dir.run_id, description=s.description)
        try:
            # the master forwards each worker's recording before it reports the stop; a short
            # grace for files still on their way (shutdown paths)
            expected = {int(i) for i in info.get("initiators_with_users") or []}
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                if expected <= self._initiators_recorded(s.partial):
                    break
                time.sleep(0.2)
            spawn = info.get("spawn_complete") or info.get("started") or s.started
            stop_t = info.get("stop_requested") or time.time()
            measure = max(float(stop_t) - float(spawn), 0.0)
            csv = s.partial / "locust_stats.csv"
            res = SwarmResult(spawn_complete=float(spawn),
                              worker_files=sorted(s.partial.glob("worker-i*.json")),
                              interrupted=status != "complete", stats_csv=csv if csv.exists() else None)
            got = self._initiators_recorded(s.partial)
            notes = [f"the recording of initiator {i}'s worker never reached the master "
                     f"(its SENDs are missing from send_rate and send latency)" for i in sorted(expected - got)]
            if not res.worker_files and not expected:
                notes.append("no worker recording reached the master")
            web = {"users": s.users, "spawn_rate": s.spawn_rate,
                   "spawn_completed": info.get("spawn_complete") is not None,
                   "initiators_with_users": sorted(expected), "ended_by": status}
            summary = s.repetition.finish(res, warmup_seconds=0.0, measure_seconds=measure, web=web,
                                          error_samples=notes, require_sends=False)
            self._write_matrix(s.run_dir, s.perm, s.spawn_rate, measure=measure)
            s.run_dir.update_run(matrix=load_matrix(s.run_dir.path / "matrix.yaml").to_dict(), permutations_done=1)
            s.run_dir.finish(status, summary.messages_lost)
        except BaseException as e:
            s.run_dir.update_run(error=f"{type(e).__name__}: {e}")
            s.run_dir.finish("failed")
            self.metrics.set_state("idle", run_id=s.run_dir.run_id, description=f"saving failed: {e}")
            raise
        self.saved.append(s.run_dir.path)
        lost = summary.messages_lost
        self.metrics.set_state("idle", run_id=s.run_dir.run_id,
                               description=f"saved: {s.description}; send {summary.send_rate:,.0f} msg/s, "
                                           f"lost {lost}", run_dir=str(s.run_dir.path))
        log.info("session %s saved (%s)", s.run_dir.run_id, summary.status)
        return {"ok": True, "run_dir": str(s.run_dir.path), "run_id": s.run_dir.run_id,
                "status": summary.status, "send_rate": summary.send_rate,
                "receive_rate": summary.receive_rate, "messages_lost": lost}

    @staticmethod
    def _initiators_recorded(partial: Path) -> set[int]:
        return {int(p.name.split("-")[1][1:]) for p in partial.glob("worker-i*.json")}

    # ------------------------------------------------------------------ helpers
    def _write_matrix(self, rd: RunDir, perm: Permutation, spawn_rate: float, measure: float | None) -> None:
        """A one-permutation matrix that replays the session with ``ssbench run``."""
        doc = {
            "name": MATRIX_NAME,
            "description": f"Interactive ssbench web session {rd.run_id}",
            "axes": {"initiators": [perm.initiators], "threads": [perm.threads],
                     "dialogs": [perm.dialogs.token], "payload_bytes": [perm.payload_bytes],
                     "server": [perm.server]},
            "run": {"warmup_seconds": 0, "measure_seconds": round(max(measure or 0.0, 0.5), 1),
                    "repetitions": 1, "drain_timeout_seconds": self.drain_timeout,
                    "sample_interval_seconds": self.sample_interval, "spawn_rate": spawn_rate},
            "broker": asdict(perm.broker),
        }
        head = ("# Written by `ssbench web`: this session as a one-permutation matrix (the measured\n"
                "# window is the session's, from the end of spawning to Stop; threads are per initiator).\n")
        write_atomic(rd.path / "matrix.yaml", head + yaml.safe_dump(doc, sort_keys=False))
