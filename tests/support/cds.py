"""The Spark class-data-sharing archive as a fresh process sees it: an environment with the
archive on and a cache of its own, and the JVM options a local analysis started in it would get
(harness.analysis.spark._cds_options, run in a process whose JVM has not started)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: what turns the archive off (SSBENCH_SPARK_CDS=0, or a configuration directory on the class path)
OFF_VARS = ("SSBENCH_SPARK_CDS", "SPARK_CONF_DIR", "HADOOP_CONF_DIR", "YARN_CONF_DIR", "SPARK_DIST_CLASSPATH")


def env(cache: Path) -> dict[str, str]:
    """This process's environment with the archive on, kept in ``cache``."""
    return {**{k: v for k, v in os.environ.items() if k not in OFF_VARS}, "SSBENCH_CACHE": str(cache)}


def options(env: dict[str, str]) -> str:
    """The CDS options a local analysis started now in ``env`` would get."""
    code = "from harness.analysis import spark; print(' '.join(spark._cds_options(spark.LOCAL_JAVA_OPTS)))"
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=60, check=True).stdout.strip()


def installed_options() -> str:
    """The JVM options that use the local analysis' installed archive (the suite writes it first,
    tests/conftest.py), for a JVM the suite starts itself (spark-submit, a Connect server): the
    same Spark classes, loaded without parsing and verifying them again (~3 CPU-s a JVM). Empty
    when there is none: nothing is claimed or written here, unlike a local analysis' first start."""
    from harness.analysis import spark

    final = spark._local_archive()
    if final is None or not spark._installed(final):
        return ""
    return f"-XX:SharedArchiveFile={final} -Xlog:cds*=off"
