"""``ssbench gate``: the regression gate (exit 0 pass, 1 regression, 2 usage or input error).

``--interleave BASELINE_REF MATRIX`` runs the baseline revision and the working tree alternately
on this machine (recommended); ``--baseline RUN_DIR --candidate RUN_DIR`` compares two stored
runs. docs/gate.md has the method and the defaults.
"""

from __future__ import annotations


def register(sub) -> None:
    from argparse import RawDescriptionHelpFormatter

    p = sub.add_parser(
        "gate", help="regression gate: fail on a real regression, not on noise",
        formatter_class=RawDescriptionHelpFormatter,
        description="Compare a candidate against a baseline per permutation and metric (receive rate, "
                    "send rate, SEND p50/p99, end-to-end p99).\n"
                    "A metric regresses when its effect is beyond max(--min-effect, --k x the baseline's "
                    "robust spread),\nat most --max-effect, AND a one-sided t test of the log ratio (paired by "
                    "round in the interleaved mode,\nits variance moderated by the run's other rows; Benjamini-"
                    "Hochberg within the rates' and the latencies'\nfamilies) is significant.\nWith fewer than --min-reps repetitions a side the test "
                    "cannot be significant: the verdict is\ninconclusive (a warning, exit 0), never a "
                    "regression on effect size alone.\nLost messages, more errors or a disabled queue fail "
                    "whatever the throughput and however few the repetitions.\n\n"
                    "  ssbench gate --interleave HEAD matrices/gate.yaml           (recommended)\n"
                    "  ssbench gate --baseline results/A --candidate results/B\n\n"
                    "exit codes: 0 pass, warning or inconclusive; 1 regression or failure; "
                    "2 usage or input error")
    p.add_argument("matrix", nargs="?", metavar="MATRIX",
                   help="matrix file for --interleave, e.g. matrices/gate.yaml")
    mode = p.add_argument_group("mode (one of)")
    mode.add_argument("--interleave", metavar="BASELINE_REF",
                      help="git revision of the baseline: run it and the working tree alternately (A B, B A, ...)")
    mode.add_argument("--baseline", metavar="RUN_DIR", help="stored baseline run directory (results/<run-id>)")
    mode.add_argument("--candidate", metavar="RUN_DIR", help="stored candidate run directory (with --baseline)")
    st = p.add_argument_group("method")
    st.add_argument("--k", type=float, default=2.0,
                    help="threshold = max(min-effect, k x baseline robust spread / median), at most max-effect (default 2)")
    st.add_argument("--min-effect", type=float, default=0.05,
                    help="smallest relative effect ever called a regression (default 0.05 = 5%%)")
    st.add_argument("--max-effect", type=float, default=0.5,
                    help="the threshold's ceiling: a rate halved is beyond it however noisy the baseline "
                         "(default 0.5 = 50%%; significance is still required)")
    st.add_argument("--min-reps", type=int, default=4,
                    help="repetitions a side needed to judge significance (default 4; fewer: inconclusive)")
    st.add_argument("--alpha", type=float, default=0.01,
                    help="false discovery rate for Benjamini-Hochberg (default 0.01)")
    st.add_argument("--spread", choices=("mad", "iqr"), default="mad",
                    help="robust spread: mad = MAD x 1.4826, iqr = IQR / 1.349 (default mad)")
    st.add_argument("--metrics", default=None,
                    help="comma-separated subset of receive_rate,send_rate,send_p50_ms,send_p99_ms,e2e_p99_ms")
    st.add_argument("--strict", action="store_true", help="exit 1 on warnings and inconclusive verdicts too")
    il = p.add_argument_group("interleaved mode")
    il.add_argument("--rounds", type=int, default=None,
                    help="repetition rounds (each runs both sides once; default: the matrix's repetitions)")
    il.add_argument("--seed", type=int, default=None, help="seed for the order within each round (default: random, recorded)")
    il.add_argument("--out", metavar="DIR", default=None,
                    help="output directory (default results/<UTC time>-gate-<matrix name>)")
    il.add_argument("--target", default="embedded", help="target passed to ssbench run (default embedded)")
    il.add_argument("--keep-worktree", action="store_true", help="keep the baseline's git worktree (for debugging)")
    out = p.add_argument_group("output")
    out.add_argument("--report", metavar="PATH", default=None,
                     help="where to write gate.json (default: next to the candidate run, <candidate>/gate.json)")
    out.add_argument("--no-report", action="store_true", help="do not write gate.json (stored mode; the interleaved mode always writes <out>/candidate/gate.json)")
    p.set_defaults(func=cmd_gate)


def cmd_gate(args) -> int:
    from ..errors import UserError
    import sys

    from ..gate import compare_runs, load_run, write_report
    from ..verdicts.regression import INCONCLUSIVE, WARNING, GateSettings

    metrics = None
    if args.metrics is not None:
        metrics = tuple(m.strip() for m in args.metrics.split(",") if m.strip())
    settings = GateSettings(k=args.k, min_effect=args.min_effect, max_effect=args.max_effect, min_reps=args.min_reps, alpha=args.alpha,
                            spread=args.spread,
                            **({"metrics": metrics} if metrics is not None else {})).validate()
    if args.interleave is not None:
        if args.baseline or args.candidate:
            raise UserError("--interleave cannot be combined with --baseline/--candidate")
        if not args.matrix:
            raise UserError("--interleave BASELINE_REF needs a MATRIX file, e.g. "
                            "ssbench gate --interleave HEAD matrices/gate.yaml")
        from ..gate.interleave import run_interleaved

        res = run_interleaved(args.interleave, args.matrix, settings=settings, rounds=args.rounds,
                              seed=args.seed, out_dir=args.out, target=args.target,
                              keep_worktree=args.keep_worktree)
        report = res.report
        if args.report and not args.no_report:
            write_report(report, args.report)
        print(report.format_table())
        print(f"gate.json: {args.report or res.gate_json}; runs: {res.out_dir}")
    else:
        if not (args.baseline and args.candidate):
            raise UserError("give --interleave BASELINE_REF MATRIX, or both --baseline RUN_DIR and "
                            "--candidate RUN_DIR")
        if args.matrix:
            raise UserError(f"unexpected MATRIX argument {args.matrix!r} (only with --interleave)")
        for flag in ("rounds", "seed", "out"):
            if getattr(args, flag) is not None:
                raise UserError(f"--{flag} only applies to --interleave")
        report = compare_runs(load_run(args.baseline), load_run(args.candidate), settings)
        print(report.format_table())
        if not args.no_report:
            try:
                path = write_report(report, args.report)
                print(f"gate.json: {path}")
            except OSError as e:
                print(f"ssbench: warning: cannot write gate.json: {e}", file=sys.stderr)
    for w in report.warnings():   # the table says them too: the terminal's stderr must not miss them
        print(f"ssbench: warning: {w}", file=sys.stderr)
    if args.strict and report.verdict in (WARNING, INCONCLUSIVE):
        return 1
    return report.exit_code
