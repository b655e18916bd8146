"""Memory over a long window: a real ``ssbench run`` of one permutation (16 threads, 8 KB SENDs
by default, one repetition of ``--measure`` seconds, a closed loop or ``--rate`` SENDs/s), every
process's memory sampled every ``--every`` seconds: ``ssbench run`` itself, the Locust master,
each Locust worker and the embedded broker (RSS, and USS and PSS from smaps). Per process, the
slope of RSS (and USS) on time after ``--settle`` seconds of the run, with its 95 % interval
(least squares, t on n-2 degrees of freedom; successive samples are autocorrelated, so read the
interval as a lower bound of the real one), in MB/min. Prints a line per sample, a table, and the JSON (also written to
``--json``) as the last line.

The embedded server is ``$SSBENCH_PGDATA``'s. These are PostgreSQL numbers from an emulation.

    .venv/bin/python benchmarks/memory_soak.py --measure 600 --json /tmp/soak.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
from scipy import stats

REPO = Path(__file__).resolve().parent.parent
MB = 1024 * 1024

MATRIX = """\
name: memory-soak
description: one permutation held for a long window, to watch every process's memory
axes:
  initiators: [1]
  threads: [{threads}]
  dialogs: [per_thread]
  payload_bytes: [{payload}]
  server: [durable]
{rate}run:
  warmup_seconds: {warmup}
  measure_seconds: {measure}
  repetitions: 1
"""


def role(p: psutil.Process, root: int) -> str | None:
    """What a process of the run is, from its command line (None: not one we follow)."""
    if p.pid == root:
        return "ssbench run"
    try:
        cmd = " ".join(p.cmdline())
    except psutil.Error:
        return None
    if "locust" in cmd and "--worker" in cmd:      # (a worker's command has --master-host)
        return "locust worker"
    if "locust" in cmd and "--master" in cmd:
        return "locust master"
    if "harness.targets.embedded.broker" in cmd:
        return "broker"
    return None


def sample(root: psutil.Process) -> list[dict]:
    """Every followed process of ``root``'s tree: pid, role, RSS, USS, PSS (MB)."""
    out = []
    try:
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return out
    for p in procs:
        r = role(p, root.pid)
        if r is None:
            continue
        try:
            m = p.memory_full_info()
        except psutil.Error:
            continue
        out.append({"pid": p.pid, "role": r, "rss": m.rss / MB, "uss": m.uss / MB,
                    "pss": getattr(m, "pss", 0.0) / MB})
    return out


def slope(ts: list[float], ys: list[float]) -> dict | None:
    """Least-squares slope of ``ys`` (MB) on ``ts`` (s) in MB/min, with its 95 % interval."""
    n = len(ts)
    if n < 4:
        return None
    fit = stats.linregress(ts, ys)
    half = stats.t.ppf(0.975, n - 2) * fit.stderr
    return {"mb_per_min": fit.slope * 60, "ci95": [(fit.slope - half) * 60, (fit.slope + half) * 60],
            "n": n, "first_mb": ys[0], "last_mb": ys[-1], "max_mb": max(ys)}


def window(samples: list[dict], settle: float, span: float) -> tuple[float, float]:
    """The seconds the slopes cover: from ``settle`` seconds after the Locust master appeared
    to ``span`` (warm-up and measured window) after it (the load's end: then the drain and
    the summaries, whose peak the table gives apart)."""
    t0 = next((s["t"] for s in samples if any(p["role"] == "locust master" for p in s["procs"])), 0.0)
    return t0 + settle, t0 + span


def summarize(samples: list[dict], settle: float, span: float) -> dict:
    """Per process (role and pid): slopes of RSS and USS over :func:`window`, and its peak RSS
    over the whole run."""
    lo, hi = window(samples, settle, span)
    series: dict[str, dict] = {}
    for s in samples:
        for p in s["procs"]:
            k = f"{p['role']} {p['pid']}"
            d = series.setdefault(k, {"t": [], "rss": [], "uss": [], "pss": []})
            d["t"].append(s["t"])
            for f in ("rss", "uss", "pss"):
                d[f].append(p[f])
    out = {}
    for k, d in series.items():
        keep = [i for i, t in enumerate(d["t"]) if lo <= t <= hi]
        ts = [d["t"][i] for i in keep]
        out[k] = {f: slope(ts, [d[f][i] for i in keep]) for f in ("rss", "uss")}
        out[k].update(samples=len(d["t"]), peak_rss_mb=max(d["rss"]), window_s=[lo, hi])
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--payload", type=int, default=8192)
    ap.add_argument("--warmup", type=float, default=10)
    ap.add_argument("--measure", type=float, default=600)
    ap.add_argument("--rate", type=float, default=None,
                    help="offered SENDs per second (open loop); default: a closed loop, as fast as it goes")
    ap.add_argument("--every", type=float, default=5.0, help="seconds between samples")
    ap.add_argument("--settle", type=float, default=60.0,
                    help="seconds after the Locust master's start left out of the slopes (warm-up)")
    ap.add_argument("--json", type=Path, help="write the samples and slopes here too")
    ap.add_argument("--summarize", type=Path, metavar="JSON",
                    help="no run: the table of an earlier --json's samples (with this --settle)")
    a = ap.parse_args(argv)
    if a.summarize:
        old = json.loads(a.summarize.read_text())
        return report(old["samples"], old["exit"], a.settle, old["warmup"] + old["measure"], old, a.json)
    with tempfile.TemporaryDirectory(prefix="ssbench-soak-") as tmp:
        matrix = Path(tmp) / "soak.yaml"
        matrix.write_text(MATRIX.format(threads=a.threads, payload=a.payload, warmup=a.warmup, measure=a.measure,
                                        rate=f"  rate: [{a.rate:g}]\n" if a.rate else ""))
        cmd = [sys.executable, "-m", "harness.cli", "run", str(matrix), "--out", str(Path(tmp) / "out")]
        print(f"# {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())} load {os.getloadavg()} "
              f"cpus {os.cpu_count()} pgdata {os.environ.get('SSBENCH_PGDATA', '(default)')}", flush=True)
        print("# " + " ".join(cmd), flush=True)
        log = open(Path(tmp) / "run.log", "w")
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        root, t0, samples = psutil.Process(proc.pid), time.monotonic(), []
        while proc.poll() is None:
            s = {"t": round(time.monotonic() - t0, 2), "procs": sample(root)}
            if s["procs"]:
                samples.append(s)
                print(f"{s['t']:7.1f}s " + "  ".join(f"{p['role'].split()[-1]}:{p['rss']:.0f}" for p in s["procs"]),
                      flush=True)
            time.sleep(a.every)
        log.close()
        rc = proc.returncode
        rates = {f.parent.parent.name: json.loads(f.read_text()).get("load", {}).get("send_rate")
                 for f in (Path(tmp) / "out").glob("**/rep-*/summary.json")}
        if rc != 0:
            print((Path(tmp) / "run.log").read_text()[-3000:], file=sys.stderr)
    return report(samples, rc, a.settle, a.warmup + a.measure,
                  {"threads": a.threads, "payload": a.payload, "warmup": a.warmup, "measure": a.measure,
                   "send_rate": rates}, a.json)


def report(samples: list[dict], rc: int, settle: float, span: float, run: dict, out: Path | None) -> int:
    """The table and the JSON line (and file) of a soak's samples."""
    slopes = summarize(samples, settle, span)
    lo, hi = window(samples, settle, span)
    print(f"# SEND/s in the measured window: {run.get('send_rate')}")
    print(f"# slopes over {lo:.0f}..{hi:.0f} s of the run (least squares, 95 % CI, MB/min); peak: whole run")
    print(f"{'process':24} {'RSS MB first→last':>20} {'RSS MB/min [95% CI]':>28} {'USS MB/min [95% CI]':>28} {'peak MB':>8}")
    for k, v in slopes.items():
        r, u = v["rss"], v["uss"]
        if r is None:
            print(f"{k:24} (too few samples in the window)")
            continue
        print(f"{k:24} {r['first_mb']:8.1f} → {r['last_mb']:8.1f}   "
              f"{r['mb_per_min']:+7.2f} [{r['ci95'][0]:+.2f}, {r['ci95'][1]:+.2f}]   "
              f"{u['mb_per_min']:+7.2f} [{u['ci95'][0]:+.2f}, {u['ci95'][1]:+.2f}]   {v['peak_rss_mb']:7.1f}")
    result = {**run, "settle": settle, "exit": rc, "slopes": slopes, "samples": samples}
    if out:
        out.write_text(json.dumps(result))
    print(json.dumps({"exit": rc, "slopes": {k: {"peak_rss_mb": v["peak_rss_mb"], **{
        f: v[f] and {x: v[f][x] for x in ("mb_per_min", "ci95")} for f in ("rss", "uss")}} for k, v in slopes.items()}}))
    return 0 if rc == 0 and not any(math.isnan(v["rss"]["mb_per_min"]) for v in slopes.values() if v["rss"]) else 1


if __name__ == "__main__":
    sys.exit(main())
