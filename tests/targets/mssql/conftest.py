"""Fixtures for the SQL Server target's tests (tests/targets/mssql/): ``fake``, the recording
fake of SQL Server (mssql_fake.py), and the T-SQL parser figures in the terminal summary."""

from __future__ import annotations

import pytest
from mssql_fake import install


@pytest.fixture
def fake(monkeypatch):
    """Every MssqlTarget connection goes to a new recording FakeServer."""
    return install(monkeypatch)
