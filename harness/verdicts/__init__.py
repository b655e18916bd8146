"""Verdicts: the stopping rule, a run's comparisons and the answer (pure Python and scipy).

Below the runner, the analysis and the gate in the layers (pyproject.toml), so that the runner
can decide after every round without Spark and all three judge alike:

* :mod:`.rule` — repeated confidence intervals (Welch, on the log ratio) with the error spent
  over the looks, and the verdicts ``gain``, ``loss``, ``no difference``, ``inconclusive``;
* :mod:`.comparison_metrics` — the metrics a comparison is judged on (a direction, where a summary has it);
* :mod:`.techniques` — the technique axes: baseline, metrics (primary first), what shows the
  mechanism engaged, how to exercise it; ``not exercised``;
* :mod:`.pairs` — the one list of a run's comparisons (dialog strategies, technique axes) and
  the repetitions that count (:func:`harness.results.counts_in_verdicts`);
* :mod:`.auto` — ``run.repetitions: auto``: the permutations of each round and when to stop;
* :mod:`.answer` — the key table on the terminal, in the report and as JSON.

docs/statistics.md describes the method and its guarantee.
"""

from .answer import Answer, Column, Section, key_answer, key_row, key_section, read_answer
from .comparison_metrics import METRIC_BY_NAME, METRICS, RECEIVE_RATE, Metric
from .pairs import (Judged, Pairing, judge_all, judge_metric, judge_pairing, pays_from, permutation_rows,
                    run_comparisons, samples)
from .rule import (ALPHA, GAIN, INCONCLUSIVE, LOSS, MIN_REPS, NO_DIFFERENCE, NOT_EXERCISED, VERDICTS, Outcome, Rule,
                   decide, judge, welch_interval)
from .techniques import TECHNIQUE_AXES, TechniqueAxis, engaged

__all__ = ["Answer", "Column", "Section", "key_answer", "key_row", "key_section", "read_answer",
           "METRIC_BY_NAME", "METRICS", "RECEIVE_RATE", "Metric",
           "Judged", "Pairing", "judge_all", "judge_metric", "judge_pairing", "pays_from", "permutation_rows",
           "run_comparisons", "samples",
           "ALPHA", "GAIN", "INCONCLUSIVE", "LOSS", "MIN_REPS", "NO_DIFFERENCE", "NOT_EXERCISED", "VERDICTS",
           "Outcome", "Rule", "decide", "judge", "welch_interval",
           "TECHNIQUE_AXES", "TechniqueAxis", "engaged"]
