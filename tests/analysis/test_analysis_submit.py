"""The analysis job runs under spark-submit too: ``spark-submit harness/analysis/job.py RUN_DIR``
(the way to run it on a cluster), printing the report path last."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support import cds, synth

REPO = Path(__file__).resolve().parents[2]
SPARK_SUBMIT = Path(sys.executable).parent / "spark-submit"

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(shutil.which("java") is None and not os.environ.get("JAVA_HOME"),
                       reason="Spark needs Java 17+ (apt-get install openjdk-17-jre-headless)"),
    pytest.mark.skipif(not SPARK_SUBMIT.exists(), reason="pyspark's spark-submit is not in the venv"),
]


def test_spark_submit_job(tmp_path):
    spec = synth.SynthSpec(name="submit", initiators=(1,), threads=(1, 10), dialogs=("per_thread", "trick150"),
                           payloads=(100,), servers=("durable",), repetitions=1, warmup_seconds=1,
                           measure_seconds=3, drain_seconds=1)
    run = synth.synthesize(tmp_path / "results", spec, run_id="20261121-000003-submit")
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               SPARK_LOCAL_IP="127.0.0.1")
    cmd = [str(SPARK_SUBMIT), "--master", "local[1]", "--conf", "spark.ui.enabled=false",
           "--conf", "spark.driver.bindAddress=127.0.0.1", "--conf", "spark.driver.host=127.0.0.1",
           # the suite's class-data archive (Spark's classes as a local analysis loads them)
           "--driver-java-options", f"-XX:TieredStopAtLevel=1 -XX:+UseSerialGC {cds.installed_options()}".strip(),
           str(REPO / "harness" / "analysis" / "job.py"), str(run), "--out", str(tmp_path / "report")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    index = Path(proc.stdout.strip().splitlines()[-1])
    assert index == (tmp_path / "report" / "index.html").resolve()
    html = index.read_text()
    assert "One dialog per thread vs 150 trick" in html
    assert len(list((tmp_path / "report" / "plots").glob("*.png"))) >= 5
