#!/usr/bin/env python
"""CPU of the host and storage collectors' ``sample`` per tick (issue 49; not a test).

Runs whichever ``harness`` the current directory holds (a ``git archive`` of the commit to
measure): a fake telemetry whose ``server_pids`` walks a 4-process tree as the embedded
target's does, a storage probe directory in a temporary one, and ``ticks`` (argument 1,
default 60) ticks 50 ms apart; prints the median and quartiles of the sampling thread's CPU
milliseconds per tick (``time.thread_time()`` around the two calls).
"""

import statistics
import subprocess
import sys
import tempfile
import threading
import time

import psutil

import harness
from harness.collectors.base import SampleContext
from harness.collectors.host import HostCollector
from harness.collectors.storage import StorageCollector
from harness.targets.telemetry import Telemetry


def main(ticks: int) -> None:
    kids = subprocess.Popen(["sh", "-c", "sleep 600 & sleep 600 & sleep 600 & wait"])
    time.sleep(0.2)
    tmp = tempfile.mkdtemp()

    class Local(Telemetry):
        def queue_depths(self, exact=False):
            return {}

        def messages_processed(self):
            return 0

        def e2e_latencies_us(self, start_epoch, end_epoch):
            return []

        def server_pids(self):
            main = psutil.Process(kids.pid)
            return [main.pid] + [p.pid for p in main.children(recursive=True)]

        def storage_probe_dir(self):
            return tmp

    class Target:
        telemetry = Local()

    ctx = SampleContext(Target(), threading.Lock(), spill_dir=tmp)
    host, storage = HostCollector(), StorageCollector()
    cpu = []
    try:
        for i in range(ticks + 2):
            now = time.time()
            c0 = time.thread_time()
            host.sample(ctx, now)
            storage.sample(ctx, now)
            if i >= 2:
                cpu.append((time.thread_time() - c0) * 1000)
            time.sleep(0.05)
    finally:
        storage.close()
        kids.kill()
    q = statistics.quantiles(cpu)
    print(f"{harness.__file__}: {len(psutil.pids())} processes, median {statistics.median(cpu):.2f} ms a tick "
          f"(quartiles {q[0]:.2f}, {q[2]:.2f})")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 60)
