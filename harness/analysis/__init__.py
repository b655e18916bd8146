"""The analysis of ssbench runs: run directories in; tables, plots and a report out.

:func:`harness.analysis.job.analyze` is the whole job (``ssbench analyze`` and ``spark-submit
harness/analysis/job.py`` call it); :func:`~harness.analysis.job.analyze_result` returns the
tables as rows for the notebook. Spark reduces the samples (:mod:`.transforms`); everything
else is plain Python over small rows: :mod:`.tables`, :mod:`.comparisons`, :mod:`.techniques`,
:mod:`.diagnosis`, the plots and the report. Importing this package does not import pyspark.
"""

from __future__ import annotations

__all__ = ["analyze", "analyze_result"]


def analyze(*args, **kwargs):
    """See :func:`harness.analysis.job.analyze`."""
    from .job import analyze as _analyze

    return _analyze(*args, **kwargs)


def analyze_result(*args, **kwargs):
    """See :func:`harness.analysis.job.analyze_result`."""
    from .job import analyze_result as _analyze_result

    return _analyze_result(*args, **kwargs)
