"""A run's swarms on one Locust master and one set of workers: :class:`SwarmSeries`.

A master and its workers cost Locust's import and the workers' connection, token handshake and
claim (docs/findings/swarm-series.md). A series starts them at its first swarm and keeps them for
the run, like the web UI's master keeps its own for its sessions: the first swarm is the headless
master's own start, each next one the controller asks for at the master's heartbeat
(``Command.start``), once the last one has ended. Each swarm is planned, placed and recorded
exactly as the first (:mod:`harness.load.master`); workers without a slot in a swarm stay idle
for the next one.

Workers on client hosts (``RemoteWorkers``: ``ssbench worker``) are served the same way, each
connected from the run's first swarm to its end. A swarm that failed or was interrupted takes
its master and workers with it (killed); the next swarm starts a new set, as it does when a
process of the set died between two swarms (a client host's ``ssbench worker`` connects its next
Locust worker to the new master). So does one that needs a local worker the set does not have
(another initiator, more workers per initiator): the new set is started with every claim seen so
far. The processes' logs are the series' (``logs_dir``, for the run's lifetime); each swarm gets
its part of them in its own directory.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Callable

from .placement import slots
from .protocol import SwarmPlan, SwarmRequest
from .auth import token_from_env
from .swarm import RemoteWorkers, Swarm, SwarmResult

#: where a run keeps its series' Locust process logs, in its results directory (each repetition
#: gets its part of them in its own directory)
LOGS_DIR = ".locust"


class SwarmSeries:
    """One master and its workers (local, or on client hosts: ``remote``) for a run's swarms;
    :meth:`run` runs one swarm, :meth:`close` ends the series."""

    def __init__(self, logs_dir: Path, remote: RemoteWorkers | None = None):
        self.logs_dir = Path(logs_dir)
        self.remote = remote
        self.swarm: Swarm | None = None
        self.spawn_rate: float | None = None
        self.claims: set[tuple[int, int]] = set()     # every local slot a swarm of the run needed
        self.started = 0                              # master and worker sets started (1 when all went well)
        self._plan: SwarmPlan | None = None
        self._out: Path | None = None

    def _plan_for(self, _req: SwarmRequest) -> tuple[SwarmPlan, Path]:
        return self._plan, self._out

    def run(self, plan: SwarmPlan, out_dir: Path, spawn_rate: float, *,
            stop_event: threading.Event | None = None, on_started: Callable[[Swarm], None] | None = None,
            until: Callable[[], bool] | None = None, on_live: Callable[[dict], None] | None = None) -> SwarmResult:
        """One swarm to its end on the series' processes (started, or started again, as needed):
        ``until()`` true stops it early (the backlog fill); raises
        :class:`harness.load.swarm.SwarmFailed` when it cannot be trusted; ``interrupted`` when
        ``stop_event`` was set."""
        wanted = slots(plan.users, plan.workers_per_initiator)
        users = sum(s.users for s in wanted)
        self._plan, self._out = plan, Path(out_dir)
        sw = self.swarm
        if sw is not None and any(p.poll() is not None for p in sw.procs.values()):
            # a process of the set died between two swarms: the set goes, a new one serves this swarm
            self.swarm = None
            sw.close(grace=0)
        elif sw is not None and (spawn_rate != self.spawn_rate or not self._has_workers(sw, wanted)):
            self.close()
        if self.swarm is None:
            sw = self._start(wanted, users, spawn_rate, plan.worker_wait_seconds, on_live)
        else:
            sw.next_swarm(self._plan_for, users, spawn_rate, on_live)
        offsets = sw.log_offsets()   # the logs are the run's: a set started again appends
        try:
            if on_started is not None:
                on_started(sw)
            res = sw.wait(plan, stop_event or threading.Event(), until)
        except BaseException:
            self._discard(offsets)
            raise
        if res.interrupted:
            self._discard(offsets)
            return res
        self._copy_logs(sw, offsets)
        return res

    def _has_workers(self, sw: Swarm, wanted) -> bool:
        """Local workers: the set has every slot the swarm needs (client hosts' are placed as
        they come)."""
        return self.remote is not None or {(s.initiator, s.worker) for s in wanted} <= set(sw.local_claims)

    def _start(self, wanted, users: int, spawn_rate: float, worker_wait: float, on_live) -> Swarm:
        """A new master (and its local workers, with every claim seen so far)."""
        if self.remote is None:
            self.claims |= {(s.initiator, s.worker) for s in wanted}
        Swarm.wait_closed()   # the last set gone (a client hosts' master: its port free), its logs whole
        claims = sorted(self.claims)
        sw = self.swarm = Swarm(self.logs_dir, self._plan_for, users=users, spawn_rate=spawn_rate,
                                remote=self.remote, local_claims=claims, expected_workers=len(claims or wanted),
                                token=token_from_env() if self.remote else None, worker_wait=worker_wait,
                                on_live=on_live)
        self.spawn_rate = spawn_rate
        sw.start()
        self.started += 1
        return sw

    def _copy_logs(self, sw: Swarm, offsets: dict[str, int]) -> None:
        if self._out is not None and self._out.resolve() != self.logs_dir.resolve():
            sw.copy_logs(offsets, self._out)

    def _discard(self, offsets: dict[str, int]) -> None:
        """A failed or interrupted swarm: its processes go (killed), its part of their logs goes
        with its directory."""
        sw, self.swarm = self.swarm, None
        if sw is not None:
            sw.close()
            self._copy_logs(sw, offsets)

    def close(self) -> None:
        """End the series: the master quits (its workers with it) in the background; the run's
        end waits for it (:meth:`Swarm.wait_closed`)."""
        sw, self.swarm = self.swarm, None
        if sw is not None:
            sw.close_in_background()

