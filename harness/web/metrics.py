"""Live broker metrics for the web UI, from the collectors' samples (one snapshot per tick).

The snapshot is JSON: what ``/ssbench/metrics`` returns and what the "Broker metrics" tab and
the ``/ssbench/`` page show. Field names say which metric family they come from
(``docs/results.md``): ``throughput.received_per_s``, ``queues.depth``, ``activation.tasks_running``,
``waits.wait_ms_per_s``, ``host.cpu_percent``.
"""

from __future__ import annotations

import threading
import time
from collections import deque

from ..metrics.live import RecentWaits

HISTORY = 180          # ticks kept for the page's chart
#: the snapshot's fields from one tick's samples: (family, metric, key)
TICK_FIELDS = {"received_per_s": ("throughput", "received_per_s", ""),
               "processed_total": ("throughput", "processed_total", ""), "xmitq_total": ("queues", "xmitq_total", ""),
               "queue_depth": ("queues", "depth", "queue"), "activation_tasks_running": ("activation", "tasks_running", ""),
               "server_cpu_percent": ("host", "cpu_percent", "server"), "client_cpu_percent": ("host", "cpu_percent", "client")}


class LiveMetrics:
    def __init__(self, target_label: str = ""):
        self._lock = threading.Lock()
        self.target_label = target_label
        self.state = "idle"             # idle | preparing | running | saving
        self.session: dict = {}
        self.last: dict = {}
        self.history: deque = deque(maxlen=HISTORY)
        self._waits = RecentWaits()   # the top waits, as the metrics endpoint has them
        self.ticks = 0
        self.last_sample_ts: float | None = None   # the last sample of the session that ended

    def set_state(self, state: str, **session) -> None:
        """``idle`` ends a session: its samples are cleared (they describe a load that has
        stopped) and only the time of the last one is kept (``last_sample_ts``)."""
        with self._lock:
            if state == "idle" and self.state != "idle":
                if self.last.get("ts"):
                    self.last_sample_ts = self.last["ts"]
                self._clear()
            self.state = state
            if session:
                self.session = session

    def _clear(self) -> None:
        self.last = {}
        self.history.clear()
        self._waits.clear()

    def reset(self) -> None:
        with self._lock:
            self._clear()
            self.last_sample_ts = None

    def on_tick(self, samples) -> None:
        """Sampler callback (one tick's samples)."""
        got = {(x.family, x.metric, x.key): x.value for x in samples}
        snap: dict = {"ts": time.time(), **{name: got.get(key) for name, key in TICK_FIELDS.items()},
                      "xmitq": {k.split(".", 1)[1]: v for (f, m, k), v in got.items()
                                if (f, m) == ("queues", "depth") and k.startswith("xmitq.")}}
        with self._lock:
            self._waits.add(samples)
            snap["top_waits"] = [{"wait_type": k, "wait_ms_per_s": round(v, 2)} for k, v in self._waits.top()]
            self.ticks += 1
            snap["tick"] = self.ticks
            self.last = snap
            self.history.append({"ts": round(snap["ts"], 3), "received_per_s": snap["received_per_s"],
                                 "xmitq_total": snap["xmitq_total"], "queue_depth": snap["queue_depth"],
                                 "activation_tasks_running": snap["activation_tasks_running"]})

    def snapshot(self) -> dict:
        with self._lock:
            out = {"state": self.state, "target": self.target_label, "session": dict(self.session),
                   "now": time.time(), **self.last, "history": list(self.history)}
            if not self.last and self.last_sample_ts:
                out["last_sample_ts"] = self.last_sample_ts
            return out


def _num(v, fmt: str = "{:,.0f}") -> str:
    return "-" if v is None else fmt.format(v)


def _age(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds} s ago"
    if seconds < 7200:
        return f"{seconds // 60} min ago"
    return f"{seconds // 3600} h ago"


STALE_SECONDS = 5  # a live sample older than this says its age


def sampled_at(m: dict) -> str:
    """When the values shown were sampled: the time, its age when stale, and after a session
    ended that there are no live values, with the time of the session's last sample."""
    now = m.get("now") or time.time()
    if m.get("ts"):
        text = time.strftime("%H:%M:%S", time.gmtime(m["ts"]))
        if now - m["ts"] > STALE_SECONDS:
            text += f" ({_age(now - m['ts'])})"
        return text
    if m.get("last_sample_ts"):
        t = m["last_sample_ts"]
        return (f"- (no session running; last sample {time.strftime('%H:%M:%S', time.gmtime(t))}, "
                f"{_age(now - t)})")
    return "-"


def table_rows(m: dict) -> list[dict]:
    """Rows of the "Broker metrics" tab: ``{"metric": ..., "value": ...}`` (strings)."""
    session = m.get("session") or {}
    state = m.get("state", "?")
    if session.get("run_id"):
        state += f" (run {session['run_id']})"
    rows = [("State", state), ("Target", m.get("target") or "-")]
    if session.get("description"):
        rows.append(("Session", session["description"]))
    rows += [("Messages received/s at the target", _num(m.get("received_per_s"), "{:,.1f}")),
             ("Messages processed (session)", _num(m.get("processed_total"))),
             ("Transmission queue depth (all initiators)", _num(m.get("xmitq_total")))]
    for ini, v in sorted((m.get("xmitq") or {}).items()):
        rows.append((f"Transmission queue depth {ini}", _num(v)))
    rows += [("Target queue depth", _num(m.get("queue_depth"))),
             ("Activation tasks running", _num(m.get("activation_tasks_running")))]
    waits = m.get("top_waits") or []
    if not waits:
        rows.append(("Top waits", "-"))
    for i, w in enumerate(waits, 1):
        rows.append((f"Top wait {i}: {w['wait_type']}", f"{w['wait_ms_per_s']:,.1f} ms/s"))
    rows += [("Server CPU (% of one core)", _num(m.get("server_cpu_percent"), "{:,.0f}")),
             ("Sampled at (UTC)", sampled_at(m))]
    if m.get("error"):
        rows.append(("Error", m["error"]))
    return [{"metric": k, "value": str(v)} for k, v in rows]
