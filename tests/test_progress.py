"""Run progress: the ETA ignores resumed repetitions, phase changes always show, a terminal
gets a live bar, a pipe gets plain lines."""

from __future__ import annotations

import io
import time

from harness.progress import Progress


class Tty(io.StringIO):
    def isatty(self):
        return True


def test_eta_counts_only_repetitions_run_here(monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    p = Progress(total=10, stream=io.StringIO())
    p.skip(6)                      # a resume: 6 complete already, 4 to run
    p.mark_start()
    assert p.eta() == "?"
    clock[0] += 30.0               # one repetition took 30 s
    p.advance()
    assert p.done == 7 and p.ran == 1
    assert p.eta_seconds() == 90.0  # 3 left x 30 s, not 3 x (30 / 7)


def test_plain_output_rate_limits_live_figures_but_not_phase_changes(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    out = io.StringIO()
    p = Progress(total=2, stream=out)
    p.status("p rep 1: running", phase_change=True)
    p.status("p rep 1: running: 100 msg/s")        # within 5 s of the last line: dropped
    clock[0] += 1
    p.status("p rep 1: draining: waiting for the queues to empty", phase_change=True)
    clock[0] += 6
    p.status("p rep 1: draining: 0 msg/s received, xmitq 12")
    lines = out.getvalue().splitlines()
    assert lines == ["[1/2] p rep 1: running", "[1/2] p rep 1: draining: waiting for the queues to empty",
                     "[1/2] p rep 1: draining: 0 msg/s received, xmitq 12"]


def test_a_terminal_gets_a_live_bar():
    out = Tty()
    p = Progress(total=3, stream=out)
    p.status("p rep 1: running")
    p.advance()
    p.line("p rep 1: send 10 msg/s")
    p.close()
    text = out.getvalue()
    assert "1/3" in text and "ETA" in text and "p rep 1: send 10 msg/s" in text
