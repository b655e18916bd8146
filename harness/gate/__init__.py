"""The regression gate: fail CI on a real regression, not on noise.

Public API::

    from harness.gate import GateSettings, load_run, compare_runs, write_report, run_interleaved

    report = compare_runs(load_run("results/base"), load_run("results/cand"), GateSettings())
    print(report.format_table()); write_report(report); sys.exit(report.exit_code)

:mod:`.stats` holds the statistics, :mod:`.method` the metrics, settings and verdict names,
:mod:`.rundata` the loading of run directories (through :class:`harness.results.RunReader`),
:mod:`.verdict` the comparison and verdicts, :mod:`.report` the table and gate.json,
:mod:`.compare` the entry point, :mod:`.interleave` the interleaved A/B mode and
:mod:`.simulate` the simulated false-alarm and detection rates. See docs/gate.md.
"""

from __future__ import annotations

from .compare import compare_runs, provenance_differences
from .method import INCONCLUSIVE, METRICS, GateSettings
from .report import GateReport, write_report
from .rundata import RunData, load_run
from .verdict import IntegrityResult, MetricResult, compare_samples
from .interleave import (InterleaveResult, Side, SubprocessRunner, combine_runs, round_orders,
                         run_interleaved)

__all__ = [
    "INCONCLUSIVE", "METRICS", "GateReport", "GateSettings", "IntegrityResult", "MetricResult", "RunData",
    "compare_runs", "compare_samples", "load_run", "provenance_differences", "write_report",
    "InterleaveResult", "Side", "SubprocessRunner", "combine_runs", "round_orders", "run_interleaved",
]
