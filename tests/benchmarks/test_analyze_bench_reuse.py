"""benchmarks/analyze_bench.py --reuse takes data synthesized before only when it was made with
the settings asked for (window, sample interval, repetitions); otherwise it synthesizes anew.
The synthesis itself is replaced by a stand-in that writes a run.json: what is tested is the
choice, not the data (the paper-scale smoke test synthesizes for real)."""

from __future__ import annotations

import importlib.util
import json

from support.embedded import REPO


def _bench():
    spec = importlib.util.spec_from_file_location("analyze_bench", REPO / "benchmarks" / "analyze_bench.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_reuse_takes_only_data_made_with_the_same_settings(tmp_path, monkeypatch):
    bench = _bench()
    made = []

    def synthesize(root, spec, run_id, workers):
        made.append((spec.measure_seconds, spec.repetitions))
        (root / run_id).mkdir()
        (root / run_id / "run.json").write_text(json.dumps({"spec": [spec.measure_seconds]}))

    monkeypatch.setattr(bench.synth, "synthesize", synthesize)
    bench.make_data(tmp_path, 1, 1, reuse=True, measure_seconds=10, interval=5)
    bench.make_data(tmp_path, 1, 1, reuse=True, measure_seconds=10, interval=5)      # the same: reused
    assert made == [(10, 3)]
    bench.make_data(tmp_path, 1, 1, reuse=True, measure_seconds=10, interval=1)      # another interval
    bench.make_data(tmp_path, 1, 1, reuse=True, measure_seconds=60, interval=1)      # another window
    bench.make_data(tmp_path, 1, 1, reuse=False, measure_seconds=60, interval=1)     # not asked to reuse
    assert made == [(10, 3), (10, 3), (60, 3), (60, 3)]
