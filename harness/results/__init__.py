"""The results contract and its one reader and writer (layout: docs/results.md).

:mod:`.fields` (the field registry), :mod:`.model` and :mod:`.records` (typed documents),
:mod:`.summary` (building them), :mod:`.reader`, :mod:`.store` (the atomic writer) and
:mod:`.histogram`. The bottom layer: it imports nothing of ssbench but :mod:`harness.errors`
and :mod:`harness.brokersettings`.
"""

from .histogram import Histogram
from .fields import DISTURBED_STATUSES, KEPT_OUT_OF_VERDICTS, counts_in_verdicts
from .model import PermutationSummary, RepetitionSummary, RunRecord
from .reader import TAIL_RE, RepRef, RunReader, find_runs, read_json
from .store import RunDir, latest_unfinished, utc_now_iso, write_atomic, write_json, write_jsonl
from .summary import (build_repetition_summary, disturbance, host_cpu_speed, host_cross_cpu, median,
                      number, repetition_status, summarize_permutation)
