"""Verdicts: the stopping rule, a run's comparisons and the answer (pure Python and scipy).

Below the runner, the analysis and the gate in the import layers, so the runner decides after
every round without Spark and all three judge alike. docs/statistics.md describes the method.
"""

from .answer import Answer, Column, Section, key_answer, key_row, key_section, read_answer
from .comparison_metrics import METRIC_BY_NAME, METRICS, RECEIVE_RATE, Metric
from .pairs import (Judged, Pairing, judge_all, judge_metric, judge_pairing, pays_from, permutation_rows,
                    run_comparisons, samples)
from .rule import (ALPHA, GAIN, INCONCLUSIVE, LOSS, MIN_REPS, NO_DIFFERENCE, NOT_EXERCISED, VERDICTS, Outcome, Rule,
                   decide, judge)
from .techniques import TECHNIQUE_AXES, TechniqueAxis, engaged

__all__ = ["Answer", "Column", "Section", "key_answer", "key_row", "key_section", "read_answer",
           "METRIC_BY_NAME", "METRICS", "RECEIVE_RATE", "Metric",
           "Judged", "Pairing", "judge_all", "judge_metric", "judge_pairing", "pays_from", "permutation_rows",
           "run_comparisons", "samples",
           "ALPHA", "GAIN", "INCONCLUSIVE", "LOSS", "MIN_REPS", "NO_DIFFERENCE", "NOT_EXERCISED", "VERDICTS",
           "Outcome", "Rule", "decide", "judge",
           "TECHNIQUE_AXES", "TechniqueAxis", "engaged"]
