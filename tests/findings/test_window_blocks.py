"""docs/findings/scripts/window_blocks.py (docs/findings/long-windows.md): a window's per-second
samples cut into blocks, pooled."""

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def write_window(path: Path, rates: list[float]) -> None:
    path.mkdir(parents=True)
    rows = []
    for i, r in enumerate(rates):
        for (fam, metric), v in {("throughput", "received_per_s"): r, ("storage", "commit_latency_ms"): 1000.0 / r,
                                 ("storage", "probe_ms"): 0.3}.items():
            rows.append({"ts": 1.0 + i, "elapsed_s": float(i), "phase": "measure", "family": fam, "metric": metric,
                         "key": "", "value": v})
    rows.insert(0, {"ts": 0.5, "elapsed_s": 0.0, "phase": "warmup", "family": "throughput",
                    "metric": "received_per_s", "key": "", "value": 1.0})
    (path / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_blocks_spread_and_the_commit_latency_mirror(tmp_path):
    write_window(tmp_path / "p" / "rep-01", [100.0] * 3 + [150.0] * 3 + [120.0] * 3)
    # the last second is a partial block: dropped
    write_window(tmp_path / "p" / "rep-02", [200.0] * 3 + [200.0] * 3 + [220.0] * 3 + [999.0])
    out = subprocess.run([sys.executable, str(REPO / "docs" / "findings" / "scripts" / "window_blocks.py"), str(tmp_path), "--block", "3"],
                         capture_output=True, text=True, check=True).stdout
    res = json.loads(out.strip().splitlines()[-1])
    assert res["blocks"] == 6 and res["windows"] == 2
    assert (res["block_spread_min"], res["block_spread_max"]) == (1.1, 1.5)
    assert res["corr_commit_ms"] == -1.0          # the rate's mirror
    assert "corr_fsync_probe_ms" not in res       # a constant figure has no correlation
    assert "blocks 100 150 120; max/min 1.500" in out
