"""Names that say what a thing is, one meaning per name: no two classes of harness/ share a
name, and two modules share a file name only where the layout explains it (below)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HARNESS = REPO / "harness"

#: file names several modules share, and why
EXPLAINED = {
    # harness/commands/<subcommand>.py: one module per subcommand, named after it, beside the
    # package that does the work
    "matrix.py": "commands", "saturate.py": "commands", "worker.py": "commands", "server.py": "commands",
    # a target implements the driver interface's parts in modules named after them
    # (harness/targets/<part>.py, harness/targets/<kind>/<part>.py)
    "telemetry.py": "targets", "sender.py": "targets", "target.py": "targets", "session.py": "targets",
    "base.py": "targets",
    # a collector is named after the broker part whose figures it collects; the embedded
    # target's emulation of that part has the part's name too
    "activation.py": "collectors", "broker.py": "collectors", "waits.py": "collectors",
    # the report of each of two commands (the analysis' index.html, the gate's table)
    "report.py": "report",
    # harness/verdicts/<topic>.py decides, harness/analysis/<topic>.py tabulates and draws it
    "scaling.py": "verdicts and analysis",
    # the web UI's login and the Locust channel's handshake: one scheme each, docs/web.md
    "auth.py": "auth",
}


def _classes() -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    for p in sorted(HARNESS.rglob("*.py")):
        for node in ast.parse(p.read_text()).body:
            if isinstance(node, ast.ClassDef):
                out[node.name].append(str(p.relative_to(REPO)))
    return out


def test_no_two_classes_share_a_name():
    twice = {name: where for name, where in _classes().items() if len(where) > 1}
    assert not twice, twice


def test_two_modules_share_a_file_name_only_where_the_layout_explains_it():
    names: dict[str, list[str]] = defaultdict(list)
    for p in sorted(HARNESS.rglob("*.py")):
        if p.name not in ("__init__.py", "__main__.py"):
            names[p.name].append(str(p.relative_to(REPO)))
    unexplained = {n: where for n, where in names.items() if len(where) > 1 and n not in EXPLAINED}
    assert not unexplained, unexplained
    stale = [n for n in EXPLAINED if len(names.get(n, ())) < 2]
    assert not stale, f"explained but no longer shared: {stale}"
