"""Host CPU and memory (psutil): client, server, each Locust worker, and the rest of the machine.

A worker near 100 % of a core marks a client-bound run; CPU used by other processes
(``other_cpu_percent``) or stolen by the hypervisor (``steal_percent``) above its threshold
flags the window ``noisy_host``: its numbers measured a shared machine.
"""

from __future__ import annotations

import os
import statistics

import psutil

from .. import cgroups
from ..results.summary import CLIENT_BOUND_CPU
from .base import Collector

#: mean CPU (percent of one core) taken by other processes over the window that flags it noisy
NOISY_OTHER_CPU = 25.0
#: mean CPU steal (percent of the machine) over the window that flags it noisy
NOISY_STEAL = 5.0


def thread_demand_ns(pid: int) -> dict[int, int] | None:
    """Per thread of ``pid``: nanoseconds on a CPU plus waiting for one (Linux's
    /proc/<pid>/task/<tid>/schedstat); None where the kernel does not say."""
    out = {}
    try:
        for task in os.scandir(f"/proc/{pid}/task"):
            with open(f"{task.path}/schedstat") as f:
                run, wait = f.read().split()[:2]
            out[int(task.name)] = int(run) + int(wait)
    except (OSError, ValueError):
        return None
    return out


class HostCollector(Collector):
    family = "host"

    def __init__(self):
        self._demand: dict[int, tuple[float, dict[int, int]]] = {}   # pid -> (when, ns per thread)
        self._procs: dict[int, psutil.Process] = {}
        self._ncpu = psutil.cpu_count() or 1
        #: remote servers (Telemetry.server_cpu_ms): name -> (when, cumulative CPU ms, CPUs)
        self._remote: dict[str, tuple[float, float, int]] = {}
        self._prev_times = psutil.cpu_times()
        #: the local server's processes' ns per thread at the last tick (_server_demand)
        self._server_ns: tuple[float, dict[int, dict[int, int]]] | None = None
        #: the local server's cgroup CPU quota (None: none), and its usage at the last tick
        self._quota: cgroups.CpuQuota | None = None
        self._quota_read = False
        self._quota_usage: tuple[float, float] | None = None
        psutil.cpu_percent(None)  # prime the system-wide counter

    def _proc(self, pid: int) -> psutil.Process | None:
        p = self._procs.get(pid)
        if p is None:
            try:
                p = psutil.Process(pid)
                p.cpu_percent(None)  # prime: the first call returns 0.0
            except psutil.Error:
                return None
            self._procs[pid] = p
        return p

    def _measure(self, pids) -> dict[int, tuple[float, float]]:
        """cpu percent (since this process's previous sample) and rss, once per pid per tick."""
        out = {}
        for pid in pids:
            p = self._proc(pid)
            if p is None:
                continue
            try:
                out[pid] = (p.cpu_percent(None), float(p.memory_info().rss))
            except psutil.Error:
                self._procs.pop(pid, None)
        return out

    def _machine(self) -> tuple[float | None, float]:
        """Busy CPU since the last tick in percent of one core, and steal in percent of the
        machine (from /proc/stat through psutil)."""
        cur = psutil.cpu_times()
        prev, self._prev_times = self._prev_times, cur

        def d(name):
            return max(0.0, getattr(cur, name, 0.0) - getattr(prev, name, 0.0))

        fields = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
        total = sum(d(f) for f in fields)   # guest time is already inside user
        if total <= 0:
            return None, 0.0
        busy = total - d("idle") - d("iowait")
        return busy / total * 100.0 * self._ncpu, d("steal") / total * 100.0

    def sample(self, ctx, now):
        procs = ctx.processes(now)
        server, client, workers = procs.server, procs.client, procs.workers
        m = self._measure(procs.ours)

        def total(pids, i):
            return sum(m[p][i] for p in pids if p in m)

        out = [("cpu_percent", "client", total(client, 0)), ("rss_bytes", "client", total(client, 1))]
        if server:       # a remote server's is _remote_cpu's (a 0 here read as a local server)
            out += [("cpu_percent", "server", total(server, 0)), ("rss_bytes", "server", total(server, 1))]
            out += self._quota_cpu(min(server), now)
        for name, pid in sorted(workers.items()):
            out.append(("cpu_percent", name, total([pid], 0)))
            demand = self._cpu_demand(pid, now)
            if demand:
                out.append(("cpu_demand", name, min(100.0, 100 * max(demand))))
        demand = self._server_demand(server, now) if server else None
        if demand is not None:
            out.append(("cpu_demand", "server", demand))
        out.append(("system_cpu_percent", "", psutil.cpu_percent(None)))
        busy, steal = self._machine()
        if busy is not None:
            mine = total(client, 0) + total(server, 0)
            out.append(("other_cpu_percent", "", max(0.0, busy - mine)))
            out.append(("steal_percent", "", steal))
        out.append(("system_memory_percent", "", psutil.virtual_memory().percent))
        if not server:
            out += self._remote_cpu(ctx, now)
        return out

    def _remote_cpu(self, ctx, now: float) -> list[tuple[str, str, float]]:
        """Remote servers' CPU since the last tick, percent of one core as the local server's
        processes (key ``server``: their sum; ``server.<name>``: each), from their cumulative
        CPU milliseconds. A counter that went back (its statistics were reset) skips a tick."""
        out, total = [], None
        for name, (ms, cpus) in sorted(ctx.call(ctx.telemetry.server_cpu_ms).items()):
            prev = self._remote.get(name)
            self._remote[name] = (now, ms, cpus)
            if prev is None or now <= prev[0] or ms < prev[1]:
                continue
            pct = (ms - prev[1]) / ((now - prev[0]) * 1000.0) * 100.0
            out.append(("cpu_percent", f"server.{name}", pct))
            total = (total or 0.0) + pct
        if total is not None:
            out.append(("cpu_percent", "server", total))
        return out

    def _cpu_demand(self, pid: int, now: float) -> list[float] | None:
        """Per thread of ``pid`` since the last tick: the share of the time it was on a CPU or
        waiting for one. A CPU-bound process is near 1 even on a machine so busy that it gets far
        less than a core (its cpu_percent then stays low). None: no previous tick, or no figure."""
        cur = thread_demand_ns(pid)
        prev = self._demand.get(pid)
        if cur is None:
            return None
        self._demand[pid] = (now, cur)
        if prev is None or now <= prev[0]:
            return None
        return [max(0, ns - prev[1].get(tid, ns)) / ((now - prev[0]) * 1e9) for tid, ns in cur.items()]

    def _quota_cpu(self, pid: int, now: float) -> list[tuple[str, str, float]]:
        """Under a cgroup CPU quota over the server (a container's --cpus), the CPU its cgroup
        used since the last tick, percent of one core (key ``server_quota``): everything in the
        cgroup counts, since everything in it shares the quota."""
        if not self._quota_read:
            self._quota, self._quota_read = cgroups.quota_of(pid), True
        used = self._quota.usage_seconds() if self._quota else None
        if used is None:
            return []
        prev, self._quota_usage = self._quota_usage, (now, used)
        if prev is None or now <= prev[0] or used < prev[1]:
            return []
        return [("cpu_percent", "server_quota", (used - prev[1]) / (now - prev[0]) * 100.0)]

    def _server_demand(self, pids: set[int], now: float) -> float | None:
        """The server's processes together since the last tick: percent of one core on a CPU
        or waiting for one. A process (or thread) started since then counts from its start, all
        of its time being in the interval: a server whose processes come and go (connections,
        activation tasks, autovacuum) still has its figure. None on the first tick."""
        prev, seen = self._server_ns, {}
        total = 0
        for pid in pids:
            cur = thread_demand_ns(pid)
            if cur is None:          # ended meanwhile: its last part goes with it
                continue
            seen[pid] = cur
            before = prev[1].get(pid, {}) if prev else {}
            total += sum(max(0, ns - before.get(tid, 0)) for tid, ns in cur.items())
        self._server_ns = (now, seen)
        if prev is None or now <= prev[0]:
            return None
        return 100.0 * total / ((now - prev[0]) * 1e9)

    def _server_cpus(self, ctx) -> int:
        """CPUs the local database server may run on (its affinity: run.pin_cpus narrows it)."""
        for pid in ctx.call(ctx.telemetry.server_pids)[:1]:
            try:
                return len(psutil.Process(pid).cpu_affinity()) or self._ncpu
            except (psutil.Error, AttributeError, OSError):
                break
        return self._ncpu

    def summary_fields(self, ctx, window):
        def mean(v):
            return round(statistics.fmean(v), 2) if v else None

        worker_cpu: dict[str, list[float]] = {}
        for s in window.samples:
            if s.family == self.family and s.metric == "cpu_percent" and s.key.startswith("worker.") \
                    and window.start <= s.ts < window.end:
                worker_cpu.setdefault(s.key, []).append(s.value)
        worker_mean = {k: statistics.fmean(v) for k, v in worker_cpu.items()}
        demand = [mean(window.series(self.family, "cpu_demand", k)) for k in worker_cpu]
        server = window.series(self.family, "cpu_percent", "server")
        server_mean = mean(server)
        if self._remote:     # remote servers: the busiest one's share of its own CPUs
            shares = [mean(window.series(self.family, "cpu_percent", f"server.{n}")) / (100.0 * cpus)
                      for n, (_, _, cpus) in self._remote.items()
                      if cpus and window.series(self.family, "cpu_percent", f"server.{n}")]
            utilization = max(shares, default=None)
        else:                # the diagnosis' server-CPU evidence: the share of the server's CPUs in use,
            utilization = server_mean / (100.0 * self._server_cpus(ctx)) if server_mean is not None else None
            used = mean(window.series(self.family, "cpu_percent", "server_quota"))
            if utilization is not None and used is not None and self._quota:   # or of its quota
                utilization = max(utilization, used / (100.0 * self._quota.cpus))
        other = mean(window.series(self.family, "other_cpu_percent"))
        steal = mean(window.series(self.family, "steal_percent"))
        host = mean(window.series(self.family, "system_cpu_percent"))
        return {"server_on_host": bool(server) and not self._remote,
                "server_cpu_utilization": round(utilization, 4) if utilization is not None else None,
                "host_cpu_utilization": round(host / 100.0, 4) if host is not None else None,
                "host_cpus": self._ncpu,
                "server_cpu_quota": self._quota.cpus if self._quota and not self._remote else None,
                "client_cpu_demand": max((d for d in demand if d is not None), default=None),
                "server_cpu_demand": mean(window.series(self.family, "cpu_demand", "server")),
                "client_cpu_percent": mean(window.series(self.family, "cpu_percent", "client")),
                "other_cpu_percent": other, "steal_percent": steal,
                "noisy_host": (other or 0.0) > NOISY_OTHER_CPU or (steal or 0.0) > NOISY_STEAL,
                "server_cpu_percent": server_mean,
                "worker_cpu_percent": {k: round(v, 1) for k, v in worker_mean.items()},
                "client_bound": any(v >= CLIENT_BOUND_CPU for v in worker_mean.values())}
