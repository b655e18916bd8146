"""A Locust worker slow to finish stopping (test-only, loaded through ``sitecustomize``): after
its users have stopped and its last delta is sent, it waits :data:`DELAY_VAR` seconds before it
tells the master it has stopped and is ready again, as a worker on a loaded host can. Meanwhile
its statistics already report no user, so the master may think the swarm over."""

from __future__ import annotations

import os

DELAY_VAR = "SSBENCH_TEST_SLOW_STOP_S"
#: a file each slowed stop appends a line to: the test knows the hook ran
MARK_VAR = "SSBENCH_TEST_SLOW_STOP_MARK"

SITECUSTOMIZE = "import support.slow_stop as _s\n_s.install()\n"


def install() -> None:
    delay = float(os.environ.get(DELAY_VAR) or 0)
    if delay <= 0:
        return
    import gevent
    from locust.runners import WorkerRunner

    handle = WorkerRunner.handle_message

    def slow(self, msg):
        if msg.type == "stop":
            self.stop()                 # the users stop and the last delta goes; Locust's stop
            gevent.sleep(delay)         # handling (a no-op stop, client_stopped, client_ready) waits
            if os.environ.get(MARK_VAR):
                with open(os.environ[MARK_VAR], "a") as f:
                    f.write(f"{os.getpid()}\n")
        return handle(self, msg)

    WorkerRunner.handle_message = slow
