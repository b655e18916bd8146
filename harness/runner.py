"""Run a matrix: for each permutation and repetition, provision, load, measure, verify, write.

One repetition, in order:

1. ``prepare`` the target (clear every conversation and message, apply the server profile and
   the broker settings), start its broker side, begin the permutation's dialogs on every
   initiator per its strategy, warm up (one message on every dialog begun, as the paper does)
   and wait for the drain.
2. Start the collectors (one per metric family, :mod:`harness.collectors`).
3. Run Locust: a master and one worker per initiator, one user per client thread, closed loop.
   Warm-up window, then the measured window (timed from the end of spawning).
4. Stop, drain (transmission and target queues empty, with a timeout) and verify: messages
   sent = messages received, per initiator. A shortfall is ``messages_lost``, shown loudly.
5. Write the repetition's results atomically (:mod:`harness.results`).
"""

from __future__ import annotations

import logging
import shutil
import statistics
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from .collectors import SampleContext, Sampler, default_collectors
from .collectors.activation import ActivationCollector
from .collectors.waits import WaitCollector
from .errors import TargetError, UserError
from .load.spec import SwarmSpec
from .load.swarm import Swarm
from .load.window import merge_workers
from .matrix import Matrix, Permutation
from .provenance import provenance
from .redact import redact
from .results import RunDir, SUMMARY_SCHEMA, utc_now_iso, write_json, write_jsonl
from .stats import Histogram
from .targets.base import Target

log = logging.getLogger(__name__)

CLIENT_BOUND_WORKER_CPU = 90.0   # percent of one core: a Locust worker is one Python process
TOP_WAITS = 5


class Interrupted(Exception):
    pass


@dataclass
class Progress:
    """Prints permutation k of n, ETA and live msg/s (one line per update; \\r on a TTY)."""

    total: int
    stream: object = None
    done: int = 0
    started: float = 0.0

    def __post_init__(self):
        import sys

        self.stream = self.stream or sys.stderr
        self.started = time.monotonic()
        self._tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._last = 0.0

    def eta(self) -> str:
        if self.done == 0:
            return "?"
        left = (time.monotonic() - self.started) / self.done * (self.total - self.done)
        return time.strftime("%H:%M:%S", time.gmtime(left))

    def line(self, text: str, live: bool = False) -> None:
        now = time.monotonic()
        if live and not self._tty and now - self._last < 5:
            return  # non-interactive: a live line every 5 s at most
        self._last = now
        prefix = f"[{self.done + 1 if live else self.done}/{self.total}] "
        if self._tty and live:
            self.stream.write("\r\033[K" + prefix + text)
        else:
            self.stream.write(("\r\033[K" if self._tty else "") + prefix + text + "\n")
        self.stream.flush()


def resolve_profile(matrix: Matrix, target: Target, server: str) -> str:
    profile = matrix.embedded_profile(server) if target.kind == "embedded" else server
    if profile not in target.profiles():
        raise UserError(f"server profile {server!r} is not defined for the {target.kind} target "
                        f"(known: {', '.join(target.profiles())})", file=str(matrix.path), field="axes.server")
    return profile


class Runner:
    def __init__(self, matrix: Matrix, target: Target, run_dir: RunDir, *, progress: Progress | None = None,
                 stop_event: threading.Event | None = None):
        self.matrix = matrix
        self.target = target
        self.run_dir = run_dir
        self.progress = progress or Progress(total=len(matrix) * matrix.run.repetitions)
        self.stop_event = stop_event or threading.Event()
        self.lock = threading.Lock()
        self.lost_total = 0

    # ------------------------------------------------------------------ whole run
    def run(self) -> int:
        """Run every permutation/repetition not yet complete. Returns the count of messages
        lost across the run (0 is the only good answer)."""
        m = self.matrix
        for perm in m.permutations():
            resolve_profile(m, self.target, perm.server)  # fail early, before any load
        max_init = max(m.axes["initiators"])
        with self.lock:
            self.target.provision(max_init)
        done = 0
        for perm in m.permutations():
            for rep in range(1, m.run.repetitions + 1):
                if self.run_dir.is_complete(perm.id, rep):
                    done += 1
                    self.progress.done = done
                    continue
                if self.stop_event.is_set():
                    raise Interrupted()
                summary = self.run_repetition(perm, rep)
                done += 1
                self.progress.done = done
                self.run_dir.update_run(permutations_done=done)
                self._report(perm, rep, summary)
        return self.lost_total

    def _report(self, perm: Permutation, rep: int, s: dict) -> None:
        lost = s["messages_lost"]
        flag = ""
        if lost:
            flag = f"  !!! {lost} MESSAGES LOST !!!"
        elif s["status"] == "users_idle":
            flag = (f"  !!! only {s['users_active']} of {s['users_expected']} users were sending "
                    "through the window !!!")
        elif s["status"] != "ok":
            flag = f"  [{s['status']}]"
        p99 = s["send_latency_ms"]["p99"]
        self.progress.line(f"{perm.id} rep {rep}: send {s['send_rate']:.0f} msg/s, receive "
                           f"{s['receive_rate']:.0f} msg/s, SEND p99 {p99 if p99 is not None else float('nan'):.2f} ms, "
                           f"lost {lost}, ETA {self.progress.eta()}{flag}")

    # ------------------------------------------------------------------ one repetition
    def run_repetition(self, perm: Permutation, rep: int) -> dict:
        m, t = self.matrix, self.target
        profile = resolve_profile(m, t, perm.server)
        partial = self.run_dir.begin_rep(perm.id, rep)
        usable = perm.dialogs.usable_dialogs(perm.threads)
        every_n = perm.dialogs.every_n
        self.progress.line(f"{perm.id} rep {rep}: preparing ({perm.initiators} x "
                           f"{perm.dialogs.dialogs_created(perm.threads)} dialogs)", live=True)
        try:
            with self.lock:
                t.prepare(perm.initiators, profile, perm.broker)
                created = 0
                for i in range(1, perm.initiators + 1):
                    created += t.create_dialogs(i, usable, every_n)
                    t.warm_up(i)
                t.start()
            warm = self._drain(m.run.drain_timeout_seconds)
            if warm.in_flight:
                raise TargetError(f"warm-up did not drain within {m.run.drain_timeout_seconds:g}s "
                                  f"({warm.in_flight} messages in flight)")

            sampler = self._sampler()
            spec = SwarmSpec(sender_specs={str(i): t.sender_spec(i) for i in range(1, perm.initiators + 1)},
                             payload_bytes=perm.payload_bytes,
                             usable={str(i): usable for i in range(1, perm.initiators + 1)},
                             warmup_seconds=m.run.warmup_seconds, measure_seconds=m.run.measure_seconds,
                             out_dir=str(partial), meta={"permutation": perm.id, "repetition": rep})
            swarm = Swarm(spec, partial, perm.initiators, perm.threads, m.run.spawn_rate)
            sampler.ctx.client_pids = swarm.worker_pids
            sampler.start()
            swarm.start()
            spawn_budget = perm.total_threads / m.run.spawn_rate + 60
            deadline = time.monotonic() + spawn_budget + m.run.warmup_seconds + m.run.measure_seconds + 30
            while swarm.running() and time.monotonic() < deadline:
                if self.stop_event.wait(0.5):
                    swarm.stop()
                    break
            res = swarm.wait(timeout=max(0.0, deadline - time.monotonic()))
            interrupted = self.stop_event.is_set() or res.interrupted
            final = self._drain(m.run.drain_timeout_seconds) if not interrupted else None
            sampler.stop()
            with self.lock:
                t.stop()
            if interrupted:
                raise Interrupted()
            if res.spawn_complete is None or not res.worker_files:
                raise TargetError("the Locust swarm did not run:\n" + swarm.log_tail())
            summary = self.summarize(perm, rep, profile, res, sampler, final, created, usable)
            self.write_repetition(partial, summary, sampler, res)
        except BaseException:
            with self.lock:
                try:
                    t.stop()
                except Exception:  # pragma: no cover - best effort
                    log.exception("stopping the target")
            raise
        self.run_dir.commit_rep(perm.id, rep, partial)
        self.run_dir.write_permutation_summary(perm.id, perm.values())
        self.lost_total += summary["messages_lost"]
        return summary

    def _drain(self, timeout: float):
        return self.target.drain(timeout, lock=self.lock, stop=self.stop_event)

    def _sampler(self) -> Sampler:
        ctx = SampleContext(target=self.target, lock=self.lock)

        def live(samples):
            rate = next((s.value for s in samples if s.metric == "received_per_s"), None)
            xq = next((s.value for s in samples if s.metric == "xmitq_total"), None)
            if rate is not None:
                self.progress.line(f"running: {rate:,.0f} msg/s received, xmitq {xq or 0:,.0f}", live=True)

        return Sampler(ctx, default_collectors(), interval=self.matrix.run.sample_interval_seconds, on_tick=live)

    # ------------------------------------------------------------------ results
    def summarize(self, perm, rep, profile, res, sampler, final, created, usable,
                  users_expected: int | None = None) -> dict:
        m, t = self.matrix, self.target
        start = res.spawn_complete + m.run.warmup_seconds
        end = start + m.run.measure_seconds
        wd = merge_workers(res.worker_files, start, end)
        start, end = wd.start, wd.end  # bucket-aligned window actually measured
        with self.lock:
            e2e_us = t.e2e_latencies_us(start, end)
        e2e = Histogram()
        e2e.extend_us(e2e_us)
        seconds = max(end - start, 1e-9)

        waits = next(c for c in sampler.collectors if isinstance(c, WaitCollector)).window_delta(start, end)
        total_wait = sum(ms for _, ms in waits.values()) or 1.0
        top = sorted(waits.items(), key=lambda kv: -kv[1][1])[:TOP_WAITS]
        top_waits = [{"wait_type": k, "wait_time_ms": round(ms, 3), "waiting_tasks": n,
                      "share": round(ms / total_wait, 4)} for k, (n, ms) in top]

        in_window = [s for s in sampler.samples if start <= s.ts < end]

        def series(family, metric, key=None, samples=in_window):
            return [s.value for s in samples if s.family == family and s.metric == metric
                    and (key is None or s.key == key)]

        # queue depths from the measured window on (the drain included): the fast counts lag
        # by up to a few seconds, so warm-up leftovers would otherwise show as the maximum
        loaded = [s for s in sampler.samples if s.ts >= start]
        xmitq = series("queues", "xmitq_total", samples=loaded)
        queue = series("queues", "depth", "queue", samples=loaded)
        client_cpu = series("host", "cpu_percent", "client")
        server_cpu = series("host", "cpu_percent", "server")
        worker_cpu = {}
        for s in in_window:
            if s.family == "host" and s.metric == "cpu_percent" and s.key.startswith("worker."):
                worker_cpu.setdefault(s.key, []).append(s.value)
        worker_mean = {k: statistics.fmean(v) for k, v in worker_cpu.items()}
        client_bound = any(v >= CLIENT_BOUND_WORKER_CPU for v in worker_mean.values())
        act = next(c for c in sampler.collectors if isinstance(c, ActivationCollector))

        per_init = []
        for c in final.initiators:
            per_init.append({"initiator": c.initiator, "sent": c.sent, "received": c.received,
                             "lost": max(0, c.sent - c.received), "xmitq_left": c.xmitq})
        # a poison message is received into the error table, not lost
        lost = max(0, final.sent - final.received - final.errors)
        errors = wd.errors_total
        # every Locust user must have been sending through the window: one that never got going
        # (stuck connecting) would make the rate a smaller swarm's without saying so
        users_active = wd.users_active
        if users_expected is None:
            users_expected = perm.total_threads
        status = "ok"
        if lost:
            status = "lost"
        elif final.queue_disabled:
            status = "queue_disabled"
        elif errors:
            status = "errors"
        elif users_active < users_expected:
            status = "users_idle"
        elif client_bound:
            status = "client_bound"

        def mean(v):
            return round(statistics.fmean(v), 2) if v else None

        server_cpu_mean = mean(server_cpu)
        if not server_cpu and hasattr(t, "server_cpu_percent"):
            # remote servers (SQL Server): the scheduler-monitor ring buffer, % of the machine
            try:
                with self.lock:
                    per_server = t.server_cpu_percent()
                server_cpu_mean = mean([v for v in per_server.values() if v is not None])
            except Exception as e:  # telemetry must not fail the run
                sampler.errors.append(f"server_cpu_percent: {e}")

        return {
            "schema": SUMMARY_SCHEMA, "run_id": self.run_dir.run_id, "permutation_id": perm.id,
            "repetition": rep, "permutation": perm.values(),
            "target": {"kind": t.kind, "label": t.label, "profile": profile},
            "window": {"warmup_seconds": m.run.warmup_seconds, "measure_seconds": round(seconds, 3),
                       "measure_start": start, "measure_end": end, "spawn_complete": res.spawn_complete},
            "dialogs_created": created, "usable_dialogs": usable * perm.initiators,
            "messages_sent": final.sent, "messages_sent_client": wd.sends_total,
            "messages_received": final.received, "messages_lost": lost,
            "drained": final.in_flight == 0, "per_initiator": per_init,
            "send_rate": round(wd.count / seconds, 3), "receive_rate": round(e2e.count / seconds, 3),
            "send_latency_ms": wd.latency.summary_ms(), "e2e_latency_ms": e2e.summary_ms(),
            "top_waits": top_waits,
            "max_xmitq_depth": max(xmitq) if xmitq else 0, "max_queue_depth": max(queue) if queue else 0,
            "activation_tasks_started": act.tasks_started(), "activation_tasks_max_running": act.max_running(),
            "client_cpu_percent": mean(client_cpu), "server_cpu_percent": server_cpu_mean,
            "worker_cpu_percent": {k: round(v, 1) for k, v in worker_mean.items()},
            "client_bound": client_bound,
            "users_expected": users_expected, "users_spawned": wd.users_spawned,
            "users_active": users_active,
            "errors": errors, "error_samples": wd.error_samples[:10],
            "collector_errors": sampler.errors[:10],
            "poison_messages": final.errors, "queue_disabled": final.queue_disabled,
            "status": status,
            "_latency": {"send": wd.latency, "e2e": e2e},
        }

    def write_repetition(self, partial: Path, summary: dict, sampler: Sampler, res) -> None:
        lat = summary.pop("_latency")
        start, end = summary["window"]["measure_start"], summary["window"]["measure_end"]
        t0 = sampler.started

        def phase(ts):
            return "warmup" if ts < start else ("measure" if ts < end else "drain")

        write_jsonl(partial / "samples.jsonl",
                    ({"ts": round(s.ts, 4), "elapsed_s": round(s.ts - t0, 4), "phase": phase(s.ts),
                      "family": s.family, "metric": s.metric, "key": s.key, "value": s.value}
                     for s in sampler.samples))
        write_json(partial / "latency.json", {"schema": "ssbench.latency/1", "unit": "us",
                                              "send": lat["send"].to_json(), "e2e": lat["e2e"].to_json()})
        if res.stats_csv is None:
            summary["error_samples"].append("Locust wrote no stats CSV")
        # keep the Locust logs and worker data; drop the swarm's scratch files
        for name in ("swarm.json", "master.json"):
            (partial / name).unlink(missing_ok=True)
        write_json(partial / "summary.json", summary)


def start_run(matrix: Matrix, target: Target, results_root: Path, out: Path | None, resume: bool) -> RunDir:
    """Create (or find, for --resume) the run directory and write its run.json."""
    if resume:
        rd = RunDir(out) if out else RunDir.latest_for(results_root, matrix.name)
        if rd is None or not rd.run_json.exists():
            raise UserError(f"nothing to resume: no unfinished run of matrix {matrix.name!r} under {results_root}"
                            if not out else "no run.json to resume", file=str(out) if out else None)
        old = rd.read_run()
        if old.get("matrix", {}).get("sha256") != matrix.sha256:
            raise UserError("the matrix file changed since this run started; resume needs the same matrix",
                            file=str(matrix.path))
        rd.update_run(status="running", resumed=utc_now_iso())
        return rd
    rd = RunDir.create(results_root, matrix.name, out)
    shutil.copyfile(matrix.path, rd.path / "matrix.yaml")
    prov = provenance()
    rd.update_run(schema="ssbench.run/1", run_id=rd.run_id, status="running", started=utc_now_iso(),
                  ended=None, ssbench=prov["ssbench"], matrix=matrix.to_dict(),
                  target=redact(target.describe()), software=prov["software"], host=prov["host"],
                  argv=redact(prov["argv"]), permutations_done=0,
                  permutations_total=len(matrix) * matrix.run.repetitions)
    return rd


def finish_run(rd: RunDir, status: str, lost: int = 0) -> None:
    rd.update_run(status=status, ended=utc_now_iso(), messages_lost=lost)
