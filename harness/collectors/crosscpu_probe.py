"""The cross-CPU probe's process: ``python -I -S crosscpu_probe.py A B ROUNDS BURSTS``
(harness.collectors.crosscpu.probe_cmd). It imports the standard library only, and nothing may
be added that is not in it: the script runs without site-packages and without ssbench's package.

Pinned to CPU A, it forks a partner pinned to CPU B; the two bounce a counter in one cache line
of an anonymous shared mapping. For every line read on standard input it times BURSTS bursts
of ROUNDS round trips and prints the fastest burst's nanoseconds per round trip (``nan`` if the
partner did not answer within 50 ms, or a probe took over :data:`PROBE_LIMIT_S`): the
fastest, so a burst in which either side was preempted by the load does not count. Between
lines the partner blocks on a pipe and takes no CPU. What a round trip costs is the cost of
moving a cache line between the two CPUs and back, plus the interpreter's own work (the same
in every burst): on the 2-vCPU test VM about 190 ns where a C version of the same loop took
80 ns, and 380 ns where it took 360 (its vCPUs on cores far apart on the host). Its standard
input closed, it stops its partner and exits; a partner whose parent went away exits within a
second (a timer, so nothing is added to the spin loops).
"""

from __future__ import annotations

import mmap
import os
import signal
import sys
import time

COUNTER, ACK, ACTIVE = 0, 64, 128     # three cache lines: the counter alone on its own
#: a probe that takes longer than this is abandoned (``nan``): its partner is gone or starved
PROBE_LIMIT_S = 2.0


class _Late(Exception):
    pass


def _late(signum, frame):
    raise _Late


def _orphaned(parent: int):
    def check(signum, frame):
        if os.getppid() != parent:
            os._exit(0)
    return check


def _partner(shm: mmap.mmap, go: int, parent: int) -> None:
    signal.signal(signal.SIGALRM, _orphaned(parent))
    signal.setitimer(signal.ITIMER_REAL, 1.0, 1.0)
    while os.read(go, 1) == b"g":
        shm[ACK] = 1
        while shm[ACTIVE]:
            v = shm[COUNTER]
            if v & 1:
                shm[COUNTER] = 0 if v == 253 else v + 1
        shm[ACK] = 0
    os._exit(0)


def _burst(shm: mmap.mmap, rounds: int) -> float:
    pc = time.perf_counter
    t0 = pc()
    for _ in range(rounds):
        nv = shm[COUNTER] + 1     # even (the partner's), so odd: its turn
        shm[COUNTER] = nv
        while shm[COUNTER] == nv:
            pass
    return (pc() - t0) * 1e9 / rounds


def main(argv: list[str]) -> int:
    a, b, rounds, bursts = (int(x) for x in argv)
    shm = mmap.mmap(-1, mmap.PAGESIZE)
    r, w = os.pipe()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        os.close(w)
        os.sched_setaffinity(0, {b})
        _partner(shm, r, parent)
    os.close(r)
    os.sched_setaffinity(0, {a})
    signal.signal(signal.SIGALRM, _late)
    try:
        for _ in sys.stdin:
            shm[ACTIVE] = 1
            os.write(w, b"g")
            end = time.monotonic() + 0.05
            while not shm[ACK] and time.monotonic() < end:
                pass
            best = float("nan")
            if shm[ACK]:
                signal.setitimer(signal.ITIMER_REAL, PROBE_LIMIT_S)
                try:
                    best = min(_burst(shm, rounds) for _ in range(bursts))
                except _Late:
                    pass
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
            shm[ACTIVE] = 0
            while shm[ACK] and time.monotonic() < end + 1.0:
                pass
            print(f"{best:.1f}", flush=True)
    finally:
        shm[ACTIVE] = 0
        os.write(w, b"q")
        os.waitpid(pid, 0)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
