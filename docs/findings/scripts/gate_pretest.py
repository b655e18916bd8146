"""Pool the paired test's variance with the rounds' sums when they look unshared: its level.

One row of the gate, n rounds of log values a side. D = B - A (what the paired t uses), S = A + B
(what the rounds share shows in). When the rounds share no noise, S's variance estimates D's, so
pooling the two doubles the degrees of freedom; "pool when s_S^2 < s_D^2" is that choice made
from the data. This prints, per round share, the share of rows rejected at a one-sided level
of 0.01 by the paired t, Welch's t and the pooled-when-small t under no difference (10 % noise),
and their power against a 10 % drop (3 % noise).

    python docs/findings/scripts/gate_pretest.py [--rows 400000] [--rounds 5] [--seed 1]
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy import stats


def rejected(rng, rows: int, n: int, share: float, cv: float, drop: float, level: float) -> dict[str, float]:
    noise, shared = cv * np.sqrt(1 - share), cv * np.sqrt(share)
    r = rng.normal(0, shared, (rows, n))
    a = r + rng.normal(0, noise, (rows, n))
    b = r + rng.normal(0, noise, (rows, n)) + np.log(1 - drop)
    d, s = b - a, a + b
    dbar, v_d, v_s = d.mean(1), d.var(1, ddof=1), s.var(1, ddof=1)
    paired = stats.t.cdf(dbar / np.sqrt(v_d / n), n - 1)
    va, vb = a.var(1, ddof=1), b.var(1, ddof=1)
    df_w = (va / n + vb / n) ** 2 / ((va / n) ** 2 / (n - 1) + (vb / n) ** 2 / (n - 1))
    welch = stats.t.cdf(dbar / np.sqrt((va + vb) / n), df_w)
    pool = v_s < v_d
    pooled = stats.t.cdf(dbar / np.sqrt(np.where(pool, (v_s + v_d) / 2, v_d) / n), np.where(pool, 2 * n - 2, n - 1))
    return {k: float((p < level).mean()) for k, p in (("paired", paired), ("welch", welch), ("pooled", pooled))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=400_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    print("| round share | case | paired | Welch | pooled when small |\n| ---: | --- | ---: | ---: | ---: |")
    for share in (0.0, 0.2, 0.4, 0.6):
        for case, cv, drop in (("no difference, 10 % noise", 0.10, 0.0), ("10 % drop, 3 % noise", 0.03, 0.10)):
            r = rejected(rng, args.rows, args.rounds, share, cv, drop, 0.01)
            print(f"| {share} | {case} | {r['paired']:.2%} | {r['welch']:.2%} | {r['pooled']:.2%} |")


if __name__ == "__main__":
    main()
