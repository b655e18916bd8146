"""Several runs' key tables side by side: do repeated `make bench` runs give the same verdicts?

    PYTHONPATH=. python docs/findings/scripts/bench_verdicts.py [--former] results/<run-1> results/<run-2> ...

For each run: its key table (the report's ``answer.json`` when the run was analysed, else the
same table computed from the summaries, :func:`harness.verdicts.answer.run_answer`), how long its
repetitions took (run.json's ``auto.spent_seconds``, or its start and end) and how many of its
repetitions were kept out of verdicts. Prints one Markdown row per comparison with every run's
gain, interval, verdict and repetitions, then whether the verdicts agree; the last line is JSON.
``--former``: also the verdict the former fixed rule (bootstrap of the medians' ratio, 95 %, +-5 %,
benchmarks/stopping_rule.py's ``former_rule``) gives on the same repetitions.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from harness.results import RunReader  # noqa: E402
from harness.verdicts.answer import KEY, read_answer, run_answer  # noqa: E402


def minutes(record: dict) -> float | None:
    try:
        a, b = (dt.datetime.fromisoformat(record[k].replace("Z", "+00:00")) for k in ("started", "ended"))
    except (KeyError, AttributeError, TypeError, ValueError):
        return None
    return (b - a).total_seconds() / 60


def former(p: str, key: tuple) -> str:
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
    from stopping_rule import former_rule

    rows = {(j["comparison"], j["total_threads"]): j for j in run_answer(p).section(KEY).rows}
    r = rows.get(key)
    if r is None:
        return "–"
    summaries = RunReader(p).readable_summaries()
    values = {pid: [s.receive_rate for s in summaries if s.permutation_id == pid]
              for pid in (r["perm_id"], r["baseline_perm_id"])}
    if min(len(v) for v in values.values()) < 3:
        return "inconclusive (fewer than 3)"
    g, lo, hi, v = former_rule(values[r["perm_id"]], values[r["baseline_perm_id"]], 5.0)
    return f"{g:+.1f} % [{lo:+.1f}, {hi:+.1f}] {v}"


def main(argv: list[str]) -> int:
    with_former = "--former" in argv
    paths = [a for a in argv if a != "--former"]
    runs = []
    for p in paths:
        answer = read_answer(Path(p) / "report") or run_answer(p)
        record = RunReader(p).record().to_json()
        runs.append((Path(p).name, {(r["comparison"], r["total_threads"]): r for r in answer.section(KEY).rows},
                     record))
    keys = list(dict.fromkeys(k for _, rows, _ in runs for k in rows))
    print("| comparison | threads | " + " | ".join(name for name, _, _ in runs) + " | same verdict |")
    print("| --- | --- | " + " | ".join("---" for _ in runs) + " | --- |")
    out = {"runs": [], "comparisons": []}
    for key in keys:
        cells = [rows.get(key) for _, rows, _ in runs]
        verdicts = {c["verdict"] if c else None for c in cells}
        print(f"| {key[0]} | {key[1]} | " + " | ".join(
            f"{c['gain_text']} **{c['verdict']}** ({c['reps_text']})" if c else "–" for c in cells)
            + f" | {'yes' if len(verdicts) == 1 else 'NO'} |")
        if with_former:
            print(f"| (former rule) | {key[1]} | " + " | ".join(former(p, key) for p in paths) + " | |")
        out["comparisons"].append({"comparison": key[0], "threads": key[1],
                                   "verdicts": [c["verdict"] if c else None for c in cells]})
    for name, rows, record in runs:
        auto = record.get("auto") or {}
        decided = sum(1 for r in rows.values() if r["verdict"] != "inconclusive")
        kept = sum(r.get("kept_out") or 0 for r in rows.values())
        rounds = (f" (repetitions {(auto.get('spent_seconds') or 0) / 60:.1f} min, {auto.get('rounds')} rounds, "
                  f"stopped: {auto.get('stopped')})" if auto else "")
        print(f"\n{name}: {decided} of {len(rows)} decided; run {minutes(record) or float('nan'):.1f} min"
              f"{rounds}; repetitions kept out of verdicts, summed over the comparisons: {kept}")
        out["runs"].append({"run": name, "decided": decided, "comparisons": len(rows), "minutes": minutes(record),
                            "rounds": auto.get("rounds"), "stopped": auto.get("stopped"), "kept_out": kept})
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
