"""The gate's integrity check: messages lost or duplicated, errors and disabled queues fail a
comparison whatever the throughput and however few the repetitions."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..verdicts.regression import FAIL, PASS
from .rundata import PermData


@dataclass
class IntegrityResult:
    permutation: str
    candidate_lost: int
    baseline_lost: int
    candidate_errors_per_rep: float
    baseline_errors_per_rep: float
    candidate_queue_disabled: bool
    verdict: str = PASS
    reasons: list[str] = field(default_factory=list)


def check_integrity(perm: str, baseline: PermData, candidate: PermData) -> IntegrityResult:
    """Messages lost or duplicated (or never sent), errors and disabled queues: a failure
    whatever the throughput."""
    c_lost = sum(r.messages_lost for r in candidate.reps)
    b_lost = sum(r.messages_lost for r in baseline.reps)
    c_err = sum(r.summary.get("errors", 0) for r in candidate.reps) / len(candidate.reps)
    b_err = sum(r.summary.get("errors", 0) for r in baseline.reps) / len(baseline.reps)
    disabled = any(r.summary.queue_disabled for r in candidate.reps)
    res = IntegrityResult(permutation=perm, candidate_lost=c_lost, baseline_lost=b_lost,
                          candidate_errors_per_rep=c_err, baseline_errors_per_rep=b_err,
                          candidate_queue_disabled=disabled)
    if c_lost > 0:
        reps = [r.repetition for r in candidate.reps if r.messages_lost > 0]
        res.reasons.append(f"candidate lost {c_lost} message(s) (rep {', '.join(map(str, reps))})")
    duplicated = [r for r in candidate.reps if r.messages_duplicated > 0]
    if duplicated:
        res.reasons.append(f"candidate received {sum(r.messages_duplicated for r in duplicated)} message(s) twice "
                           f"or never sent (rep {', '.join(str(r.repetition) for r in duplicated)})")
    if c_err > b_err:
        res.reasons.append(f"errors rose: {c_err:g} per repetition (baseline {b_err:g})")
    if disabled:
        res.reasons.append("candidate queue disabled (poison messages)")
    if res.reasons:
        res.verdict = FAIL
    return res
