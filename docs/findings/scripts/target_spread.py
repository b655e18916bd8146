#!/usr/bin/env python
"""The embedded target's own run-to-run spread, before and after a change, side by side.

Runs a matrix (default: one shared dialog at 32 threads, ``delayed``, six back-to-back
repetitions: issue 30's goal) with each variant of the code in turn, alternating the variants
round after round (A B A B ...) so a shared machine's drift hits both alike. A variant is a
source tree: ``after`` is this checkout, ``before`` a git ref exported into a temporary
directory (``--before REF``, default: where this branch left main); each runs as ``python -m harness.cli run`` with
that tree first on PYTHONPATH (its own harness and workloads; the same venv and embedded
server, whose schema is reloaded when the workload files differ). For every permutation and
variant it prints the repetitions' receive rates, their max/min and coefficient of variation
(stdev / mean), the statuses, and the load average before and after each run; the last line is
one JSON object. These are PostgreSQL numbers from an emulation, never SQL Server's.

    SSBENCH_PGDATA=/var/tmp/me/pg .venv/bin/python docs/findings/scripts/target_spread.py --rounds 2
    SSBENCH_PGDATA=/var/tmp/me/pg .venv/bin/python docs/findings/scripts/target_spread.py --matrix matrices/bench.yaml \\
        --server durable,delayed --rounds 1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

SHARED32 = """\
name: shared32
description: one shared dialog at 32 threads, back-to-back repetitions (issue 30)
axes:
  initiators: [1]
  threads: [32]
  dialogs: [shared]
  payload_bytes: [100]
  server: [{server}]
run:
  warmup_seconds: 2
  measure_seconds: 6
  repetitions: {reps}
  order: interleaved
  drain_timeout_seconds: 60
  sample_interval_seconds: 1
broker:
  max_queue_readers: 4
  receive_top: 10000
  waitfor_timeout_ms: 1000
  monitor_interval_seconds: 1
"""


def export_ref(ref: str, into: Path) -> Path:
    """``git archive REF`` of this repository, unpacked into ``into``."""
    archive = into / "src.tar"
    subprocess.run(["git", "-C", str(REPO), "archive", "-o", str(archive), ref], check=True)
    with tarfile.open(archive) as t:
        t.extractall(into / "src", filter="data")
    return into / "src"


def matrices(args, work: Path) -> list[Path]:
    out = []
    for server in args.server.split(","):
        p = work / f"matrix-{server}.yaml"
        if args.matrix:
            import yaml

            doc = yaml.safe_load(Path(args.matrix).read_text())
            doc.setdefault("axes", {})["server"] = [server]
            if args.reps:
                doc.setdefault("run", {})["repetitions"] = args.reps
        else:
            import yaml

            doc = yaml.safe_load(SHARED32.format(server=server, reps=args.reps or 6))
        if args.pin:
            doc.setdefault("run", {})["pin_cpus"] = True
        p.write_text(yaml.safe_dump(doc, sort_keys=False))
        out.append(p)
    return out


def run_variant(src: Path, matrix: Path, out: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(src) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    load0 = os.getloadavg()
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(matrix), "--out", str(out)],
                       cwd=src, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stderr[-3000:])
        raise SystemExit(f"the run of {src} failed (exit {r.returncode})")
    reps = []
    for f in sorted(out.glob("*/rep-*/summary.json")):
        s = json.loads(f.read_text())
        top = (s.get("top_waits") or [{}])[0]
        # what might select a mode: CPU of the server, the clients and the rest of the machine,
        # activation churn, the top wait's share, a stall
        reps.append({"perm": s["permutation_id"], "rep": s["repetition"], "receive_rate": s["receive_rate"],
                     "send_rate": s["send_rate"], "status": s["status"],
                     **{k: s.get(k) for k in ("server_cpu_percent", "client_cpu_percent", "other_cpu_percent",
                                              "activation_tasks_started_per_s", "receive_stall_seconds",
                                              "storage_probe_ms", "commit_latency_ms")},
                     "top_wait": top.get("wait_type"), "top_wait_share": top.get("share")})
    return {"reps": reps, "load_before": load0, "load_after": os.getloadavg(), "seconds": time.monotonic() - t0}


def spread(rates: list[float]) -> tuple[float, float]:
    """(max/min, coefficient of variation) of a permutation's receive rates."""
    if len(rates) < 2 or min(rates) <= 0:
        return float("inf"), float("nan")
    return max(rates) / min(rates), statistics.stdev(rates) / statistics.fmean(rates)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--matrix", help="a matrix file (default: one shared dialog at 32 threads)")
    ap.add_argument("--server", default="delayed", help="profiles, comma-separated (default delayed)")
    ap.add_argument("--reps", type=int, default=None, help="repetitions per run (default: the matrix's; 6)")
    ap.add_argument("--rounds", type=int, default=1, help="alternating rounds of the variants (default 1)")
    ap.add_argument("--before", default="base", help="git ref of the 'before' variant (default: where this "
                                                     "branch left main, git merge-base HEAD main); "
                                                     "'none': this checkout only")
    ap.add_argument("--pin", action="store_true", help="run.pin_cpus: the server on half the CPUs, the load "
                                                      "generator on the other half (CPU placement made fixed)")
    ap.add_argument("--out", type=Path, default=None, help="keep the runs here (default: a temporary directory)")
    a = ap.parse_args()
    if not os.environ.get("SSBENCH_PGDATA"):
        print("note: SSBENCH_PGDATA is not set: this uses the default (shared) embedded server", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="ssbench-spread-") as tmp:
        work = a.out or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        variants = {"after": REPO}
        if a.before != "none":
            ref = a.before
            if ref == "base":
                ref = subprocess.run(["git", "-C", str(REPO), "merge-base", "HEAD", "main"], check=True,
                                     capture_output=True, text=True).stdout.strip()
            variants = {"before": export_ref(ref, Path(tmp)), **variants}
        runs: dict[str, list[dict]] = {v: [] for v in variants}
        for rnd in range(a.rounds):
            order = list(variants) if rnd % 2 == 0 else list(reversed(variants))
            for m in matrices(a, Path(tmp)):
                for v in order:
                    res = run_variant(variants[v], m, work / f"{v}-{m.stem}-r{rnd + 1}")
                    runs[v].append(res)
                    print(f"round {rnd + 1} {v:>6} {m.stem}: {len(res['reps'])} repetitions in {res['seconds']:.0f} s, "
                          f"load {res['load_before'][0]:.1f} -> {res['load_after'][0]:.1f}", flush=True)
        table = {}
        for v, rs in runs.items():
            perms: dict[str, list[dict]] = {}
            for r in rs:
                for rep in r["reps"]:
                    perms.setdefault(rep["perm"], []).append(rep)
            for perm, reps in sorted(perms.items()):
                rates = [x["receive_rate"] for x in reps]
                ratio, cv = spread(rates)
                table.setdefault(perm, {})[v] = {"receive_rates": rates, "max_min": ratio, "cv": cv,
                                                 "median": statistics.median(rates),
                                                 "statuses": sorted({x["status"] for x in reps}), "reps": reps}
        loads = [x for rs in runs.values() for r in rs for x in (r["load_before"][0], r["load_after"][0])]
        print(f"\nload average (1 min) during the runs: {min(loads):.1f} to {max(loads):.1f}")
        for perm, by in table.items():
            for v, d in by.items():
                print(f"{perm:<34} {v:>6}: max/min {d['max_min']:.3f}  CV {d['cv']:.3f}  median {d['median']:,.0f} "
                      f"msg/s  rates {', '.join(f'{x:,.0f}' for x in d['receive_rates'])}  {','.join(d['statuses'])}")
        print(json.dumps({"variants": {k: str(v) for k, v in variants.items()}, "load": [min(loads), max(loads)],
                          "permutations": table}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
