"""``ssbench bench``: what ``make bench`` runs: a matrix on the embedded target, then the
analysis, then where everything is and the key table (``--json``: the key table alone on
stdout)."""

from __future__ import annotations

import sys

from .common import add_run_options, metrics_endpoint


def register(sub) -> None:
    p = sub.add_parser("bench", help="run matrices/bench.yaml on the embedded target and build the report",
                       description="Run a matrix (default matrices/bench.yaml) on a target (default: the embedded one), "
                                   "then the Spark analysis; print what limits throughput in each permutation and what "
                                   "to try (docs/diagnosis.md), where the results and plots are, and end with the key "
                                   "table: every comparison's gain with its interval, verdict, 'pays from' and "
                                   "repetitions used.")
    p.add_argument("--matrix", default="matrices/bench.yaml", metavar="FILE",
                   help="matrix YAML file to run (default matrices/bench.yaml)")
    add_run_options(p)
    p.add_argument("--no-analysis", action="store_true",
                   help="skip the Spark analysis (the key table is computed from the summaries)")
    p.add_argument("--json", action="store_true",
                   help="print the key table as JSON, alone on stdout, with each permutation's diagnosis under "
                        "\"diagnosis\" (the repetitions' table goes to stderr)")
    p.set_defaults(func=cmd_bench)


def cmd_bench(args) -> int:
    from ..verdicts.answer import run_answer
    from .analyze import print_answer
    from .run import execute

    args.diagnose = False      # printed at the end, after the analysis' log
    with metrics_endpoint(args, "bench") as live:   # the run only: the analysis has no live figures
        code, rd = execute(args, live)   # prints the repetitions' table in the matrix's order
    if code not in (0, 4):
        return code
    result = None
    if not args.no_analysis:
        try:
            from ..analysis.job import analyze_result
        except ImportError:
            print("ssbench: analysis not available in this build; summaries above", file=sys.stderr)
        else:
            result = analyze_result([rd.path])
    out = sys.stderr if args.json else sys.stdout
    from ..analysis.diagnosis_view import print_runs, rows

    diags = print_runs([rd.path], stream=out)
    print(f"\nresults: {rd.path}", file=out)
    if result is not None:
        print(f"report:  {result.index}", file=out)
    answer = result.answer if result is not None else run_answer(rd.path)
    answer.diagnosis = rows(diags)       # the diagnosis the terminal printed, in --json too
    print_answer(answer, args.json)
    return code
