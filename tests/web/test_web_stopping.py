"""Locust's page polls ``/stats/requests`` only while the swarm spawns or runs: an answer saying
"stopping" leaves it at STOPPING until reloaded (locustio/locust#2046, #2400; seen in
tests/web/test_web_ui.py on a loaded machine). The web UI's master holds such a poll until the
stop is over (harness.web.polls). The hold, with a runner whose stop ends 0.3 s later on
gevent's loop, as the master's does (no Locust here: it would patch this test process)."""

from __future__ import annotations

import time

import gevent
import pytest

from harness.web.polls import until_stopped
from support import machine


class Runner:
    state = "stopping"


@pytest.mark.untimed("lower bounds are the hold's own waits; its time bounds are stretched to this machine "
                     "(support.machine.allowance)")
def test_a_poll_while_stopping_is_answered_once_stopped():
    runner = Runner()
    gevent.spawn_later(0.3, setattr, runner, "state", "stopped")
    t0 = time.monotonic()
    until_stopped(runner, "stopping", 10.0)
    assert runner.state == "stopped" and 0.25 <= time.monotonic() - t0 < machine.allowance(2.0)


@pytest.mark.untimed("lower bounds are the hold's own waits; its time bounds are stretched to this machine "
                     "(support.machine.allowance)")
def test_the_hold_has_a_limit_and_other_states_pass_at_once():
    runner = Runner()
    t0 = time.monotonic()
    until_stopped(runner, "stopping", 0.2)      # a stop that never ends: the poll is answered
    assert runner.state == "stopping" and 0.15 <= time.monotonic() - t0 < machine.allowance(1.5)
    runner.state = "running"
    t0 = time.monotonic()
    until_stopped(runner, "stopping", 10.0)
    assert time.monotonic() - t0 < machine.allowance(0.05)
