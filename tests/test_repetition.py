"""harness.repetition's CPU pinning with real processes: a server process that ended between
being listed and being pinned (a backend whose session just closed) is skipped, not a reason to
leave the whole run unpinned (a suite run on 3 workers lost cpu_pinning from a summary, most
likely this way)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from harness.repetition import pin_cpus

pytestmark = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="pinning needs 2 CPUs or more")


def _gone_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_a_server_process_that_ended_is_skipped_and_the_rest_are_pinned():
    server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    client = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        sets = pin_cpus([_gone_pid(), server.pid], [client.pid, _gone_pid()])
        cpus = sorted(os.sched_getaffinity(0))
        assert sets == {"server": cpus[:len(cpus) // 2], "client": cpus[len(cpus) // 2:]}
        assert sorted(os.sched_getaffinity(server.pid)) == sets["server"]
        assert sorted(os.sched_getaffinity(client.pid)) == sets["client"]
        back = pin_cpus([server.pid, _gone_pid()], [], restore=True)
        assert back is not None and sorted(os.sched_getaffinity(server.pid)) == cpus
    finally:
        for p in (server, client):
            p.kill()
            p.wait()


def test_no_server_process_is_no_pinning():
    assert pin_cpus([], [os.getpid()]) is None
