"""Verdicts: the stopping rule, a run's comparisons and the answer (pure Python and scipy).

Below the runner, the analysis and the gate in the import layers, so the runner decides after
every round without Spark and all three judge alike. docs/statistics.md describes the method.
"""

from .answer import Answer, Column, Section, key_answer, read_answer
from .comparison_metrics import RECEIVE_RATE
from .pairs import Judged, judge_all, judge_metric, pays_from, permutation_rows, run_comparisons, samples
from .rule import MIN_REPS, NOT_EXERCISED, VERDICTS, Rule, judge
from .techniques import TECHNIQUE_AXES, engaged
