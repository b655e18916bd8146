"""The regression gate: fail CI on a real regression, not on noise (docs/gate.md).

:func:`compare_runs` of two :func:`load_run` results gives a report (table, gate.json, exit
code). :mod:`.compare` pairs repetitions, :mod:`.integrity` checks them, the rule is
:mod:`harness.verdicts.regression`; :mod:`.interleave` runs the interleaved A/B mode.
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
