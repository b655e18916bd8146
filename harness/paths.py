"""Where ssbench finds its data files (workloads, matrices) and writes results.

ssbench is run from a checkout (``make`` installs it editable), so the T-SQL and PL/pgSQL
under ``workloads/`` are read from the repository. ``SSBENCH_HOME`` overrides the root.
"""

from __future__ import annotations

from pathlib import Path
from . import environment

REPO_ROOT = Path(environment.get("SSBENCH_HOME") or Path(__file__).resolve().parent.parent)
WORKLOADS = REPO_ROOT / "workloads"
RESULTS = Path(environment.get("SSBENCH_RESULTS") or REPO_ROOT / "results")
