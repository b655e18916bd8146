"""Hostile result files, as a damaged disk or a hand edit leaves them, read by the gate and the
analysis through the results contract (harness/results/fields.py): a count below 0, JSON's
NaN/Infinity constants, a number past a float, 200,000 nested arrays or objects. The gate (a real
``ssbench gate`` subprocess) refuses each with one line naming the file, line and field, exit 2;
the analysis names each as an issue, leaves its repetition out, and a run with nothing readable
is a one-line exit 2 from ``ssbench analyze`` (a subprocess, with its JVM). Real files from the
synthetic writer (tests/support/synth.py), then damaged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.analysis import discovery
from harness.errors import UserError
from harness.results import read_json
from support import machine, synth

REPO = Path(__file__).resolve().parents[2]
DEEP = 200_000


def _set(path: str, raw: str):
    """Write the JSON text ``raw`` as the value at ``path`` (dots; [i] for a list's item)."""
    def edit(doc: dict) -> str:
        keys = path.replace("[", ".[").split(".")
        obj = doc
        for k in keys[:-1]:
            obj = obj[int(k[1:-1])] if k.startswith("[") else obj[k]
        last = keys[-1]
        if last.startswith("["):
            obj[int(last[1:-1])] = "@@hostile@@"
        else:
            obj[last] = "@@hostile@@"
        return json.dumps(doc, indent=2).replace('"@@hostile@@"', raw)
    return edit


#: name -> (edit of the summary document -> its new text, the field named, what the line says, the
#: text whose line is named: a JSON constant's or the first bracket's; None where the model refuses a
#: value, after parsing, and names no line)
HOSTILE = {
    "lost-nan": (_set("accounting.messages_lost", "NaN"), "accounting.messages_lost", "NaN is not a number", "NaN"),
    "lost-negative": (_set("accounting.messages_lost", "-7"), "accounting.messages_lost", "at least 0, got -7", None),
    "lost-1e999": (_set("accounting.messages_lost", "1e999"), "accounting.messages_lost", "got inf", None),
    "sent-huge": (_set("accounting.messages_sent", "1" + "0" * 30), "accounting.messages_sent", "an integer", None),
    "rate-infinity": (_set("load.send_rate", "Infinity"), "load.send_rate", "Infinity is not a number", "Infinity"),
    "rate-minus-infinity": (_set("load.receive_rate", "-Infinity"), "load.receive_rate", "-Infinity is not",
                            "-Infinity"),
    "rate-negative": (_set("load.send_rate", "-1.5"), "load.send_rate", "at least 0", None),
    "initiator-nan": (_set("accounting.per_initiator[0].lost", "NaN"), "accounting.per_initiator[0].lost",
                      "NaN is not a number", "NaN"),
    "initiator-negative": (_set("accounting.per_initiator[0].sent", "-3"), "accounting.per_initiator[0].sent",
                           "at least 0, got -3", None),
    "deep-arrays": (lambda doc: "[" * DEEP + "]" * DEEP, None, "nested deeper than 64 levels", "["),
    "deep-objects": (lambda doc: '{"a":' * DEEP + "1" + "}" * DEEP, None, "nested deeper than 64 levels", "{"),
}


def _run(root: Path, run_id: str) -> Path:
    spec = synth.small_spec(initiators=(1,), threads=(1, 5), dialogs=("per_thread",), payloads=(100,))
    return synth.synthesize(root, spec, run_id=run_id)


def _damage(run: Path, name: str) -> tuple[Path, int | None]:
    """Damage the first repetition's summary of ``run``; (its path, the line the refusal names)."""
    edit, _field, _expect, token = HOSTILE[name]
    summary = sorted(run.glob("*/rep-01/summary.json"))[0]
    text = edit(json.loads(summary.read_text()))
    summary.write_text(text)
    line = next(i for i, x in enumerate(text.splitlines(), 1) if token in x) if token else None
    return summary, line


def assert_refused(code: int, err: str, where: str, expect: str) -> None:
    """Exit 2 and one stderr line (tests/badinput/test_badinput_cli.py's rule) starting ``where``."""
    assert code == 2, err
    assert "Traceback" not in err, err
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"ssbench: error: {where}") and expect in err, err


@pytest.fixture(scope="module")
def baseline(tmp_path_factory) -> Path:
    return _run(tmp_path_factory.mktemp("results"), "20261121-000000-base")


@pytest.fixture
def cli(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO), SSBENCH_PGDATA=str(tmp_path / "pg"), NO_COLOR="1")

    def run(*args: str, timeout: float = 60):
        r = subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=timeout)
        return r.returncode, r.stdout, r.stderr
    return run


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_the_gate_refuses_a_hostile_summary(cli, baseline, tmp_path, name, tally):
    """One line naming the file (and its line), the field and what is wrong; exit 2; never a
    traceback, never the gate's exit 1 ("regression") from a crash, never a silent pass."""
    tally.tried()
    summary, line = _damage(_run(tmp_path / "results", "20261121-000001-cand"), name)
    code, _out, err = cli("gate", "--baseline", str(baseline), "--candidate", str(summary.parents[2]),
                          "--no-report")
    _, field, expect, _token = HOSTILE[name]
    assert_refused(code, err, f"{summary}:{line}: " if line else f"{summary}: ", expect)
    if field:
        assert f": {field}: " in err, err
    tally.clean()


def test_the_analysis_names_each_hostile_summary_and_reads_the_rest(tmp_path, tally):
    """Every hostile summary of a run is an issue naming its file, line and field, its
    repetition left out; the other repetitions are read."""
    runs = []
    for i, name in enumerate(sorted(HOSTILE)):
        tally.tried()
        run = _run(tmp_path, f"20261121-00{i:04d}-{name}")
        runs.append((run, name, *_damage(run, name)))
    disc = discovery.discover([r for r, *_ in runs])
    rows = discovery.read_summaries(disc)
    assert len(rows) == len(runs) * 3            # 2 permutations x 2 repetitions, one damaged, each run
    problems = {i.path: i.problem for i in disc.issues}
    for _run_dir, name, summary, line in runs:
        _, field, expect, _token = HOSTILE[name]
        problem = problems[str(summary)]
        assert problem.startswith(f"damaged (line {line}: " if line else "damaged ("), (name, problem)
        assert expect in problem and (field is None or f"{field}: " in problem), (name, problem)
        assert problem.endswith("repetition skipped")
        tally.clean()


@pytest.mark.untimed("a scan that stops at the 65th bracket takes under a millisecond; the bound is half a "
                     "second, stretched to this machine (support.machine.allowance)")
@pytest.mark.parametrize("opening, closing", [("[", "]"), ('{"a":', "}")])
def test_a_deep_file_is_refused_before_the_parser_recurses(tmp_path, opening, closing):
    deep = tmp_path / "deep.json"
    deep.write_text(opening * DEEP + "1" * (opening == '{"a":') + closing * DEEP)
    t0 = time.monotonic()
    with pytest.raises(UserError) as e:
        read_json(deep)
    assert time.monotonic() - t0 < machine.allowance(0.5)
    assert str(e.value) == f"{deep}:1: nested deeper than 64 levels"


def test_analyze_with_nothing_readable_is_one_line_exit_2(cli, tmp_path, tally):
    """``ssbench analyze`` on runs whose every summary is hostile (NaN, a negative count, 200,000
    nested arrays): one line naming the first, exit 2, no traceback (not a crash's exit 1), and
    no Spark JVM started first (not marked ``spark``: the parts watcher fails a test that starts one)."""
    tally.tried()
    spec = synth.small_spec(initiators=(1,), threads=(1,), dialogs=("per_thread",), payloads=(100,),
                            repetitions=1)
    runs, first = [], None
    for i, name in enumerate(("lost-nan", "lost-negative", "deep-arrays")):
        run = synth.synthesize(tmp_path / "results", spec, run_id=f"20261121-00000{i}-{name}")
        summary, line = _damage(run, name)
        first = first or (summary, line)
        runs.append(str(run))
    code, _out, err = cli("analyze", "-q", "--out", str(tmp_path / "report"), *runs, timeout=600)
    assert code == 2, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    lines = [x for x in err.splitlines() if x.startswith("ssbench: error:")]
    assert lines == [f"ssbench: error: {first[0]}:{first[1]}: accounting.messages_lost: no readable repetition "
                     "summary; the first: NaN is not a number (a finite number is required)"], err[-3000:]
    tally.clean()
