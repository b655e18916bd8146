"""The package's shape: layers that point one way (import-linter, contracts in pyproject.toml)
and modules small enough to read."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
MAX_MODULE_LINES = 600


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


@pytest.mark.parametrize("path", sorted(p.relative_to(REPO).as_posix()
                                        for p in (REPO / "harness").rglob("*.py")))
def test_module_size(path):
    n = len((REPO / path).read_text().splitlines())
    assert n <= MAX_MODULE_LINES, f"{path} has {n} lines (split it by concern: at most {MAX_MODULE_LINES})"
