"""Latency against throughput from repetition summaries: one curve per dialog strategy.

Each repetition is a point at its achieved SEND rate and its p99 latency (end to end, and SEND:
corrected for coordinated omission when paced); a repetition that fell behind is hollow, and a
run's ``saturation.json`` marks each curve's highest sustained rate. No Spark::

    python -m harness.analysis.saturation RUN_DIR [RUN_DIR ...] [--out latency_vs_throughput.png]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable

from matplotlib.figure import Figure

from ..results import RunReader
from ..results.fields import axis_names
from .plots import STRATEGY_COLOR
from .tables import group_by

#: axes that do not make a new curve (the rate is the curve's x)
NOT_A_CURVE = {"rate", "total_threads", *axis_names("strategy")}


def rows_from_runs(run_dirs: Iterable[str | Path]) -> list[dict[str, Any]]:
    """:func:`curve_rows` of every complete repetition of the runs."""
    return [row for run in run_dirs
            for row in curve_rows((s.row() for s in RunReader(run).summaries()), Path(run))]


def curve_rows(reps: Iterable[dict[str, Any]], run: Path | None = None) -> list[dict[str, Any]]:
    """One plain row per repetition (flat rows, harness.results.fields) for the plot; the
    sustainable rates of ``run``'s saturation.json when it has one."""
    best = {}
    sat_path = Path(run) / "saturation.json" if run is not None else None
    if sat_path is not None and sat_path.is_file():
        for p in json.loads(sat_path.read_text()).get("permutations", []):
            ev = p.get("evidence") or {}       # the probe judged sustained (a re-run's last repetition)
            best[p["permutation"]["id"]] = (p.get("sustainable_rate"), ev.get("repetition", 1))
    rows = []
    for r in reps:
        base_id = r["perm_id"].rsplit("-rate", 1)[0] if r.get("rate") else r["perm_id"]
        corrected = r.get("send_corrected_p99_ms") is not None
        rows.append({
            "run_id": r["run_id"], "label": r.get("target_label"), "permutation_id": r["perm_id"],
            "dialogs": r.get("dialogs") or "?",
            "curve": tuple(sorted((k, json.dumps(r.get(k), sort_keys=True)) for k in axis_names(but=("id", "index"))
                                  if k not in NOT_A_CURVE)),
            "rate": r.get("rate"), "offered_rate": r.get("offered_rate"),
            "throughput": r["achieved_rate"] if r.get("achieved_rate") is not None else r["send_rate"],
            "e2e_p99_ms": r.get("e2e_p99_ms"),
            "send_p99_ms": r["send_corrected_p99_ms"] if corrected else r.get("send_p99_ms"),
            "corrected": corrected, "behind": bool(r.get("behind")),
            "sustainable": base_id in best and best[base_id][0] is not None
                           and (r.get("rate"), r.get("rep")) == best[base_id],
            "threads": r.get("total_threads"),
        })
    return rows


def _curve_label(dialogs: str, curve: tuple, varying: set[str]) -> str:
    extra = [f"{k}={json.loads(v)}" for k, v in curve if k in varying]
    return dialogs + (f" ({', '.join(extra)})" if extra else "")


def plot_latency_vs_throughput(rows: list[dict[str, Any]], out: str | Path) -> Path | None:
    """Write the PNG; None (nothing written) when there is no row with a throughput."""
    fig = latency_vs_throughput_figure(rows)
    if fig is None:
        return None
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    return out


def latency_vs_throughput_figure(rows: list[dict[str, Any]]) -> Figure | None:
    """The figure (what the report of ``ssbench analyze`` draws too); None without a row that
    has a throughput."""
    rows = [r for r in rows if r["throughput"]]
    if not rows:
        return None
    values: dict[str, set] = defaultdict(set)
    for r in rows:
        for k, v in r["curve"]:
            values[k].add(v)
    varying = {k for k, vs in values.items() if len(vs) > 1}
    curves = group_by(rows, "dialogs", "curve")
    fig = Figure(figsize=(12, 5), dpi=100)
    axes = fig.subplots(1, 2)
    corrected = any(r["corrected"] for r in rows)
    for (dialogs, curve), pts in sorted(curves.items(), key=lambda kv: kv[0][0]):
        pts.sort(key=lambda r: (r["offered_rate"] or 0, r["threads"] or 0, r["throughput"]))
        color = STRATEGY_COLOR.get(dialogs)
        label = _curve_label(dialogs, curve, varying)
        for ax, key in zip(axes, ("e2e_p99_ms", "send_p99_ms")):
            xs = [r["throughput"] for r in pts if r[key] is not None]
            ys = [r[key] for r in pts if r[key] is not None]
            if not xs:
                continue
            line, = ax.plot(xs, ys, "-", color=color, label=label, alpha=0.8)
            c = line.get_color()
            for r in pts:
                if r[key] is None:
                    continue
                ax.plot([r["throughput"]], [r[key]], "o", color=c,
                        markerfacecolor="none" if r["behind"] else c, markersize=6)
                if r["sustainable"]:
                    ax.annotate(f"max sustained\n{r['offered_rate'] or r['throughput']:g}/s",
                                (r["throughput"], r[key]), textcoords="offset points", xytext=(6, 8),
                                fontsize=8, color=c)
    axes[0].set_title("end-to-end p99")
    axes[1].set_title("SEND p99, from the intended send time" if corrected else "SEND p99 (service time)")
    for ax in axes:
        ax.set_xlabel("achieved SENDs per second (all initiators)")
        ax.set_ylabel("ms")
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8, title="dialog strategy", title_fontsize=8)
    runs = sorted({r["run_id"] for r in rows})
    labels = sorted({r["label"] for r in rows})
    fig.suptitle(f"Latency against throughput: {', '.join(runs)}\n{'; '.join(labels)} "
                 "(hollow: fell behind the offered rate)", fontsize=10)
    fig.tight_layout()
    return fig


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.analysis.saturation",
                                 description="Plot p99 latency against achieved throughput, one curve per "
                                             "dialog strategy, from run directories (open-loop runs, "
                                             "ssbench saturate).")
    ap.add_argument("runs", nargs="+", type=Path, help="run directories")
    ap.add_argument("--out", type=Path, default=None,
                    help="PNG file (default: RUN_DIR/report/latency_vs_throughput.png of the first run)")
    args = ap.parse_args(argv)
    out = args.out or args.runs[0] / "report" / "latency_vs_throughput.png"
    path = plot_latency_vs_throughput(rows_from_runs(args.runs), out)
    if path is None:
        print("no complete repetition with a throughput in these runs", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
