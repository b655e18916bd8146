"""The several-runs view: when ``ssbench analyze`` is given more than one run, each
permutation's receive and send rate per run, side by side, with intervals (the per-run plots
are :mod:`.plots`)."""

from __future__ import annotations

from pathlib import Path

import matplotlib
from matplotlib.figure import Figure

from .plots import (LEGEND_IN, TITLE_TOP_IN, Plot, Row, RunContext, _hollow_note, _legend_right, _num, _points,
                    _save, _slug, _suptitle)


def runs_comparison(perms: list[Row], contexts: list[RunContext], out_dir: Path) -> list[Plot]:
    """Several runs side by side: per permutation, each run's median receive and send rate with
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
    width = min(40.0, max(8.0, 0.24 * len(ids)))
    fig = Figure(figsize=(width + LEGEND_IN, 8.2))
    axes = fig.subplots(2, 1, sharex=True)
    fig.subplots_adjust(left=0.85 / (width + LEGEND_IN), right=1 - LEGEND_IN / (width + LEGEND_IN),
                        bottom=2.2 / 8.2, top=1 - TITLE_TOP_IN / 8.2, hspace=0.15)
    cmap = matplotlib.colormaps["tab10"]
    step = 0.6 / max(1, len(run_ids) - 1)
    for k, c in enumerate(contexts):
        runrows = sorted((r for r in rows if r["run_id"] == c.run_id), key=lambda r: pos[r["perm_id"]])
        if not runrows:
            continue
        x = [pos[r["perm_id"]] - 0.3 + k * step if len(run_ids) > 1 else pos[r["perm_id"]] for r in runrows]
        label = f"{c.run_id}{chr(10) + '(SYNTHETIC)' if c.synthetic else ''}"
        for ax, m in zip(axes, ("receive_rate", "send_rate")):
            _points(ax, x, [_num(r[f"{m}_median"]) for r in runrows], [r["n"] for r in runrows], cmap(k % 10),
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
    _legend_right(fig, [axes[0]], title="run (median of repetitions,\n95 % interval bars)", extra=[_hollow_note()])
    targets = "; ".join(dict.fromkeys(c.target for c in contexts))
    ctx = RunContext(run_id=", ".join(run_ids), target=targets, kind=None, server_profiles={},
                     synthetic=any(c.synthetic for c in contexts))
    title = f"{len(run_ids)} runs compared: receive and send rate per permutation"
    _suptitle(fig, title, ctx)
    f = _save(fig, out_dir, _slug("runs_compared", *run_ids)[:150])
    return [Plot(section, title, f)]
