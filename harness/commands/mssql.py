"""``ssbench mssql check|provision|teardown|smoke TOPOLOGY.yaml``: the SQL Server target.

``check`` reports versions, permissions, broker state, objects and routes; ``provision``
creates what the paper's topology needs, never taking over objects it did not create;
``teardown`` removes what ssbench created and nothing else; ``smoke`` runs a tiny flow
(sent == received). See docs/sqlserver.md.
"""

from __future__ import annotations

import sys


def register(sub) -> None:
    p = sub.add_parser("mssql", help="check, provision or tear down a SQL Server topology",
                       description="Manage the SQL Server target described by a topology YAML file "
                                   "(docs/sqlserver.md).")
    p.add_argument("action", choices=["check", "provision", "teardown", "smoke"])
    p.add_argument("topology", help="topology YAML file, e.g. topologies/example-distributed.yaml")
    p.add_argument("--initiators", type=int, default=None, metavar="N",
                   help="provision/check only the first N initiators of each profile")
    p.add_argument("--drop-databases", action="store_true",
                   help="teardown: also drop the target and initiator databases ssbench created")
    p.add_argument("--yes", action="store_true", help="teardown: do not ask for confirmation")
    p.add_argument("--messages", type=int, default=10, metavar="N",
                   help="smoke: messages to send per initiator (default 10)")
    p.add_argument("--profile", default=None, help="smoke: server profile to use (default: the first)")
    p.set_defaults(func=cmd_mssql)


def cmd_mssql(args) -> int:
    from ..errors import UserError
    from ..targets.mssql import driver
    from ..targets.mssql.target import MssqlTarget

    if args.initiators is not None and args.initiators < 1:
        raise UserError("--initiators must be at least 1")
    target = MssqlTarget.from_file(args.topology)
    topo = target.topology
    try:
        if args.action != "teardown":
            driver.pyodbc_module()   # a missing unixODBC: one line naming the package, exit 2
        if args.action == "check":
            results = target.check(args.initiators)
            width = max((len(w) for _, w, _ in results), default=10)
            for status, what, detail in results:
                print(f"{status.upper():<4}  {what:<{width}}  {detail}")
            failed = sum(1 for s, _, _ in results if s == "fail")
            warned = sum(1 for s, _, _ in results if s == "warn")
            print(f"{len(results)} checks: {failed} failed, {warned} warnings")
            return 1 if failed else 0
        if args.action == "provision":
            target.provision(args.initiators)
            print(f"provisioned topology {topo.name} ({topo.layout}): "
                  f"{len(topo.used_instances(args.initiators))} database(s); "
                  f"profiles: {', '.join(topo.profiles)}")
            return 0
        if args.action == "teardown":
            what = ", ".join(i.where() for i in topo.used_instances())
            if not args.yes:
                if not sys.stdin.isatty():
                    raise UserError("teardown needs --yes when not run interactively")
                verb = "DROP the databases" if args.drop_databases else "remove ssbench's objects from"
                answer = input(f"{verb} {what}? [y/N] ")
                if answer.strip().lower() not in ("y", "yes"):
                    print("nothing done")
                    return 1
            driver.pyodbc_module()
            kept = target.teardown(drop_databases=args.drop_databases)
            for line in kept:
                print(f"KEPT  {line}")
            print(f"torn down topology {topo.name}: what ssbench created is removed"
                  + (", with the databases it created" if args.drop_databases else ""))
            return 0
        c = target.smoke(messages=args.messages, profile=args.profile)
        print(f"smoke test passed: sent {c.sent}, received {c.received}, "
              f"{len(c.initiators)} initiator(s)")
        return 0
    finally:
        target.close()
