"""Swarm.wait_closed: the masters a series closed exit in the background (their Locust master's
quit and shutdown), and wait_closed joins every one of them: the next master's start, and a
run's end, so no repetition is measured beside an exiting swarm and every log is whole when the
run returns."""

from __future__ import annotations

import threading
import time

import pytest

from harness.load import swarm
from support import machine


@pytest.mark.untimed("its time bounds are stretched to this machine (support.machine.allowance)")
def test_wait_closed_joins_every_ended_swarm_and_returns_at_once_when_none_is_left():
    done: list[int] = []

    def close(i: int) -> None:
        time.sleep(0.2 * (2 - i))
        done.append(i)

    threads = [threading.Thread(target=close, args=(i,)) for i in range(2)]
    with swarm._CLOSING_LOCK:
        swarm._CLOSING.extend(threads)
    for t in threads:
        t.start()
    swarm.Swarm.wait_closed()
    assert sorted(done) == [0, 1] and not swarm._CLOSING
    t0 = time.monotonic()
    swarm.Swarm.wait_closed()
    assert time.monotonic() - t0 < machine.allowance(0.05)
