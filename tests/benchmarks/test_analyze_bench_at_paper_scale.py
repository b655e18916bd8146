"""``ssbench analyze`` at the paper's scale, through benchmarks/analyze_bench.py (its smoke test,
with 10 s windows sampled every 5 s: the report's layout and line count depend on the number of
permutations, not on the rows per file): a synthetic run of 528 permutations x 3 repetitions is
analysed by a fresh ``ssbench analyze``, which must print at most about 60 lines before its key
table (the diagnosis grouped by limit, docs/diagnosis.md), and whose report must fit a laptop's
screen (1366 px wide: no sideways scrolling) in a real Chromium, saying each caveat once.

analyze_bench.py times that analysis through benchmarks/analysis_time.py, so this is the smoke
test of both: one fresh analysis instead of one each."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from support.browser import chromium, require_chromium

REPO = Path(__file__).resolve().parents[2]
LAPTOP = (1366, 768)
TIMER = "analysis_time.py"

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.timeout(1800)]


@pytest.fixture(scope="module")
def paper(tmp_path_factory):
    root = tmp_path_factory.mktemp("paper")
    out = subprocess.run([sys.executable, str(REPO / "benchmarks" / "analyze_bench.py"), "--scales", "1",
                          "--measure-seconds", "10", "--interval", "5", "--data-dir", str(root), "--json", str(root / "bench.json"),
                          "--master", "local[2]"], cwd=REPO, capture_output=True, text=True, timeout=1700)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    (result,) = json.loads((root / "bench.json").read_text())["results"]
    return root, result, out.stdout


def test_the_benchmark_times_a_paper_sized_analysis(paper):
    root, result, stdout = paper
    assert result["samples_files"] == 528 * 3 and result["best_wall_s"] > 0
    assert "lines before the key table (goal: about 60)" in stdout
    # analysis_time.py's figures: the CPU of everything the analysis started (its JVM's too:
    # more than the children the benchmark's own process waited for), and its key table read back
    (figures,) = json.loads((root / "report-x1" / "analysis-time.json").read_text()).values()
    assert figures["same_key_table"] is True and figures["this"]["wall_median_s"] > 0
    (run,) = result["runs"]
    assert run["cpu_s"] == figures["this"]["cpu_median_s"] > 0 and f"{run['cpu_s']} s CPU" in stdout
    assert (REPO / "benchmarks" / TIMER).is_file()


def test_a_paper_sized_analysis_prints_at_most_60_lines_before_the_key_table(paper):
    _, result, _ = paper
    (run,) = result["runs"]
    assert run["lines_before_key_table"] <= 60, run
    assert run["stdout"].splitlines()[0] == str(Path(run["report"]).resolve())   # the report's path,
    assert run["stdout"].splitlines()[2].startswith("Key results")                # then the key table


@pytest.mark.browser
@pytest.mark.untimed("the page's layout and what it says")
def test_the_paper_sized_report_fits_a_laptop_screen(paper, tmp_path):
    require_chromium()
    _, result, _ = paper
    (run,) = result["runs"]
    driver = chromium(tmp_path / "chromium-profile", *LAPTOP)
    try:
        from selenium.webdriver.common.by import By

        driver.get(Path(run["report"]).resolve().as_uri())
        fits = "return document.documentElement.scrollWidth <= document.documentElement.clientWidth"
        assert driver.execute_script("return document.documentElement.clientWidth") <= LAPTOP[0]
        assert driver.execute_script(fits), driver.execute_script("return document.documentElement.scrollWidth")
        for d in driver.find_elements(By.TAG_NAME, "details"):      # unfolded, still no sideways scroll
            driver.execute_script("arguments[0].open = true", d)
        assert driver.execute_script(fits), driver.execute_script("return document.documentElement.scrollWidth")
        text = driver.find_element(By.TAG_NAME, "body").text
        diagnosis = driver.find_element(By.ID, "diagnosis")
        rows = diagnosis.find_elements(By.CSS_SELECTOR, "table")[0].find_elements(By.CSS_SELECTOR, "tbody tr")
        assert 1 <= len(rows) <= 12                                  # one row per limit, not per permutation
        assert text.count("mapped from PostgreSQL wait events") == 1
        assert text.count("does not exist on PostgreSQL") == 1
        driver.save_screenshot(str(tmp_path / "report.png"))
    finally:
        driver.quit()
