"""The gate's false alarms and power at 5 rounds, under one noise model, for the rule of any
checkout: the rule it replaced (fae6f3e: an exact Mann-Whitney U on the unpaired repetitions,
FDR 0.05) and today's (a paired t test of the rounds' log ratios, Benjamini-Hochberg in two
families). docs/findings/gate-power.md quotes its output.

    git worktree add /tmp/gate-base fae6f3e
    PYTHONPATH=. python docs/findings/scripts/gate_power.py                 # this checkout's rule
    python docs/findings/scripts/gate_power.py --checkout /tmp/gate-base    # the old rule

Each figure: 2,000 seeded gates; noise relative, ``shared`` of its variance a level each round
shares with both sides (the measured share is 0.4: findings/gate-rounds.md).
"""

from __future__ import annotations

import argparse
import math
import random
import sys


def _old_rule(checkout: str):
    """fae6f3e's gate: its own compare_samples and noise model (harness.gate.simulate)."""
    sys.path.insert(0, checkout)
    from harness.gate.simulate import REGRESSION, GateSettings, compare_samples, side, side_orders

    def gate(seed, reps, perms, cv, drop=0.0, shared=0.0, trials=2000):
        rng, fails, own = random.Random(seed), 0, cv * math.sqrt(1 - shared)
        for _ in range(trials):
            side_orders(rng, reps, True)
            levels = [[math.exp(rng.gauss(0, cv * math.sqrt(shared))) for _ in range(reps)] for _ in range(perms)]

            def leveled(d):
                return {p: {m: [x * levels[int(p[4:])][i] for i, x in enumerate(v)] for m, v in ms.items()}
                        for p, ms in d.items()}
            b = leveled(side(rng, reps, perms, own, "normal"))
            c = leveled(side(rng, reps, perms, own, "normal", drop, 0.0))
            fails += any(r.verdict == REGRESSION for r in compare_samples(b, c, GateSettings()))
        return fails / trials
    return gate


def _this_rule():
    from harness.verdicts.simulate import simulate_gate

    def gate(seed, reps, perms, cv, drop=0.0, shared=0.0, trials=2000):
        return simulate_gate(seed, reps, perms, cv, rate_drop=drop, trials=trials, shared=shared).failed
    return gate


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkout", help="a checkout of fae6f3e (the old rule); default: this checkout's rule")
    ap.add_argument("--trials", type=int, default=2000)
    a = ap.parse_args()
    gate = _old_rule(a.checkout) if a.checkout else _this_rule()
    print("| shared | false alarm, 10 % noise, 2 perms | 10 % drop, 10 % noise, 2 perms "
          "| 10 % drop, 3 % noise, 1 perm | 10 % drop, 3 % noise, 2 perms |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for s in (0.0, 0.4, 0.5):
        fp = gate(55, 5, 2, 0.10, shared=s, trials=a.trials)
        p10 = gate(67, 5, 2, 0.10, 0.10, s, trials=a.trials)
        p1 = gate(65, 5, 1, 0.03, 0.10, s, trials=a.trials)
        p2 = gate(66, 5, 2, 0.03, 0.10, s, trials=a.trials)
        print(f"| {s:g} | {fp:.2%} | {p10:.2%} | {p1:.2%} | {p2:.2%} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
