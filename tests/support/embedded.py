"""Helpers for the embedded target's tests (real server, real broker process)."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from pathlib import Path

import psycopg

from harness.matrix import BrokerSettings
from harness.targets.base import open_sender
from harness.targets.embedded.server import EmbeddedServer
from harness.targets.embedded.target import EmbeddedTarget
from harness.targets.embedded.transport import TransportLink

from . import machine

REPO = Path(__file__).resolve().parents[2]


def settings(**kw) -> BrokerSettings:
    base = dict(max_queue_readers=2, receive_top=10000, waitfor_timeout_ms=400, monitor_interval_seconds=0.1)
    base.update(kw)
    return BrokerSettings(**base)


def db(target: EmbeddedTarget, name: str) -> psycopg.Connection:
    return psycopg.connect(target.conninfo(name), autocommit=True)


def deliver(target: EmbeddedTarget, initiator: int = 1) -> None:
    """Run the transport in-line until the initiator's transmission queue is empty."""
    link = TransportLink(initiator, target.conninfo(target.initiator_db(initiator)),
                         target.conninfo(target.target_db), batch_size=500)
    try:
        while link.forward() > 0:
            pass
        while link.backward() > 0:
            pass
    finally:
        link.close()


def send_many(target: EmbeddedTarget, initiator: int, per_dialog: int, payload: bytes = b"m" * 40) -> int:
    """per_dialog messages on every usable dialog, round robin, one SEND transaction each."""
    s = open_sender(target.sender_spec(initiator))
    try:
        with db(target, target.initiator_db(initiator)) as c:
            slots = [r[0] for r in c.execute("SELECT k FROM ssb.dialogs ORDER BY k")]
        handles = [s.dialog(k) for k in slots]
        for _ in range(per_dialog):
            for h in handles:
                s.send(h, payload)
        return per_dialog * len(handles)
    finally:
        s.close()


@contextlib.contextmanager
def provisioned(server: EmbeddedServer, prefix: str, initiators: int = 1):
    """An embedded target on ``server`` with databases of its own ``prefix``, provisioned for
    ``initiators``; closed afterwards (a module-scoped fixture's body)."""
    t = EmbeddedTarget(server, prefix=prefix)
    t.provision(initiators)
    try:
        yield t
    finally:
        t.close()


def wait_for(cond, timeout: float, what: str, poll: float = 0.05):
    """``cond()`` once it is true; ``timeout`` is set on the reference machine and stretched to
    this one (support.machine.allowance): a slow host waits longer before it fails."""
    deadline = time.monotonic() + machine.allowance(timeout)
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(poll)


def counter(target: EmbeddedTarget, name: str) -> float:
    return {c.counter_name: c.value for c in target.perf_counters()}[name]


@contextlib.contextmanager
def private_server(tag: str):
    """An embedded server of its own (not started), destroyed afterwards. Not under pytest's
    tmp_path when root: the server then runs as an unprivileged user, and every pytest session
    of the machine resets /tmp/pytest-of-root to mode 0700 when it starts, which would lock the
    server out of its data directory mid-test. Same choice as tests/conftest.py."""
    base = Path(tempfile.mkdtemp(prefix=f"ssbench-test-{tag}-", dir="/var/tmp" if os.geteuid() == 0 else None))
    srv = EmbeddedServer(base / "pg")
    try:
        yield srv
    finally:
        srv.destroy()
        shutil.rmtree(base, ignore_errors=True)
