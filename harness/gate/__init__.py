"""The regression gate: fail CI on a real regression, not on noise.

Public API::

    from harness.gate import GateSettings, load_run, compare_runs, write_report, run_interleaved

    report = compare_runs(load_run("results/base"), load_run("results/cand"), GateSettings())
    print(report.format_table()); write_report(report); sys.exit(report.exit_code)

:mod:`harness.gate.stats` holds the statistics, :mod:`harness.gate.compare` the comparison
and verdicts, :mod:`harness.gate.interleave` the interleaved A/B mode. See docs/gate.md.
"""

from __future__ import annotations

from .compare import (METRICS, GateReport, GateSettings, IntegrityResult, MetricResult, RunData,
                      compare_runs, compare_samples, load_run, provenance_differences, write_report)
from .interleave import (InterleaveResult, Side, SubprocessRunner, combine_runs, round_orders,
                         run_interleaved)

__all__ = [
    "METRICS", "GateReport", "GateSettings", "IntegrityResult", "MetricResult", "RunData",
    "compare_runs", "compare_samples", "load_run", "provenance_differences", "write_report",
    "InterleaveResult", "Side", "SubprocessRunner", "combine_runs", "round_orders", "run_interleaved",
]
