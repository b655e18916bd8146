"""The scalability model in the analysis: the answer's sections and the ``scaling`` tables' rows.

From :mod:`harness.verdicts.scaling` over the permutation rows; the figure is
:mod:`.plots_scaling`. Pure Python.
"""

from __future__ import annotations

from typing import Any

from ..verdicts import scaling as S
from ..verdicts.answer import Answer
from ..verdicts.scaling_answer import MOVES, add_sections


def attach(perms: list[dict[str, Any]], answer: Answer) -> tuple[list[S.Sweep], dict[str, list[dict[str, Any]]]]:
    """Model every sweep of the permutations and add the answer's sections; returns the sweeps
    (for the figure) and the tables' rows by name: ``scaling`` when there is a sweep,
    ``scaling_moves`` when a comparison has both its sweeps fitted (the section's rows without
    their texts)."""
    sweeps = add_sections(answer, perms)
    tables = {"scaling": S.table_rows(sweeps)} if sweeps else {}
    moves = answer.section(MOVES)
    if moves is not None and moves.rows:
        tables["scaling_moves"] = [{k: v for k, v in r.items() if not k.endswith("_text")} for r in moves.rows]
    return sweeps, tables
