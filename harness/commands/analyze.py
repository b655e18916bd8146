"""``ssbench analyze RUN_DIR...``: the Spark analysis (docs/results.md).

Writes tables, plots, ``index.html`` and ``answer.json`` under ``RUN_DIR/report/`` (or
``--out``), prints the report's path and the key table (``--json``: the key table alone).
pyspark is imported only when the command runs; ``-q`` hides the JVM's output unless the
analysis fails.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile


def register(sub) -> None:
    p = sub.add_parser(
        "analyze", help="analyze run directories with Spark: tables, plots and an HTML report",
        description="Analyze one or more run directories with Spark (local by default) into Parquet/CSV "
                    "tables, PNG plots (the whitepaper's Figures 2-5 and more), index.html and answer.json, print "
                    "what limits throughput in each permutation (docs/diagnosis.md) on stderr, and end with the key "
                    "table (every comparison's gain, interval, verdict, 'pays from', repetitions used; --json for "
                    "scripts). Needs Java 17+. "
                    "On a cluster the run and report directories must be at the same path on every node "
                    "(docs/analysis-cluster.md).")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="a run directory, e.g. results/<run-id>")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--master", metavar="URL",
                       help="Spark master, e.g. local[2] or spark://host:7077 (default local[*])")
    where.add_argument("--remote", metavar="sc://HOST:PORT",
                       help="a Spark Connect server instead of a master (needs pip install 'ssbench[connect]'; "
                            "the server reads the runs and writes the report)")
    p.add_argument("--out", metavar="DIR",
                   help="report directory (default RUN_DIR/report; with several runs, report-<time> "
                        "beside the first)")
    p.add_argument("--threshold", type=float, default=None, metavar="PCT",
                   help="a comparison is a gain (loss) when its whole interval is above +PCT (below -PCT), no "
                        "difference within +-PCT (default: each run's run.threshold_pct, else 5)")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="print only the report path and the key table (Spark's and the JVM's output and the "
                        "diagnosis are kept out)")
    p.add_argument("--json", action="store_true",
                   help="print the key table as JSON (alone on stdout) instead of the path and the table, with each "
                        "permutation's diagnosis under \"diagnosis\"")
    p.set_defaults(func=cmd_analyze)


@contextlib.contextmanager
def stderr_to_file():
    """Point file descriptor 2 at a temporary file (the JVM started inside inherits it) and
    restore it on exit. Yields the file, readable afterwards while the context is open."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b", prefix="ssbench-analyze-", suffix=".log") as f:
        os.dup2(f.fileno(), 2)
        try:
            yield f
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


def _tail(f, lines: int = 40) -> str:
    f.flush()
    f.seek(0)
    text = f.read().decode("utf-8", "replace")
    return "\n".join(text.rstrip().splitlines()[-lines:])


def cmd_analyze(args) -> int:
    from ..analysis.spark import check_java, check_remote
    from ..errors import UserError

    remote = getattr(args, "remote", None)
    if remote:
        check_remote(remote)  # before anything is written
    else:
        check_java()  # UserError with how to get Java 17 when missing or too old (a Connect client needs none)
    from ..analysis.job import analyze_result, load_issues_from

    if not args.quiet:
        log = lambda m: print(f"ssbench analyze: {m}", file=sys.stderr)  # noqa: E731
        result = analyze_result(args.run_dirs, out=args.out, master=args.master, remote=remote,
                                threshold_pct=args.threshold, log=log)
        issues = load_issues_from(result.index)   # every issue the analysis recorded (tables/issues.csv)
        log(f"{len(issues)} issue(s)" + (": repetitions or files left out, see the warnings" if issues else ""))
        for issue in issues:
            print(f"ssbench analyze: warning: {issue}", file=sys.stderr)
    else:
        error: Exception | None = None
        with stderr_to_file() as captured:
            try:
                result = analyze_result(args.run_dirs, out=args.out, master=args.master, remote=remote,
                                        threshold_pct=args.threshold)
            except UserError:
                raise
            except Exception as e:  # what Spark said goes with the error
                error, tail = e, _tail(captured)
        if error is not None:
            if tail:
                print(tail, file=sys.stderr)
            raise error
    if not args.quiet and not args.json:   # what limits throughput, per permutation, on stderr
        from ..analysis.diagnosis_view import print_runs
        from ..analysis.job import find_runs

        print_runs([r for d in args.run_dirs for r in find_runs(d)], stream=sys.stderr)
    print_answer(result.answer, args.json, path=result.index)
    return 0


def print_answer(answer, as_json: bool, path=None, stream=None) -> None:
    """The end of ``ssbench analyze`` and ``ssbench bench``: the report's path and the key table
    (harness.verdicts.answer), or the answer as JSON (answer.json's document: the key table and
    the diagnosis' rows)."""
    import json

    stream = stream or sys.stdout
    if as_json:
        doc = answer.to_json() if answer is not None else {"sections": []}
        print(json.dumps(doc, indent=2), file=stream)
        return
    if path is not None:
        print(path, file=stream)
    if answer is not None:
        answer.render(stream)
