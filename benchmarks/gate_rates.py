"""The regression gate's false-alarm and detection rates, measured by simulation.

    PYTHONPATH=. python benchmarks/gate_rates.py [--trials 400] [--markdown] [--only TEXT]

Each scenario runs ``--trials`` seeded gates through the gate's own rule
(:func:`harness.verdicts.simulate.simulate_gate`: every metric of every permutation with
relative noise per repetition, ``shared`` of its variance a level each round shares with both
sides; judged paired by round as an interleaved gate is, or unpaired as two stored runs are)
and counts the overall verdicts: ``fails`` is the gate exiting 1, the
rest exit 0 (``pass``, ``warning`` or ``inconclusive``); ``improved`` is the share of
comparisons with a row called improved (false when there is only noise). docs/gate.md quotes
this output.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.verdicts.regression import INCONCLUSIVE, PASS, WARNING  # noqa: E402
from harness.verdicts.simulate import simulate_gate as simulate  # noqa: E402

#: a share of the noise's variance each round shares with both sides (interleaving's reason)
HALF = {"shared": 0.5}
UNPAIRED = {"paired": False}

# (label, seed, reps, perms, cv, kind, rate_drop, latency_rise[, simulate's other arguments])
SCENARIOS = [
    ("noise only, 1 rep, 18 perms (bench.yaml), 3 % noise", 11, 1, 18, 0.03, "normal", 0.0, 0.0),
    ("noise only, 1 rep, 18 perms, 25 % noise", 12, 1, 18, 0.25, "normal", 0.0, 0.0),
    ("noise only, 1 rep, 2 perms, 3 % noise", 13, 1, 2, 0.03, "normal", 0.0, 0.0),
    ("noise only, 3 reps, 2 perms, 3 % noise", 31, 3, 2, 0.03, "normal", 0.0, 0.0),
    ("noise only, 3 reps, 18 perms, 3 % noise", 32, 3, 18, 0.03, "normal", 0.0, 0.0),
    ("noise only, 4 reps, 2 perms, 3 % noise", 41, 4, 2, 0.03, "normal", 0.0, 0.0),
    ("noise only, 5 reps, 2 perms (gate.yaml), 3 % noise", 51, 5, 2, 0.03, "normal", 0.0, 0.0),
    ("noise only, 5 reps, 18 perms, 3 % noise", 52, 5, 18, 0.03, "normal", 0.0, 0.0),
    ("noise only, 5 reps, 2 perms, 3 % log-normal", 53, 5, 2, 0.03, "lognormal", 0.0, 0.0),
    ("noise only, 5 reps, 2 perms, 3 % + 1 rep in 10 at 12 %", 54, 5, 2, 0.03, "wide", 0.0, 0.0),
    ("noise only, 5 reps, 2 perms, 10 % noise", 55, 5, 2, 0.10, "normal", 0.0, 0.0),
    ("noise only, 5 reps, 2 perms, 10 % noise, half shared by the round", 56, 5, 2, 0.10, "normal", 0.0, 0.0, HALF),
    ("noise only, 5 reps, 2 perms, 10 % noise, unpaired (stored runs)", 57, 5, 2, 0.10, "normal", 0.0, 0.0,
     UNPAIRED),
    # noise levels that differ between the permutations or the metrics, and rates that move
    # together: the moderated variances' prior (fitted by permutation and family, a cell
    # counted once) holds the gate's level in each
    ("noise only, 5 reps, 2 perms, 10 % noise, one perm twice as noisy", 81, 5, 2, 0.10, "normal", 0.0, 0.0,
     {"perm_noise": (1.0, 2.0)}),
    ("noise only, 5 reps, 2 perms, 10 % noise, latencies 3x as noisy", 82, 5, 2, 0.10, "normal", 0.0, 0.0,
     {"latency_noise": 3.0}),
    ("noise only, 5 reps, 2 perms, 10 % noise, rates 3x as noisy", 88, 5, 2, 0.10, "normal", 0.0, 0.0,
     {"latency_noise": 1 / 3}),
    ("noise only, 5 reps, 18 perms, 10 % noise", 85, 5, 18, 0.10, "normal", 0.0, 0.0),
    ("noise only, 5 reps, 18 perms, 10 % log-normal, every 2nd perm 3x, latencies 3x as noisy", 86, 5, 18, 0.10,
     "lognormal", 0.0, 0.0, {"perm_noise": (1.0, 3.0), "latency_noise": 3.0}),
    ("noise only, 5 reps, 2 perms, 10 % noise, the send rate the receive rate's twin", 101, 5, 2, 0.10, "normal",
     0.0, 0.0, {"rates_together": True}),
    ("10 % rate drop, 1 rep, 2 perms, 3 % noise", 61, 1, 2, 0.03, "normal", 0.10, 0.0),
    ("10 % rate drop, 3 reps, 2 perms, 3 % noise", 63, 3, 2, 0.03, "normal", 0.10, 0.0),
    ("10 % rate drop, 4 reps, 1 perm, 3 % noise", 64, 4, 1, 0.03, "normal", 0.10, 0.0),
    ("10 % rate drop, 5 reps, 1 perm, 3 % noise", 65, 5, 1, 0.03, "normal", 0.10, 0.0),
    ("10 % rate drop, 5 reps, 1 perm, 3 % noise, half shared by the round", 65, 5, 1, 0.03, "normal", 0.10, 0.0,
     HALF),
    ("10 % rate drop, 5 reps, 1 perm, 3 % noise, unpaired (stored runs)", 65, 5, 1, 0.03, "normal", 0.10, 0.0,
     UNPAIRED),
    ("10 % rate drop, 5 reps, 2 perms (gate.yaml), 3 % noise", 66, 5, 2, 0.03, "normal", 0.10, 0.0),
    ("10 % rate drop, 5 reps, 2 perms (gate.yaml), 3 % noise, the rates twins", 66, 5, 2, 0.03, "normal", 0.10, 0.0,
     {"rates_together": True}),
    ("10 % rate drop, 5 reps, 2 perms (gate.yaml), 3 % noise, half shared by the round", 66, 5, 2, 0.03, "normal",
     0.10, 0.0, HALF),
    ("10 % rate drop, 5 reps, 2 perms (gate.yaml), 10 % noise, half shared by the round", 67, 5, 2, 0.10, "normal",
     0.10, 0.0, HALF),
    ("20 % latency rise, 5 reps, 1 perm, 3 % noise", 67, 5, 1, 0.03, "normal", 0.0, 0.20),
    ("10 % rate gain, 4 reps, 1 perm, 3 % noise", 68, 4, 1, 0.03, "normal", -0.10, 0.0),
    ("10 % rate gain, 5 reps, 2 perms (gate.yaml), 3 % noise", 69, 5, 2, 0.03, "normal", -0.10, 0.0),
    # a round's second run 5 % slower (a position effect), 5 % noise: the rounds' orders drawn
    # one by one or counterbalanced in pairs (as the gate draws them)
    ("noise, 5 % position effect, 5 reps, 2 perms, 5 % noise, orders drawn per round", 71, 5, 2, 0.05, "normal",
     0.0, 0.0, {"position_effect": 0.05, "balanced": False}),
    ("noise, 5 % position effect, 5 reps, 2 perms, 5 % noise, counterbalanced", 71, 5, 2, 0.05, "normal",
     0.0, 0.0, {"position_effect": 0.05}),
    ("noise, 5 % position effect, 6 reps, 2 perms, 5 % noise, orders drawn per round", 72, 6, 2, 0.05, "normal",
     0.0, 0.0, {"position_effect": 0.05, "balanced": False}),
    ("noise, 5 % position effect, 6 reps, 2 perms, 5 % noise, counterbalanced", 72, 6, 2, 0.05, "normal",
     0.0, 0.0, {"position_effect": 0.05}),
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=400)
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    ap.add_argument("--only", action="append", default=[], metavar="TEXT",
                    help="only the scenarios whose label contains TEXT (repeatable: any of them)")
    args = ap.parse_args(argv)
    head = ("scenario", "fails (exit 1)", "pass", "warning", "inconclusive", "improved")
    if args.markdown:
        print("| " + " | ".join(head) + " |")
        print("| --- | ---: | ---: | ---: | ---: | ---: |")
    else:
        print(f"{head[0]:<80} {head[1]:>14} {head[2]:>8} {head[3]:>8} {head[4]:>13} {head[5]:>9}")
    t0 = time.monotonic()
    for label, seed, reps, perms, cv, kind, drop, rise, *more in SCENARIOS:
        if args.only and not any(t in label for t in args.only):
            continue
        r = simulate(seed, reps, perms, cv, kind, rate_drop=drop, latency_rise=rise, trials=args.trials,
                     **(more[0] if more else {}))
        cells = [f"{r.failed:.2%}", f"{r.rate(PASS):.2%}", f"{r.rate(WARNING):.2%}", f"{r.rate(INCONCLUSIVE):.2%}",
                 f"{r.improved:.2%}"]
        if args.markdown:
            print("| " + " | ".join([label, *cells]) + " |")
        else:
            print(f"{label:<80} {cells[0]:>14} {cells[1]:>8} {cells[2]:>8} {cells[3]:>13} {cells[4]:>9}")
    print(f"\n{args.trials} trials per scenario, {time.monotonic() - t0:.1f} s; default settings "
          "(k=2, min effect 5 %, min reps 4, BH FDR 0.01, moderated variances); paired by round unless said")
    return 0


if __name__ == "__main__":
    sys.exit(main())
