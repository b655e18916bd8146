"""The operating system's own locks and threads, even in a gevent-patched process.

A Locust worker runs under gevent's monkey-patching: ``threading.Lock`` there is a gevent lock
(a semaphore bound to the hub) and ``_thread.start_new_thread`` starts a greenlet. Code that
runs on real OS threads (the SEND loops of blocking drivers, the pyodbc watchdog) needs the
real ones: a gevent lock used across OS threads is a cross-thread wait, and the lock of a
connection is taken once per SEND: a native lock costs a fraction of a gevent one
(benchmarks/harness_ceiling.py). A greenlet must never *block* on a native lock (it would stop
the whole hub): only OS threads (the SEND loops, gevent's threadpool) take them.

The one place that knows where the originals are; without gevent (a plain process) they are
the ``_thread`` functions themselves.
"""

from __future__ import annotations


def _originals():
    try:
        from gevent.monkey import get_original
    except ImportError:  # pragma: no cover - gevent comes with Locust
        import _thread

        return _thread.allocate_lock, _thread.start_new_thread
    lock, start = get_original("_thread", ["allocate_lock", "start_new_thread"])
    return lock, start


#: ``_thread.allocate_lock`` and ``_thread.start_new_thread`` of the OS
allocate_lock, start_new_thread = _originals()
