"""Progress of a matrix run: a live bar with rate and ETA on a terminal, plain lines otherwise.

The ETA counts only the repetitions this invocation ran, so ``--resume`` does not skew it.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """``total`` repetitions; ``skip(n)`` those already complete; ``advance()`` after each one
    run; ``status(text)`` for what the current one is doing; ``line(text)`` for a result line."""

    PLAIN_LIVE_EVERY_S = 5.0

    def __init__(self, total: int, stream: TextIO | None = None, *, force_plain: bool = False):
        self.total = total
        self.stream = stream or sys.stderr
        self.done = 0          # complete, skipped included
        self.skipped = 0
        self.ran = 0
        self.started = time.monotonic()
        self._last_live = 0.0
        self._tty = not force_plain and hasattr(self.stream, "isatty") and self.stream.isatty()
        self._bar = None
        if self._tty:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress as RichProgress, TextColumn,
                                       TimeElapsedColumn, TimeRemainingColumn)

            self._console = Console(file=self.stream)
            self._bar = RichProgress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                     TextColumn("reps"), TimeElapsedColumn(), TextColumn("ETA"),
                                     TimeRemainingColumn(), TextColumn("{task.fields[status]}"),
                                     console=self._console, transient=False)
            self._task = self._bar.add_task("ssbench", total=total, status="")
            self._bar.start()

    # ------------------------------------------------------------------ counting
    def skip(self, n: int = 1) -> None:
        self.skipped += n
        self.done += n
        if self._bar is not None:
            # skipped repetitions move the bar but not its speed: reset the rate estimate
            self._bar.reset(self._task, total=self.total, completed=self.done, status="")

    def add_total(self, n: int) -> None:
        """``n`` more repetitions planned (an auto run's added round)."""
        self.total += n
        if self._bar is not None:
            self._bar.update(self._task, total=self.total)

    def advance(self) -> None:
        self.ran += 1
        self.done += 1
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done)

    def eta_seconds(self) -> float | None:
        if self.ran == 0:
            return None
        return (time.monotonic() - self.started) / self.ran * (self.total - self.done)

    def eta(self) -> str:
        e = self.eta_seconds()
        return "?" if e is None else time.strftime("%H:%M:%S", time.gmtime(max(0.0, e)))

    def mark_start(self) -> None:
        """The clock for the ETA starts with the first repetition actually run."""
        if self.ran == 0:
            self.started = time.monotonic()

    # ------------------------------------------------------------------ output
    def status(self, text: str, phase_change: bool = False) -> None:
        """What the current repetition is doing. Live figures are rate-limited on plain output;
        a phase change (preparing, running, draining) is always shown."""
        if self._bar is not None:
            self._bar.update(self._task, status=text)
            return
        now = time.monotonic()
        if not phase_change and now - self._last_live < self.PLAIN_LIVE_EVERY_S:
            return
        self._last_live = now
        self._write(f"[{self.done + 1}/{self.total}] {text}")

    def line(self, text: str) -> None:
        """A line that stays (a repetition's result, a warning)."""
        if self._bar is not None:
            self._console.print(f"[{self.done}/{self.total}] {text}", markup=False, highlight=False)
            return
        self._write(f"[{self.done}/{self.total}] {text}")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def _write(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()
