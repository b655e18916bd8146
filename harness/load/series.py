"""A run's swarms on one Locust master and one set of workers: :class:`SwarmSeries`.

``ssbench run`` used to start a Locust master and its workers for every repetition
(:meth:`harness.load.swarm.Swarm.run_one`): two or more Python processes, each paying Locust's
import and its workers' connection and claim again, most of a second of the repetition and
about 0.7 CPU-second per process. A series starts them at its first swarm and keeps them for
the run, like the web UI's master keeps its own for its sessions: the first swarm is the
headless master's own start, each next one the controller asks for at the master's heartbeat
(``Command.start``), once the last one has ended. Each swarm is planned, placed and recorded
exactly as a single one (:mod:`harness.load.master`), with ``single`` False so that workers
without a slot in this swarm stay idle for the next one.

A swarm that failed or was interrupted takes its master and workers with it (killed, as a
single swarm's are); the next swarm starts a new set, as it does when a process of the set died
between two swarms. So does one that needs a local worker the
set does not have (another initiator, more workers per initiator): the new set is started with
every claim seen so far. The processes' logs are the series' (``logs_dir``, for the run's
lifetime); each swarm gets its part of them in its own directory.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path
from typing import Callable

from .placement import slots
from .protocol import Progress, SwarmPlan, SwarmRequest
from .swarm import Swarm, SwarmResult

#: where a run keeps its series' Locust process logs, in its results directory (each repetition
#: gets its part of them in its own directory)
LOGS_DIR = ".locust"


class SwarmSeries:
    """One master and its local workers for a run's swarms; :meth:`run` is
    :meth:`Swarm.run_one`'s equivalent, :meth:`close` ends the series. Local workers only: with
    workers on client hosts each repetition keeps a master of its own (``ssbench worker`` starts
    a worker per swarm)."""

    def __init__(self, logs_dir: Path):
        self.logs_dir = Path(logs_dir)
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
            until: Callable[[], bool] | None = None,
            on_progress: Callable[[Progress], None] | None = None) -> SwarmResult:
        """One swarm to its end on the series' processes (started, or started again, as needed);
        raises :class:`harness.load.swarm.SwarmFailed` as :meth:`Swarm.run_one` does."""
        plan = replace(plan, single=False)     # the master stays, workers without a slot wait
        wanted = slots(plan.users, plan.workers_per_initiator)
        need = {(s.initiator, s.worker) for s in wanted}
        users = sum(s.users for s in wanted)
        self._plan, self._out = plan, Path(out_dir)
        sw = self.swarm
        if sw is not None and any(p.poll() is not None for p in sw.procs.values()):
            # a process of the set died between two swarms: the set goes, a new one serves this swarm
            self.swarm = None
            sw.close(grace=0)
        elif sw is not None and (spawn_rate != self.spawn_rate or not need <= set(sw.local_claims)):
            self.close()
        if self.swarm is None:
            self.claims |= need
            Swarm.wait_closed()   # the last set gone, its logs whole
            claims = sorted(self.claims)
            sw = self.swarm = Swarm(self.logs_dir, self._plan_for, users=users, spawn_rate=spawn_rate,
                                    local_claims=claims, expected_workers=len(claims),
                                    worker_wait=plan.worker_wait_seconds, on_progress=on_progress)
            self.spawn_rate = spawn_rate
            sw.start()
            offsets = sw.log_offsets()   # the logs are the run's: a set started again appends
            self.started += 1
        else:
            sw = self.swarm
            offsets = sw.log_offsets()
            sw.next_swarm(self._plan_for, users, spawn_rate, on_progress)
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
        sw.copy_logs(offsets, self._out)
        return res

    def _discard(self, offsets: dict[str, int]) -> None:
        """A failed or interrupted swarm: its processes go (killed, as a single swarm's), its
        part of their logs goes with its directory."""
        sw, self.swarm = self.swarm, None
        if sw is not None:
            sw.close()
            sw.copy_logs(offsets, self._out)

    def close(self) -> None:
        """End the series: the master quits (its workers with it) in the background; the run's
        end waits for it (:meth:`Swarm.wait_closed`)."""
        sw, self.swarm = self.swarm, None
        if sw is not None:
            sw.close_in_background()


__all__ = ["LOGS_DIR", "SwarmSeries"]
