"""``ssbench saturate MATRIX [--slo-p99-ms X] [--target ...] [--out DIR]``: the highest offered
rate each permutation sustains (open-loop probes, steps then bisection; :mod:`harness.saturate`)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict


def _positive(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return v


from .common import add_run_options, metrics_endpoint


def register(sub) -> None:
    p = sub.add_parser("saturate", help="find the highest offered rate each permutation sustains",
                       description="For every permutation of the matrix (its rate axis aside), run open-loop "
                                   "probes at rising offered rates (steps, then bisection) until the system "
                                   "falls behind: achieved rate below the offered one, a queue growing "
                                   "through the window, or the end-to-end p99 over --slo-p99-ms. Prints the "
                                   "highest sustained rate per permutation and writes saturation.json and "
                                   "every probe's repetition to the run directory. Rates are SENDs per "
                                   "second per initiator.")
    p.add_argument("matrix", help="matrix YAML file, e.g. matrices/saturate.yaml")
    add_run_options(p, resume=False)
    p.add_argument("--slo-p99-ms", type=_positive, default=None,
                   help="end-to-end p99 limit in ms: a probe over it is not sustained")
    p.add_argument("--start-rate", type=_positive, default=None,
                   help="first probe's rate per initiator (default: the smallest value of the matrix's "
                        "rate axis, else 50)")
    p.add_argument("--factor", type=_positive, default=2.0, help="step-up factor (default 2)")
    p.add_argument("--precision", type=_positive, default=0.1,
                   help="stop bisecting when the bounds are within this fraction (default 0.1)")
    p.add_argument("--max-probes", type=int, default=12, help="probes per permutation at most (default 12)")
    p.set_defaults(func=cmd_saturate)


def cmd_saturate(args) -> int:
    with metrics_endpoint(args, "saturate") as live:
        return saturate(args, live)


def saturate(args, metrics=None) -> int:
    from ..errors import UserError
    from ..redact import error_line
    from ..repetition import Interrupted
    from ..saturate import Saturation, SearchSettings, format_table
    from .run import open_run

    if args.factor <= 1:
        raise UserError(f"--factor must be above 1, got {args.factor:g}")
    if args.max_probes < 1:
        raise UserError(f"--max-probes must be at least 1, got {args.max_probes}")

    def check(matrix) -> None:
        if matrix.run.backlog_messages:
            raise UserError("saturate measures offered rates: a backlog matrix cannot be saturated",
                            file=str(matrix.path), field="run.backlog_messages")

    with open_run(args, "saturate", check) as run:
        matrix, target, rd = run.matrix, run.target, run.rd
        settings = SearchSettings(start_rate=args.start_rate or min(matrix.axes.get("rate", [50.0])),
                                  factor=args.factor, precision=args.precision, max_probes=args.max_probes,
                                  slo_p99_ms=args.slo_p99_ms)
        rd.update_run(saturation=asdict(settings))
        print(f"ssbench: saturate {rd.run_id} on {target.label}\nssbench: results in {rd.path}", file=sys.stderr)
        if metrics is not None:
            metrics.begin_run(rd.run_id, matrix.name, target.label)
        sat = Saturation(matrix, target, rd, settings, stop_event=run.stop,
                         say=lambda text: print(f"ssbench: {text}", file=sys.stderr, flush=True), remote=run.remote,
                         metrics=metrics)
        try:
            sat.run()
            rd.finish("complete")
        except Interrupted:
            rd.finish("interrupted", error="interrupted (Ctrl-C or SIGTERM)")
            print("ssbench: interrupted (saturation.json holds the permutations finished)", file=sys.stderr)
            return 130
        except Exception as e:
            rd.finish("failed", error=error_line(e))
            raise
    print(f"{target.label}: SENDs per second sustained (per initiator and in total), this machine")
    print(format_table(sat.results))
    print(f"ssbench: saturation.json in {rd.path}", file=sys.stderr)
    from ..analysis.saturation import plot_latency_vs_throughput, rows_from_runs

    png = plot_latency_vs_throughput(rows_from_runs([rd.path]), rd.path / "report" / "latency_vs_throughput.png")
    if png is not None:
        print(f"ssbench: latency against throughput: {png}", file=sys.stderr)
    return 0
