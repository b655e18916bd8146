"""``ssbench matrix FILE [--target TARGET] [--count] [--json]``: validate and expand a test matrix."""

from __future__ import annotations

import json

from .common import TARGET_HELP


def register(sub) -> None:
    p = sub.add_parser("matrix", help="validate a matrix file and list its permutations",
                       description="Validate a matrix YAML file and list its permutations in run order.")
    p.add_argument("file", help="matrix YAML file, e.g. matrices/paper.yaml")
    p.add_argument("--target", default=None,
                   help="also check the server axis (and the axes only some targets implement) against "
                        "this target, without connecting: " + TARGET_HELP)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--count", action="store_true", help="print only the number of permutations")
    g.add_argument("--json", action="store_true", help="print the permutations as JSON lines")
    p.set_defaults(func=cmd_matrix)


def cmd_matrix(args) -> int:
    from ..matrix import load_matrix
    from ..targets.factory import target_config

    config = target_config(args.target) if args.target is not None else None
    m = load_matrix(args.file, embedded_profiles=config.alias_profiles() if config else None)
    if config is not None:
        config.check_matrix(m)
    if args.count:
        print(len(m))
        return 0
    if args.json:
        for perm in m.permutations():
            print(json.dumps(perm.values()))
        return 0
    alternated = (f"; dialog strategies alternating every {m.run.slice_seconds:g}s inside each window"
                  if m.run.alternate else "")
    print(f"# {m.name}: {len(m)} permutations x {m.run.describe_repetitions()}; "
          f"warm-up {m.run.warmup_seconds:g}s, measured {m.run.measure_seconds:g}s{alternated}")
    for case in m.cases:
        if case.run:
            r = case.run_settings(m.run)
            drain = (f", drain at most {r.drain_timeout_seconds:g}s" if "drain_timeout_seconds" in case.run else "")
            print(f"# case {case.name}: warm-up {r.warmup_seconds:g}s, measured {r.measure_seconds:g}s{drain}")
    perms = list(m.permutations())
    w = max(40, *(len(p.id) for p in perms))
    print(f"{'#':>4}  {'id':<{w}} {'initiators':>10} {'threads':>7} {'dialogs':>10} {'payload':>8}  server")
    for perm in perms:
        print(f"{perm.index:>4}  {perm.id:<{w}} {perm.initiators:>10} {perm.threads:>7} "
              f"{perm.dialogs.token:>10} {perm.payload_bytes:>8}  {perm.server}")
    return 0
