"""``ssbench bench``: what ``make bench`` runs: a matrix on the embedded target, then the
analysis, then where everything is."""

from __future__ import annotations

import json
import sys
import re
from pathlib import Path

from .common import TARGET_HELP


def register(sub) -> None:
    p = sub.add_parser("bench", help="run matrices/bench.yaml on the embedded target and build the report",
                       description="Run a matrix (default matrices/bench.yaml) on a target (default: the embedded one), "
                                   "then the Spark analysis, and print where the results and plots are.")
    p.add_argument("--matrix", default="matrices/bench.yaml", metavar="FILE",
                   help="matrix YAML file to run (default matrices/bench.yaml)")
    p.add_argument("--target", default="embedded", help=TARGET_HELP)
    p.add_argument("--out", type=Path, default=None, metavar="DIR",
                   help="run directory (default: results/<UTC time>-<matrix name>)")
    p.add_argument("--resume", action="store_true",
                   help="continue an unfinished run (--out DIR, or the newest unfinished run of this "
                        "matrix): complete repetitions are kept, partial ones redone")
    p.add_argument("--results", type=Path, default=None, metavar="DIR",
                   help="results root (default: ./results)")
    p.add_argument("--no-analysis", action="store_true",
                   help="skip the Spark analysis (print the summaries table only)")
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


def natural_key(text: str) -> tuple:
    """'t8' before 't32': digit runs compare as numbers."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part)
                 for part in re.split(r"(\d+)", text) if part)


def summary_order(d: dict) -> tuple:
    """The matrix's order (the permutation's index), then the repetition; permutation ids in
    natural order when a summary has no index."""
    index = (d.get("permutation") or {}).get("index")
    return (index is None, index if index is not None else 0, natural_key(str(d.get("permutation_id", ""))),
            d.get("repetition") or 0)


def _print_summaries(run_path: Path) -> None:
    rows = [json.loads(s.read_text()) for s in Path(run_path).glob("*/rep-*/summary.json")]
    if not rows:
        return
    rows.sort(key=summary_order)
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
