"""``ssbench bench``: what ``make bench`` runs: a matrix on the embedded target, then the
analysis, then where everything is."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser("bench", help="run matrices/bench.yaml on the embedded target and build the report",
                       description="Run a matrix (default matrices/bench.yaml) on the embedded target, "
                                   "then the Spark analysis, and print where the results and plots are.")
    p.add_argument("--matrix", default="matrices/bench.yaml")
    p.add_argument("--target", default="embedded")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--resume", action="store_true")
    p.add_argument("--results", type=Path, default=None)
    p.add_argument("--no-analysis", action="store_true", help="skip the Spark analysis")
    p.set_defaults(func=cmd_bench)


def cmd_bench(args) -> int:
    from .run import execute

    code, rd = execute(args)
    if code not in (0, 4):
        return code
    _print_summaries(rd.path)
    report = None
    if not args.no_analysis:
        try:
            from ..analysis.job import analyze
        except ImportError:
            print("ssbench: analysis not available in this build; summaries above", file=sys.stderr)
        else:
            report = analyze([rd.path])
    print(f"\nresults: {rd.path}")
    if report:
        print(f"report:  {report}")
    return code


def _print_summaries(run_path: Path) -> None:
    rows = []
    for s in sorted(Path(run_path).glob("*/rep-*/summary.json")):
        d = json.loads(s.read_text())
        rows.append(d)
    if not rows:
        return
    label = rows[0]["target"]["label"]
    print(f"\n{label} — numbers are this target's, measured on this machine")
    print(f"{'permutation':<36} {'rep':>3} {'send/s':>9} {'recv/s':>9} {'SEND p99 ms':>11} "
          f"{'e2e p99 ms':>10} {'lost':>5}  top wait")
    for d in rows:
        tw = d["top_waits"][0]["wait_type"] if d["top_waits"] else "-"
        sp99 = d["send_latency_ms"]["p99"]
        ep99 = d["e2e_latency_ms"]["p99"]
        print(f"{d['permutation_id']:<36} {d['repetition']:>3} {d['send_rate']:>9.0f} {d['receive_rate']:>9.0f} "
              f"{sp99 if sp99 is not None else float('nan'):>11.2f} {ep99 if ep99 is not None else float('nan'):>10.2f} "
              f"{d['messages_lost']:>5}  {tw}")
