"""The several-runs view: when ``ssbench analyze`` is given more than one run, each
permutation's receive and send rate per run, side by side, with intervals (the per-run plots
are :mod:`.plots`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import matplotlib
from matplotlib.ticker import MaxNLocator

from .plots import (LEGEND_IN, STRATEGY_COLOR, TITLE_TOP_IN, Plot, Row, RunContext, _finish, _grid, _hollow_note,
                    _legend_right, _num, _points)


def runs_comparison(perms: list[Row], contexts: list[RunContext], out_dir: Path) -> list[Plot]:
    """Several runs side by side: per permutation, each run's geometric-mean receive and send rate with
    its 95 % interval (hollow: fewer than 3 repetitions), one series per run."""
    section = "Runs compared"
    run_ids = [c.run_id for c in contexts]
    rows = [r for r in perms if r["run_id"] in run_ids]
    if len(run_ids) < 2 or not rows:
        return []
    order: dict[str, tuple] = {}
    for r in rows:
        order.setdefault(r["perm_id"], (r.get("perm_index") or 0, r["perm_id"]))
    ids = sorted(order, key=lambda k: order[k])
    pos = {p: k for k, p in enumerate(ids)}
    fig, grid = _grid(2, 1, w=min(40.0, max(8.0, 0.24 * len(ids))), h=3.85, right_in=LEGEND_IN, bottom_in=2.2,
                      hspace=0.15, sharex=True)
    axes = [row[0] for row in grid]
    cmap = matplotlib.colormaps["tab10"]
    step = 0.6 / max(1, len(run_ids) - 1)
    for k, c in enumerate(contexts):
        runrows = sorted((r for r in rows if r["run_id"] == c.run_id), key=lambda r: pos[r["perm_id"]])
        if not runrows:
            continue
        x = [pos[r["perm_id"]] - 0.3 + k * step if len(run_ids) > 1 else pos[r["perm_id"]] for r in runrows]
        label = f"{c.run_id}{chr(10) + '(SYNTHETIC)' if c.synthetic else ''}"
        for ax, m in zip(axes, ("receive_rate", "send_rate")):
            _points(ax, x, [_num(r[f"{m}_mean"]) for r in runrows], [r["n"] for r in runrows], cmap(k % 10),
                    lo=[r.get(f"{m}_ci_low") for r in runrows], hi=[r.get(f"{m}_ci_high") for r in runrows],
                    ls="none", label=label)
    axes[0].set_ylabel("messages/s processed by the target")
    axes[1].set_ylabel("SENDs/s")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=0)
    axes[1].set_xticks(range(len(ids)), ids, rotation=90, fontsize=6 if len(ids) > 40 else 8)
    axes[1].set_xlim(-0.7, len(ids) - 0.3)
    axes[1].set_xlabel("permutation")
    _legend_right(fig, [axes[0]], title="run (geometric mean of\nrepetitions, 95 % interval bars)", extra=[_hollow_note()])
    targets = "; ".join(dict.fromkeys(c.target for c in contexts))
    ctx = RunContext(run_id=", ".join(run_ids), target=targets, profile_aliases=False, server_profiles={},
                     synthetic=any(c.synthetic for c in contexts))
    title = f"{len(run_ids)} runs compared: receive and send rate per permutation"
    return [replace(_finish(fig, ctx, out_dir, section, title, "runs_compared", *run_ids), run_id=None)]


VERDICT_COLOURS = {"gain": "#2ca02c", "loss": "#d62728", "no difference": "#7f7f7f", "inconclusive": "#ff7f0e",
                   "not exercised": "#9467bd"}


def technique_gains(rows: list[Row], ctx: RunContext, out_dir: Path, threshold_pct: float) -> list[Plot]:
    """One figure per technique axis of the run (harness.analysis.comparisons.technique_gains): each technique
    value's gain in the axis' primary metric over its baseline (in the metric's better
    direction: for a latency a gain is a fall), everything else equal, with its interval (the
    stopping rule's); coloured by verdict (green only for a gain the interval supports); none
    when the run has no technique axis."""
    from ..verdicts.techniques import axis_note

    section = "Techniques against their baselines: figures"
    out = []
    mine = [r for r in rows if r["run_id"] == ctx.run_id and r.get("primary")]
    for axis in dict.fromkeys(r["axis"] for r in mine):
        pts = [r for r in mine if r["axis"] == axis]
        labels = [f"{axis} = {r['value']} vs {r['baseline_value']}\n{r['threads']} thr, {r['dialogs']}, "
                  f"{r['payload_bytes']} B" + (f", rate {r['rate']:g}/s" if r.get("rate") else "")
                  + (f", {r['context']}" if r["context"] else "") for r in pts]
        fig, ((ax,),) = _grid(1, 1, w=10.7, h=max(2.3, 0.55 * len(pts) + 1.3), left_in=4.6, right_in=0.3,
                              bottom_in=0.9)
        ax.axvspan(-threshold_pct, threshold_pct, color="#eeeeee", zorder=0)
        ax.axvline(0, color="black", lw=0.6)
        for k, r in enumerate(pts):
            g = _num(r["gain_pct"])
            colour = VERDICT_COLOURS.get(r["verdict"], "#7f7f7f")
            lo, hi = r.get("gain_ci_low_pct"), r.get("gain_ci_high_pct")
            if lo is not None and hi is not None and g == g:
                ax.errorbar([g], [k], xerr=[[g - lo], [hi - g]], fmt="o", color=colour, capsize=4,
                            mfc="none" if r["verdict"] == "not exercised" else colour)
            else:   # too few repetitions on a side: no interval, hollow point
                ax.plot([g], [k], "o", mfc="none", color=colour)
            right = hi if hi is not None and g == g else g
            ax.annotate(f"  {r['verdict']}", (right, k), fontsize=8, color=colour, va="center")
        ax.set_yticks(range(len(pts)), labels, fontsize=8)
        ax.invert_yaxis()
        better = "lower is better: a fall is a gain" if pts[0].get("lower_is_better") else "higher is better"
        ax.set_xlabel(f"gain in {pts[0]['metric_label']} over the baseline, % ({better}; the verdict's interval; "
                      f"grey: ±{threshold_pct:g} %)")
        ax.grid(axis="x", alpha=0.3)
        title = f"Technique: {axis} against its baseline ({axis_note(axis)})"
        out.append(_finish(fig, ctx, out_dir, section, title, "technique", axis, ctx.run_id))
    return out


def open_loop(reps: list[dict[str, Any]], run_path: Path, ctx: RunContext, out_dir: Path) -> list[Plot]:
    """Open-loop repetitions of a run (a ``rate`` axis): latency against achieved throughput, one
    curve per dialog strategy (:mod:`.saturation`, the figure ``ssbench saturate`` writes), and
    the achieved rate against the offered one (``reps``: the run's flat repetition rows). None
    when the run has no paced repetition."""
    from .saturation import curve_rows, latency_vs_throughput_figure

    section = "Open loop: offered rate, achieved rate and latency"
    rows = [r for r in curve_rows(reps, run_path) if r["offered_rate"]]
    if not rows:
        return []
    out = []
    fig = latency_vs_throughput_figure(rows)
    if fig is not None:
        fig.set_size_inches(12, 5.6)
        fig.subplots_adjust(top=1 - TITLE_TOP_IN / 5.6)
        title = "Latency against achieved throughput, one curve per dialog strategy (hollow: fell behind)"
        out.append(_finish(fig, ctx, out_dir, section, title, "open_loop_latency", ctx.run_id))
    fig, ((ax,),) = _grid(1, 1, w=7.25, h=5.1)
    top = max(max(r["offered_rate"], r["throughput"] or 0) for r in rows) * 1.08
    ax.plot([0, top], [0, top], color="black", lw=0.6, label="achieved = offered")
    for dialogs in sorted({r["dialogs"] for r in rows}):
        c = STRATEGY_COLOR.get(dialogs, "#555555")
        for r in (r for r in rows if r["dialogs"] == dialogs):
            ax.plot([r["offered_rate"]], [r["throughput"]], "o", color=c, markerfacecolor="none" if r["behind"] else c)
        ax.plot([], [], "o", color=c, label=dialogs)
    ax.set_xlim(0, top)
    ax.set_ylim(0, top)
    ax.set_xlabel("offered SENDs per second (all initiators)")
    ax.set_ylabel("achieved SENDs per second")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, title="dialog strategy (hollow: behind)", title_fontsize=8)
    title = "Achieved against offered rate, one point per repetition"
    out.append(_finish(fig, ctx, out_dir, section, title, "open_loop_rates", ctx.run_id))
    return out


def backlog_drain(reps: list[dict[str, Any]], ctx: RunContext, out_dir: Path) -> list[Plot]:
    """Backlog drain (``run.backlog_messages``): the drain rate of each repetition (``reps``: the
    run's flat repetition rows) against MAX_QUEUE_READERS, one line per RECEIVE TOP (n)
    (medians, repetitions as points). None when the run has no drain."""
    from ..results import median

    section = "Backlog drain"
    rows = [(r["receive_top"], r["max_queue_readers"], r["dialogs"], r["drain_rate"]) for r in reps
            if r.get("drain_rate")]
    if not rows:
        return []
    fig, ((ax,),) = _grid(1, 1, w=8.25, h=4.9)
    cmap = matplotlib.colormaps["tab10"]
    series: dict[tuple, dict[int, list[float]]] = {}
    for top, readers, dialogs, rate in rows:
        series.setdefault((top, dialogs), {}).setdefault(readers or 0, []).append(rate)
    for k, ((top, dialogs), by_readers) in enumerate(sorted(series.items(), key=lambda kv: str(kv[0]))):
        xs = sorted(by_readers)
        c = cmap(k % 10)
        for x in xs:
            ax.plot([x] * len(by_readers[x]), by_readers[x], "o", color=c, alpha=0.45, markersize=4)
        ax.plot(xs, [median(by_readers[x]) for x in xs], "-", color=c, label=f"RECEIVE TOP ({top}), {dialogs}")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("MAX_QUEUE_READERS")
    ax.set_ylabel("messages drained per second")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, title="line: median; points: repetitions", title_fontsize=8)
    title = "Backlog drain rate against queue readers (the paper's batch scenario)"
    return [_finish(fig, ctx, out_dir, section, title, "backlog_drain", ctx.run_id)]
