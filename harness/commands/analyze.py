"""``ssbench analyze RUN_DIR [RUN_DIR ...] [--master URL] [--out DIR]``: the Spark analysis.

Reads the runs' summaries and samples (``docs/results.md``), writes Parquet and CSV tables,
PNG plots and ``index.html`` under ``RUN_DIR/report/`` (or ``--out``) and prints the report's
path. pyspark is imported only when the command runs, so ``ssbench --help`` stays fast.
"""

from __future__ import annotations

import sys


def register(sub) -> None:
    p = sub.add_parser(
        "analyze", help="analyze run directories with Spark: tables, plots and an HTML report",
        description="Analyze one or more run directories with Spark (local by default) into Parquet/CSV "
                    "tables, PNG plots (the whitepaper's Figures 2-5 and more) and index.html. Needs Java 17+.")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="a run directory, e.g. results/<run-id>")
    p.add_argument("--master", metavar="URL",
                   help="Spark master, e.g. local[2] or spark://host:7077 (default local[*])")
    p.add_argument("--out", metavar="DIR",
                   help="report directory (default RUN_DIR/report; with several runs, report-<time> "
                        "beside the first)")
    p.add_argument("--threshold", type=float, default=5.0, metavar="PCT",
                   help="gain in %% a dialog strategy must keep to count as paying (crossover; default 5)")
    p.add_argument("-q", "--quiet", action="store_true", help="print only the report path")
    p.set_defaults(func=cmd_analyze)


def cmd_analyze(args) -> int:
    from ..analysis.spark import check_java

    check_java()  # UserError with how to get Java 17 when missing or too old
    from ..analysis.job import analyze, load_issues_from

    log = None if args.quiet else (lambda m: print(f"ssbench analyze: {m}", file=sys.stderr))
    path = analyze(args.run_dirs, out=args.out, master=args.master, threshold_pct=args.threshold, log=log)
    if not args.quiet:
        for issue in load_issues_from(path):
            print(f"ssbench analyze: warning: {issue}", file=sys.stderr)
    print(path)
    return 0
