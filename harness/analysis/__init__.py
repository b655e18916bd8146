"""The analysis of ssbench runs: a PySpark job that turns run directories (see
``docs/results.md``) into tables (Parquet and CSV), PNG plots and an ``index.html`` report.

Entry points:

- :func:`harness.analysis.job.analyze` ``(run_dirs, out=None, master=None, *, spark=None,
  threshold_pct=5.0) -> Path``: the whole job; returns the path of ``index.html``.
  ``ssbench analyze`` and ``spark-submit harness/analysis/job.py RUN_DIR...`` both call it.
- :func:`harness.analysis.job.analyze_result`: the same, returning an ``AnalysisResult``
  (tables as rows, plots, issues) -- what the notebook displays.
- :func:`harness.analysis.job.find_runs`: a run directory, or the runs in a results directory.

Modules: ``spark`` (session), ``schemas`` (the samples' explicit schema), ``discovery``
(finding runs through harness.results.RunReader, reading each summary once; problems reported
per file), ``transforms`` (the samples reduced on Spark), ``tables`` (the tables, from rows),
``writer`` (the one writer of the tables), ``comparisons`` (gains, crossovers and the throughput
points' intervals, judged by harness.verdicts), ``techniques`` (each technique axis
against its baseline on every metric it moves, or "not exercised", judged by harness.verdicts),
``techniques_report`` (their report section; the terminal's answer is the key table),
``diagnosis`` (what limits throughput per permutation and what to try, pure Python over the
summaries; docs/diagnosis.md), ``diagnosis_view`` (its tables, report section and terminal
text), ``plots`` (matplotlib, Agg), ``plots_compare`` (the several-runs view and technique
figures), ``html`` (the report's building blocks), ``report`` (index.html), ``job``
(orchestration). Synthetic runs (marked SYNTHETIC)
are written by tests/support/synth.py, test data outside the package.

Importing this package does not import pyspark; its modules that need Spark import it.
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
