"""The regression gate: fail CI on a real regression, not on noise (docs/gate.md).

:func:`compare_runs` of two :func:`load_run` results gives a report (table, gate.json, exit
code). :mod:`.compare` pairs repetitions, :mod:`.integrity` checks them, the rule is
:mod:`harness.verdicts.regression`; :mod:`.interleave` runs the interleaved A/B mode.
"""

from __future__ import annotations

from .compare import compare_runs
from .report import write_report
from .rundata import load_run
