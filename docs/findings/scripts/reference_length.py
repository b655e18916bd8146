#!/usr/bin/env python
"""How long must the host probes' idle reference be? The false-flag rates of slow_cpu and
noisy_storage, per window and across a run, for references of different lengths and densities.

Two parts, both printed, and a last line of JSON:

* **replay** (``--cycles``): the real probes (harness.collectors.cpuspeed.CpuProbe and
  harness.collectors.storage.FsyncProbe, both at once in this process, as a repetition's
  collectors run them) on this machine, in cycles: for each reference configuration
  (``--configs``, seconds/interval) in turn, the probes' idle reference, then a window of
  ``--window`` seconds at the probes' own interval. A run is ``--refs`` consecutive cycles: its
  typical is the median of its references of one configuration (a run takes one in each of its
  first 3 repetitions), and every window of those cycles is judged against each configuration's
  typical, paired, exactly as the collectors decide (the window's figure: the mean over its 1 s
  ticks of each tick's median probe). Nobody disturbs the machine on purpose: every flag is false.
* **simulation** (``--trials``): the model of tests/collectors/test_cpuspeed.py and
  tests/collectors/test_storage.py (log-normal probes: CPU s.d. 27 %, storage sigma 1), each
  configuration's probe count, windows of ``--window`` s, runs of ``--run-windows`` windows
  sharing one typical; an unchanged host, and one as slow as its own load can make it.

    .venv/bin/python docs/findings/scripts/reference_length.py --cycles 12 --dir /var/tmp
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))

from harness.collectors.cpuspeed import SLOW_CPU_SPEED, CpuProbe, cpu_speed  # noqa: E402
from harness.collectors.storage import FsyncProbe, noisy_storage  # noqa: E402

PROBE_INTERVAL_S = 0.1


def parse_configs(text: str) -> list[tuple[float, float]]:
    return [(float(s), float(i)) for s, i in (c.split("/") for c in text.split(","))]


def label(cfg: tuple[float, float]) -> str:
    return f"{cfg[0]:g} s / {cfg[1] * 1000:.1f} ms ({round(cfg[0] / cfg[1])} probes)"


def window_figure(samples, start: float, seconds: int) -> float | None:
    """The mean over 1 s ticks of each tick's median probe."""
    ticks = []
    for k in range(seconds):
        got = [ms for ts, ms in samples if start + k <= ts < start + k + 1]
        if got:
            ticks.append(statistics.median(got))
    return statistics.fmean(ticks) if ticks else None


def cycle(directory: Path, cfg: tuple[float, float], seconds: int) -> dict:
    """One repetition's probes: the idle reference of ``cfg``, then a window."""
    ref_s, ref_every = cfg
    probes = [CpuProbe(reference_interval=ref_every, reference_s=ref_s),
              FsyncProbe(directory, reference_interval=ref_every, reference_s=ref_s)]
    for p in probes:
        p.start()
    t0 = time.time()
    time.sleep(ref_s + seconds + 0.05)
    for p in probes:
        p.stop()
    out = {}
    for name, p in zip(("cpu", "storage"), probes):
        samples = list(p.samples)
        first = samples[0][0]
        out[name] = {"reference": p.idle_reference(first + ref_s),
                     "window": window_figure(samples, first + ref_s, seconds),
                     "probes": sum(1 for ts, _ in samples if ts < first + ref_s)}
    out["t"] = t0
    return out


def replay(directory: Path, configs, cycles: int, seconds: int, refs: int) -> dict:
    rows: list[dict] = []
    for k in range(cycles):
        row = {}
        for cfg in configs:
            row[label(cfg)] = cycle(directory, cfg, seconds)
        rows.append(row)
        print(f"cycle {k + 1}/{cycles}: load {os.getloadavg()[0]:.1f}; " + "; ".join(
            f"{name}: cpu {c['cpu']['reference']:.3f} ms, fsync {c['storage']['reference']:.3f} ms"
            for name, c in row.items()), flush=True)
    out = {}
    for cfg in configs:
        name = label(cfg)
        per_window, per_run, speeds, ratios = {"cpu": 0, "storage": 0}, {"cpu": 0, "storage": 0}, [], []
        windows = runs = 0
        for k in range(cycles - refs + 1):
            part = rows[k:k + refs]
            typ_cpu = statistics.median(r[name]["cpu"]["reference"] for r in part)
            typ_sto = statistics.median(r[name]["storage"]["reference"] for r in part)
            hit = {"cpu": False, "storage": False}
            for r in part:
                for c in r.values():          # every window of the run's cycles, paired
                    speed = cpu_speed(c["cpu"]["window"], typ_cpu)
                    slow = speed is not None and speed < SLOW_CPU_SPEED
                    noisy = noisy_storage(c["storage"]["window"], typ_sto)
                    speeds.append(speed)
                    ratios.append(c["storage"]["window"] / typ_sto)
                    per_window["cpu"] += slow
                    per_window["storage"] += noisy
                    hit["cpu"] |= slow
                    hit["storage"] |= noisy
                    windows += 1
            runs += 1
            for f in hit:
                per_run[f] += hit[f]
        refs_cpu = [r[name]["cpu"]["reference"] for r in rows]
        refs_sto = [r[name]["storage"]["reference"] for r in rows]
        out[name] = {
            "windows": windows, "runs": runs, "flagged_windows": per_window, "flagged_runs": per_run,
            "cpu_reference_ms": quantiles(refs_cpu), "fsync_reference_ms": quantiles(refs_sto),
            "cpu_reference_log_sd": statistics.stdev(np.log(refs_cpu)), "fsync_reference_log_sd": statistics.stdev(np.log(refs_sto)),
            "speed_min_p1_median": [min(speeds), float(np.percentile(speeds, 1)), statistics.median(speeds)],
            "fsync_ratio_median_p99_max": [statistics.median(ratios), float(np.percentile(ratios, 99)), max(ratios)],
        }
    return out


def quantiles(xs) -> list[float]:
    return [round(min(xs), 4), round(statistics.median(xs), 4), round(max(xs), 4)]


def simulate(configs, seconds: int, run_windows: int, trials: int) -> dict:
    """Per window and per run (``run_windows`` windows judged against one typical), numpy."""
    rng = np.random.default_rng(51)
    out = {}
    for cfg in configs:
        n_ref = round(cfg[0] / cfg[1])
        res = {}
        for what, sigma, base, factors in (("cpu", 0.27, 0.4, (1.0, 1.1, 1.4)), ("storage", 1.0, 2.0, (1.0, 2.0, 4.0))):
            for f in factors:
                refs = np.median(base * np.exp(sigma * rng.standard_normal((trials, 3, n_ref))), axis=2)
                typical = np.median(refs, axis=1)[:, None]
                ticks = np.median(base * f * np.exp(sigma * rng.standard_normal((trials, run_windows, seconds, 10))),
                                  axis=3)
                window = ticks.mean(axis=2)
                if what == "cpu":
                    flags = typical / window < SLOW_CPU_SPEED
                else:
                    flags = np.vectorize(noisy_storage)(window, np.broadcast_to(typical, window.shape))
                res[f"{what} x{f:g}"] = {"per_window": float(flags.mean()), "per_run": float(flags.any(axis=1).mean())}
        out[label(cfg)] = res
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs", default="1.5/0.02,0.5/0.00667,0.5/0.02",
                    help="reference seconds/interval, comma separated (the first: the one before)")
    ap.add_argument("--cycles", type=int, default=12, help="replay cycles (0: simulation only)")
    ap.add_argument("--window", type=int, default=6, help="window seconds")
    ap.add_argument("--refs", type=int, default=3, help="references a run's typical is the median of")
    ap.add_argument("--run-windows", type=int, default=10, help="windows per simulated run")
    ap.add_argument("--trials", type=int, default=4000)
    ap.add_argument("--dir", type=Path, default=Path("/var/tmp"), help="the fsync probe's directory")
    a = ap.parse_args(argv)
    configs = parse_configs(a.configs)
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs", flush=True)
    result = {"simulation": simulate(configs, a.window, a.run_windows, a.trials)}
    for name, res in result["simulation"].items():
        print(f"simulated, {name}: " + "; ".join(f"{k}: {v['per_window']:.4f} a window, {v['per_run']:.4f} a run"
                                                 for k, v in res.items()), flush=True)
    if a.cycles:
        result["replay"] = replay(a.dir, configs, a.cycles, a.window, a.refs)
        for name, res in result["replay"].items():
            print(f"replayed, {name}: {json.dumps(res)}", flush=True)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
