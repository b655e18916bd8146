"""benchmarks/bench_design.py: the simulation that chose bench.yaml's windows (docs/statistics.md,
"bench.yaml's design") runs through the real auto loop, and the chosen design beats one window
for all by the margin the docs claim, with no wrong verdict."""

from __future__ import annotations

import importlib.util

from support.embedded import REPO

# loaded from its file: benchmarks/ on sys.path would show its entry points (a "ceiling" sender)
# to every later test of this process
_spec = importlib.util.spec_from_file_location("bench_design", REPO / "benchmarks" / "bench_design.py")
_mod = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_mod)
simulate = _mod.simulate


def test_the_longer_one_thread_window_decides_more_runs_and_none_wrongly():
    one = simulate({1: 6, 8: 6, 32: 6}, 4, 510, runs=200, overhead_s=4.0)
    chosen = simulate({1: 16, 8: 6, 32: 6}, 4, 540, runs=200, overhead_s=4.0)
    assert one["wrong"] == 0 and chosen["wrong"] == 0
    assert one["p5"] < 0.35 < 0.65 < chosen["p5"], (one["p5"], chosen["p5"])
    assert chosen["max_s"] <= 540 + 22      # the budget, give or take the last repetition's length
