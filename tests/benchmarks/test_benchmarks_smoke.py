"""Every benchmark kept in benchmarks/ (benchmarks/README.md) runs end to end in a short, cheap
invocation and prints what its README says it prints. Smoke tests: the figures are the
benchmarks' business, run by hand. benchmarks/harness_ceiling.py's own are in
tests/load/test_harness_ceiling_smoke.py, benchmarks/analyze_bench.py's and
benchmarks/analysis_time.py's (which times it) in tests/benchmarks/test_analyze_bench_at_paper_scale.py."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "benchmarks"

pytestmark = pytest.mark.slow


def run(script: str, *args: str, timeout: float = 300, ok=(0,)) -> str:
    env = {**os.environ, "PYTHONPATH": str(REPO)}      # SSBENCH_PGDATA: this test process's server
    out = subprocess.run([sys.executable, str(BENCH / script), *args], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=timeout)
    assert out.returncode in ok, out.stdout[-3000:] + out.stderr[-3000:]
    return out.stdout


def test_every_script_in_benchmarks_is_in_its_readme_and_smoke_tested():
    """benchmarks/ lists only kept benchmarks: each in the README, each run by a smoke test."""
    readme = (BENCH / "README.md").read_text()
    tests = "".join(p.read_text() for p in [*Path(__file__).parent.glob("test_*.py"),
                                           REPO / "tests" / "load" / "test_harness_ceiling_smoke.py"])
    helpers = {"loadbench.py", "ceiling_sender.py"}      # imported by the benchmarks, not run
    for script in sorted(p.name for p in BENCH.glob("*.py")):
        assert f"`{script}`" in readme, f"benchmarks/README.md does not describe {script}"
        if script not in helpers:
            assert f'"{script}"' in tests, f"no smoke test runs benchmarks/{script}"
    assert not [p for p in BENCH.iterdir() if p.suffix not in (".py", ".md") and p.name != "__pycache__"]


def test_stopping_rule():
    last = json.loads(run("stopping_rule.py", "--trials", "20", "--runs", "3").strip().splitlines()[-1])
    assert {"no_effect", "beyond_margin", "power", "families"} <= set(last)
    assert all(row["wrong"] == 0 for row in last["power"])


def test_gate_rates():
    out = run("gate_rates.py", "--trials", "4", "--markdown")
    assert "| noise only, 5 reps, 2 perms (gate.yaml), 3 % noise |" in out
    assert out.count("| --- |") == 1 and "4 trials per scenario" in out


def test_diagnosis_growth():
    out = run("diagnosis_growth.py", "--trials", "20")
    assert out.startswith("window  samples  fluctuation") and len(out.splitlines()) == 1 + 2 * 3 * 3


def test_install_time_measures_what_the_makefile_runs():
    """--dry-run installs nothing; its uv command is the Makefile's, so the benchmark times the
    install `make` does."""
    out = run("install_time.py", "--dry-run", "--rounds", "2")
    last = json.loads(out.strip().splitlines()[-1])
    assert last["order"] == [["pip", "uv"], ["uv", "pip"]]
    uv = last["commands"]["uv"][-1]
    makefile = (REPO / "Makefile").read_text()
    recipe = re.search(r"^\s+\$\(BIN\)/uv pip install [^&\n]*", makefile, re.M).group(0)
    words = shlex.split(recipe.replace("$(BIN)", "x"))
    for flag in ("--compile-bytecode", "-e", ".[test]"):
        assert flag in uv and flag in words, (flag, uv, words)


@pytest.mark.swarm
@pytest.mark.untimed("the lines it prints; its ratio may miss its goal")
def test_send_vs_pgbench(pg_server):
    # exit 1 when the ratio misses its goal: with 2 clients for a second it may
    out = run("send_vs_pgbench.py", "--clients", "2", "--seconds", "1", "--warmup", "0.5", "--rounds", "1",
              ok=(0, 1))
    assert re.search(r"round 1: ssbench [\d,]+ SEND/s   pgbench [\d,]+ SEND/s", out), out
    assert "median ratio ssbench / pgbench = " in out


@pytest.mark.swarm
@pytest.mark.untimed("figures above zero")
def test_ab_ceiling_of_one_checkout_against_itself(pg_server):
    if not (REPO / ".venv" / "bin" / "python").exists():
        pytest.skip("ab_ceiling.py runs each checkout with its own .venv (make .venv/.installed)")
    out = run("ab_ceiling.py", "--a", str(REPO), "--b", str(REPO), "--rounds", "1", "--clients", "2",
              "--seconds", "1", "--warmup", "0.5", "--variants", "hub", "--sends", "null")
    last = json.loads(out.strip().splitlines()[-1])
    assert last["hub_send_per_s"]["a"] > 0 and last["hub_send_per_s"]["b"] > 0, last


@pytest.mark.swarm
@pytest.mark.untimed("the processes it follows and their slopes")
def test_memory_soak(pg_server, tmp_path):
    """A real ssbench run of a few seconds: every process followed, a slope for each (7 s from the
    Locust master's start: about 7 samples a process, a slope needs 4); open loop (``--rate``):
    the processes and their slopes, not a saturated host."""
    out = run("memory_soak.py", "--threads", "2", "--payload", "100", "--warmup", "1", "--measure", "6",
              "--rate", "50", "--every", "1", "--settle", "0", "--json", str(tmp_path / "soak.json"))
    last = json.loads(out.strip().splitlines()[-1])
    roles = {k.rsplit(" ", 1)[0] for k in last["slopes"]}
    assert last["exit"] == 0 and roles == {"ssbench run", "locust master", "locust worker", "broker"}, last
    assert all(v["rss"] is not None and v["peak_rss_mb"] > 0 for v in last["slopes"].values()), last
    assert json.loads((tmp_path / "soak.json").read_text())["samples"]


def test_usl_coverage():
    """Every table, a few sweeps a cell: the profile / Wald / bootstrap coverage, the band, the
    comparisons and the lack-of-fit test."""
    out = run("usl_coverage.py", "--trials", "2", "--boot-trials", "1", "--workers", "1", "--quick", timeout=600)
    for head in ("1. coverage of the 95 % intervals", "1b. the figure's band", "2. a technique against its baseline",
                 "3. said not to fit"):
        assert head in out, out
    assert "| shared-like (bootstrap) | lognormal 0.05 | 3 |" in out and "| misfit | lognormal 0.03 | 3 |" in out


def test_scaling_runs_on_existing_runs(tmp_path):
    """Two synthetic sweeps of the law, side by side without Spark: one shared dialog's σ
    interval above one dialog per thread's in both (exit 0)."""
    from support import synth

    law = (("per_thread", (2400.0, 0.2, 2e-4)), ("shared", (2400.0, 0.6, 0.03)))
    runs = [synth.synthesize(tmp_path, synth.SynthSpec(
        name="sweep", initiators=(1,), threads=(1, 2, 4, 8, 16, 32), dialogs=("per_thread", "shared"), payloads=(100,),
        servers=("durable",), repetitions=3, warmup_seconds=1, measure_seconds=2, drain_seconds=1, usl=law, seed=seed),
        run_id=f"20261128-00000{seed}-sweep") for seed in (1, 2)]
    out = run("scaling_runs.py", "--existing", *map(str, runs), "--no-analysis")
    assert "| shared σ | " in out and "| shared vs per_thread: moves | raises σ" in out, out
    assert out.strip().endswith("wholly above one dialog per thread's in every run: True")
