"""The package's shape: layers that point one way (import-linter, contracts in pyproject.toml),
modules small enough to read, and no code outside harness/targets/ that asks which target runs."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
MAX_MODULE_LINES = 600


@pytest.fixture(autouse=True)
def logging_left_as_found():
    """import-linter's CLI configures logging with ``dictConfig``, which disables every logger
    that exists already (``disable_existing_loggers``): harness's own, so a later test in this
    process that reads them (caplog) would see nothing. Put every logger back as it was."""
    import logging

    loggers = [logging.getLogger(), *(x for x in logging.Logger.manager.loggerDict.values()
                                      if isinstance(x, logging.Logger))]
    saved = [(x, x.disabled, x.level, x.propagate, list(x.handlers)) for x in loggers]
    yield
    for x, disabled, level, propagate, handlers in saved:
        x.disabled, x.level, x.propagate, x.handlers[:] = disabled, level, propagate, handlers
    for x in logging.Logger.manager.loggerDict.values():     # made by import-linter: quiet again
        if isinstance(x, logging.Logger) and all(x is not s[0] for s in saved):
            x.handlers.clear()


def test_import_contracts_hold(capsys):
    from importlinter.cli import lint_imports

    code = lint_imports(config_filename=str(REPO / "pyproject.toml"))
    out = capsys.readouterr().out
    assert code == 0, out


def test_a_broken_layer_is_caught(tmp_path, monkeypatch):
    """The contract can fail: a copy of the package with one arrow pointing back up breaks it."""
    import shutil

    from importlinter.cli import lint_imports

    shutil.copytree(REPO / "harness", tmp_path / "harness",
                    ignore=shutil.ignore_patterns("__pycache__"))
    results_init = tmp_path / "harness" / "results" / "__init__.py"
    results_init.write_text(results_init.read_text() + "\nfrom .. import runner  # noqa\n")
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in list(__import__("sys").modules):
        if name == "harness" or name.startswith("harness."):
            monkeypatch.delitem(__import__("sys").modules, name)
    monkeypatch.chdir(tmp_path)
    assert lint_imports(config_filename=str(tmp_path / "pyproject.toml"), no_cache=True) != 0


def test_module_size():
    """Every module of the package, in one test (each was a test of its own: 160 of them)."""
    long = [f"{p.relative_to(REPO).as_posix()} has {n} lines" for p in sorted((REPO / "harness").rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES]
    assert not long, f"split by concern, at most {MAX_MODULE_LINES} lines: " + "; ".join(long)


MAX_DOCSTRING_LINES = 20


def test_module_docstrings_are_short():
    """Every module says what it is and why in a docstring of a few lines; the method, the
    reference and the findings live in docs/."""
    missing, long = [], []
    for p in sorted((REPO / "harness").rglob("*.py")):
        name = p.relative_to(REPO).as_posix()
        doc = ast.get_docstring(ast.parse(p.read_text()), clean=False)
        if doc is None:
            missing.append(name)
        elif (n := doc.count("\n") + 1) > MAX_DOCSTRING_LINES:
            long.append(f"{name} has {n}")
    assert not missing, "modules without a docstring: " + ", ".join(missing)
    assert not long, f"module docstrings over {MAX_DOCSTRING_LINES} lines: " + "; ".join(long)


MAX_FUNCTION_LINES = 80


def test_function_size():
    """A function reads in one screen or two: at most MAX_FUNCTION_LINES lines (its decorators,
    signature, docstring and body)."""
    long = []
    for path in sorted((REPO / "harness").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name} ({n} lines)")
    assert not long, "split these functions (at most %d lines): %s" % (MAX_FUNCTION_LINES, "; ".join(long))


# --------------------------------------------------------------------------- no tests of a target's kind or label

#: attributes and keys that name a target (or a recorded one): comparing them is testing which
#: target runs
TARGET_NAMES = {"kind", "label", "target_kind", "target_label"}
#: words of a target's label: a substring test of them is a label test in disguise
LABEL_WORDS = re.compile(r"emulation|postgres|sql\s*server", re.I)


def _registered_targets() -> set[str]:
    import tomllib

    doc = tomllib.loads((REPO / "pyproject.toml").read_text())
    return set(doc["project"]["entry-points"]["ssbench.targets"])


def _names_a_target(node: ast.AST, targets: set[str]) -> str | None:
    """What in ``node`` names a target: ``x.kind``, ``x["label"]``, ``x.get("kind")``,
    ``target_kind``, or a registered target's name as a string."""
    if isinstance(node, ast.Attribute) and node.attr in TARGET_NAMES:
        return f".{node.attr}"
    if isinstance(node, ast.Name) and node.id in TARGET_NAMES - {"kind", "label"}:
        return node.id
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value in TARGET_NAMES:
        return f"[{node.slice.value!r}]"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
            and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value in TARGET_NAMES:
        return f".get({node.args[0].value!r})"
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in targets:
        return repr(node.value)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return next((w for e in node.elts if (w := _names_a_target(e, targets))), None)
    return None


def kind_tests(source: str, targets: set[str]) -> list[tuple[int, str]]:
    """Every place in ``source`` that tests a target's kind or label: a comparison (``==``,
    ``!=``, ``in``, ``is``) or a ``match`` on something naming a target, or a substring test of
    a label's words (``"PostgreSQL emulation" in text``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for op in operands:
                what = _names_a_target(op, targets)
                if what:
                    found.append((node.lineno, f"compares {what}"))
                    break
            else:
                if isinstance(node.left, ast.Constant) and isinstance(node.left.value, str) \
                        and any(isinstance(o, (ast.In, ast.NotIn)) for o in node.ops) \
                        and LABEL_WORDS.search(node.left.value):
                    found.append((node.lineno, f"looks for {node.left.value!r} in a text"))
        elif isinstance(node, ast.Match) and _names_a_target(node.subject, targets):
            found.append((node.lineno, f"matches {_names_a_target(node.subject, targets)}"))
    return found


def test_nothing_outside_targets_tests_a_targets_kind_or_label():
    """Code outside harness/targets/ reads a capability or a value the target provides
    (harness.targets.base: Capabilities, TargetConfig, interactive_broker, closing_note, ...);
    it never asks which target runs. (Which module may import a particular target is the import
    contract's business, pyproject.toml.)"""
    targets = _registered_targets()
    assert {"embedded", "mssql"} <= targets
    offences = []
    for path in sorted((REPO / "harness").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel.startswith("harness/targets/"):
            continue
        offences += [f"{rel}:{line}: {what}" for line, what in kind_tests(path.read_text(), targets)]
    assert not offences, "tests of a target's kind or label outside harness/targets/:\n" + "\n".join(offences)


@pytest.mark.parametrize("source", [
    'if target.kind == "embedded": pass',
    'x = t.label != other',
    'ok = run.target_kind in ("mssql",)',
    'if where == "embedded": pass',
    'if "PostgreSQL emulation" in targets.get(run_id, ""): pass',
    'if d["kind"] == k: pass',
    'if d.get("label") is None: pass',
    'match target.kind:\n    case "mssql": pass',
])
def test_the_kind_check_catches(source):
    assert kind_tests(source, {"embedded", "mssql"}), source


@pytest.mark.parametrize("source", [
    'if target.capabilities.priority: pass',
    'print(f"on {target.label}")',
    'if kind == "pct": pass',            # a local name of another meaning
    'ref = TargetRef(kind=t.kind, label=t.label, profile=p)',
    'if c.is_gauge: pass',
])
def test_the_kind_check_lets_values_through(source):
    assert not kind_tests(source, {"embedded", "mssql"}), source


# --------------------------------------------------------------------------- one declaration per field

def _field_lists(source: str, names: set[str], least: int = 4) -> list[tuple[int, list[str]]]:
    """Literal tuples, lists and sets in ``source`` naming ``least`` or more of ``names``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            hits = [e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in names]
            if len(hits) >= least:
                out.append((node.lineno, hits))
    return out


def _registry_names() -> set[str]:
    from harness.results import fields

    return {f.name for f in fields.FIELDS} | {a.name for a in fields.AXES} | {d.name for d in fields.DERIVED}


def test_no_hand_written_list_of_result_fields_outside_the_registry():
    """Every list of summary fields, table columns or axes comes from harness/results/fields.py
    (its roles, flags and helpers): a literal list of four or more of their names elsewhere in
    harness/ is a second copy of the contract."""
    names = _registry_names()
    registry = REPO / "harness" / "results" / "fields.py"
    found = [f"{p.relative_to(REPO)}:{line}: {hits}" for p in sorted((REPO / "harness").rglob("*.py"))
             if p != registry for line, hits in _field_lists(p.read_text(), names)]
    assert not found, "declare these in the registry and derive them:\n" + "\n".join(found)


def test_the_field_list_check_catches_a_copy():
    names = _registry_names()
    assert _field_lists('KEYS = ("run_id", "server", "initiators", "threads")', names)
    assert not _field_lists('KEYS = ("run_id", "server", "x", "y")', names)


def _analysis_imports() -> dict[str, set[str]]:
    """harness/analysis modules -> the analysis modules each imports, at any depth of the code
    (an import inside a function counts: it is where a cycle hides)."""
    root = REPO / "harness" / "analysis"
    mods = {p.stem for p in root.glob("*.py")}
    graph = {}
    for p in root.glob("*.py"):
        deps = set()
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module is not None:
                module = node.module if node.level == 0 else "harness.analysis." * (node.level == 1) + node.module
                if module.startswith("harness.analysis."):
                    deps.add(module.split(".")[2])
                elif module == "harness.analysis":
                    deps |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 1:
                deps |= {a.name for a in node.names}
        graph[p.stem] = (deps & mods) - {p.stem, "__init__"}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}

    def visit(n: str, path: list[str]) -> list[str] | None:
        state[n] = 1
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return path[path.index(m):] + [m]
            if m not in state and (c := visit(m, path + [m])):
                return c
        state[n] = 2
        return None

    return next((c for n in sorted(graph) if n not in state and (c := visit(n, [n]))), None)


def test_no_import_cycle_in_the_analysis():
    cycle = _cycle(_analysis_imports())
    assert cycle is None, " -> ".join(cycle)


def test_the_cycle_check_catches_one():
    assert _cycle({"report": {"plots"}, "plots": {"diagnosis_view"}, "diagnosis_view": {"report"}})
    assert _cycle({"report": {"plots", "html"}, "plots": {"html"}, "html": set()}) is None


def test_no_analysis_module_shadows_the_standard_library():
    """spark-submit runs harness/analysis/job.py as a script, which puts its directory first on
    sys.path: a module named like a standard one (html.py) would hide it."""
    names = {p.stem for p in (REPO / "harness" / "analysis").glob("*.py")}
    assert not names & set(sys.stdlib_module_names)
