"""A third target plugs in without an edit to ssbench: the in-memory target of tests/plugins
registers itself through its distribution's entry points, and ``ssbench run --target memory``
runs a tiny matrix on it end to end (real Locust master and workers, the collectors, the drain,
the lost-message check), nothing lost. Without the plugin on the path the name is unknown."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from support import pythonpath_env
from support.summaries import read as read_summary

SSBENCH = str(Path(sys.executable).with_name("ssbench"))

MATRIX = """\
name: third
axes:
  initiators: [2]
  threads: [3]
  dialogs: [per_thread, shared]
  payload_bytes: [100]
  server: [default]
  rate: [50]                    # open loop: counts, not the target's ceiling (12 CPU-s less)
run:
  warmup_seconds: 1
  measure_seconds: 2
  repetitions: 1
  drain_timeout_seconds: 30
"""


def _run(tmp_path: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    m = tmp_path / "third.yaml"
    m.write_text(MATRIX)
    return subprocess.run([SSBENCH, "run", str(m), "--target", "memory", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow
@pytest.mark.swarm
@pytest.mark.untimed("counts")
def test_ssbench_run_on_a_plugins_target_loses_nothing(tmp_path):
    out = tmp_path / "out"
    env = pythonpath_env()
    env["SSBENCH_PGDATA"] = str(tmp_path / "no-pg")          # a PostgreSQL server would show up here
    r = _run(tmp_path, env, "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "complete"
    assert run["target"]["kind"] == "memory" and run["target"]["capabilities"]["priority"] is False
    assert run["target"]["label"] == "in-memory test target (not Service Broker)"
    summaries = sorted(out.glob("*/rep-01/summary.json"))
    assert [p.parent.parent.name for p in summaries] == ["i2-t3-per_thread-p100-default-rate50",
                                                         "i2-t3-shared-p100-default-rate50"]
    for p in summaries:
        d = read_summary(p)
        # the host may be busy (noisy_host, client_bound: this machine's conditions, not the target's)
        assert d["messages_lost"] == 0 and d["errors"] == 0 and d["status"] in ("ok", "noisy_host", "client_bound"), d
        # what the target counted, what the Locust workers recorded, what was received: equal
        assert d["messages_sent"] > 0 and d["messages_sent"] == d["messages_sent_client"] == d["messages_received"]
        assert [(i["initiator"], i["sent"] == i["received"] > 0) for i in d["per_initiator"]] == [(1, True), (2, True)]
        assert d["users_active"] == d["users_expected"] == 6
        assert d["send_latency_ms"]["count"] > 0 and d["e2e_latency_ms"]["count"] > 0
        families = {json.loads(line)["family"] for line in (p.parent / "samples.jsonl").open()}
        assert "memory" in families                # the plugin's own collector ran
        assert {"queues", "throughput", "host"} <= families
        assert "waits" not in families              # the target has no wait statistics: none invented
    assert "in-memory test target (not Service Broker): numbers are this target's" in r.stdout
    assert not (tmp_path / "no-pg").exists()


def test_without_the_plugin_the_name_is_unknown(tmp_path):
    r = _run(tmp_path, {k: v for k, v in pythonpath_env().items() if k != "PYTHONPATH"},
             "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "'memory': no such file, nor a registered target ('embedded', 'mssql')" in r.stderr
    assert not (tmp_path / "out").exists()
