"""Bad-input tests: every malformed input is a one-line exit 2, fast, with nothing written.

The session's tally of bad inputs tried and handled cleanly goes into the fault suite's one
figure line (tests/conftest.py: ``fault suite: ... bad inputs tried N, bad inputs clean N``)."""

from __future__ import annotations

import pytest


class Tally:
    """Count one bad input: ``tried`` now, ``clean`` once every check on it passed."""

    def __init__(self, figures):
        self.figures = figures

    def tried(self) -> None:
        self.figures["bad inputs tried"] += 1

    def clean(self) -> None:
        self.figures["bad inputs clean"] += 1


@pytest.fixture(scope="session")
def tally(request) -> Tally:
    return Tally(request.config._ssbench_figures)
