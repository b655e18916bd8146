"""Shared pieces of the load benchmarks (send_vs_pgbench.py, harness_ceiling.py): the embedded
target set up for N clients, one real Locust swarm measured over its window (SEND rate and the
worker processes' CPU per SEND, from /proc; the master's and this controller process's too),
optionally with the live metrics endpoint on (the master keeping the live figures of its merge
of the workers' deltas and posting them, this process keeping the live state and serving it to
a scraper every second),
and pgbench on the same server (rate and its CPU).

These are PostgreSQL numbers from an emulation, never SQL Server's.
"""

from __future__ import annotations

import contextlib
import os
import re
import resource
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(REPO))

from harness.load.protocol import SwarmPlan  # noqa: E402
from harness.load.spec import SwarmSpec  # noqa: E402
from harness.load.series import SwarmSeries  # noqa: E402
from harness.load.swarm import Swarm, SwarmFailed  # noqa: E402
from harness.load.window import merge_workers  # noqa: E402
from harness.matrix import BrokerSettings  # noqa: E402
from harness.targets.embedded.server import bin_dir  # noqa: E402
from harness.targets.embedded.target import EmbeddedTarget  # noqa: E402

_TICK = os.sysconf("SC_CLK_TCK")


@dataclass
class Measured:
    rate: float                    # SEND/s over the measured window
    cpu_us_per_send: float | None  # client CPU (worker processes, or pgbench) per SEND
    cpu_cores: float | None = None  # that CPU in cores (CPU seconds per second)
    #: the Locust master's and this controller process's CPU per SEND over the same window
    master_us_per_send: float | None = None
    controller_us_per_send: float | None = None


@contextlib.contextmanager
def embedded_target(clients: int, profile: str = "durable", initiators: int = 1):
    """The default embedded target ($SSBENCH_PGDATA picks its server), its run lock held,
    provisioned, prepared, ``clients`` dialogs per initiator, warmed up, broker running."""
    target = EmbeddedTarget()
    lock = target.run_lock(f"benchmark {Path(sys.argv[0]).name}")
    lock.__enter__()
    target.provision(initiators)
    target.prepare(initiators, profile, BrokerSettings(max_queue_readers=2, waitfor_timeout_ms=1000,
                                                       monitor_interval_seconds=1))
    target.start()
    try:
        for i in range(1, initiators + 1):
            target.create_dialogs(i, clients, 1)
            target.warm_up(i)
        target.drain(60)
        yield target
    finally:
        target.stop()
        target.close()
        lock.__exit__(None, None, None)


def proc_cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` (and its threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


class _CpuWindow(threading.Thread):
    """Samples the workers' CPU at the measured window's start and end (known once the master
    has reported spawn_complete)."""

    def __init__(self, swarm: Swarm, warmup: float, seconds: float):
        super().__init__(daemon=True)
        self.swarm, self.warmup, self.seconds = swarm, warmup, seconds
        self.result: tuple[float, float] | None = None    # (cpu seconds, wall seconds)
        self.others: tuple[float, float] | None = None    # (master, this process) cpu seconds

    def run(self) -> None:
        deadline = time.time() + 120
        while time.time() < deadline:
            cur = self.swarm.current
            spawned = cur.facts.get("spawn_complete") if cur is not None else None
            if spawned:
                break
            time.sleep(0.05)
        else:
            return
        pids = list(self.swarm.worker_pids().values())
        master = self.swarm.procs["master"].pid
        start, end = spawned + self.warmup, spawned + self.warmup + self.seconds
        time.sleep(max(0.0, start - time.time()))
        try:
            t0, c0 = time.time(), sum(proc_cpu_seconds(p) for p in pids)
            m0, s0 = proc_cpu_seconds(master), proc_cpu_seconds(os.getpid())
            time.sleep(max(0.0, end - time.time()))
            t1, c1 = time.time(), sum(proc_cpu_seconds(p) for p in pids)
            m1, s1 = proc_cpu_seconds(master), proc_cpu_seconds(os.getpid())
        except (OSError, IndexError):
            return
        self.result = (c1 - c0, t1 - t0)
        self.others = (m1 - m0, s1 - s0)


class _Scraper(threading.Thread):
    """Scrapes a metrics endpoint every ``every`` seconds (a Prometheus stand-in, busier than
    Prometheus's default 15 s)."""

    def __init__(self, url: str, every: float = 1.0):
        super().__init__(daemon=True)
        self.url, self.every, self.stop, self.scrapes = url, every, threading.Event(), 0

    def run(self) -> None:
        import urllib.request

        while not self.stop.wait(self.every):
            with urllib.request.urlopen(self.url, timeout=10) as r:
                r.read()
            self.scrapes += 1


@contextlib.contextmanager
def live_metrics(name: str):
    """The live metrics endpoint on a free loopback port, scraped every second: yields a
    repetition's feed of its real LiveState (its ``client`` is the swarm's ``on_live``)."""
    from harness.metrics.live import LiveState
    from harness.metrics.server import Endpoint
    from harness.metrics.settings import EndpointSettings

    m = Endpoint(LiveState(command="benchmark"), EndpointSettings(port=0, linger_seconds=0)).start()
    m.live.begin_run("benchmark", name)
    feed = m.live.repetition("benchmark", name, 1)
    scraper = _Scraper(m.url)
    scraper.start()
    try:
        yield feed
    finally:
        scraper.stop.set()
        scraper.join(10)
        m.close()


def ssbench(target, sender_specs: dict[str, dict], threads: int, payload: int, seconds: float,
            warmup: float, work: Path, mode: str = "auto", workers_per_initiator: int = 1,
            report_interval: float | None = None, metrics: float = 0.0) -> Measured:
    """One real swarm (a master and ``workers_per_initiator`` Locust workers per entry of
    ``sender_specs``, ``threads`` users per entry) in send mode ``mode``; every user must be
    sending through the window and no SEND may fail. ``metrics`` > 0: the live metrics endpoint
    on, each worker sending its delta every ``metrics`` seconds (as a run with
    ``--metrics-port`` and that sample interval does; else every second)."""
    old = dict(os.environ)
    os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO), str(BENCH_DIR)])
    users = {k: threads for k in sender_specs}
    spec = SwarmSpec(sender_specs=sender_specs, payload_bytes=payload, usable=dict(users), users=dict(users),
                     send_mode=mode, sample_interval_seconds=metrics or 1.0,
                     **({"report_interval_seconds": report_interval} if report_interval else {}))
    plan = SwarmPlan(spec=spec, users=dict(users), workers_per_initiator=workers_per_initiator,
                     warmup_seconds=warmup, planned_seconds=seconds,
                     live_window=[warmup, seconds] if metrics else None)
    cpu: list[_CpuWindow] = []

    def started(swarm: Swarm) -> None:
        cpu.append(_CpuWindow(swarm, warmup, seconds))
        cpu[0].start()

    try:
        with (live_metrics(Path(work).name) if metrics else contextlib.nullcontext()) as feed:
            with contextlib.closing(SwarmSeries(Path(work))) as series:
                res = series.run(plan, Path(work), 1000, on_started=started,
                                 on_live=feed.client if feed is not None else None)
    except SwarmFailed as e:
        raise SystemExit(f"the Locust swarm did not run: {e}") from None
    finally:
        os.environ.clear()
        os.environ.update(old)
    if feed is not None:    # the live totals are the recordings' (every delta arrived)
        live_total = sum(n for *_, n in feed.rep.client.get("sends", ()))
        if live_total != merge_workers(res.worker_files, 0, 1).sends_total:
            raise SystemExit(f"the live SEND total {live_total} is not the recordings'")
    cpu[0].join(5)
    n = len(sender_specs)
    start = res.spawn_complete + warmup
    wd = merge_workers(res.worker_files, start, start + seconds)
    if wd.errors_total:
        raise SystemExit(f"SEND errors in the swarm: {wd.error_samples[:3]}")
    if wd.users_active != n * threads:
        raise SystemExit(f"only {wd.users_active} of {n * threads} Locust users were sending through the window")
    per = cores = master = controller = None
    result = cpu[0].result
    if result and result[1] > 0 and wd.rate > 0:
        cores = result[0] / result[1]
        per = cores / wd.rate * 1e6
        sends = wd.rate * result[1]
        master, controller = (c / sends * 1e6 for c in cpu[0].others)
    return Measured(wd.rate, per, cores, master, controller)


def pgbench(target, clients: int, payload: int, seconds: float, work: Path, sql: str | None = None) -> Measured:
    """pgbench (-M prepared, ``clients`` clients, 2 threads) running the embedded SEND on each
    client's own dialog, or ``sql``; its rate and its own CPU per transaction."""
    info = target.info
    if sql is None:
        body = ("ssbench-payload-" * (payload // 16 + 1))[:payload].encode().hex()
        sql = ("\\set k :client_id + 1\n"
               f"SELECT ssb.send((SELECT handle FROM ssb.dialogs WHERE k = :k), '\\x{body}'::bytea);\n")
    Path(work).mkdir(parents=True, exist_ok=True)
    script = Path(work) / "pgbench.sql"
    script.write_text(sql if sql.endswith("\n") else sql + "\n")
    script.chmod(0o644)
    Path(work).chmod(0o755)
    cmd = [str(bin_dir() / "pgbench"), "-n", "-M", "prepared", "-c", str(clients), "-j", "2",
           "-T", str(int(seconds)), "-f", str(script), "-h", str(info.socket_dir), "-p", str(info.port),
           "-U", "postgres", target.initiator_db(1)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 120)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise SystemExit(f"pgbench failed: {out.stderr.strip()}")
    m = re.search(r"tps = ([\d.]+) \(without initial connection time\)", out.stdout)
    n = re.search(r"number of transactions actually processed: (\d+)", out.stdout)
    if not m or not n:
        raise SystemExit(f"cannot read pgbench's tps:\n{out.stdout}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    count = int(n.group(1))
    return Measured(float(m.group(1)), cpu / count * 1e6 if count else None, cpu / seconds)
