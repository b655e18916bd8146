"""Bad-input tests: every malformed input is a one-line exit 2, fast, with nothing written.

The session's tally of bad inputs tried and handled cleanly is printed as one line at the end
(``bad inputs: N tried, N clean``), the bad-input part of issue 13's figure line."""

from __future__ import annotations

import pytest

TALLY = {"tried": 0, "clean": 0}


class Tally:
    """Count one bad input: ``tried`` now, ``clean`` once every check on it passed."""

    def tried(self) -> None:
        TALLY["tried"] += 1

    def clean(self) -> None:
        TALLY["clean"] += 1


@pytest.fixture(scope="session")
def tally() -> Tally:
    return Tally()


def pytest_terminal_summary(terminalreporter):
    if TALLY["tried"]:
        terminalreporter.write_line(f"bad inputs: {TALLY['tried']} tried, {TALLY['clean']} clean")
