"""One local SparkSession shared by the analysis tests that need one (started on first use)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    from harness.analysis.spark import get_spark

    s = get_spark("local[2]", app_name="ssbench-tests", shuffle_partitions=2, driver_memory="1g", input_bytes=0)
    yield s
    s.stop()
