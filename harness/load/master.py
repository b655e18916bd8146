"""Master-side hooks: time the warm-up and measured windows from the end of spawning, and
stop the swarm when they are over (headless runs driven by ``ssbench run``).

In a headless swarm (``scale_out``: ``$SSBENCH_SWARM`` set by :mod:`harness.load.swarm`) the
master also runs the master side of :mod:`harness.load.channel`:

* only workers that prove the run's token are admitted (:class:`harness.load.auth.MasterGuard`);
* it waits up to ``worker_wait_seconds`` for ``initiators x workers_per_initiator`` workers,
  and assigns each an initiator and a worker index (a worker's claim, ``--initiator K``, is
  kept; the others fill the gaps); on timeout it writes which are missing into ``master.json``
  and quits;
* it pushes the spec and the assignment to the workers in the spawn message (Locust then
  gives each worker ``threads / workers_per_initiator`` users: it spreads users evenly);
* at the end it stops the users, waits for every worker's recording and writes them as
  ``worker-i<K>-w<W>.json`` into the repetition directory, then quits.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import gevent
from locust import events

from harness.results.store import write_atomic

log = logging.getLogger("ssbench.master")

STOP_MARGIN_S = 0.5
RECORDING_WAIT_S = 60.0


def install(environment, load_spec, scale_out: bool = False) -> None:
    """``load_spec(environment)`` returns the SwarmSpec (the locustfile's loader: importing the
    locustfile again here would load a second copy of it under another module name)."""
    state: dict = {"master": {}}
    channel = MasterChannel(environment, load_spec(environment), state) if scale_out else None

    def write(**fields) -> None:
        state["master"].update(fields)
        _write(load_spec(environment).out_dir, state["master"])

    @events.spawning_complete.add_listener
    def _spawned(user_count, **_kw):
        if "spawned" in state:
            return
        spec = load_spec(environment)
        state["spawned"] = time.time()
        write(spawn_complete=state["spawned"], user_count=user_count)
        if spec.measure_seconds > 0:
            def _finish():
                write(stop_requested=time.time())
                if channel is not None:
                    channel.collect_and_quit(write)
                else:
                    environment.runner.quit()

            # a little past the window: it starts at the next recording-bucket boundary
            gevent.spawn_later(spec.warmup_seconds + spec.measure_seconds + STOP_MARGIN_S, _finish)

    @events.test_start.add_listener
    def _started(**_kw):
        for k in [k for k in state if k != "master"]:
            del state[k]
        if channel is not None:
            channel.wait_assigned(write)


def _write(out_dir: str, data: dict) -> None:
    if not out_dir:
        return
    write_atomic(Path(out_dir) / "master.json", json.dumps(data))


class MasterChannel:
    """The master side of :mod:`harness.load.channel` (see the module doc)."""

    def __init__(self, environment, spec, state: dict):
        from harness.load import channel
        from harness.load.auth import MasterGuard, new_token, token_from_env

        self.environment = environment
        self.runner = environment.runner
        self.spec = spec
        self.state = state
        self.expected = [(i, w) for i in range(1, spec.initiators + 1)
                         for w in range(1, spec.workers_per_initiator + 1)]
        self.claims: dict[str, dict] = {}
        self.assignment: dict[str, tuple[int, int]] = {}
        self.recorded: set[tuple[int, int]] = set()
        self.started = time.monotonic()
        self.ready = False
        self.failed: str | None = None
        runner = self.runner
        orig = runner.handle_message

        def handle(client_id, msg):   # under the token guard: admitted workers only
            if msg.type == "client_ready" and self.ready and client_id not in self.assignment:
                log.warning("worker %s: every expected worker is placed already; told to quit", client_id)
                runner.send_message("quit", None, client_id)
                return
            orig(client_id, msg)

        runner.handle_message = handle
        token = token_from_env()
        if token is None:
            log.error("$SSBENCH_WORKER_TOKEN is not set in the master: every worker will be refused")
            token = new_token()
        self.guard = MasterGuard(runner, token).install()
        environment.events.worker_connect.add_listener(
            lambda client_id, **_kw: runner.send_message(channel.WELCOME, None, client_id=client_id))
        runner.register_message(channel.CLAIM, self._on_claim)
        runner.register_message(channel.RECORDING, self._on_recording)
        gevent.spawn(self._watch)

    # ------------------------------------------------------------------ who is who
    def _on_claim(self, environment, msg, **_kw) -> None:
        self.claims[msg.node_id] = dict(msg.data or {})

    def _assign(self) -> dict[str, tuple[int, int]]:
        """Slots for the connected workers that claimed: exact claims first, then an initiator
        claim takes its lowest free worker index, then the rest fill the lowest free slots."""
        connected = {cid: c for cid, c in self.claims.items() if cid in self.runner.clients}
        free = list(self.expected)
        out: dict[str, tuple[int, int]] = {}
        for rule in ("exact", "initiator", "any"):
            for cid, c in sorted(connected.items()):
                if cid in out:
                    continue
                i, w = c.get("initiator"), c.get("worker")
                pick = None
                if rule == "exact" and i and w:
                    pick = (i, w) if (i, w) in free else None
                elif rule == "initiator" and i and not w:
                    pick = next((s for s in free if s[0] == i), None)
                elif rule == "any" and not i:
                    pick = free[0] if free else None
                if pick is not None:
                    free.remove(pick)
                    out[cid] = pick
        return out

    def missing_text(self) -> str:
        got = self._assign()
        missing = [s for s in self.expected if s not in got.values()]
        by_init: dict[int, list[int]] = {}
        for i, w in missing:
            by_init.setdefault(i, []).append(w)
        n = self.spec.workers_per_initiator
        parts = [f"initiator {i}: worker(s) {', '.join(map(str, ws))} of {n}" for i, ws in sorted(by_init.items())]
        text = (f"{len(missing)} of {len(self.expected)} Locust worker(s) missing after "
                f"{self.spec.worker_wait_seconds:g}s: " + "; ".join(parts))
        there = [f"{self.claims[c].get('host')} (initiator {s[0]}, worker {s[1]})" for c, s in sorted(got.items())]
        if there:
            text += "; connected: " + ", ".join(there)
        unplaced = [f"{c.get('host')} claiming initiator {c.get('initiator')}" + (f" worker {c.get('worker')}" if c.get('worker') else "")
                    for cid, c in self.claims.items() if cid in self.runner.clients and cid not in got]
        if unplaced:
            text += "; claims that fit no free slot: " + ", ".join(unplaced)
        if self.guard.refused:
            text += "; refused: " + ", ".join(f"{r['worker']} ({r['reason']})" for r in self.guard.refused[-5:])
        return text

    def _watch(self) -> None:
        """Until every expected worker is connected and placed; or give up and say who is missing."""
        while not self.ready:
            got = self._assign()
            if len(got) == len(self.expected):
                self.assignment = got
                self.ready = True
                return
            if time.monotonic() - self.started > self.spec.worker_wait_seconds:
                self.failed = self.missing_text()
                log.error("%s", self.failed)
                self._write_state({"missing_workers": self.failed})
                self.runner.quit()
                return
            gevent.sleep(0.2)

    def _write_state(self, fields: dict) -> None:
        self.state["master"].update(fields)
        _write(self.spec.out_dir, self.state["master"])

    def wait_assigned(self, write) -> None:
        """``test_start``: hold the spawn until every worker is placed; then push the spec and
        the assignment in the spawn message's options."""
        from harness.load import channel

        while not self.ready and self.failed is None:
            gevent.sleep(0.1)
        if self.failed is not None:
            return
        # a worker that fits no slot (an initiator this permutation does not use, one too many)
        # gets no users: out of the dispatcher Locust built before test_start, and told to quit
        for cid in [c for c in self.runner.clients.keys() if c not in self.assignment]:
            node = self.runner.clients.pop(cid)
            if self.runner._users_dispatcher is not None:
                self.runner._users_dispatcher.remove_worker(node)
            claim = self.claims.get(cid, {})
            log.warning("worker %s (%s, initiator %s) fits no slot of this swarm: told to quit", cid,
                        claim.get("host"), claim.get("initiator"))
            self.runner.send_message("quit", None, client_id=cid)
        opts = self.environment.parsed_options
        setattr(opts, channel.SPEC_OPTION, json.dumps(self.spec.to_dict()))
        setattr(opts, channel.ASSIGN_OPTION, json.dumps({c: list(s) for c, s in self.assignment.items()}))
        write(workers={f"i{s[0]}.w{s[1]}": {"host": self.claims[c].get("host"), "pid": self.claims[c].get("pid"),
                                            "client_id": c} for c, s in self.assignment.items()})

    # ------------------------------------------------------------------ recordings
    def _on_recording(self, environment, msg, **_kw) -> None:
        from harness.load import channel

        data = msg.data or {}
        slot = self.assignment.get(msg.node_id)
        if data.get("swarm_id") != self.spec.swarm_id or slot is None:
            log.warning("dropped a recording from %s: not a worker of this swarm", msg.node_id)
            return
        if (int(data.get("initiator", 0)), int(data.get("worker", 0))) != slot:
            log.warning("recording from %s names initiator %s worker %s, assigned %s: written as assigned",
                        msg.node_id, data.get("initiator"), data.get("worker"), slot)
            data.update(initiator=slot[0], worker=slot[1])
        if self.spec.out_dir:
            write_atomic(Path(self.spec.out_dir) / channel.recording_name(*slot), json.dumps(data))
        self.recorded.add(slot)

    def collect_and_quit(self, write) -> None:
        """Stop every user (each worker then sends its recording), wait for the recordings,
        then quit the swarm."""
        from locust.runners import STATE_MISSING

        self.runner.stop()
        deadline = time.monotonic() + RECORDING_WAIT_S

        def awaited() -> bool:   # a recording still due from a worker that is still there
            return any(slot not in self.recorded and cid in self.runner.clients
                       and self.runner.clients[cid].state != STATE_MISSING
                       for cid, slot in self.assignment.items())

        while awaited() and time.monotonic() < deadline:
            gevent.sleep(0.1)
        missing = sorted(set(self.assignment.values()) - self.recorded)
        write(recordings=[f"i{i}.w{w}" for i, w in sorted(self.recorded)],
              **({"recordings_missing": [f"i{i}.w{w}" for i, w in missing]} if missing else {}))
        self.runner.quit()
