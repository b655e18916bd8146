"""matrices/scaling.yaml, run and analysed, each run's scalability model side by side.

    SSBENCH_PGDATA=/var/tmp/ssbench-$USER/pg PYTHONPATH=. python benchmarks/scaling_runs.py [--runs 2]
    PYTHONPATH=. python benchmarks/scaling_runs.py --existing results/RUN_A results/RUN_B [--no-analysis]

Each run is ``ssbench run matrices/scaling.yaml`` then ``ssbench analyze RUN --json``; the
``scaling`` and ``scaling_moves`` sections of the answers are printed as markdown tables, one
column per run, with the runs' times, how many windows were flagged (noisy host or storage) and
whether one shared dialog's σ interval lies wholly above one dialog per thread's in every run
(what docs/findings/scalability.md records). Exit code 1 when it does not.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
SSBENCH = [sys.executable, "-m", "harness.cli"]


def run_matrix(matrix: str) -> Path:
    """One run of ``matrix``: its directory (from the runner's "results in" line)."""
    p = subprocess.run(SSBENCH + ["run", matrix], cwd=REPO, capture_output=True, text=True)
    if p.returncode not in (0, 4):
        sys.exit(f"ssbench run failed ({p.returncode}):\n{p.stderr[-3000:]}")
    line = next(x for x in p.stderr.splitlines() if x.startswith("ssbench: results in "))
    return Path(line.split("results in ", 1)[1].strip())


def analyze(run: Path, spark: bool = True) -> dict:
    """The run's answer by section: ``ssbench analyze RUN --json``, or without Spark the answer
    straight from its summaries (harness.verdicts.answer.run_answer, what ``ssbench bench
    --no-analysis`` prints)."""
    if not spark:
        from harness.verdicts.answer import run_answer

        return {s.key: s.to_json() for s in run_answer(run).sections}
    p = subprocess.run(SSBENCH + ["analyze", str(run), "--json", "-q"], cwd=REPO, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"ssbench analyze failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return {s["key"]: s for s in json.loads(p.stdout)["sections"]}


def about(run: Path) -> str:
    """When it ran and how many of its windows were flagged."""
    record = json.loads((run / "run.json").read_text())
    statuses = [json.loads(f.read_text()).get("status") for f in run.glob("*/rep-*/summary.json")]
    flagged = sum(1 for s in statuses if s not in ("ok", None))
    return f"{record.get('started', '?')[:16]} to {record.get('ended', '?')[11:16]} UTC, {flagged}/{len(statuses)} flagged"


def table(runs: list[Path], answers: list[dict]) -> bool:
    """Print the side-by-side tables; True when shared's σ interval is above per_thread's in
    every run."""
    print("| sweep | " + " | ".join(r.name for r in runs) + " |")
    print("| --- |" + " --- |" * len(runs))
    print("| (when, windows flagged) | " + " | ".join(about(r) for r in runs) + " |")
    apart = True
    fields = (("λ msg/s", "lambda_text"), ("σ", "sigma_text"), ("κ", "kappa_text"), ("N*", "peak_text"),
              ("peak msg/s", "peak_rate_text"), ("fit", "fit_text"))
    strategies = list(dict.fromkeys(row["sweep"] for a in answers for row in a.get("scaling", {}).get("rows", [])))
    for strategy in strategies:
        rows = [next((r for r in a.get("scaling", {}).get("rows", []) if r["sweep"] == strategy), {}) for a in answers]
        for label, key in fields:
            print(f"| {strategy} {label} | " + " | ".join(str(r.get(key) or r.get("status", "–")) for r in rows) + " |")
    for a in answers:
        by = {r["dialogs"]: r for r in a.get("scaling", {}).get("rows", [])}
        s, p = by.get("shared", {}), by.get("per_thread", {})
        apart &= (s.get("sigma_ci_low") or 0) > (p.get("sigma_ci_high") or 1)
    print()
    comparisons = list(dict.fromkeys(r["comparison_text"] for a in answers
                                     for r in a.get("scaling_moves", {}).get("rows", [])))
    for c in comparisons:
        rows = [next((r for r in a.get("scaling_moves", {}).get("rows", []) if r["comparison_text"] == c), {})
                for a in answers]
        for label, key in (("λ change", "lambda_text"), ("σ change", "sigma_text"), ("κ change", "kappa_text"),
                           ("moves", "moves_text")):
            print(f"| {c}: {label} | " + " | ".join(str(r.get(key, "–")) for r in rows) + " |")
    print(f"\none shared dialog's σ interval wholly above one dialog per thread's in every run: {apart}")
    return apart


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--matrix", default="matrices/scaling.yaml")
    ap.add_argument("--existing", nargs="*", type=Path, help="analyse these run directories instead of running")
    ap.add_argument("--no-analysis", action="store_true", help="the answer from the summaries, without Spark")
    args = ap.parse_args(argv)
    runs = list(args.existing) if args.existing else [run_matrix(args.matrix) for _ in range(args.runs)]
    answers = [analyze(r, spark=not args.no_analysis) for r in runs]
    return 0 if table(runs, answers) else 1


if __name__ == "__main__":
    sys.exit(main())
