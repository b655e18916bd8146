"""The regression gate: fail CI on a real regression, not on noise.

Public API::

    from harness.gate import GateSettings, load_run, compare_runs, write_report, run_interleaved

    report = compare_runs(load_run("results/base"), load_run("results/cand"), GateSettings())
    print(report.format_table()); write_report(report); sys.exit(report.exit_code)

The gate is the pairing of two runs' repetitions (:mod:`.compare`; paired by round where the
rounds interleave), its integrity checks (:mod:`.integrity`) and the regression rule of
harness.verdicts (:mod:`harness.verdicts.regression`: settings, verdicts, the estimate);
:mod:`.rundata` loads run directories (through :class:`harness.results.RunReader`),
:mod:`.report` writes the table and gate.json, :mod:`.interleave` runs the interleaved A/B mode.
Its error rates are simulated by :func:`harness.verdicts.simulate.simulate_gate`. See
docs/gate.md.
"""

from __future__ import annotations

from .compare import compare_runs, provenance_differences
from ..verdicts.comparison_metrics import METRICS
from ..verdicts.regression import INCONCLUSIVE, GateSettings, MetricResult, compare_samples
from .integrity import IntegrityResult
from .report import GateReport, write_report
from .rundata import RunData, load_run
from .interleave import (InterleaveResult, Side, SubprocessRunner, add_round, round_orders,
                         run_interleaved)

__all__ = [
    "INCONCLUSIVE", "METRICS", "GateReport", "GateSettings", "IntegrityResult", "MetricResult", "RunData",
    "compare_runs", "compare_samples", "load_run", "provenance_differences", "write_report",
    "InterleaveResult", "Side", "SubprocessRunner", "add_round", "round_orders", "run_interleaved",
]
