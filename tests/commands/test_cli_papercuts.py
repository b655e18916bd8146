"""What a new user trips over in the first hour (issue 16, item 3): help texts, a mistyped
--target, the order of the bench's final table, the data directory's documentation, the
package metadata."""

from __future__ import annotations

import argparse
import os
import re
import tomllib
from pathlib import Path

import pytest

from harness.cli import build_parser, main

REPO = Path(__file__).resolve().parents[2]


def _subparser(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


# --------------------------------------------------------------------------- bench

def test_bench_help_describes_every_flag():
    p = _subparser("bench")
    for action in p._actions:
        if action.option_strings and action.dest != "help":
            assert action.help and len(action.help) > 10, f"bench {action.option_strings[0]} has no description"


def test_bench_table_in_the_matrix_order(tmp_path, capsys):
    from support import synth
    from harness.commands.run import print_run_table

    spec = synth.SynthSpec(name="order", initiators=(1,), threads=(1, 8, 32), dialogs=("per_thread",),
                           payloads=(100,), servers=("durable",), repetitions=2, warmup_seconds=1,
                           measure_seconds=2, drain_seconds=1)
    run = synth.synthesize(tmp_path, spec, run_id="20261122-000000-order")
    print_run_table(run)
    lines = [ln.split() for ln in capsys.readouterr().out.splitlines() if ln.startswith("i1-")]
    assert [(ln[0].split("-")[1], ln[1]) for ln in lines] == [
        ("t1", "1"), ("t1", "2"), ("t8", "1"), ("t8", "2"), ("t32", "1"), ("t32", "2")]


def test_bench_order_without_an_index_is_natural():
    from harness.commands.run import row_order

    rows = [{"perm_id": f"i1-t{t}-per_thread-p{p}-durable", "rep": 1, "perm_index": None}
            for t, p in ((32, 100), (8, 8000), (1, 100), (8, 100))]
    assert [r["perm_id"] for r in sorted(rows, key=row_order)] == [
        "i1-t1-per_thread-p100-durable", "i1-t8-per_thread-p100-durable",
        "i1-t8-per_thread-p8000-durable", "i1-t32-per_thread-p100-durable"]


# --------------------------------------------------------------------------- --target

@pytest.mark.parametrize("argv", [["run", "matrices/bench.yaml"], ["bench"], ["web"]])
def test_mistyped_target_suggests_embedded(argv, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    code = main([*argv, "--target", "embeded"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1, err
    assert err == ("ssbench: error: --target: 'embeded' is neither a registered target nor a file; "
                   "did you mean 'embedded'?\n")


def test_mistyped_topology_file_suggests_the_file(capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    assert (REPO / "topologies" / "example-single.yaml").is_file()
    code = main(["run", "matrices/bench.yaml", "--target", "topologies/example-singel.yaml"])
    err = capsys.readouterr().err
    assert code == 2 and "did you mean 'topologies/example-single.yaml'?" in err and err.count("\n") == 1


def test_unknown_target_names_what_is_expected(capsys, tmp_path):
    code = main(["run", "matrices/bench.yaml", "--target", str(tmp_path / "nothing.yaml")])
    err = capsys.readouterr().err
    assert code == 2 and "no such file, nor a registered target ('embedded', 'mssql'); give" in err
    assert err.count("\n") == 1


# --------------------------------------------------------------------------- server / README

@pytest.mark.parametrize("euid", [0, 1000])
def test_server_help_names_the_data_directory_the_code_picks(euid, monkeypatch):
    from harness.targets.embedded import server

    monkeypatch.delenv("SSBENCH_PGDATA", raising=False)
    monkeypatch.setattr(os, "geteuid", lambda: euid)
    text = _subparser("server").description
    base = server.data_base_dir()
    assert f"{base}/pg<major>" in text
    assert (base == Path("/var/tmp/ssbench")) == (euid == 0)
    assert server.default_data_dir().parent == base.resolve()
    assert "$SSBENCH_PGDATA" in text


def test_server_help_with_ssbench_pgdata(monkeypatch, tmp_path):
    monkeypatch.setenv("SSBENCH_PGDATA", str(tmp_path / "pg"))
    assert str(tmp_path / "pg") in _subparser("server").description


def test_the_docs_name_ssbench_pgdata_and_the_root_default():
    cli = (REPO / "docs" / "cli.md").read_text()
    assert "SSBENCH_PGDATA" in cli and "/var/tmp/ssbench/pg<major>" in cli
    assert "docs/analysis-cluster.md" in (REPO / "README.md").read_text()


# --------------------------------------------------------------------------- packaging

def test_license_is_an_spdx_expression():
    doc = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert doc["project"]["license"] == "MIT"  # not the deprecated {text = ...} table
    from packaging.licenses import canonicalize_license_expression

    assert canonicalize_license_expression(doc["project"]["license"]) == "MIT"
    # SPDX strings need setuptools 77 (PEP 639)
    req = next(r for r in doc["build-system"]["requires"] if r.startswith("setuptools"))
    assert int(re.search(r">=(\d+)", req).group(1)) >= 77


# --------------------------------------------------------------------------- analyze

def test_analyze_master_and_remote_exclude_each_other(capsys):
    with pytest.raises(SystemExit) as e:
        main(["analyze", "x", "--master", "local[1]", "--remote", "sc://h:1"])
    assert e.value.code == 2


def test_analyze_remote_must_be_a_connect_url(capsys, tmp_path):
    code = main(["analyze", str(tmp_path), "--remote", "spark://h:7077", "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and "--remote: 'spark://h:7077' is not a Spark Connect URL" in err
    assert not (tmp_path / "r").exists()  # nothing half-written


def test_analyze_quiet_bad_input_is_one_line(capsys, tmp_path):
    code = main(["analyze", str(tmp_path / "missing"), "-q"])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert captured.err.startswith(f"ssbench: error: {tmp_path / 'missing'}: ") and captured.err.count("\n") == 1


def test_bench_table_top_wait_is_the_users_where_sampled(tmp_path, capsys):
    """An alternated window's top_waits are its strategies' together; the users' own sampled
    waits (session_waits) tell the shared dialog's lock queue from the others' log flush."""
    import json

    from support import synth
    from harness.commands.run import print_run_table

    spec = synth.SynthSpec(name="waits", initiators=(1,), threads=(8,), dialogs=("per_thread", "shared"),
                           payloads=(100,), servers=("durable",), repetitions=1, warmup_seconds=1,
                           measure_seconds=2, drain_seconds=1)
    run = synth.synthesize(tmp_path, spec, run_id="20261128-000000-waits")
    for f in run.glob("*/rep-01/summary.json"):
        doc = json.loads(f.read_text())
        waits = doc.setdefault("waits", {})
        waits["top_waits"] = [{"wait_type": "WRITELOG", "wait_time_ms": 9000.0, "waiting_tasks": 90, "share": 0.9}]
        if "shared" in f.parent.parent.name:
            waits["session_waits"] = {"sender": {"WRITELOG": 0.5, "LCK_M_X": 6.1}, "reader": {"WRITELOG": 7.0}}
            waits["session_wait_samples"] = 60
        f.write_text(json.dumps(doc))
    print_run_table(run)
    top = {ln.split()[0].split("-")[2]: ln.split()[-1] for ln in capsys.readouterr().out.splitlines()
           if ln.startswith("i1-")}
    assert top == {"per_thread": "WRITELOG", "shared": "LCK_M_X"}


# --------------------------------------------------------------------------- a bug

def test_a_crash_is_exit_70_with_its_traceback_redacted_never_the_gates_1(monkeypatch, capsys):
    """An unexpected exception in any command (a bug) exits 70, not 1 (the gate's
    "regression"): its traceback to report it with, a connection string's password redacted."""
    import harness.commands.matrix as matrix_cmd

    def crash(args):
        raise RuntimeError("cannot parse Server=db1;UID=sa;PWD=hunter2;")

    monkeypatch.setattr(matrix_cmd, "cmd_matrix", crash)
    assert main(["matrix", "matrices/bench.yaml"]) == 70
    err = capsys.readouterr().err
    assert "Traceback" in err and "RuntimeError" in err and "hunter2" not in err
    assert err.rstrip().splitlines()[-1].startswith("ssbench: internal error")
