"""Every environment variable ssbench reads is declared once (harness/environment.py) and listed
in docs/environment.md; no module names an undeclared SSBENCH_ variable."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from harness import environment

REPO = Path(__file__).resolve().parent.parent


def test_every_ssbench_variable_named_in_the_code_is_declared():
    names = set(environment.VARIABLES)
    prefixes = {"SSBENCH_MSSQL_"}          # a family: the integration tests' variables (SSBENCH_MSSQL_HOST, ...)
    found = {}
    for path in (REPO / "harness").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for m in re.finditer(r"\bSSBENCH_[A-Z_]*[A-Z]\b|\bSSBENCH_[A-Z_]+_\b", node.value):
                    found.setdefault(m.group(0), f"{path.relative_to(REPO)}:{node.lineno}")
    undeclared = {n: where for n, where in found.items()
                  if n not in names and n not in prefixes and not any(n.startswith(p) for p in prefixes)}
    assert not undeclared, f"declare these in harness/environment.py: {undeclared}"


def test_the_docs_list_every_variable_with_its_default():
    doc = (REPO / "docs" / "environment.md").read_text()
    for v in environment.VARIABLES.values():
        row = next((line for line in doc.splitlines() if line.startswith(f"| `{v.name}` |")), None)
        assert row is not None, f"docs/environment.md has no row for {v.name}"
        assert (f"`{v.default}`" if v.default else "| - |") in row, row


def test_get_and_flag():
    env = {"SSBENCH_SPARK_CDS": "off", "SSBENCH_PGDATA": ""}
    assert environment.get("SSBENCH_SEND_MODE", env) == "auto"          # its default
    assert environment.get("SSBENCH_PGDATA", env) is None               # empty is unset
    assert not environment.flag("SSBENCH_SPARK_CDS", env) and environment.flag("SSBENCH_PLOT_HELPER", env)
