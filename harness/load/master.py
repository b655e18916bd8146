"""Master-side hooks: time the warm-up and measured windows from the end of spawning, and
stop the swarm when they are over (headless runs driven by ``ssbench run``)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import gevent
from locust import events

from harness.results.store import write_atomic

STOP_MARGIN_S = 0.5


def install(environment, load_spec) -> None:
    """``load_spec(environment)`` returns the SwarmSpec (the locustfile's loader: importing the
    locustfile again here would load a second copy of it under another module name)."""
    state: dict = {}

    @events.spawning_complete.add_listener
    def _spawned(user_count, **_kw):
        if "spawned" in state:
            return
        spec = load_spec(environment)
        state["spawned"] = time.time()
        _write(spec.out_dir, {"spawn_complete": state["spawned"], "user_count": user_count})
        if spec.measure_seconds > 0:
            def _finish():
                state["stopped"] = time.time()
                _write(spec.out_dir, {"spawn_complete": state["spawned"], "user_count": user_count,
                                      "stop_requested": state["stopped"]})
                environment.runner.quit()

            # a little past the window: it starts at the next recording-bucket boundary
            gevent.spawn_later(spec.warmup_seconds + spec.measure_seconds + STOP_MARGIN_S, _finish)

    @events.test_start.add_listener
    def _started(**_kw):
        state.clear()


def _write(out_dir: str, data: dict) -> None:
    if not out_dir:
        return
    write_atomic(Path(out_dir) / "master.json", json.dumps(data))
