"""dashboards/ssbench.json for the tests: its queries, with Grafana's variables replaced."""

from __future__ import annotations

import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "dashboards" / "ssbench.json"
#: where the Prometheus tests skip: what installs Prometheus and promtool
APT = "apt-get install prometheus (Debian/Ubuntu; .ci/run installs it)"


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def queries(d: dict) -> list[tuple[str, str]]:
    """(panel title, expr) of every query of every panel."""
    return [(p["title"], t["expr"]) for p in d["panels"] if p["type"] != "row" for t in p["targets"]]


def substitute(expr: str, run_id: str = "run", permutation: str = ".*", rate_interval: str = "2s") -> str:
    """A query as Grafana sends it, its variables replaced (``$permutation``: All)."""
    return (expr.replace("$__rate_interval", rate_interval).replace("$run_id", run_id)
            .replace("$permutation", permutation))
