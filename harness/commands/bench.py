"""``ssbench bench``: what ``make bench`` runs: a matrix on the embedded target, then the
analysis, then where everything is."""

from __future__ import annotations

import sys
from pathlib import Path

from .common import TARGET_HELP


def register(sub) -> None:
    p = sub.add_parser("bench", help="run matrices/bench.yaml on the embedded target and build the report",
                       description="Run a matrix (default matrices/bench.yaml) on a target (default: the embedded one), "
                                   "then the Spark analysis; print the technique comparisons (if the matrix has "
                                   "technique axes), what limits throughput in each permutation and what to try "
                                   "(docs/diagnosis.md), and where the results and plots are.")
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
    from .run import add_scale_arguments

    add_scale_arguments(p)
    p.set_defaults(func=cmd_bench)


def cmd_bench(args) -> int:
    from .run import execute

    args.diagnose = False      # printed at the end, after the analysis' log
    code, rd = execute(args)   # prints the repetitions' table in the matrix's order
    if code not in (0, 4):
        return code
    report = None
    if not args.no_analysis:
        try:
            from ..analysis.job import analyze
        except ImportError:
            print("ssbench: analysis not available in this build; summaries above", file=sys.stderr)
        else:
            report = analyze([rd.path])
            from .analyze import print_techniques

            print_techniques(report)
    from ..analysis.diagnosis_view import print_runs

    print_runs([rd.path])
    print(f"\nresults: {rd.path}")
    if report:
        print(f"report:  {report}")
    return code
