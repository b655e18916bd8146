"""The gate's false alarms and power at 5 rounds, for the variance priors weighed against each
other: none (the ordinary paired t), one prior for the run's rows (no labels: each row's from
the other rows), and the gate's rule (``others``: each permutation x family cell's prior
predicted from the other cells). docs/findings/gate-moderation.md quotes it; its ``rows`` and
``cells`` columns are this script at 27cef0d, whose gate's rule was ``cells``.

    PYTHONPATH=. python docs/findings/scripts/gate_moderation.py --trials 4000 [none run others]

Each figure: the share of ``--trials`` seeded gates exiting 1 (harness.verdicts.simulate_gate).
"""

from __future__ import annotations

import argparse
import sys

from harness.verdicts import estimate, regression
from harness.verdicts.simulate import simulate_gate

# (label, seed, permutations, noise, simulate_gate's other arguments); 5 rounds each
SCENARIOS = [
    ("noise, gate.yaml, 10 %", 55, 2, 0.10, {}),
    ("noise, gate.yaml, 10 %, round share 0.4", 56, 2, 0.10, {"shared": 0.4}),
    ("noise, 2 perms, 10 %, one perm 2x as noisy", 81, 2, 0.10, {"perm_noise": (1.0, 2.0)}),
    ("noise, 2 perms, 10 %, latencies 3x as noisy", 82, 2, 0.10, {"latency_noise": 3.0}),
    ("noise, 2 perms, 10 %, rates 3x as noisy", 88, 2, 0.10, {"latency_noise": 1 / 3}),
    ("noise, 2 perms, 10 %, send rate the receive rate's twin", 101, 2, 0.10, {"rates_together": True}),
    ("noise, 1 perm, 10 %, latencies 3x as noisy", 84, 1, 0.10, {"latency_noise": 3.0}),
    ("noise, 18 perms, 10 %", 85, 18, 0.10, {}),
    ("noise, 18 perms, 10 % log-normal, 2nd perm 3x, latencies 3x", 86, 18, 0.10,
     {"perm_noise": (1.0, 3.0), "latency_noise": 3.0, "kind": "lognormal"}),
    ("noise, gate.yaml, 3 %", 51, 2, 0.03, {}),
    ("10 % rate drop, 1 perm, 3 %", 65, 1, 0.03, {"rate_drop": 0.10}),
    ("10 % rate drop, gate.yaml, 3 %", 66, 2, 0.03, {"rate_drop": 0.10}),
    ("10 % rate drop, 1 perm, 3 %, round share 0.4", 65, 1, 0.03, {"rate_drop": 0.10, "shared": 0.4}),
    ("10 % rate drop, gate.yaml, 3 %, round share 0.4", 66, 2, 0.03, {"rate_drop": 0.10, "shared": 0.4}),
    ("10 % rate drop, gate.yaml, 3 %, rates twins", 66, 2, 0.03, {"rate_drop": 0.10, "rates_together": True}),
    ("20 % latency rise, 1 perm, 3 %", 67, 1, 0.03, {"latency_rise": 0.20}),
]


def _ordinary(rows):
    for r in rows:
        if r.estimate is not None:
            (r.p,), (r.p_better,) = estimate.p_values([r.estimate])


def _one_prior(rows):
    judged = [r for r in rows if r.estimate is not None]
    for r, e in zip(judged, estimate.moderate([r.estimate for r in judged])):
        r.estimate = e
        (r.p,), (r.p_better,) = estimate.p_values([e])


def use(candidate: str) -> None:
    """Patch the rule to the candidate's prior (``others``: the gate's own, unpatched)."""
    if candidate == "none":
        regression._moderate = _ordinary
    elif candidate == "run":
        regression._moderate = _one_prior


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=4000)
    ap.add_argument("candidate", nargs="?", default="others", choices=("none", "run", "others"))
    a = ap.parse_args()
    use(a.candidate)
    for label, seed, perms, cv, more in SCENARIOS:
        r = simulate_gate(seed, 5, perms, cv, trials=a.trials, **more)
        print(f"| {a.candidate} | {label} | {r.failed:.2%} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
