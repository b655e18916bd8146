"""The gate end to end.

* The interleave plumbing, without the runner: A/B order per round (seeded, recorded), the
  baseline's git worktree (created, used, removed, also on errors), combining the
  single-repetition runs, and the real subprocess command line with a stand-in ``harness``
  package in a scratch git repository (proves each side imports its own code).
* ``@pytest.mark.slow``: the real ``ssbench run`` on the embedded target, with the SEND delay
  (``SSBENCH_EMBEDDED_SEND_DELAY_MS``) making a slowed candidate (in the alone part: its
  verdicts are judged on rates); skipped when HEAD has no runner for the baseline side.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from harness.cli import main
from harness.errors import TargetError
from harness.gate import compare_runs, load_run
from harness.gate.interleave import (MAX_REPLACEMENTS, GateRunError, Side, SubprocessRunner, find_run_dir,
                                     run_interleaved)
from harness.plan import side_orders
from test_gate_compare import PERM, make_summary, write_run
from support.summaries import read as read_summary

REPO = Path(__file__).resolve().parents[2]
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

MATRIX = textwrap.dedent("""\
    # a tiny matrix for the gate's tests
    name: gatetest
    axes:
      initiators: [1]
      threads: [4]
      dialogs: [per_thread]
      payload_bytes: [100]
      server: [durable]
    run:
      warmup_seconds: 1
      measure_seconds: 2
      repetitions: 4
      drain_timeout_seconds: 30
      sample_interval_seconds: 0.5
    broker:
      max_queue_readers: 2
      receive_top: 10000
      waitfor_timeout_ms: 500
      monitor_interval_seconds: 0.5
    """)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=ssbench-test", "-c",
                           "user.email=test@example.invalid", "-c", "commit.gpgsign=false", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


def worktrees(repo: Path) -> list[str]:
    return [line.split(" ", 1)[1] for line in git(repo, "worktree", "list", "--porcelain").splitlines()
            if line.startswith("worktree ")]


@pytest.fixture
def scratch_repo(tmp_path):
    """A git repository with a committed VERSION file 'baseline' and a working-tree change
    to 'candidate' (what `make gate` compares: HEAD against the working tree)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "VERSION").write_text("baseline\n")
    (repo / "matrix.yaml").write_text(MATRIX)
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "baseline")
    (repo / "VERSION").write_text("candidate\n")
    return repo


class FakeRunner:
    """Stands in for `ssbench run`: records each call and writes a one-repetition run whose
    receive rate depends on the side's checked-out VERSION file."""

    def __init__(self, rates: dict[str, float], fail_on: tuple[int, str] | None = None,
                 disturbed: dict[tuple[int, str], str] | None = None):
        self.rates = rates
        self.calls: list[dict] = []
        self.fail_on = fail_on
        self.disturbed = disturbed or {}     # (round, side) -> the repetition's status

    def __call__(self, side: Side, matrix: Path, out: Path, round_no: int) -> Path:
        version = (side.code_root / "VERSION").read_text().strip()
        self.calls.append({"round": round_no, "side": side.name, "root": side.code_root, "version": version,
                           "commit": side.commit, "matrix": matrix, "matrix_text": matrix.read_text(),
                           "root_exists": side.code_root.is_dir(),
                           "worktrees": worktrees(side.code_root)})
        if self.fail_on == (round_no, side.name):
            raise GateRunError(f"round {round_no}: the {side.name}'s `ssbench run` failed (fake)")
        rate = self.rates[version] * (1 + 0.002 * round_no)
        run_dir = out / f"20260101-00000{round_no}-gatetest"     # `--out` as a results root
        summary = make_summary(PERM, 1, receive_rate=rate)
        if (round_no, side.name) in self.disturbed:
            summary["status"] = self.disturbed[(round_no, side.name)]
        write_run(run_dir, {PERM: [summary]})
        return run_dir


def test_side_orders_are_seeded_and_mixed():
    orders = side_orders(random.Random(12345), 8)
    assert orders == side_orders(random.Random(12345), 8)
    assert all(sorted(o) == ["baseline", "candidate"] for o in orders)
    assert {o[0] for o in orders} == {"baseline", "candidate"}     # not always the same side first
    assert side_orders(random.Random(1), 8) != side_orders(random.Random(2), 8)


@pytest.mark.parametrize("rounds", [1, 2, 5, 6, 9])
def test_side_orders_are_counterbalanced(rounds):
    """Each pair of rounds runs both orders, so each side is first in half the rounds (one
    more at most, the odd last round): a position effect cannot favour one side. Drawn one
    round at a time, 5 rounds put one side first in all of them in about 1 seed in 16."""
    for seed in range(200):
        orders = side_orders(random.Random(seed), rounds)
        assert len(orders) == rounds
        for i in range(0, rounds - 1, 2):
            assert orders[i] == tuple(reversed(orders[i + 1])), (seed, orders)
        firsts = [o[0] for o in orders]
        assert abs(firsts.count("baseline") - firsts.count("candidate")) <= rounds % 2, (seed, orders)


@needs_git
def test_interleave_plumbing_with_a_fake_runner(scratch_repo, tmp_path):
    base_commit = git(scratch_repo, "rev-parse", "HEAD")
    runner = FakeRunner({"baseline": 3000.0, "candidate": 2600.0})
    out = tmp_path / "out"
    res = run_interleaved("HEAD", scratch_repo / "matrix.yaml", rounds=6, seed=7, out_dir=out,
                          repo=scratch_repo, runner=runner, echo=lambda s: None)
    # A B A B ...: every round runs both sides once, in the seeded order
    expected = [side for order in side_orders(random.Random(7), 6) for side in order]
    assert [c["side"] for c in runner.calls] == expected
    assert [c["round"] for c in runner.calls] == [r for r in range(1, 7) for _ in (0, 1)]
    record = json.loads((out / "interleave.json").read_text())
    assert record["seed"] == 7 and record["orders"] == [list(o) for o in side_orders(random.Random(7), 6)]
    assert record["baseline_commit"] == base_commit and record["candidate_dirty"] is True
    assert record["status"] == "complete" and record["verdict"] == "regression"
    # the baseline ran from a git worktree of the baseline commit, the candidate from the working tree
    for c in runner.calls:
        assert c["root_exists"]
        assert "repetitions: 1" in c["matrix_text"] and c["matrix"] == out / "matrix-1rep.yaml"
        if c["side"] == "baseline":
            assert c["version"] == "baseline" and c["commit"] == base_commit
            assert c["root"] != scratch_repo and str(c["root"]) in c["worktrees"]
        else:
            assert c["version"] == "candidate" and c["root"] == scratch_repo
    # ... and the worktree is gone afterwards
    wt = next(c["root"] for c in runner.calls if c["side"] == "baseline")
    assert not wt.exists() and not wt.parent.exists()
    assert worktrees(scratch_repo) == [str(scratch_repo)]
    # the rounds were combined into one run per side in the documented layout
    for side in ("baseline", "candidate"):
        combined = out / side
        reps = sorted(p.name for p in (combined / PERM).iterdir() if p.name.startswith("rep-"))
        assert reps == [f"rep-{i:02d}" for i in range(1, 7)]
        for i in range(1, 7):
            s = read_summary(combined / PERM / f"rep-{i:02d}" / "summary.json")
            assert s["repetition"] == i and s["interleave"]["round"] == i and s["interleave"]["side"] == side
        run = json.loads((combined / "run.json").read_text())
        assert [r["round"] for r in run["gate_interleave"]["rounds"]] == list(range(1, 7))
        assert (combined / "matrix.yaml").read_text() == MATRIX
        perm_summary = json.loads((combined / PERM / "summary.json").read_text())
        assert perm_summary["repetitions"] == list(range(1, 7))
    for r in record["runs"]:       # the rounds' own files are untouched by the renumbering
        original = json.loads((Path(r["run_dir"]) / PERM / "rep-01" / "summary.json").read_text())
        assert original["repetition"] == 1 and "interleave" not in original
    assert res.gate_json == out / "candidate" / "gate.json"
    doc = json.loads(res.gate_json.read_text())
    assert doc["mode"] == "interleaved" and doc["interleave"]["seed"] == 7
    assert doc["verdict"] == "regression" and res.report.exit_code == 1
    # combined runs compare as stored runs too
    assert compare_runs(load_run(out / "baseline"), load_run(out / "candidate")).exit_code == 1


@needs_git
def test_interleave_same_code_passes(scratch_repo, tmp_path):
    runner = FakeRunner({"baseline": 3000.0, "candidate": 3000.0})
    res = run_interleaved("HEAD", scratch_repo / "matrix.yaml", seed=3, out_dir=tmp_path / "out",
                          repo=scratch_repo, runner=runner, echo=lambda s: None)
    assert len(runner.calls) == 8                 # rounds default to the matrix's 4 repetitions
    assert res.report.exit_code == 0 and res.report.verdict == "pass"


@needs_git
def test_a_disturbed_repetition_gets_a_replacement_round(scratch_repo, tmp_path):
    """A candidate repetition kept out of the comparison (noisy storage) is replaced by a round
    of both sides, so the regression is still judged on 4 rounds both sides count (the paired
    comparison reads those); the replacements stop at MAX_REPLACEMENTS however many are
    disturbed."""
    runner = FakeRunner({"baseline": 3000.0, "candidate": 1000.0}, disturbed={(2, "candidate"): "noisy_storage"})
    out = tmp_path / "out"
    res = run_interleaved("HEAD", scratch_repo / "matrix.yaml", seed=3, out_dir=out, repo=scratch_repo,
                          runner=runner, echo=lambda s: None)
    assert sorted((c["round"], c["side"]) for c in runner.calls[8:]) == [(5, "baseline"), (5, "candidate")]
    assert json.loads((out / "interleave.json").read_text())["replacements"] == [{"round": 5}]
    assert res.report.exit_code == 1, res.report.format_table()
    assert any("kept out" in n or "left out" in n for n in res.report.notes), res.report.notes

    every = {(r, side): "server_frozen" for r in range(1, 9) for side in ("baseline", "candidate")}
    runner = FakeRunner({"baseline": 3000.0, "candidate": 3000.0}, disturbed=every)
    run_interleaved("HEAD", scratch_repo / "matrix.yaml", seed=3, out_dir=tmp_path / "out2", repo=scratch_repo,
                    runner=runner, echo=lambda s: None)
    assert len(runner.calls) == 8 + 2 * MAX_REPLACEMENTS


@needs_git
def test_interleave_cleans_up_when_a_side_fails(scratch_repo, tmp_path):
    runner = FakeRunner({"baseline": 3000.0, "candidate": 3000.0}, fail_on=(2, "candidate"))
    with pytest.raises(GateRunError):
        run_interleaved("HEAD", scratch_repo / "matrix.yaml", rounds=4, seed=3, out_dir=tmp_path / "out",
                        repo=scratch_repo, runner=runner, echo=lambda s: None)
    assert worktrees(scratch_repo) == [str(scratch_repo)]
    wt = next(c["root"] for c in runner.calls if c["side"] == "baseline")
    assert not wt.exists()
    record = json.loads((tmp_path / "out" / "interleave.json").read_text())
    assert record["status"] == "failed" and "fake" in record["error"]


@needs_git
def test_interleave_input_errors(scratch_repo, tmp_path, capsys):
    kw = dict(repo=scratch_repo, runner=FakeRunner({}), echo=lambda s: None)
    from harness.errors import UserError

    with pytest.raises(UserError, match="unknown git revision"):
        run_interleaved("no-such-ref", scratch_repo / "matrix.yaml", out_dir=tmp_path / "o1", **kw)
    with pytest.raises(UserError, match="no such file"):
        run_interleaved("HEAD", tmp_path / "missing.yaml", out_dir=tmp_path / "o2", **kw)
    (tmp_path / "o3").mkdir()
    (tmp_path / "o3" / "x").write_text("")
    with pytest.raises(UserError, match="not empty"):
        run_interleaved("HEAD", scratch_repo / "matrix.yaml", out_dir=tmp_path / "o3", **kw)
    with pytest.raises(UserError, match="not a git checkout"):
        run_interleaved("HEAD", scratch_repo / "matrix.yaml", out_dir=tmp_path / "o4",
                        repo=tmp_path / "o3", runner=FakeRunner({}), echo=lambda s: None)
    assert worktrees(scratch_repo) == [str(scratch_repo)]
    # through the CLI: exit 2 with a message
    assert main(["gate", "--interleave", "HEAD"]) == 2
    assert "needs a MATRIX" in capsys.readouterr().err
    assert main(["gate", "--interleave", "no-such-ref-xyz", str(REPO / "matrices" / "gate.yaml"),
                 "--out", str(tmp_path / "o5")]) == 2
    assert "unknown git revision" in capsys.readouterr().err
    assert main(["gate", "--interleave", "HEAD", "--baseline", "x", "m.yaml"]) == 2
    assert main(["gate"]) == 2


def test_find_run_dir_accepts_both_out_conventions(tmp_path):
    direct = write_run(tmp_path / "direct", {PERM: [make_summary(PERM, 1)]})
    assert find_run_dir(direct) == direct
    nested = write_run(tmp_path / "root" / "20260101-000000-gate", {PERM: [make_summary(PERM, 1)]})
    assert find_run_dir(tmp_path / "root") == nested
    assert find_run_dir(tmp_path / "nothing") is None


# --------------------------------------------------------------------------- the real subprocess command line

FAKE_CLI = textwrap.dedent('''\
    """Stand-in for harness.cli: `run MATRIX --target T --out OUT` writes a one-repetition run."""
    import json, os, sys, zlib
    from pathlib import Path

    import harness


    def main(argv):
        assert argv[0] == "run", argv
        matrix, target, out = argv[1], argv[argv.index("--target") + 1], Path(argv[argv.index("--out") + 1])
        reps = [l for l in open(matrix).read().splitlines() if "repetitions" in l]
        run = out / "20260101-000000-gatetest"
        rep = run / "PERM" / "rep-01"
        rep.mkdir(parents=True)
        jitter = 1 + (zlib.crc32(str(out).encode()) % 100) / 10000
        (run / "run.json").write_text(json.dumps({"schema": "ssbench.run/1", "run_id": run.name,
                                                  "status": "complete", "host": {"hostname": "h"}}))
        summary = json.loads(TEMPLATE)      # a complete summary (test_gate_compare.make_summary)
        summary.update({"send_rate": harness.RATE * jitter, "receive_rate": harness.RATE * jitter,
                        "harness_file": harness.__file__, "ssbench_home": os.environ.get("SSBENCH_HOME"),
                        "target_arg": target, "repetitions_line": reps,
                        "send_delay": os.environ.get("SSBENCH_EMBEDDED_SEND_DELAY_MS")})
        (rep / "summary.json").write_text(json.dumps(summary))
        return 0


    if __name__ == "__main__":
        sys.exit(main(sys.argv[1:]))
    ''').replace("PERM", PERM).replace("TEMPLATE", repr(json.dumps(make_summary(PERM, 1))))


@pytest.fixture
def fake_harness_repo(tmp_path):
    """A git repository holding a stand-in `harness` package: committed RATE 1000, working tree 700."""
    repo = tmp_path / "fake"
    (repo / "harness").mkdir(parents=True)
    (repo / "harness" / "__init__.py").write_text("RATE = 1000.0\n")
    (repo / "harness" / "cli.py").write_text(FAKE_CLI)
    (repo / "matrix.yaml").write_text(MATRIX)
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "baseline")
    (repo / "harness" / "__init__.py").write_text("RATE = 700.0\n")
    return repo


@needs_git
def test_subprocess_runner_runs_each_side_with_its_own_code(fake_harness_repo, tmp_path, monkeypatch):
    """`python -m harness.cli run ...` in each checkout, with PYTHONPATH/SSBENCH_HOME set: the
    baseline imports the worktree's harness (RATE 1000), not the candidate's nor the editable
    install of this repository, and the candidate its working tree (RATE 700). Relative paths
    given by the user still work although each side runs in its own checkout. A side's own
    environment (here the candidate's SEND delay) reaches that side only."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SSBENCH_EMBEDDED_SEND_DELAY_MS", raising=False)
    out = tmp_path / "out"
    runner = SubprocessRunner(target="embedded", side_env={"candidate": {"SSBENCH_EMBEDDED_SEND_DELAY_MS": "20"}})
    res = run_interleaved("HEAD", Path("fake") / "matrix.yaml", rounds=4, seed=11, out_dir="out",
                          repo=fake_harness_repo, runner=runner, echo=lambda s: None)
    for side, rate in (("baseline", 1000.0), ("candidate", 700.0)):
        for i in range(1, 5):
            s = read_summary(out / side / PERM / f"rep-{i:02d}" / "summary.json")
            assert s["receive_rate"] == pytest.approx(rate, rel=0.02)
            assert s["target_arg"] == "embedded" and s["repetitions_line"] == ["  repetitions: 1"]
            assert s["send_delay"] == ("20" if side == "candidate" else None)
            home = Path(s["ssbench_home"])
            assert Path(s["harness_file"]).resolve().is_relative_to(home.resolve())
            if side == "candidate":
                assert home == fake_harness_repo
            else:
                assert home != fake_harness_repo and home.name == "src"
        assert (out / "rounds" / f"round-01-{side}.log").exists()
    assert res.report.verdict == "regression" and res.report.exit_code == 1
    assert worktrees(fake_harness_repo) == [str(fake_harness_repo)]


#: a stand-in side whose round 2 waits for a signal, as a long `ssbench run` would; every round
#: else is FAKE_CLI's (harness/fake_cli.py beside it)
SLOW_ROUND_2 = textwrap.dedent('''\
    import signal, sys, time
    from pathlib import Path

    from harness.fake_cli import main

    if __name__ == "__main__":
        out = Path(sys.argv[sys.argv.index("--out") + 1])
        if "round-02" in out.name:
            def stop(signum, frame):      # SIGTERM ends the side as it ends `ssbench run`
                (out.parent / "terminated").write_text(str(signum))
                sys.exit(130)

            signal.signal(signal.SIGTERM, stop)
            (out.parent / "started").write_text("")
            time.sleep(120)
        sys.exit(main(sys.argv[1:]))
    ''')


@needs_git
def test_a_sigterm_to_the_gate_ends_its_side_and_removes_the_worktree(fake_harness_repo, tmp_path):
    """SIGTERM (a CI timeout, `kill`) is handled as Ctrl-C: the running side gets it passed on,
    interleave.json says interrupted, the baseline's worktree is removed, the exit is 130."""
    (fake_harness_repo / "harness" / "fake_cli.py").write_text(FAKE_CLI)
    (fake_harness_repo / "harness" / "cli.py").write_text(SLOW_ROUND_2)
    git(fake_harness_repo, "add", "harness")
    git(fake_harness_repo, "commit", "-q", "-m", "a slow round 2")
    script = ("import sys\nfrom harness.cli import sigterm_as_ctrl_c\n"
              "from harness.gate.interleave import SubprocessRunner, run_interleaved\n"
              "try:\n    with sigterm_as_ctrl_c():   # as harness.cli.main runs every command\n"
              "        run_interleaved('HEAD', sys.argv[1], rounds=4, seed=11, out_dir=sys.argv[2], repo=sys.argv[3],"
              " runner=SubprocessRunner(), echo=print)\nexcept KeyboardInterrupt:\n    sys.exit(130)\n")
    out = tmp_path / "out"
    gate = subprocess.Popen([sys.executable, "-c", script, str(fake_harness_repo / "matrix.yaml"), str(out),
                             str(fake_harness_repo)], cwd=REPO, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for _ in range(1200):
            if (out / "rounds" / "started").exists() or gate.poll() is not None:
                break
            time.sleep(0.05)
        assert (out / "rounds" / "started").exists(), gate.communicate(timeout=60)[0]
        record = json.loads((out / "interleave.json").read_text())
        assert Path(record["worktree"]).is_dir()
        gate.send_signal(signal.SIGTERM)         # to the gate alone: the side is not signalled by anyone else
        said = gate.communicate(timeout=60)[0]
    finally:
        if gate.poll() is None:
            os.killpg(gate.pid, signal.SIGKILL)
    assert gate.returncode == 130, said
    assert (out / "rounds" / "terminated").read_text() == str(int(signal.SIGTERM))
    record = json.loads((out / "interleave.json").read_text())
    assert record["status"] == "interrupted", record
    assert worktrees(fake_harness_repo) == [str(fake_harness_repo)] and not Path(record["worktree"]).exists()


def test_preflight_refuses_a_side_that_imports_foreign_code(tmp_path):
    empty = tmp_path / "no-harness-here"
    empty.mkdir()
    runner = SubprocessRunner()
    # no harness package in the checkout: Python would fall back to the installed ssbench
    with pytest.raises(GateRunError, match="not from its checkout|cannot import"):
        runner.preflight(Side("baseline", empty))
    runner.preflight(Side("candidate", REPO))    # this checkout imports itself


def test_subprocess_runner_reports_a_failed_run(tmp_path):
    root = tmp_path / "broken"
    (root / "harness").mkdir(parents=True)
    (root / "harness" / "__init__.py").write_text("")
    (root / "harness" / "cli.py").write_text("import sys\nprint('boom: no runner')\nsys.exit(1)\n")
    runner = SubprocessRunner()
    with pytest.raises(GateRunError, match="boom: no runner"):
        runner(Side("candidate", root), tmp_path / "m.yaml", tmp_path / "out" / "round-01-candidate", 1)
    # exit 3 (the target failed) stays a target error: `ssbench gate` exits 3 too
    (root / "harness" / "cli.py").write_text("import sys\nprint('no server')\nsys.exit(3)\n")
    with pytest.raises(TargetError, match="no server"):
        runner(Side("baseline", root), tmp_path / "m.yaml", tmp_path / "out" / "round-01-baseline", 1)


# --------------------------------------------------------------------------- the real runner (slow)

def _runner_at_head() -> str | None:
    """None when the runner is committed at HEAD (a baseline worktree of HEAD can run), else why not."""
    if subprocess.run(["git", "-C", str(REPO), "cat-file", "-e", "HEAD:harness/commands/run.py"],
                      capture_output=True).returncode != 0:
        return "the runner is not committed at HEAD yet: the baseline worktree could not run"
    return None


@pytest.mark.slow
@pytest.mark.swarm
@pytest.mark.timing   # a verdict from real swarms: disturbed repetitions would be kept out
def test_gate_on_the_embedded_target_catches_a_slowed_send(tmp_path, pg_server, capsys, monkeypatch):
    """The gate on real runs of a 1-permutation matrix (2 s measured): an interleaved gate of
    HEAD against this checkout with a 20 ms delay inside the candidate's SEND (its own
    environment, as a slowed revision would run) is a regression, and so is the stored mode
    (``--baseline DIR --candidate DIR``) on its two sides; the reverse (faster) passes.

    That the same code passes on real runs is ``.ci/run``'s step after ``make test`` (the
    interleaved self-comparison on ``matrices/gate.yaml``, 5 rounds) and its false-alarm rate
    the simulation's (docs/gate.md); the plumbing with fake runs is this module's other tests."""
    reason = _runner_at_head()
    if reason:
        pytest.skip(reason)
    matrix = tmp_path / "gatetest.yaml"
    matrix.write_text(MATRIX)
    monkeypatch.delenv("SSBENCH_EMBEDDED_SEND_DELAY_MS", raising=False)
    monkeypatch.chdir(REPO)
    runner = SubprocessRunner(target="embedded", side_env={"candidate": {"SSBENCH_EMBEDDED_SEND_DELAY_MS": "20"}})
    res = run_interleaved("HEAD", matrix, rounds=4, seed=7, out_dir=tmp_path / "ab", runner=runner,
                          echo=lambda s: None)
    a, c = res.baseline_dir, res.candidate_dir
    capsys.readouterr()
    rc = main(["gate", "--baseline", str(a), "--candidate", str(c)])
    out = capsys.readouterr().out
    doc = json.loads((c / "gate.json").read_text())
    if not _disk_left_too_few(doc, out):
        assert res.report.verdict == "regression" and res.report.exit_code == 1, out
        assert rc == 1 and "REGRESSION" in out, out
        assert doc["verdict"] == "regression"
        assert {r["metric"] for r in doc["rows"] if r["verdict"] == "regression"} & {"send_rate", "send_p50_ms"}
    # faster: both rates improve, and nothing but a tail latency may be worse (on a machine of
    # one CPU the unslowed side saturates it: its p99 rose 24 -> 43 ms under a quota of 1 CPU,
    # which the gate rightly says; the slowed side's 20 ms SENDs leave the CPU idle)
    rc = main(["gate", "--baseline", str(c), "--candidate", str(a)])
    out = capsys.readouterr().out
    rows = json.loads((a / "gate.json").read_text())["rows"]
    assert {r["metric"]: r["verdict"] for r in rows if r["metric"] in ("send_rate", "receive_rate")} == \
        {"send_rate": "improved", "receive_rate": "improved"}, out
    assert rc == 0 or {r["metric"] for r in rows if r["verdict"] == "regression"} <= {"send_p99_ms", "e2e_p99_ms"}, out


def _disk_left_too_few(doc: dict, table: str) -> bool:
    """Whether the slowed candidate was judged inconclusive only because repetitions kept out
    for noisy storage (other processes' fsyncs on the same disk: on a shared machine, the CI
    host's other jobs) left a side fewer than significance needs. That is the gate being right,
    so it is a warning here, not a pass: the slowed SEND must still look worse beyond the
    threshold on every rate row."""
    import warnings

    rows = doc["rows"]
    rates = [r for r in rows if r["metric"] in ("send_rate", "receive_rate")]
    if not (doc["verdict"] != "regression" and "kept out of the comparison (noisy_storage)" in table and rates
            and all(min(r["n_baseline"], r["n_candidate"]) < 4 for r in rows)):
        return False
    assert all(r["r"] is not None and r["r"] < 1 and r["effect_beyond"] for r in rates), table
    warnings.warn(f"gate: repetitions kept out for noisy storage left too few to judge significance; the slowed "
                  f"SEND looked worse on every rate row:\n{table}")
    return True
