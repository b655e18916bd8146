"""Host CPU and memory (psutil): the load generators (client) and the database server's
processes on this host (server), plus each Locust worker separately (to spot a client-bound
run: one worker near 100% of a core)."""

from __future__ import annotations

import os

import psutil

from .base import Collector


class HostCollector(Collector):
    family = "host"

    def __init__(self):
        self._procs: dict[int, psutil.Process] = {}
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

    def sample(self, ctx, now):
        server = set(ctx.call(ctx.target.server_pids))
        workers = ctx.client_pids()
        me = psutil.Process(os.getpid())
        try:
            family = {me.pid} | {c.pid for c in me.children(recursive=True)}
        except psutil.Error:
            family = {me.pid}
        client = family - server
        m = self._measure(client | server | set(workers.values()))

        def total(pids, i):
            return sum(m[p][i] for p in pids if p in m)

        out = [("cpu_percent", "client", total(client, 0)), ("rss_bytes", "client", total(client, 1)),
               ("cpu_percent", "server", total(server, 0)), ("rss_bytes", "server", total(server, 1))]
        for name, pid in sorted(workers.items()):
            out.append(("cpu_percent", name, total([pid], 0)))
        out.append(("system_cpu_percent", "", psutil.cpu_percent(None)))
        out.append(("system_memory_percent", "", psutil.virtual_memory().percent))
        return out
