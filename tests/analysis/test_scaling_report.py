"""The scalability model through the Spark analysis (harness.analysis.scaling, plots_scaling):
a synthetic run whose strategies follow the law (and one that falls off a cliff) gets its
sweeps' coefficients in the ``scaling`` table, what shared moves in ``scaling_moves``, both
sections in answer.json and the report, and the figure of the fitted curves."""

from __future__ import annotations

import csv
import json
import os
import shutil

import pytest

from support import synth

pytestmark = pytest.mark.skipif(shutil.which("java") is None and not os.environ.get("JAVA_HOME"),
                                reason="Spark needs Java 17+ (apt-get install openjdk-17-jre-headless)")

PER_THREAD, SHARED = (2400.0, 0.2, 2e-4), (2400.0, 0.6, 0.03)


def _csv(path):
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def result(spark, tmp_path_factory):
    from harness.analysis.job import analyze_result

    root = tmp_path_factory.mktemp("scaling")
    spec = synth.SynthSpec(name="sweep", initiators=(1,), threads=(1, 2, 4, 8, 16, 32), dialogs=("per_thread",
                           "trick150", "shared"), payloads=(100,), servers=("durable",), repetitions=3, noise=0.02,
                           warmup_seconds=1, measure_seconds=4, drain_seconds=1,
                           usl=(("per_thread", PER_THREAD), ("trick150", PER_THREAD), ("shared", SHARED)),
                           cliff=(("trick150", 32, 0.6),))
    run = synth.synthesize(root, spec, run_id="20261128-000000-sweep")
    return analyze_result([run], spark=spark)


def test_the_scaling_table_has_each_sweeps_coefficients_or_why_not(result):
    rows = {r["dialogs"]: r for r in _csv(result.out_dir / "tables" / "scaling.csv")}
    assert rows["per_thread"]["status"] == rows["shared"]["status"] == "fitted"
    for d, (lam, sigma, kappa) in (("per_thread", PER_THREAD), ("shared", SHARED)):
        r = rows[d]
        assert float(r["sigma_ci_low"]) <= sigma <= float(r["sigma_ci_high"]), r
        assert float(r["kappa_ci_low"]) <= kappa <= float(r["kappa_ci_high"]), r
        # the synthetic receive rate is a little below the law's (each second's receipt is the
        # lesser of a noisy send and a noisy capacity: tests/support/synth.py), the same at every N
        assert float(r["lambda"]) == pytest.approx(lam, rel=0.05)
        assert json.loads(r["thread_counts"]) == [1, 2, 4, 8, 16, 32]
    cliff = rows["trick150"]
    assert cliff["status"] == "does not fit" and cliff["sigma"] == "" and "lack of fit" in cliff["reason"]
    (move,) = _csv(result.out_dir / "tables" / "scaling_moves.csv")
    assert (move["comparison"], move["baseline"]) == ("shared", "per_thread")
    assert "sigma" in json.loads(move["moves"]) and float(move["sigma_change_low"]) > 0


def test_the_answer_and_the_report_carry_both_sections_and_the_figure(result):
    doc = json.loads((result.out_dir / "answer.json").read_text())
    assert [s["key"] for s in doc["sections"]][-2:] == ["scaling", "scaling_moves"]
    html = result.index.read_text()
    assert "How far it scales (Universal Scalability Law): 2 of 3 thread sweeps fitted" in html
    assert "does not fit: trick150" in html and "raises σ" in html
    figs = [p for p in result.plots if p.section.startswith("How far it scales")]
    assert len(figs) == 1, [(p.title, p.file, p.note) for p in figs]
    (fig,) = figs
    png = result.out_dir / fig.file
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"src='{fig.file}'" in html
    assert "tables/scaling.csv" in html and "tables/scaling_moves.csv" in html
