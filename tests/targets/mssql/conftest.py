"""Fixtures for the SQL Server target's tests (tests/targets/mssql/): ``fake``, the recording
fake of SQL Server (mssql_fake.py), and the T-SQL parser figures in the terminal summary."""

from __future__ import annotations

import sys

import pytest
from mssql_fake import install


@pytest.fixture
def fake(monkeypatch):
    """Every MssqlTarget connection goes to a new recording FakeServer."""
    return install(monkeypatch)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The T-SQL parser check's figures (test_mssql_tsql_parsers.py), visible under -q too."""
    mod = sys.modules.get("test_mssql_tsql_parsers")
    fig = config.stash.get(mod.FIGURES, None) if mod is not None else None
    if fig:
        terminalreporter.write_line(mod.summary_line(fig))
