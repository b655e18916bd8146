"""The page's polls of Locust's web UI, as the master of ``ssbench web`` answers them (no Locust
import here: the function runs on any gevent loop).

Locust's page polls ``/stats/requests`` every 2 s, but only while the swarm spawns or runs: an
answer saying "stopping" leaves the page at STOPPING until it is reloaded (locustio/locust#2046,
#2400; seen in tests/web/test_web_ui.py on a loaded machine). A master stops in tenths of a
second on an idle machine, longer under load. So a poll asked while it stops is answered once it
has stopped (:func:`until_stopped`, from a ``before_request`` hook of
:mod:`harness.web.locust_plugin`), at most :data:`STOPPING_HOLD_S` later."""

from __future__ import annotations

import time

#: how long a /stats/requests asked while the master is stopping waits for it to stop
STOPPING_HOLD_S = 60.0


def until_stopped(runner, stopping: str, hold_s: float = STOPPING_HOLD_S) -> None:
    """Wait (cooperatively: the web UI is served by gevent) while ``runner.state`` is
    ``stopping``, at most ``hold_s`` seconds."""
    import gevent

    deadline = time.monotonic() + hold_s
    while runner.state == stopping and time.monotonic() < deadline:
        gevent.sleep(0.05)
