"""Fixtures of the verdicts' tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def noisy_kept_out(monkeypatch):
    """Keep ``noisy_host`` repetitions out of verdicts, as a status added to
    ``harness.results.KEPT_OUT_OF_VERDICTS`` would be (no status is kept out today)."""
    from harness.results import fields

    monkeypatch.setattr(fields, "KEPT_OUT_OF_VERDICTS", frozenset({"noisy_host"}))
