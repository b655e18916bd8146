"""Answers that hold under noise: the whole analysis (Spark job, tables, report) on synthetic
sets where the truth is known.

* no effect: 5 repetitions per permutation, the 150 trick a relabelled copy of one dialog per
  thread, +-25 % independent noise per repetition: never reported as a gain or a crossover;
* a real +40 % effect, 5 repetitions, +-10 % noise: reported as a gain at every thread count;
* two repetitions (one at a point): every verdict inconclusive, said in words, never green;
* the real effect's run again with 3 of one point's 5 repetitions disturbed: that point
  inconclusive, the others as in the undisturbed run.

The four runs are analysed together, by ``ssbench analyze --json -q`` (one analysis: each costs
the suite its Spark jobs and its runs' plots), which also draws the several-runs comparison
plot; every assertion about one run reads that run's rows. The target section of one run.json
carries a wait mapping and notes (as the SQL Server target will): the report shows them. (A
report whose every comparison rests on fewer than 3 repetitions says so in those words: the
notebook's one-repetition run, tests/analysis/test_analysis_notebook.py.)"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
import shutil
from pathlib import Path
from typing import NamedTuple

import pytest

from support import synth
from support.summaries import edit

pytestmark = pytest.mark.skipif(shutil.which("java") is None and not os.environ.get("JAVA_HOME"),
                                reason="Spark needs Java 17+ (apt-get install openjdk-17-jre-headless)")

AXES = dict(initiators=(1, 2), threads=(1, 5, 10, 20), dialogs=("per_thread", "trick150"), payloads=(100,),
            servers=("durable",), warmup_seconds=1, measure_seconds=3, drain_seconds=1)
#: the disturbed run's point: 3 of its trick's 5 repetitions disturbed
DISTURBED = "i1-t20-trick150-p100-durable"


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


class Runs(NamedTuple):
    none: Path
    real: Path
    few: Path
    few_summary: Path           # its summary of a schema version this code does not read
    disturbed: Path
    out: Path                   # the report directory
    stdout: str                 # what the command printed: the answer as JSON
    result: object              # the AnalysisResult of the command's analysis


@pytest.fixture(scope="module")
def runs(spark, tmp_path_factory) -> Runs:
    """The four runs, analysed once by the command line (in this process, on the suite's Spark
    session): its output, and the result its analysis returned (harness.analysis.job's
    analyze_result, wrapped to keep it)."""
    from harness.analysis import job
    from harness.cli import main

    root = tmp_path_factory.mktemp("verdicts")
    none = synth.synthesize(root, synth.small_spec(name="noeffect", repetitions=5, uniform_noise=0.25,
                                                   same_as=(("trick150", "per_thread"),), seed=11, **AXES),
                            run_id="20261122-000000-noeffect")
    real = synth.synthesize(root, synth.small_spec(name="effect", repetitions=5, uniform_noise=0.10,
                                                   same_as=(("trick150", "per_thread"),), effect=(("trick150", 1.4),),
                                                   seed=12, **AXES),
                            run_id="20261122-000001-effect")
    run_json = json.loads((real / "run.json").read_text())
    run_json["target"]["notes"] = ["a single-instance layout bypasses the transmission queue"]
    run_json["target"]["wait_mapping"] = {"IO/WalSync": "WRITELOG", "LWLock/BufferContent": "PAGELATCH_EX"}
    (real / "run.json").write_text(json.dumps(run_json))
    few, few_summary = _few(root)
    disturbed = root / "20261122-000002-disturbed"      # a run's id is its directory's name
    shutil.copytree(real, disturbed)
    for rep in (1, 2, 3):
        edit(disturbed / DISTURBED / f"rep-{rep:02d}" / "summary.json", status="receive_stalled",
             receive_stalled=True, receive_stall_seconds=4.0, receive_send_ratio=0.1, queue_growth=9000.0)
    out, kept = root / "report", []
    analyze = job.analyze_result
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(io.StringIO()) as stdout:
        mp.setattr(job, "analyze_result", lambda *a, **k: kept.append(analyze(*a, **k)) or kept[-1])
        code = main(["analyze", str(none), str(real), str(few), str(disturbed), "--out", str(out),
                     "--threshold", "5", "--json", "-q"])
    assert code == 0 and len(kept) == 1
    return Runs(none, real, few, few_summary, disturbed, out, stdout.getvalue(), kept[0])


def _few(root: Path) -> tuple[Path, Path]:
    """Two repetitions a permutation, one summary and run.json of schema versions this code
    does not read: every comparison rests on fewer than 3 repetitions a side, and one point's
    trick150 on a single one. (The run and that summary.)"""
    run = synth.synthesize(root, synth.small_spec(name="v", repetitions=2, **AXES), run_id="20261122-v")
    summary = run / "i1-t5-trick150-p100-durable" / "rep-02" / "summary.json"
    doc = json.loads(summary.read_text())
    doc["schema"] = "ssbench.summary/3"
    summary.write_text(json.dumps(doc))
    record = json.loads((run / "run.json").read_text())
    record["schema"] = "ssbench.run/9"
    (run / "run.json").write_text(json.dumps(record))
    return run, summary


def test_no_effect_is_never_a_gain_and_a_real_effect_is(runs):
    none, real, result = runs.none, runs.real, runs.result
    gains = _csv(result.out_dir / "tables" / "dialog_gains.csv")
    by_run = {r: [g for g in gains if g["run_id"] == r] for r in (none.name, real.name)}
    assert len(by_run[none.name]) == len(by_run[real.name]) == 8
    for g in by_run[none.name]:
        assert g["verdict"] in ("no difference", "inconclusive"), g
        assert float(g["gain_ci_low_pct"]) <= 5.0 <= float(g["gain_ci_high_pct"]) or g["verdict"] == "no difference"
    for g in by_run[real.name]:
        assert g["verdict"] == "gain", g
        assert float(g["gain_ci_low_pct"]) > 5.0 and float(g["gain_pct"]) > 20.0
    cross = _csv(result.out_dir / "tables" / "crossover.csv")
    assert {c["run_id"] for c in cross} == {none.name, real.name, runs.few.name, runs.disturbed.name}
    for c in cross:
        if c["run_id"] == none.name:
            assert c["crossover_total_threads"] == "" and c["verdict"] != "gain", c
        elif c["run_id"] == real.name:
            assert c["verdict"] == "gain" and int(c["crossover_total_threads"]) == int(c["initiators"]), c
    # the key table (report and notebook) says the same (the disturbed copy's: the CLI test)
    for k in result.key_rows:
        if k["run_id"] != runs.disturbed.name:
            assert (k["verdict"] == "gain") == (k["run_id"] == real.name), k


def test_the_report_shows_verdicts_notes_and_the_runs_compared(runs):
    real, disturbed, result = runs.real, runs.disturbed, runs.result
    html = result.index.read_text()
    key = html[html.index("Key results"):html.index("</table>", html.index("Key results"))]
    green = re.findall(r'<td class="v-gain">([^<]*)</td>', key)
    assert green == ["gain"] * 15                # only the real effect's 8 rows and its disturbed copy's 7
    # the key table of the report is the answer the terminal prints, row for row
    rows = result.answer.section("key").rows
    assert len(rows) == 32 and [r["verdict"] for r in rows if r["verdict"] == "gain"] == ["gain"] * 15
    assert {r["run_id"] for r in rows if r["verdict"] == "gain"} == {real.name, disturbed.name}
    for r in rows:
        assert f'<td class="">{r["gain_text"]}</td>' in key, r
    cross = html[html.index("Where a dialog strategy pays"):]
    cross = cross[:cross.index("</table>")]
    # the real effect's two initiator counts, and the disturbed copy's 2 (its 1 ends inconclusive)
    assert re.findall(r'<td class="v-gain">([^<]*)</td>', cross) == ["gain"] * 3
    assert "a single-instance layout bypasses the transmission queue" in html
    assert "LWLock/BufferContent" in html and "PAGELATCH_EX" in html   # the run's own mapping
    compared = [p for p in result.plots if p.section == "Runs compared"]
    assert len(compared) == 1 and not compared[0].skipped
    assert (result.out_dir / compared[0].file).stat().st_size > 10_000
    # the comparisons said to rest on too few repetitions are the two-repetition run's 8 and the
    # disturbed point, and only they: not the five-repetition runs' others
    assert "9 of 32 comparisons rest on fewer than 3 repetitions on a side, so their verdicts are " \
           "inconclusive" in result.notes_html


def test_fewer_than_three_repetitions_are_inconclusive_in_words(runs):
    few, result = runs.few, runs.result
    gains = [g for g in result.gains if g["run_id"] == few.name]
    assert {g["verdict"] for g in gains} == {"inconclusive"}
    assert len(gains) == 8 and any(g["n"] == 1 for g in gains)   # one repetition at (1, 5)
    assert all(g["gain_ci_low_pct"] is None for g in gains)
    cross = [c for c in result.crossover if c["run_id"] == few.name]
    assert len(cross) == 2 and all(c["crossover_total_threads"] is None for c in cross)
    # said in words (the notes: test_the_report_shows_verdicts_notes_and_the_runs_compared), never green
    assert [k["verdict"] for k in result.key_rows if k["run_id"] == few.name] == ["inconclusive"] * 2
    assert {r["verdict"] for r in result.answer.section("key").rows if r["run_id"] == few.name} == {"inconclusive"}


def test_unsupported_schema_versions_are_named_and_skipped(runs):
    run, summary, result = runs.few, runs.few_summary, runs.result
    problems = {i.path: i.problem for i in result.issues}
    assert "unsupported schema version 'ssbench.summary/3'" in problems[str(summary)]
    assert "unsupported schema version 'ssbench.run/9'" in problems[str(run / "run.json")]
    perms = {p["perm_id"]: p for p in result.permutations if p["run_id"] == run.name}
    assert perms["i1-t5-trick150-p100-durable"]["n"] == 1 and perms["i1-t5-per_thread-p100-durable"]["n"] == 2
    # without run.json the summaries' SYNTHETIC label still marks the run
    assert len(perms) == 16 and all(p["synthetic"] for p in perms.values())
    html = result.index.read_text()
    marked = html[html.index("SYNTHETIC DATA: "):]
    assert run.name in marked[:marked.index("</div>")]


def test_cli_prints_the_answer_and_leaves_disturbed_repetitions_out_of_verdicts(runs, capsys):
    """ssbench analyze ends with the key table; --json gives the same rows, alone on stdout. The
    disturbed run is the real +40 % effect's (the same data) with 3 of the trick's 5 repetitions
    at one point disturbed (harness.results.counts_in_verdicts): that point has 2 left, its
    verdict is inconclusive, every other a gain as in the undisturbed run; the permutations
    table counts them, the report names them with why."""
    real, run, out = runs.real, runs.disturbed, runs.out
    doc = json.loads(runs.stdout)
    key, *others = doc["sections"]      # then the scalability model's (each strategy's 4 thread counts)
    assert key["key"] == "key" and [s["key"] for s in others] == ["scaling", "scaling_moves"]
    assert doc["schema"] == "ssbench.answer/1"
    assert doc["runs"] == [runs.none.name, real.name, runs.few.name, run.name]
    assert doc["report"] == str((out / "index.html").resolve())
    rows = [r for r in key["rows"] if r["run_id"] == run.name]
    disturbed = [r for r in rows if r["perm_id"] == DISTURBED]
    assert [r["verdict"] for r in disturbed] == ["inconclusive"]
    assert [r["verdict"] for r in rows if r not in disturbed] == ["gain"] * 7
    mine = [r for r in key["rows"] if r["run_id"] == real.name]

    def same(rows):
        return [(r["comparison"], r["total_threads"], r["gain_text"]) for r in rows if r["perm_id"] != DISTURBED]
    assert same(rows) == same(mine) and len(same(mine)) == 7
    assert {r["pays_from"] for r in mine} == {1, 2}       # one row group per initiator count
    # "pays from": the total threads from which every verdict is a gain; 1 initiator's group
    # ends on the disturbed point's inconclusive verdict, so it pays from nowhere
    assert {(r["initiators"], r["pays_from"]) for r in rows} == {(1, None), (2, 2)}
    assert json.loads((out / "answer.json").read_text()) == doc
    gains = {(int(g["initiators"]), int(g["threads"])): g for g in _csv(out / "tables" / "dialog_gains.csv")
             if g["run_id"] == run.name}
    assert gains[(1, 20)]["verdict"] == "inconclusive" and gains[(1, 20)]["n"] == "2"     # 5 less 3
    assert all(g["verdict"] == "gain" for k, g in gains.items() if k != (1, 20)) and len(gains) == 8
    perms = {p["perm_id"]: p for p in _csv(out / "tables" / "permutations.csv") if p["run_id"] == run.name}
    assert perms[DISTURBED]["disturbed_reps"] == "3"
    assert {p["disturbed_reps"] for k, p in perms.items() if k != DISTURBED} <= {"", "0"}
    html = (out / "index.html").read_text()
    assert "3 disturbed repetition(s)" in html and "receive stalled: nothing received for 4.0 s" in html
    # the same answer as text, as `analyze -q` prints it (the command's text mode itself: the -q
    # subprocesses of test_analysis_cluster.py, and
    # test_analysis.py::test_cli_analyze_prints_the_diagnosis_and_the_issues_on_stderr)
    from harness.commands.analyze import print_answer
    from harness.verdicts.answer import read_answer

    print_answer(read_answer(out), False, path=out / "index.html")
    text = capsys.readouterr().out
    decided = sum(r["verdict"] != "inconclusive" for r in key["rows"])
    assert text.splitlines()[0].endswith("index.html")
    assert f"Key results: {decided} of 32 comparisons decided" in text and "trick150 vs per_thread" in text
