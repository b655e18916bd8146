"""The Locust master's side of the swarm protocol (:mod:`harness.load.protocol`).

Installed on every ssbench Locust master, headless or with the web UI, as ``environment.ssbench``
(:class:`MasterSide`) from Locust's ``init`` event. For each swarm it asks the controller for a
plan, places the connected workers on the plan's slots by their claims (missing workers fail
the swarm), sends each its ``Assignment`` before the spawn, times a headless plan's windows from
the end of spawning (every user spawned and past its first connect), merges the workers' deltas
once (:class:`harness.load.merge.SwarmMerge`), posts each slot's recording to the controller (it
writes no file) and reports ``ended`` with Locust's statistics once every recording is in; then it
waits for the next swarm or a quit.

A heartbeat posts ``Status`` every :data:`HEARTBEAT_S`; the reply may stop the swarm or quit.
A placed worker Locust marks missing is reported at once, and a controller silent for
:data:`CONTROLLER_SILENT_S` makes the master quit. Locust's documented extension points only,
except the token guard (:class:`harness.load.auth.MasterGuard`), which must see a worker's
``client_ready`` before Locust admits it (docs/architecture.md, "The swarm protocol").
"""

from __future__ import annotations

import logging
import os
import sys
import time

import gevent
from gevent.event import Event

from .auth import MasterGuard
from .control import CONTROL_ENV, ControlClient
from .merge import SwarmMerge
from .placement import Slot, assign, make_dispatcher, rescale, slots
from .. import environment as envvars
from .protocol import (LOCUST_CSV, LOCUST_TYPES, WELCOME, Assignment, Claim, Command, Delta, Failure, Notice, Recording, Status,
                       SwarmPlan, SwarmRequest)

log = logging.getLogger("ssbench.master")

#: after Locust's end of spawning, at most, for every user's first connect (:meth:`MasterSide._open_window`)
READY_WAIT_S = 30.0
STOP_MARGIN_S = 0.5          # past the windows: the window starts at a recording-bucket boundary
STOPPED_POLL_S = 0.05        # after the stop: how often to look whether every worker has stopped
RECORDING_WAIT_S = 60.0      # after the stop, for every placed worker's recording
MISSING_GRACE_S = 15.0       # after the stop, for the recording of a worker Locust marked missing
HEARTBEAT_S = 0.25
CONTROLLER_SILENT_S = 10.0
QUIT_WAIT_S = 2.0            # Locust's shutdown with no swarm running: at most, for the workers to leave


class MasterSide:
    def __init__(self, environment, control: ControlClient, token: str):
        from .locust_stats import log_delta   # imports locust: in the master process only

        self._log_delta = log_delta
        self.env = environment
        self.runner = environment.runner
        self.control = control
        self.guard = MasterGuard(self.runner, token, on_refused=self._refused).install()
        self.claims: dict[str, Claim] = {}
        self.plan: SwarmPlan | None = None
        self.merge: SwarmMerge | None = None     # this swarm's deltas, merged once
        self.placed: dict[str, Slot] = {}        # client id -> slot
        self.recorded: set[str] = set()          # slot names whose recording was forwarded
        self.forwarding: set[str] = set()        # slot names whose recording is being forwarded
        self.unslotted: set[str] = set()         # client ids told they have no slot in this swarm
        self.lost: set[str] = set()              # slot names whose worker went missing while it ran
        self.phase = "idle"
        self.facts: dict = {}
        self.opened = False                      # the web UI prepared this start already
        self._preparing = None                   # headless: the greenlet placing from the start
        self._prepared: str | None = None
        self._timer = None
        self._ready: dict[str, float] = {}
        self._spawned: tuple[float, int] | None = None
        self._ending = False                     # the swarm's end is being collected
        self._last_answer = time.monotonic()
        #: headless: every swarm is started by the controller (the first by Locust's headless
        #: start, the next ones of a run's series by the heartbeat's Command.start), never by a UI
        self.headless = bool(getattr(environment.parsed_options, "headless", False))
        self._start_seen = 0                     # the last Command.start taken
        self._locust_stopped = Event()           # Locust fired test_stop for the last swarm started
        self._locust_stopped.set()
        #: workers Locust told to stop that have not said they are ready again (_on_test_stopping)
        self._restarting: set[str] = set()
        runner, events = self.runner, environment.events
        environment.dispatcher_class = make_dispatcher(self._quotas)
        runner.register_message(LOCUST_TYPES["claim"], self._on_claim)
        runner.register_message(LOCUST_TYPES["delta"], self._on_delta)
        runner.register_message(LOCUST_TYPES["failure"], self._on_worker_failure)
        events.worker_connect.add_listener(self._on_connect)
        events.test_start.add_listener(self._on_test_start)
        events.spawning_complete.add_listener(self._on_spawned)
        events.test_stopping.add_listener(self._on_test_stopping)
        events.test_stop.add_listener(self._on_test_stop)
        # Locust's own test_stop only (_on_test_stop is also called early, by _end_when_stopped)
        events.test_stop.add_listener(lambda **_kw: self._locust_stopped.set())
        events.quitting.add_listener(self._on_quitting)
        gevent.spawn(self._heartbeat)

    # ------------------------------------------------------------------ workers
    def _on_connect(self, client_id, **_kw) -> None:
        self._restarting.discard(client_id)
        self.runner.send_message(WELCOME, None, client_id=client_id)

    def _on_claim(self, environment, msg, **_kw) -> None:
        try:
            self.claims[msg.node_id] = Claim.from_wire(msg.data)
        except ValueError as e:
            log.warning("worker %s: %s", msg.node_id, e)
            return

    def _no_slot(self, cid: str) -> None:
        """A worker with no slot in this swarm (said once): it waits for the next one."""
        if cid in self.unslotted:
            return
        self.unslotted.add(cid)
        claim = self.claims.get(cid)
        log.info("worker %s (%s) has no slot in this swarm: it waits for the next one", cid,
                 claim.host if claim else "?")

    def _refused(self, worker: str, reason: str) -> None:
        self._post("/notice", Notice(text=f"refused worker {worker}: {reason}"))

    def _connected_claims(self) -> dict[str, Claim]:
        """The workers a swarm may be placed on: connected, and not still stopping the last
        swarm (a worker that went missing meanwhile is not waited for)."""
        from locust.runners import STATE_MISSING

        clients = self.runner.clients
        self._restarting = {c for c in self._restarting if c not in clients or clients[c].state != STATE_MISSING}
        return {cid: c for cid, c in self.claims.items() if cid in clients and cid not in self._restarting}

    # ------------------------------------------------------------------ 1-3. open a swarm
    def open_swarm(self, users: int, spawn_rate: float, form: dict | None = None) -> str | None:
        """Ask the controller for a plan, place the workers and send their assignments. Returns
        None when the swarm may spawn, else why not (one sentence)."""
        if self._preparing is not None:            # started at init (headless): its outcome
            self._preparing.join()
            self._preparing, why = None, self._prepared
        else:
            why = self._plan_and_place(users, spawn_rate, form)
        if why is not None:
            return why
        plan, got = self.plan, self.placed
        for cid in [c for c in list(self.runner.clients.keys()) if c not in got]:
            self._no_slot(cid)
        for cid, s in got.items():
            self.runner.send_message(LOCUST_TYPES["assignment"], Assignment(
                spec=plan.spec, initiator=s.initiator, worker=s.worker, users=s.users,
                first_user=s.first_user).to_wire(), client_id=cid)
        self.facts["workers"] = {s.name: {"host": self.claims[c].host, "pid": self.claims[c].pid, "client_id": c}
                                 for c, s in got.items()}
        if self.merge is not None and self.merge.live is not None:
            self.merge.live.place((s.initiator, s.worker, self.claims[c].host, s.users) for c, s in got.items())
        self._set_phase("spawning")
        return None

    def _plan_and_place(self, users: int, spawn_rate: float, form: dict | None) -> str | None:
        """The plan (asked once per swarm) and every slot placed, waiting up to the plan's worker
        wait; a headless master does this from its start (:meth:`prepare_headless`), so missing
        workers are named even while Locust itself still waits for them."""
        self.plan, self.merge, self.placed, self.recorded, self.facts = None, None, {}, set(), {}
        self.forwarding = set()
        self.unslotted, self.lost = set(), set()
        self._ready: dict[str, float] = {}      # slot name -> its Delta.ready_at
        self._spawned: tuple[float, int] | None = None   # Locust's spawning_complete: (epoch, users)
        self._ending = False
        self._set_phase("placing")
        reply = self._post("/swarm", SwarmRequest(users=users, spawn_rate=spawn_rate, form=form or {}),
                           timeout=3600)
        plan = SwarmPlan.from_wire(reply) if isinstance(reply, dict) and reply.get("type") == SwarmPlan.TYPE \
            else SwarmPlan(error=str((reply or {}).get("error") or "no plan from the controller"))
        if plan.error or plan.spec is None:
            self._set_phase("idle")
            return self._fail("plan", f"the controller could not prepare the swarm: {plan.error}")
        self.plan, self.merge = plan, SwarmMerge(plan)
        wanted = slots(plan.users, plan.workers_per_initiator)
        deadline = time.monotonic() + plan.worker_wait_seconds
        while True:
            got = assign(self._connected_claims(), wanted)
            if len(got) == len(wanted) or time.monotonic() > deadline:
                break
            gevent.sleep(0.05)
        if len(got) < len(wanted):
            return self._fail("missing", self._missing_text(wanted, got))
        self.placed = got
        return None

    def prepare_headless(self) -> None:
        """A headless master: ask for the plan and place the workers from the start."""
        runner = self.runner
        opts = self.env.parsed_options

        def run():
            self._prepared = self._plan_and_place(int(opts.num_users or 0), float(opts.spawn_rate or 1), None)
            if self._prepared is not None:
                runner.quit()

        self._preparing = gevent.spawn(run)
        # called from ``init``: waiting here for the placement lets Locust's first look for its
        # expected workers (at once, then once a second) find them. A failed placement has quit
        # the runner already.
        self._preparing.join()

    def _missing_text(self, wanted: list[Slot], got: dict[str, Slot]) -> str:
        missing = [s for s in wanted if s not in got.values()]
        by_init: dict[int, list[int]] = {}
        for s in missing:
            by_init.setdefault(s.initiator, []).append(s.worker)
        n = self.plan.workers_per_initiator
        parts = [f"initiator {i}: worker(s) {', '.join(map(str, ws))} of {min(n, self.plan.users_of(i))}"
                 for i, ws in sorted(by_init.items())]
        text = (f"{len(missing)} of {len(wanted)} Locust worker(s) missing after "
                f"{self.plan.worker_wait_seconds:g}s: " + "; ".join(parts))
        there = [f"{self.claims[c].host} (initiator {s.initiator}, worker {s.worker})" for c, s in sorted(got.items())]
        if there:
            text += "; connected: " + ", ".join(there)
        unplaced = [f"{c.host} claiming initiator {c.initiator}" + (f" worker {c.worker}" if c.worker else "")
                    for cid, c in self._connected_claims().items() if cid not in got]
        if unplaced:
            text += "; claims that fit no free slot: " + ", ".join(unplaced)
        stopping = [f"{self.claims[c].host} (pid {self.claims[c].pid})" for c in sorted(self._restarting)
                    if c in self.claims and c in self.runner.clients]
        if stopping:
            text += "; still stopping the last swarm: " + ", ".join(stopping)
        if self.guard.refused:
            text += "; refused: " + ", ".join(f"{r['worker']} ({r['reason']})" for r in self.guard.refused[-5:])
        return text

    def _quotas(self, total: int) -> dict[str, int]:
        """Users per placed worker (the dispatcher's question)."""
        if self.plan is None or not self.placed:
            return {}
        if total == sum(s.users for s in self.placed.values()):
            return {cid: s.users for cid, s in self.placed.items()}
        return rescale(self.placed, total, self.plan.workers_per_initiator)

    def _on_test_start(self, **_kw) -> None:
        self._locust_stopped.clear()
        if self.opened:                 # the web UI's start request opened it already
            self.opened = False
            return
        runner = self.runner
        why = self.open_swarm(int(runner.target_user_count or 0), float(runner.spawn_rate or 1))
        if why is not None:
            gevent.spawn_later(0.1, runner.stop)

    # ------------------------------------------------------------------ 4. windows
    def _on_spawned(self, user_count, **_kw) -> None:
        if self.plan is None or self._spawned is not None:
            return
        self._spawned = (time.time(), user_count)
        plan = self.plan
        gevent.spawn_later(READY_WAIT_S, lambda: self.plan is plan and self._open_window(time.time()))
        self._open_window()

    def _open_window(self, forced: float | None = None) -> None:
        """The window's origin (the fact ``spawn_complete``, the warm-up counted from it): once
        Locust has spawned every user and each user has tried its first connect (each worker's
        ``Delta.ready_at``), so a slow connect on a loaded host is warm-up, not measured idle
        time; ``forced``: at most :data:`READY_WAIT_S` after the spawn (a worker that never
        says: its idle users flag the window, as before)."""
        if self._spawned is None or "spawn_complete" in self.facts:
            return
        ready = [self._ready.get(s.name) for s in self.placed.values()]
        if forced is None and (None in ready or not ready):
            return
        origin = forced if forced is not None else max([self._spawned[0], *ready])
        self.facts.update(spawn_complete=origin, user_count=self._spawned[1])
        self._live_window()
        self._set_phase("running")
        if self.plan.planned_seconds > 0:
            self._timer = gevent.spawn_later(max(0.0, origin + self.plan.warmup_seconds + self.plan.planned_seconds
                                                 + STOP_MARGIN_S - time.time()), self.stop_swarm)

    def stop_swarm(self) -> None:
        if self.phase in ("spawning", "running"):
            self._stop_requested()
            self._set_phase("stopping")
            # on a greenlet of its own: Locust's stop waits for the workers' users and then fires
            # test_stop, and the swarm's end kills the window timer that may be calling this
            gevent.spawn(self.runner.stop)

    # ------------------------------------------------------------------ 5. recordings and the end
    def _stop_requested(self) -> None:
        self.facts.setdefault("stop_requested", time.time())
        self._live_window()

    def _live_window(self) -> None:
        if self.merge is not None and self.merge.live is not None:
            self.merge.live.window(self.facts.get("spawn_complete"), self.facts.get("stop_requested"))

    def _on_delta(self, environment, msg, **_kw) -> None:
        """A placed worker's delta of this swarm (stamped with the slot it was assigned,
        whatever it says), merged once: its recording, Locust's statistics, the live figures.
        Its last one completes the recording, which goes to the controller."""
        try:
            d = Delta.from_wire(msg.data)
        except ValueError as e:
            log.warning("worker %s: %s", msg.node_id, e)
            return
        slot = self.placed.get(msg.node_id)
        if self.merge is None or slot is None or d.swarm_id != self.merge.swarm_id:
            log.info("dropped a delta from %s: not a worker of this swarm", msg.node_id)
            return
        d.initiator, d.worker = slot.initiator, slot.worker
        problem = self.merge.add(d)
        if problem is not None:
            self._fail("worker", problem)
            return
        self._log_delta(self.env.stats, d, self.plan.spec.payload_bytes)
        if d.ready_at is not None and slot.name not in self._ready:
            self._ready[slot.name] = float(d.ready_at)
            self._open_window()
        if d.final:
            self.forwarding.add(slot.name)
            gevent.spawn(self._forward_recording, slot.name)

    def _forward_recording(self, name: str) -> None:
        # awaited until the controller has it: the worker may quit (and leave Locust's clients)
        # while its recording, a large post on a loaded machine, is still on its way
        merge = self.merge
        s = merge.slots[name]
        try:
            reply = self._post("/recording", Recording(swarm_id=merge.swarm_id, initiator=s.initiator,
                                                       worker=s.worker, data=merge.recording(name)), timeout=120)
            if reply is not None and reply.get("ok"):
                self.recorded.add(name)
        finally:
            self.forwarding.discard(name)

    def _on_worker_failure(self, environment, msg, **_kw) -> None:
        try:
            f = Failure.from_wire(msg.data)
        except ValueError:
            return
        slot = self.placed.get(msg.node_id)
        self._fail("worker", f"{slot.name if slot else msg.node_id}: {f.text}")

    def _on_test_stopping(self, **_kw) -> None:
        # Locust now tells every worker to stop. A worker's statistics may report its users
        # stopped before it says so: Locust then forgets it, and adds it again once it says it is
        # ready, redistributing a swarm placed on it meanwhile. Until then it is not placed.
        self._restarting = set(self.runner.clients.keys())
        if self.plan is None or self.phase in ("idle", "ended"):
            return
        self._stop_requested()      # the web UI's Stop: its window ends now
        # a headless master only: the web UI's swarm may be started again at once, and Locust's
        # late test_stop must not end the next one (a series' next swarm waits for it: _start_next)
        if self.headless:
            gevent.spawn(self._end_when_stopped)

    def _end_when_stopped(self) -> None:
        """Locust's master fires ``test_stop`` only after polling its workers' user count once a
        second; the swarm ends as soon as every worker has stopped its users (the count Locust
        waits for) and no recording is still due."""
        deadline = time.monotonic() + RECORDING_WAIT_S
        while self.phase not in ("idle", "ended") and not self._ending and time.monotonic() < deadline:
            if self.runner.user_count == 0 and not self._awaited():
                self._on_test_stop()
                return
            gevent.sleep(STOPPED_POLL_S)

    def _on_test_stop(self, **_kw) -> None:
        if self.plan is None or self.phase in ("idle", "ended") or self._ending:
            return
        self._ending = True
        self._stop_requested()
        self._set_phase("stopping")
        if self._timer is not None:
            self._timer.kill(block=False)
            self._timer = None
        gevent.spawn(self._collect_and_end)

    def _awaited(self) -> bool:
        """A recording being forwarded to the controller (its worker may have quit meanwhile),
        or still due from a placed worker that is still there. Locust marks a worker
        missing after 3 s without its heartbeat; a worker busy stopping its users and building
        its recording on a loaded machine can be that late and still send it, so the recording
        of a missing worker is awaited for MISSING_GRACE_S after the stop, unless it went missing
        while the swarm ran (``_heartbeat`` reported it lost: the swarm has failed)."""
        from locust.runners import STATE_MISSING

        if self.forwarding:
            return True
        grace = time.time() - self.facts.get("stop_requested", time.time()) < MISSING_GRACE_S
        return any(s.name not in self.recorded and cid in self.runner.clients
                   and (self.runner.clients[cid].state != STATE_MISSING or (grace and s.name not in self.lost))
                   for cid, s in self.placed.items())

    def _collect_and_end(self) -> None:
        deadline = time.monotonic() + RECORDING_WAIT_S
        while self._awaited() and time.monotonic() < deadline:
            gevent.sleep(0.1)
        names = sorted(s.name for s in self.placed.values())
        self.facts.update(recorded=sorted(self.recorded), missing=[n for n in names if n not in self.recorded])
        # "ended" is posted with Locust's statistics. The phase changes only once that post is
        # answered: the heartbeat posts the phase meanwhile, and an "ended" without the CSVs
        # reaching the controller first would end the swarm without them.
        live = self.merge.live.snapshot(final=True) if self.merge.live is not None else None
        self._post("/status", Status(swarm_id=self.plan.swarm_id, phase="ended",
                                     facts={**self.facts, **_locust_csv(self.env)}, live=live), timeout=120)
        self.phase = "ended"
        self.plan = self.merge = None
        self._set_phase("idle")

    def _start_next(self, users: int, spawn_rate: float) -> None:
        """A series' next swarm (Command.start): once Locust has seen the last one stopped (its
        ``test_stop`` fired: a late one cannot end this swarm), plan, place and spawn it, as the
        web UI's start does."""
        self._locust_stopped.wait(timeout=RECORDING_WAIT_S + 30)
        if self.open_swarm(users, spawn_rate) is not None:
            return                  # the failure went to the controller, which fails the swarm
        self.opened = True
        self.runner.start(users, spawn_rate)

    # ------------------------------------------------------------------ the link to the controller
    def _fail(self, what: str, text: str) -> str:
        log.error("%s", text)
        self._post("/failure", Failure(swarm_id=self.plan.swarm_id if self.plan else "", what=what, text=text))
        return text

    def _set_phase(self, phase: str) -> None:
        self.phase = phase
        self._post_status()

    def _post_status(self) -> Command | None:
        live = self.merge.live if self.merge is not None else None
        reply = self._post("/status", Status(swarm_id=self.plan.swarm_id if self.plan else "", phase=self.phase,
                                             facts=self.facts, live=live.snapshot() if live and live.changed else None))
        if reply is None:
            return None
        try:
            return Command.from_wire(reply)
        except ValueError:
            return None

    def _post(self, route: str, message, timeout: float = 30) -> dict | None:
        try:
            reply = self.control.post(route, message.to_wire(), timeout=timeout)
        except Exception as e:   # the controller is busy or gone: the heartbeat decides
            log.warning("controller %s: %s", route, e)
            return None
        self._last_answer = time.monotonic()
        return reply

    def _heartbeat(self) -> None:
        from locust.runners import STATE_MISSING

        while True:
            gevent.sleep(HEARTBEAT_S)
            for cid, s in list(self.placed.items()):
                node = self.runner.clients.get(cid)
                if self.phase in ("spawning", "running") and s.name not in self.lost and (
                        node is None or node.state == STATE_MISSING):
                    self.lost.add(s.name)
                    self._fail("lost", f"Locust worker {s.name} ({self.claims[cid].host}, pid {self.claims[cid].pid}) "
                                       "stopped answering while the swarm was running")
            cmd = self._post_status()
            if cmd is not None and cmd.stop and self.phase in ("spawning", "running"):
                gevent.spawn(self.stop_swarm)
            if cmd is not None and cmd.start > self._start_seen and self.phase in ("idle", "ended"):
                self._start_seen = cmd.start
                gevent.spawn(self._start_next, cmd.users, cmd.spawn_rate)
            if cmd is not None and cmd.quit and self.phase in ("idle", "ended", "placing"):
                self._on_quitting()     # exits when no swarm is left to end
                self.runner.quit()
                return
            if time.monotonic() - self._last_answer > CONTROLLER_SILENT_S:
                log.error("the controller has not answered for %.0f s: quitting", CONTROLLER_SILENT_S)
                self.runner.quit()
                return

    def _on_quitting(self, **_kw) -> None:
        """Locust's shutdown (SIGTERM: a series' close) of a headless master with no swarm left
        to end: every recording is in, Locust's statistics went with the last "ended". Locust's
        own pauses 0.5 s for the workers' last statistics report, twice (its quitting listener,
        then its shutdown's quit), whatever they do: this tells them to quit, waits until they
        have left (at most :data:`QUIT_WAIT_S`), prints Locust's summary as its shutdown does
        and exits (docs/findings/run-cost.md). Otherwise Locust's own shutdown goes on."""
        from locust import log as locust_log, stats
        from locust.runners import STATE_MISSING

        if not self.headless or self.phase not in ("idle", "ended") or self.forwarding:
            return
        runner = self.runner
        runner.send_message("quit")
        deadline = time.monotonic() + QUIT_WAIT_S
        while any(c.state != STATE_MISSING for c in runner.clients.all) and time.monotonic() < deadline:
            gevent.sleep(0.01)
        stats.print_stats(runner.stats, current=False)
        stats.print_percentile_stats(runner.stats)
        stats.print_error_report(runner.stats)
        code = self.env.process_exit_code
        if code is None:   # as Locust's shutdown decides it
            code = (self.env.parsed_options.exit_code_on_error if runner.errors or runner.exceptions
                    else 2 if locust_log.unhandled_greenlet_exception else 0)
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _locust_csv(environment) -> dict[str, str]:
    """Locust's own statistics, failures and exceptions as CSV text (the controller writes them)."""
    import csv
    import io

    from locust import stats

    out = {}
    writer = stats.StatsCSV(environment, stats.PERCENTILES_TO_REPORT)
    for key, fn in zip(LOCUST_CSV, (writer.requests_csv, writer.failures_csv, writer.exceptions_csv)):
        buf = io.StringIO()
        try:
            fn(csv.writer(buf))
        except Exception as e:  # pragma: no cover - Locust's CSV writers changed
            log.warning("Locust's %s: %s", key, e)
            continue
        out[key] = buf.getvalue()
    return out


def install(environment) -> MasterSide | None:
    """``init``: the master side, when this master belongs to an ssbench controller."""

    from .auth import new_token, token_from_env

    url = envvars.get(CONTROL_ENV)
    if not url:
        return None
    token = token_from_env()
    if token is None:
        log.error("$SSBENCH_WORKER_TOKEN is not set in the master: every worker will be refused")
        token = new_token()
    environment.ssbench = side = MasterSide(environment, ControlClient(url), token)
    if getattr(environment.parsed_options, "headless", False):
        side.prepare_headless()
    return side

