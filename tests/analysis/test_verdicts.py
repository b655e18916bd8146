"""Answers that hold under noise: the whole analysis (Spark job, tables, report) on synthetic
sets where the truth is known.

* no effect: 5 repetitions per permutation, the 150 trick a relabelled copy of one dialog per
  thread, +-25 % independent noise per repetition: never reported as a gain or a crossover;
* a real +40 % effect, 5 repetitions, +-10 % noise: reported as a gain at every thread count;
* two repetitions (one at a point): every verdict inconclusive, said in words, never green.

Both sets are analysed together, which also draws the several-runs comparison plot. The target
section of one run.json carries a wait mapping and notes (as the SQL Server target will): the
report shows them."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
from pathlib import Path

import pytest

from support import synth
from support.summaries import edit

pytestmark = pytest.mark.skipif(shutil.which("java") is None and not os.environ.get("JAVA_HOME"),
                                reason="Spark needs Java 17+ (apt-get install openjdk-17-jre-headless)")

AXES = dict(initiators=(1, 2), threads=(1, 5, 10, 20), dialogs=("per_thread", "trick150"), payloads=(100,),
            servers=("durable",), warmup_seconds=1, measure_seconds=3, drain_seconds=1)


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def two_sets(spark, tmp_path_factory):
    from harness.analysis.job import analyze_result

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
    return none, real, analyze_result([none, real], out=root / "report", spark=spark, threshold_pct=5.0)


def test_no_effect_is_never_a_gain_and_a_real_effect_is(two_sets):
    none, real, result = two_sets
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
    for c in cross:
        if c["run_id"] == none.name:
            assert c["crossover_total_threads"] == "" and c["verdict"] != "gain", c
        else:
            assert c["verdict"] == "gain" and int(c["crossover_total_threads"]) == int(c["initiators"]), c
    # the key table (report and notebook) says the same
    for k in result.key_rows:
        assert (k["verdict"] == "gain") == (k["run_id"] == real.name), k


def test_the_report_shows_verdicts_notes_and_the_runs_compared(two_sets):
    none, real, result = two_sets
    html = result.index.read_text()
    key = html[html.index("Key results"):html.index("</table>", html.index("Key results"))]
    green = re.findall(r'<td class="v-gain">([^<]*)</td>', key)
    assert green == ["gain"] * 8                          # only the real effect's rows are green
    # the key table of the report is the answer the terminal prints, row for row
    rows = result.answer.section("key").rows
    assert len(rows) == 16 and [r["verdict"] for r in rows if r["verdict"] == "gain"] == ["gain"] * 8
    for r in rows:
        assert f'<td class="">{r["gain_text"]}</td>' in key, r
    cross = html[html.index("Where a dialog strategy pays"):]
    cross = cross[:cross.index("</table>")]
    assert re.findall(r'<td class="v-gain">([^<]*)</td>', cross) == ["gain", "gain"]
    assert "a single-instance layout bypasses the transmission queue" in html
    assert "LWLock/BufferContent" in html and "PAGELATCH_EX" in html   # the run's own mapping
    compared = [p for p in result.plots if p.section == "Runs compared"]
    assert len(compared) == 1 and not compared[0].skipped
    assert (result.out_dir / compared[0].file).stat().st_size > 10_000
    assert "fewer than 3 repetitions" not in result.notes_html


@pytest.fixture(scope="module")
def few(spark, tmp_path_factory):
    """Two repetitions a permutation, one summary and run.json of schema versions this code
    does not read, analysed once: every comparison rests on fewer than 3 repetitions a side,
    and one point's trick150 on a single one."""
    from harness.analysis.job import analyze_result

    run = synth.synthesize(tmp_path_factory.mktemp("few"), synth.small_spec(name="v", repetitions=2, **AXES),
                           run_id="20261122-v")
    summary = run / "i1-t5-trick150-p100-durable" / "rep-02" / "summary.json"
    doc = json.loads(summary.read_text())
    doc["schema"] = "ssbench.summary/3"
    summary.write_text(json.dumps(doc))
    record = json.loads((run / "run.json").read_text())
    record["schema"] = "ssbench.run/9"
    (run / "run.json").write_text(json.dumps(record))
    return run, summary, analyze_result([run], spark=spark)


def test_fewer_than_three_repetitions_are_inconclusive_in_words(few):
    _run, _summary, result = few
    assert {g["verdict"] for g in result.gains} == {"inconclusive"}
    assert len(result.gains) == 8 and any(g["n"] == 1 for g in result.gains)   # one repetition at (1, 5)
    assert all(g["gain_ci_low_pct"] is None for g in result.gains)
    assert all(c["crossover_total_threads"] is None for c in result.crossover)
    html = result.index.read_text()
    assert "Every comparison rests on fewer than 3 repetitions on a side, so every verdict is inconclusive" in html
    assert 'class="v-gain"' not in html


def test_unsupported_schema_versions_are_named_and_skipped(few):
    run, summary, result = few
    problems = {i.path: i.problem for i in result.issues}
    assert "unsupported schema version 'ssbench.summary/3'" in problems[str(summary)]
    assert "unsupported schema version 'ssbench.run/9'" in problems[str(run / "run.json")]
    perms = {p["perm_id"]: p for p in result.permutations}
    assert perms["i1-t5-trick150-p100-durable"]["n"] == 1 and perms["i1-t5-per_thread-p100-durable"]["n"] == 2
    # without run.json the summaries' SYNTHETIC label still marks the run
    assert "SYNTHETIC DATA" in result.index.read_text()


def test_cli_prints_the_answer_and_leaves_disturbed_repetitions_out_of_verdicts(spark, two_sets, tmp_path, capsys):
    """ssbench analyze ends with the key table; --json gives the same rows, alone on stdout. Its
    run is the real +40 % effect's (the same data) with 3 of the trick's 5 repetitions at one
    point disturbed (harness.results.counts_in_verdicts): that point has 2 left, its verdict is
    inconclusive, every other a gain as in the undisturbed run; the permutations table counts
    them, the report names them with why."""
    from harness.cli import main

    _none, real, result = two_sets
    run = tmp_path / real.name          # a copy: the undisturbed run is two_sets' too
    shutil.copytree(real, run)
    perm = "i1-t20-trick150-p100-durable"
    for rep in (1, 2, 3):
        edit(run / perm / f"rep-{rep:02d}" / "summary.json", status="receive_stalled", receive_stalled=True,
             receive_stall_seconds=4.0, receive_send_ratio=0.1, queue_growth=9000.0)
    out = tmp_path / "r"
    assert main(["analyze", str(run), "--out", str(out), "--json", "-q"]) == 0
    doc = json.loads(capsys.readouterr().out)
    key, *others = doc["sections"]      # then the scalability model's (each strategy's 4 thread counts)
    assert key["key"] == "key" and [s["key"] for s in others] == ["scaling", "scaling_moves"]
    assert doc["schema"] == "ssbench.answer/1" and doc["runs"] == [run.name]
    assert doc["report"] == str((out / "index.html").resolve())
    disturbed = [r for r in key["rows"] if r["perm_id"] == perm]
    assert [r["verdict"] for r in disturbed] == ["inconclusive"]
    assert [r["verdict"] for r in key["rows"] if r not in disturbed] == ["gain"] * 7
    mine = [r for r in result.answer.section("key").rows if r["run_id"] == real.name]

    def same(rows):
        return [(r["comparison"], r["total_threads"], r["gain_text"]) for r in rows if r["perm_id"] != perm]
    assert same(key["rows"]) == same(mine) and len(same(mine)) == 7
    assert {r["pays_from"] for r in mine} == {1, 2}       # one row group per initiator count
    # "pays from": the total threads from which every verdict is a gain; 1 initiator's group
    # ends on the disturbed point's inconclusive verdict, so it pays from nowhere
    assert {(r["initiators"], r["pays_from"]) for r in key["rows"]} == {(1, None), (2, 2)}
    assert json.loads((out / "answer.json").read_text()) == doc
    gains = {(int(g["initiators"]), int(g["threads"])): g for g in _csv(out / "tables" / "dialog_gains.csv")}
    assert gains[(1, 20)]["verdict"] == "inconclusive" and gains[(1, 20)]["n"] == "2"     # 5 less 3
    assert all(g["verdict"] == "gain" for k, g in gains.items() if k != (1, 20)) and len(gains) == 8
    perms = {p["perm_id"]: p for p in _csv(out / "tables" / "permutations.csv")}
    assert perms[perm]["disturbed_reps"] == "3"
    html = (out / "index.html").read_text()
    assert "3 disturbed repetition(s)" in html and "receive stalled: nothing received for 4.0 s" in html
    # the same answer as text, as `analyze -q` prints it (the command's text mode itself: the -q
    # subprocesses of test_analysis_cluster.py, and
    # test_analysis.py::test_cli_analyze_prints_the_diagnosis_and_the_issues_on_stderr)
    from harness.commands.analyze import print_answer
    from harness.verdicts.answer import read_answer

    print_answer(read_answer(out), False, path=out / "index.html")
    text = capsys.readouterr().out
    assert text.splitlines()[0].endswith("index.html")
    assert "Key results: 7 of 8 comparisons decided" in text and "trick150 vs per_thread" in text
