"""The operating system's own locks and threads, even in a gevent-patched process.

Under gevent's monkey-patching ``threading.Lock`` is a gevent lock and a new thread a greenlet;
code on real OS threads (blocking SEND loops, the pyodbc watchdog) needs the originals, which
are also cheaper per SEND. A greenlet must never block on a native lock: it would stop the hub.
Without gevent these are the ``_thread`` functions themselves.
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
