"""The analysis of ssbench runs: a PySpark job that turns run directories (see
``docs/results.md``) into tables (Parquet and CSV), PNG plots and an ``index.html`` report.

Entry points:

- :func:`harness.analysis.job.analyze` ``(run_dirs, out=None, master=None) -> Path``: the whole
  job; returns the path of ``index.html``. ``ssbench analyze`` and ``spark-submit
  harness/analysis/job.py`` both call it.
- :mod:`harness.analysis.synth`: synthetic run directories in the documented layout (tests,
  the benchmark and the notebook's fallback).

Importing this package does not import pyspark; its modules that need Spark import it.
"""

from __future__ import annotations

__all__ = ["analyze"]


def analyze(*args, **kwargs):
    """See :func:`harness.analysis.job.analyze`."""
    from .job import analyze as _analyze

    return _analyze(*args, **kwargs)
