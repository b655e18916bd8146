"""One interactive session (a swarm start..stop in the web UI) as a saved run.

A session is one permutation with one repetition, built exactly like a repetition of
``ssbench run`` (:class:`harness.runner.Runner`), so ``ssbench analyze`` reads it like any run:

1. on swarm start: a new run directory ``results/<UTC time>-web/`` (run.json, matrix.yaml), the
   target prepared from a clean state (``prepare``: every conversation and message cleared,
   counters reset), its broker side started, the dialogs of the chosen strategy begun on every
   initiator in use, warm-up (one message per dialog) and drain; then the collectors start and
   the swarm spec is written;
2. on swarm stop: drain and verify (sent = received per initiator), then the summary,
   samples.jsonl, latency.json and Locust's stats CSV are written with the runner's own code.

The measured window is from the end of spawning to the moment Stop was pressed (no warm-up
window: the UI's user decides when to look). ``matrix.yaml`` is a one-permutation matrix that
``ssbench run`` can replay with the same settings and the session's duration.
"""

from __future__ import annotations

import io
import logging
import math
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

import yaml

from ..collectors.base import SampleContext, Sampler, default_collectors
from ..errors import TargetError, UserError
from ..load.spec import SwarmSpec
from ..load.swarm import SwarmResult
from ..matrix import MAX_PAYLOAD_BYTES, BrokerSettings, DialogStrategy, Permutation, RunSettings, load_matrix
from ..provenance import provenance
from ..redact import redact
from ..results import RunDir, utc_now_iso
from ..runner import Progress, Runner, finish_run
from ..targets.base import Target
from .metrics import LiveMetrics

log = logging.getLogger(__name__)

MATRIX_NAME = "web"


@dataclass
class Session:
    run_dir: RunDir
    perm: Permutation
    users: int
    spawn_rate: float
    partial: Path
    sampler: Sampler
    created: int
    usable: int
    started: float
    description: str
    extra: dict = field(default_factory=dict)


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
        usable = strategy.usable_dialogs(threads)
        description = (f"{users} client thread(s) on {k} initiator(s), {strategy.token} dialogs, "
                       f"{payload}-byte messages, profile {self.profile}")
        rd = RunDir.create(self.results_root, MATRIX_NAME)
        self._write_matrix(rd, perm, spawn_rate, measure=None)
        prov = provenance()
        rd.update_run(schema="ssbench.run/1", run_id=rd.run_id, status="running", started=utc_now_iso(),
                      ended=None, ssbench=prov["ssbench"], matrix=load_matrix(rd.path / "matrix.yaml").to_dict(),
                      target=redact(t.describe()), software=prov["software"], host=prov["host"],
                      argv=redact(prov["argv"]), permutations_done=0, permutations_total=1,
                      web={"users": users, "spawn_rate": spawn_rate, "initiators": k,
                           "dialogs": strategy.token, "payload_bytes": payload})
        self.metrics.reset()
        self.metrics.set_state("preparing", run_id=rd.run_id, description=description)
        log.info("session %s: preparing (%s)", rd.run_id, description)
        sampler = None
        try:
            with self.lock:
                t.prepare(k, self.profile, self.broker)
                t.start()
                created = 0
                for i in range(1, k + 1):
                    created += t.create_dialogs(i, usable, strategy.every_n)
                    t.warm_up(i)
            warm = self._drain()
            if warm.in_flight:
                raise TargetError(f"warm-up did not drain within {self.drain_timeout:g}s "
                                  f"({warm.in_flight} messages in flight)")
            partial = rd.begin_rep(perm.id, 1)
            spec = SwarmSpec(sender_specs={str(i): t.sender_spec(i) for i in range(1, k + 1)},
                             payload_bytes=payload, usable={str(i): usable for i in range(1, k + 1)},
                             warmup_seconds=0.0, measure_seconds=0.0, out_dir=str(partial),
                             meta={"permutation": perm.id, "repetition": 1, "session": rd.run_id})
            spec_path = spec.dump(partial / "swarm.json")
            self.metrics.reset()
            sampler = Sampler(SampleContext(target=t, lock=self.lock, client_pids=self.client_pids),
                              default_collectors(), interval=self.sample_interval, on_tick=self.metrics.on_tick)
            sampler.start()
        except BaseException as e:
            if sampler is not None:
                sampler.stop()
            with self.lock:
                try:
                    t.stop()
                except Exception:  # pragma: no cover - best effort
                    log.exception("stopping the target")
            rd.update_run(error=f"{type(e).__name__}: {e}")
            finish_run(rd, "failed")
            self.metrics.set_state("idle", run_id=rd.run_id, description=f"failed: {e}")
            raise
        self.current = Session(run_dir=rd, perm=perm, users=users, spawn_rate=spawn_rate, partial=partial,
                               sampler=sampler, created=created, usable=usable, started=time.time(),
                               description=description)
        self.metrics.set_state("running", run_id=rd.run_id, description=description)
        return {"ok": True, "run_id": rd.run_id, "out_dir": str(partial), "spec_path": str(spec_path),
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
        t = self.target
        self.metrics.set_state("saving", run_id=s.run_dir.run_id, description=s.description)
        try:
            # the master forwards each worker's recording before it reports the stop; a short
            # grace for files still on their way (shutdown paths)
            expected = {int(i) for i in info.get("initiators_with_users") or []}
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                have = {int(p.name.split("-")[1][1:]) for p in s.partial.glob("worker-i*.json")}
                if expected <= have:
                    break
                time.sleep(0.2)
            final = self._drain()
            s.sampler.stop()
            with self.lock:
                t.stop()
            spawn = info.get("spawn_complete") or info.get("started") or s.started
            stop_t = info.get("stop_requested") or time.time()
            measure = max(float(stop_t) - float(spawn), 0.0)
            csv = s.partial / "locust_stats.csv"
            res = SwarmResult(spawn_complete=float(spawn), stop_requested=float(stop_t),
                              worker_files=sorted(s.partial.glob("worker-i*.json")), returncodes={},
                              interrupted=status != "complete", stats_csv=csv if csv.exists() else None)
            runner = Runner(SimpleNamespace(run=RunSettings(warmup_seconds=0.0, measure_seconds=measure)),
                            t, s.run_dir, progress=Progress(total=1, stream=io.StringIO()))
            runner.lock = self.lock
            summary = runner.summarize(s.perm, 1, self.profile, res, s.sampler, final, s.created, s.usable,
                                         users_expected=s.users)
            summary["permutation"]["total_threads"] = s.users
            summary["web"] = {"users": s.users, "spawn_rate": s.spawn_rate,
                              "spawn_completed": info.get("spawn_complete") is not None,
                              "initiators_with_users": sorted(expected), "ended_by": status}
            got = {int(p.name.split("-")[1][1:]) for p in res.worker_files}
            for i in sorted(expected - got):
                summary["error_samples"].append(f"the recording of initiator {i}'s worker never reached the master "
                                                f"(its SENDs are missing from send_rate and send latency)")
            if not res.worker_files and not expected:
                summary["error_samples"].append("no worker recording reached the master")
            runner.write_repetition(s.partial, summary, s.sampler, res)
            s.run_dir.commit_rep(s.perm.id, 1, s.partial)
            s.run_dir.write_permutation_summary(s.perm.id, s.perm.values())
            self._write_matrix(s.run_dir, s.perm, s.spawn_rate, measure=measure)
            s.run_dir.update_run(matrix=load_matrix(s.run_dir.path / "matrix.yaml").to_dict(), permutations_done=1)
            finish_run(s.run_dir, status, summary["messages_lost"])
        except BaseException as e:
            try:
                s.sampler.stop()
            except Exception:  # pragma: no cover
                pass
            with self.lock:
                try:
                    t.stop()
                except Exception:  # pragma: no cover
                    log.exception("stopping the target")
            s.run_dir.update_run(error=f"{type(e).__name__}: {e}")
            finish_run(s.run_dir, "failed")
            self.metrics.set_state("idle", run_id=s.run_dir.run_id, description=f"saving failed: {e}")
            raise
        self.saved.append(s.run_dir.path)
        lost = summary["messages_lost"]
        self.metrics.set_state("idle", run_id=s.run_dir.run_id,
                               description=f"saved: {s.description}; send {summary['send_rate']:,.0f} msg/s, "
                                           f"lost {lost}", run_dir=str(s.run_dir.path))
        log.info("session %s saved (%s)", s.run_dir.run_id, summary["status"])
        return {"ok": True, "run_dir": str(s.run_dir.path), "run_id": s.run_dir.run_id,
                "status": summary["status"], "send_rate": summary["send_rate"],
                "receive_rate": summary["receive_rate"], "messages_lost": lost}

    # ------------------------------------------------------------------ helpers
    def _drain(self):
        return self.target.drain(self.drain_timeout, lock=self.lock)

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
        path = rd.path / "matrix.yaml"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(head + yaml.safe_dump(doc, sort_keys=False))
        tmp.replace(path)
