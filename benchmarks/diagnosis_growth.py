"""The diagnosis' queue-growth detector (harness.analysis.diagnosis._growing over
harness.collectors.queues.growth), simulated: how often a depth that only fluctuates is called
growing, and how often a real growth is found, by window, sampling and kind of fluctuation.
docs/diagnosis.md ("The thresholds' error rates") quotes its output; the test suite checks three
of its cells (tests/analysis/test_diagnosis.py::test_growth_detector_error_rates).

    .venv/bin/python benchmarks/diagnosis_growth.py [--trials 800] [--seed 1]

A depth is growth x SEND rate x t plus a fluctuation of amplitude A (in seconds' worth of SENDs):
"batches" uniform in [0, A] (the transport's and the readers' batches seen at random phases),
"ar1" correlated from one sample to the next (0.8), "walk" a random walk kept within A."""

from __future__ import annotations

import argparse

import numpy as np

from harness.analysis.diagnosis import _growing
from harness.collectors.queues import growth

SEND = 1000.0


def depths(rng, n: int, dt: float, grow: float, amp: float, model: str) -> list[tuple[float, float]]:
    t = np.arange(n) * dt + rng.uniform(0, dt)
    if model == "batches":
        noise = rng.uniform(0, amp, n)
    elif model == "ar1":
        x, noise = rng.normal(0, amp / 3), np.zeros(n)
        for i in range(n):
            x = 0.8 * x + rng.normal(0, amp / 5)
            noise[i] = x + amp / 2
    else:
        noise = np.clip(np.cumsum(rng.normal(0, amp / 4, n)), -amp, amp) + amp
    return list(zip(t.tolist(), np.maximum(0, grow * SEND * t + noise).tolist()))


def rate(rng, trials: int, **kw) -> float:
    return sum(_growing(growth(depths(rng, **kw)), SEND) for _ in range(trials)) / trials


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=800)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    print("window  samples  fluctuation   amp  | false growth | found at 20 % | at 50 %")
    for n, dt in ((20, 0.25), (10, 1.0)):
        for model in ("batches", "ar1", "walk"):
            for amp in (0.5, 1.0, 2.0):
                kw = dict(n=n, dt=dt, amp=amp * SEND, model=model)
                fp = rate(rng, a.trials, grow=0.0, **kw)
                p20 = rate(rng, a.trials // 2, grow=0.2, **kw)
                p50 = rate(rng, a.trials // 2, grow=0.5, **kw)
                print(f"{n * dt:5.0f} s {n:7d}  {model:11s} {amp:4.1f} s | {100 * fp:11.1f} % | {100 * p20:12.0f} % | "
                      f"{100 * p50:6.0f} %")


if __name__ == "__main__":
    main()
