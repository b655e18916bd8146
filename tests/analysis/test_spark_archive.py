"""The Spark JVM's class-data-sharing archive (harness.analysis.spark): write_archive() writes
it with a job of its own (what the suite does first on a machine without one, tests/conftest.py);
that job's JVM claims it when it starts, so JVMs started meanwhile neither wait for it nor write
their own, and keep_archive() installs it as soon as the JVM has written it. Real JVMs."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from support.embedded import REPO

pytestmark = pytest.mark.slow

WRITE = "from harness.analysis import spark; print(spark.archive_missing()); print(spark.write_archive())"


def _options(env) -> str:
    """The CDS options a local analysis started now would get."""
    code = "from harness.analysis import spark; print(' '.join(spark._cds_options(spark.LOCAL_JAVA_OPTS)))"
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=60, check=True).stdout.strip()


def test_one_jvm_writes_the_archive_and_it_is_installed_when_written(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in ("SSBENCH_SPARK_CDS", "SPARK_CONF_DIR", "HADOOP_CONF_DIR", "YARN_CONF_DIR",
                        "SPARK_DIST_CLASSPATH")}
    env["SSBENCH_CACHE"] = str(tmp_path)
    writer = subprocess.Popen([sys.executable, "-c", WRITE], cwd=REPO, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not list(tmp_path.glob("spark-cds-*.part")) and writer.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        claims = list(tmp_path.glob("spark-cds-*.part"))
        assert len(claims) == 1, (claims, writer.poll())
        # claimed when its JVM starts: a JVM started meanwhile runs without an archive and
        # writes none of its own
        assert _options(env) == ""
        assert list(tmp_path.glob("spark-cds-*")) == claims
        out, err = writer.communicate(timeout=300)
    finally:
        if writer.poll() is None:
            writer.kill()
    missing, path = out.split()
    assert writer.returncode == 0 and missing == "True", err[-3000:]
    assert path.endswith(".jsa") and os.path.getsize(path) > 0, err[-3000:]
    assert [p.name for p in tmp_path.glob("spark-cds-*")] == [os.path.basename(path)]   # the part became it
    # the next JVM uses it at once (not 120 s later, as when its writer is not waited for)
    assert _options(env).startswith(f"-XX:SharedArchiveFile={path}")
    r = subprocess.run([sys.executable, "-c", WRITE], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert r.stdout.split() == ["False", path], r.stderr[-2000:]   # there already: nothing to write
