"""Run one real headless swarm (a Locust master and its workers, over the swarm protocol)
from a test, without a matrix: :func:`run_swarm`."""

from __future__ import annotations

import time
from contextlib import closing
from pathlib import Path

from harness.load.protocol import SwarmPlan
from harness.load.spec import SwarmSpec
from harness.load.series import SwarmSeries
from harness.load.swarm import SwarmResult

from . import pythonpath_env


def run_swarm(sender_specs: dict[str, dict], out: Path, users: int | dict[str, int], *, warmup: float,
              measure: float, usable: int | None = None, send_mode: str = "auto", payload_bytes: int = 100,
              workers_per_initiator: int = 1, spawn_rate: float = 1000, on_started=None,
              series: SwarmSeries | None = None, **spec_fields) -> tuple[SwarmResult, float]:
    """A swarm of ``users`` per initiator (one number for every initiator of ``sender_specs``, or
    a dict), its warm-up and measured windows; returns its result and the time it ended. The
    Locust processes can import the test-only senders of ``support`` (PYTHONPATH). On
    ``series`` (the caller closes it), the swarm runs on its processes, as a run's do; without
    one, on processes of its own."""
    import os

    per = users if isinstance(users, dict) else {k: int(users) for k in sender_specs}
    spec = SwarmSpec(sender_specs=sender_specs, payload_bytes=payload_bytes,
                     usable={k: usable or max(per.values()) for k in sender_specs}, users=dict(per),
                     send_mode=send_mode, **spec_fields)
    plan = SwarmPlan(spec=spec, users=dict(per), workers_per_initiator=workers_per_initiator,
                     warmup_seconds=warmup, planned_seconds=measure, worker_wait_seconds=60)
    Path(out).mkdir(parents=True, exist_ok=True)
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = pythonpath_env()["PYTHONPATH"]
    try:
        if series is not None:
            res = series.run(plan, Path(out), spawn_rate, on_started=on_started)
        else:
            with closing(SwarmSeries(Path(out))) as own:
                res = own.run(plan, Path(out), spawn_rate, on_started=on_started)
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old
    return res, time.time()
