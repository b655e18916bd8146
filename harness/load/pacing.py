"""Open-loop pacing: SENDs at fixed intended times, latency corrected for coordinated omission.

In closed loop every user sends as soon as its previous SEND returned, so a slow server slows
the load down and the latency of the SENDs it would have had to take is never seen (coordinated
omission). In open loop an initiator offers ``rate`` SENDs per second on a fixed schedule:
slot ``k`` is due at ``t0 + k / rate``. The schedule is split over the initiator's ``n`` users:
user ``u`` takes slots ``u, u + n, u + 2n, ...``, i.e. it sends at ``t0 + (u + j*n) / rate``.

A user that is late (its previous SEND took longer than ``n / rate``) sends at once, without
skipping slots, and its latency is measured from the slot's *intended* time, as wrk2 does: the
corrected latency includes the time the SEND waited for its turn. The service time (from the
actual start of the SEND) is recorded next to it.

``t0`` is shared by the users of one worker (one initiator); a user joining later starts at
its first slot not already past (a user owes nothing for the time before it existed).
"""

from __future__ import annotations

import math
import time


class Schedule:
    """One worker's schedule: ``rate`` slots per second from ``t0`` (``time.perf_counter``),
    and the offset that turns a perf_counter time into epoch seconds."""

    def __init__(self, rate: float, users: int, t0: float | None = None):
        if not rate > 0:
            raise ValueError(f"rate must be positive, got {rate!r}")
        self.rate = float(rate)
        self.users = max(1, int(users))
        self.t0 = time.perf_counter() if t0 is None else t0
        self.epoch_offset = time.time() - time.perf_counter()

    def pacer(self, user: int, now: float | None = None) -> "Pacer":
        return Pacer(self, user, time.perf_counter() if now is None else now)


class Pacer:
    """The slots of one user: :meth:`next_slot` returns the next intended time (perf_counter)."""

    def __init__(self, schedule: Schedule, user: int, now: float):
        self.schedule = schedule
        self.user = int(user)
        # a user beyond the expected count (the web UI can add some) still gets its own slots
        self.stride = max(schedule.users, self.user + 1)
        period = self.stride / schedule.rate
        first = schedule.t0 + self.user / schedule.rate
        self.j = max(0, math.ceil((now - first) / period - 1e-9))
        self.late = 0          # slots that were already due when the previous SEND returned

    def intended(self, j: int) -> float:
        s = self.schedule
        return s.t0 + (self.user + j * self.stride) / s.rate

    def next_slot(self) -> float:
        """The next slot's intended time; advances the schedule (no slot is ever skipped)."""
        t = self.intended(self.j)
        self.j += 1
        return t

    def to_epoch(self, perf: float) -> float:
        return perf + self.schedule.epoch_offset

    def wait(self, sleep) -> float:
        """Sleep (``sleep(seconds)``: gevent.sleep in a Locust user) until the next slot is due;
        return its intended time (perf_counter)."""
        t = self.next_slot()
        delay = t - time.perf_counter()
        if delay <= 0:
            self.late += 1
        while delay > 0:     # gevent's sleep can end early (its loop's cached time lags): again
            sleep(delay)
            delay = t - time.perf_counter()
        return t
