"""benchmarks/bench_design.py: the simulation that chose bench.yaml's windows (docs/statistics.md,
"bench.yaml's design") runs through the real auto loop, and the chosen design beats one window
for all by the margin the docs claim, with no wrong verdict."""

from __future__ import annotations

import sys

from support.embedded import REPO

sys.path.insert(0, str(REPO / "benchmarks"))

from bench_design import simulate  # noqa: E402


def test_the_longer_one_thread_window_decides_more_runs_and_none_wrongly():
    one = simulate({1: 6, 8: 6, 32: 6}, 4, 510, runs=200, overhead_s=4.0)
    chosen = simulate({1: 16, 8: 6, 32: 6}, 4, 540, runs=200, overhead_s=4.0)
    assert one["wrong"] == 0 and chosen["wrong"] == 0
    assert one["p5"] < 0.35 < 0.65 < chosen["p5"], (one["p5"], chosen["p5"])
    assert chosen["max_s"] <= 540 + 22      # the budget, give or take the last repetition's length
