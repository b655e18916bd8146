"""``ssbench matrix FILE [--target embedded|TOPOLOGY.yaml] [--count] [--json]``: validate and
expand a test matrix."""

from __future__ import annotations

import json


def register(sub) -> None:
    p = sub.add_parser("matrix", help="validate a matrix file and list its permutations",
                       description="Validate a matrix YAML file and list its permutations in run order.")
    p.add_argument("file", help="matrix YAML file, e.g. matrices/paper.yaml")
    p.add_argument("--target", default=None,
                   help="also check the server axis against this target's server profiles, without "
                        "connecting: 'embedded' or a SQL Server topology YAML file")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--count", action="store_true", help="print only the number of permutations")
    g.add_argument("--json", action="store_true", help="print the permutations as JSON lines")
    p.set_defaults(func=cmd_matrix)


def target_profiles(where: str) -> tuple[str, list[str]]:
    """The target kind and its server profile names for ``--target``, read without connecting
    (a topology file is loaded and validated)."""
    if where == "embedded":
        from ..targets.embedded.profiles import EMBEDDED_PROFILES

        return "embedded", list(EMBEDDED_PROFILES)
    from ..targets.mssql.topology import load_topology

    return "mssql", list(load_topology(where).profiles)


def cmd_matrix(args) -> int:
    from ..matrix import load_matrix
    from ..targets.embedded.profiles import EMBEDDED_PROFILES

    m = load_matrix(args.file, embedded_profiles=EMBEDDED_PROFILES)
    if args.target is not None:
        m.check_servers(*target_profiles(args.target))
    if args.count:
        print(len(m))
        return 0
    if args.json:
        for perm in m.permutations():
            print(json.dumps(perm.values()))
        return 0
    print(f"# {m.name}: {len(m)} permutations x {m.run.describe_repetitions()}; "
          f"warm-up {m.run.warmup_seconds:g}s, measured {m.run.measure_seconds:g}s")
    perms = list(m.permutations())
    w = max(40, *(len(p.id) for p in perms))
    print(f"{'#':>4}  {'id':<{w}} {'initiators':>10} {'threads':>7} {'dialogs':>10} {'payload':>8}  server")
    for perm in perms:
        print(f"{perm.index:>4}  {perm.id:<{w}} {perm.initiators:>10} {perm.threads:>7} "
              f"{perm.dialogs.token:>10} {perm.payload_bytes:>8}  {perm.server}")
    return 0
