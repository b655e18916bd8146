"""Bad input through the real command line (``python -m harness.cli``, a subprocess each):
exit 2, one stderr line ``ssbench: error: file:line: field: message``, no traceback, nothing
written (no run directory, no results root, no embedded PostgreSQL data directory: a bad run is
refused before the target starts), no password echoed.

One test drives ``execute`` in-process with a target whose provisioning fails: a stand-in,
because the failure to inject is the target's, and the point is what the command leaves behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness.errors import TargetError

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
CORPUS = HERE / "corpus"
TINY = REPO / "tests" / "data" / "tiny.yaml"
SECRET = "S3cr3t!Pass"


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.fixture
def cli(tmp_path):
    """Run ``ssbench ARGS`` in a scratch directory; returns (exit code, stdout, stderr) after
    checking that nothing was written there and no PostgreSQL data directory was made."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "afile").write_text("not a directory\n")
    pgdata = tmp_path / "pg"
    env = dict(os.environ, PYTHONPATH=str(REPO), SSBENCH_PGDATA=str(pgdata), NO_COLOR="1")

    def run(*args: str, clean: bool = True, timeout: float = 30):
        before = tree(work)
        r = subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=work, env=env,
                           capture_output=True, text=True, timeout=timeout)
        if clean:
            assert tree(work) == before, f"files written: {sorted(tree(work) - before)}"
            assert not pgdata.exists(), "the embedded server was started for a bad input"
        return r.returncode, r.stdout, r.stderr

    run.work = work
    return run


def assert_refused(code: int, err: str, where: str, expect: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err, err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"ssbench: error: {where}"), err
    assert expect in lines[0], err
    assert SECRET not in err and "83291746" not in err


MATRIX_CASES = {
    # corpus file -> (expected line, expected text)
    "matrix-billion-laughs": (14, "anchors and aliases"),
    "matrix-recursive-alias": (14, "anchors and aliases"),
    "matrix-deep-flow-3000": (14, "nested more than 50 deep"),
    "matrix-tag-python-name": (2, "YAML tag '!!python/name:os.system' is not allowed"),
    "matrix-tag-int-abc": (5, "not a valid int"),
    "matrix-embedded-profiles-value-list": (15, "an embedded profile is a name, got list"),
    "matrix-run-order-list": (12, "got ['a', 'b']"),
    "matrix-payload-2GiB": (7, "over 2 GB - 1"),
}


@pytest.mark.parametrize("name", sorted(MATRIX_CASES))
def test_matrix_command_refuses_bad_file(cli, name, tally):
    tally.tried()
    line, expect = MATRIX_CASES[name]
    f = CORPUS / f"{name}.yaml"
    code, out, err = cli("matrix", str(f), "--count")
    assert_refused(code, err, f"{f}:{line}: ", expect)
    assert out == ""
    tally.clean()


def test_matrix_command_refuses_nul_and_binary(cli, tally):
    for data, line, expect in ((b"name: t\naxes: {\x00}\n", 2, "U+0000"),
                               (b"\x89PNG\r\n\x1a\n\x00\x00", 1, "not UTF-8"),
                               (b"name: \xff\xfe\n", 1, "not UTF-8")):
        tally.tried()
        f = cli.work.parent / "bad.yaml"
        f.write_bytes(data)
        code, out, err = cli("matrix", str(f))
        assert_refused(code, err, f"{f}:{line}: ", expect)
        tally.clean()


def test_matrix_target_checks_the_server_axis(cli, tally):
    """``--count`` alone cannot know the target; ``--target`` checks the servers (without
    connecting or starting anything)."""
    f = CORPUS / "matrix_embedded-server-unknown.yaml"
    assert cli("matrix", str(f), "--count")[:2] == (0, "32\n")
    tally.tried()
    code, out, err = cli("matrix", str(f), "--count", "--target", "embedded")
    assert_refused(code, err, f"{f}:9: axes.server[1]: ",
                   "server profile 'nosuch' is not defined for the embedded target (it has: durable, delayed)")
    tally.clean()
    paper, bench = REPO / "matrices" / "paper.yaml", REPO / "matrices" / "bench.yaml"
    topo = REPO / "topologies" / "example-distributed.yaml"
    assert cli("matrix", str(paper), "--count", "--target", "embedded")[:2] == (0, "528\n")
    # the example topology's profiles are named for what they are (durable, delayed), not after
    # the paper's builds: bench.yaml fits it, paper.yaml's sql2005/sql2008 need a topology of their own
    assert cli("matrix", str(bench), "--count", "--target", str(topo))[:2] == (0, "9\n")
    tally.tried()
    code, out, err = cli("matrix", str(paper), "--count", "--target", str(topo))
    assert_refused(code, err, f"{paper}:", "not defined for the mssql target")
    assert "axes.server[0]" in err
    tally.clean()


def test_run_refuses_before_creating_or_starting_anything(cli, tally):
    unknown = CORPUS / "matrix_embedded-server-unknown.yaml"
    payload = CORPUS / "matrix-payload-2GiB.yaml"
    topo = cli.work.parent / "topo.yaml"
    topo.write_text((REPO / "topologies" / "example-single.yaml").read_text()
                    .replace("password_env: SSBENCH_MSSQL_PASSWORD", f'password_env: "{SECRET}"'))
    cases = [
        (("run", str(unknown)), f"{unknown}:9: axes.server[1]: ", "not defined for the embedded target"),
        (("run", str(unknown), "--results", "res/a/b"), f"{unknown}:9: ", "not defined"),
        (("run", str(payload)), f"{payload}:7: axes.payload_bytes[1]: ", "over 2 GB - 1"),
        (("run", str(TINY), "--out", "afile"), "afile: --out: ", "exists and is not a directory"),
        (("run", str(TINY), "--out", "afile/sub"), "afile/sub: --out: ", "afile is not a directory"),
        (("run", str(TINY), "--out", "/proc/nope"), "/proc/nope: --out: ", "cannot create it in /proc"),
        (("run", str(TINY), "--results", "afile"), "afile: --results: ", "exists and is not a directory"),
        (("run", str(TINY), "--results", "afile/x"), "afile/x: --results: ", "not a directory"),
        (("run", str(TINY), "--out", "nothing-here", "--resume"), "nothing-here: --out: ",
         "no run.json to resume"),
        (("run", str(TINY), "--target", str(topo)), f"{topo}:", "is not an environment variable name"),
        (("run", str(TINY), "--target", "nope.yaml"), "--target: 'nope.yaml'", "no such file"),
        (("run", str(CORPUS / "matrix-deep-flow-3000.yaml")), f"{CORPUS}/matrix-deep-flow-3000.yaml:14: ",
         "nested"),
    ]
    for args, where, expect in cases:
        tally.tried()
        code, out, err = cli(*args)
        assert_refused(code, err, where, expect)
        tally.clean()


def test_out_naming_a_non_empty_directory_keeps_it(cli, tally):
    prev = cli.work / "prev"
    prev.mkdir()
    (prev / "run.json").write_text("{}")
    tally.tried()
    code, out, err = cli("run", str(TINY), "--out", "prev")
    assert_refused(code, err, "prev: --out: ", "exists and is not empty")
    assert (prev / "run.json").read_text() == "{}"
    tally.clean()


class _FailingTarget:
    """Stands in for a target whose provisioning fails (a server that cannot be set up)."""

    kind = "embedded"
    label = "failing stand-in"

    def describe(self) -> dict:
        return {"kind": self.kind, "label": self.label}

    def profiles(self) -> list[str]:
        return ["durable", "delayed"]

    def run_lock(self, owner: str):
        import contextlib

        return contextlib.nullcontext()

    def provision(self, max_initiators: int) -> None:
        raise TargetError("injected: provisioning failed")

    def close(self) -> None:
        pass


@pytest.fixture
def failing_target(monkeypatch):
    import harness.targets.factory as factory

    monkeypatch.setattr(factory, "make_target", lambda where: _FailingTarget())
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    yield
    for s, h in saved.items():
        signal.signal(s, h)


def _args(**kw):
    import argparse

    base = dict(matrix=str(TINY), target="embedded", out=None, resume=False, results=None)
    base.update(kw)
    return argparse.Namespace(**base)


def test_run_failing_before_its_first_repetition_leaves_nothing(failing_target, tmp_path):
    from harness.commands.run import execute

    results = tmp_path / "results" / "deeper"
    with pytest.raises(TargetError):
        execute(_args(results=results))
    assert not (tmp_path / "results").exists()
    out = tmp_path / "out"
    out.mkdir()  # an existing empty --out is kept, and left empty
    with pytest.raises(TargetError):
        execute(_args(out=out))
    assert out.is_dir() and not list(out.iterdir())
    new = tmp_path / "new" / "run"
    with pytest.raises(TargetError):
        execute(_args(out=new))
    assert not (tmp_path / "new").exists()


def test_a_resumed_run_that_fails_is_kept(failing_target, tmp_path):
    from harness.commands.run import execute

    out = tmp_path / "run"
    with pytest.raises(TargetError):
        execute(_args(out=out))
    assert not out.exists()
    # a run that exists (here: made by a first attempt that got further) is never removed
    import json

    from harness.matrix import load_matrix

    out.mkdir()
    (out / "matrix.yaml").write_bytes(TINY.read_bytes())
    (out / "run.json").write_text(json.dumps({
        "schema": "ssbench.run/1", "status": "interrupted", "run_id": "run",
        "matrix": load_matrix(TINY).to_dict()}))
    with pytest.raises(TargetError):
        execute(_args(out=out, resume=True))
    assert json.loads((out / "run.json").read_text())["status"] == "failed"


def test_pgdata_naming_a_file_is_one_line(tmp_path, tally):
    """SSBENCH_PGDATA under a file: one line naming the variable, exit 2, no run directory."""
    import os
    import subprocess
    import sys

    f = tmp_path / "afile"
    f.write_text("x")
    out = tmp_path / "run"
    tally.tried()
    r = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(TINY), "--out", str(out)],
                       cwd=REPO, capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, SSBENCH_PGDATA=str(f / "pg")))
    assert r.returncode == 2 and "SSBENCH_PGDATA" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not out.exists()
    tally.clean()
