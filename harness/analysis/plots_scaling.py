"""The scalability model's figure: each sweep's fitted curve with its band over the measured
repetitions, and the residuals under it (:mod:`harness.verdicts.scaling`)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

from ..results.fields import axis_names
from ..verdicts import scaling as S
from .plots import (LEGEND_IN, STRATEGY_COLOR, STRATEGY_ORDER, Plot, RunContext, _finish, _grid, _initiators,
                    _legend_right, strategy_label)
from .tables import group_by

SECTION = "How far it scales (Universal Scalability Law)"


#: the keys of a panel: everything a sweep has but its dialog strategy (and what follows from it)
PANEL_KEYS = tuple(k for k in S.SWEEP_KEYS if k not in axis_names("strategy"))


def _panels(sweeps: list[S.Sweep]) -> dict[tuple, list[S.Sweep]]:
    """The sweeps drawn together: everything but the dialog strategy equal."""
    return group_by(sweeps, key=lambda s: tuple(s.first.get(k) for k in PANEL_KEYS))


def _figures(panels: dict[tuple, list[S.Sweep]]) -> dict[tuple, list[tuple]]:
    """The panels by figure: everything but the initiator count equal (a column per initiator
    count, as the throughput figures have them)."""
    at = PANEL_KEYS.index("initiators")
    return group_by(sorted(panels, key=str), key=lambda k: k[:at] + k[at + 1:])


def _title(key: tuple, varying: list[str], ctx: RunContext) -> str:
    """A figure's title: server, payload, and the other axes that differ between the figures."""
    values = dict(zip(PANEL_KEYS, key))
    extra = [f"{k}={values[k]}" for k in varying if k in S.OTHER_AXES]
    return (f"How far it scales: X(N) = λN / (1 + σ(N−1) + κN(N−1)) fitted to each thread sweep — "
            f"{ctx.server_label(str(values.get('server')))}, {values.get('payload_bytes')} B payload"
            + (f", {', '.join(extra)}" if extra else ""))


def scaling_fits(sweeps: list[S.Sweep], ctx: RunContext, out_dir: Path) -> list[Plot]:
    """A figure per server, payload and other axes of the run, a column per initiator count:
    every repetition's receive rate against total threads, each fitted sweep's curve with its
    95 % band (one per dialog strategy), and under it each repetition's residual (percent off
    the curve); a sweep the law does not fit is drawn dashed with its residuals, one without a
    model is left out (the table says why)."""
    mine = [s for s in sweeps if s.run_id == ctx.run_id]
    drawn = [s for s in mine if s.fit is not None]
    if not mine:
        return []
    if not drawn:
        return [Plot(SECTION, "Fitted curves", run_id=ctx.run_id,
                     note="no sweep has a model: every one has fewer than "
                          f"{S.MIN_THREAD_COUNTS} thread counts (the table above says which)")]
    panels = _panels(drawn)
    varying = [k for i, k in enumerate(PANEL_KEYS) if len({key[i] for key in panels}) > 1]
    out = []
    for keys in _figures(panels).values():
        title = _title(keys[0], varying, ctx)
        out.append(replace(_figure(keys, panels, title, ctx, out_dir), note=(
            "Residuals: each repetition's rate against the fitted curve; a pattern (not a scatter about 0) says the "
            "law misses the sweep's shape. Dashed: the law does not fit (no coefficient is given).")))
    return out


def _figure(keys: list[tuple], panels: dict[tuple, list[S.Sweep]], title: str, ctx: RunContext, out_dir: Path) -> Plot:
    fig, axes = _grid(2, len(keys), w=5.4, h=3.4, right_in=LEGEND_IN)
    at = PANEL_KEYS.index("initiators")
    for col, key in enumerate(keys):
        group = panels[key]
        top, bottom = axes[0][col], axes[1][col]
        for s in sorted(group, key=lambda s: (STRATEGY_ORDER.get(s.first.get("dialogs"), 9), str(s.first.get("dialogs")))):
            _sweep(top, bottom, s)
        top.set_title(_initiators(key[at]), fontsize=9)
        for ax in (top, bottom):
            ax.set_xscale("log", base=2)
            ticks = sorted({n for s in group for n in s.threads})
            ax.set_xticks(ticks, [str(n) for n in ticks])
            ax.grid(alpha=0.3)
        top.set_ylim(bottom=0)
        bottom.axhline(0, color="black", lw=0.6)
        bottom.set_xlabel("total client threads N (log scale)")
    axes[0][0].set_ylabel("messages/s processed by the target")
    axes[1][0].set_ylabel("residual, % off the curve")
    _legend_right(fig, axes[0], title="repetitions (points),\nfitted law (line), 95 % band")
    return _finish(fig, ctx, out_dir, SECTION, title, "scaling", ctx.run_id, *keys[0][1:at], *keys[0][at + 1:])


def _sweep(top, bottom, s: S.Sweep) -> None:
    strategy = str(s.first.get("dialogs"))
    color = STRATEGY_COLOR.get(strategy, "#555555")
    fitted = s.status == S.FITTED
    pts = S.points(s.rows)
    xs = [n for n, rates in pts for _ in rates]
    ys = [r for _, rates in pts for r in rates]
    label = strategy_label(strategy) + ("" if fitted else " (does not fit)")
    top.plot(xs, ys, ls="none", marker="o", ms=3.5, color=color, alpha=0.75)
    f = s.fit
    if fitted:
        band = S.curve(s)
        ns = [p["threads"] for p in band]
        top.fill_between(ns, [p["low"] for p in band], [p["high"] for p in band], color=color, alpha=0.18, lw=0)
        top.plot(ns, [p["rate"] for p in band], color=color, lw=1.4, label=label)
    else:
        import numpy as np

        ns = np.geomspace(1.0, max(s.threads) * 1.25, 60)
        top.plot(ns, [float(S.usl.rate(n, f.lam, f.sigma, f.kappa)) for n in ns], color=color, lw=1.2, ls="--",
                 label=label)
    res = [100 * (y / float(S.usl.rate(x, f.lam, f.sigma, f.kappa)) - 1) for x, y in zip(xs, ys)]
    jitter = {"per_thread": 0.97, "trick150": 1.0, "shared": 1.03}.get(strategy, 1.0)
    bottom.plot([x * jitter for x in xs], res, ls="none", marker="o" if fitted else "x", ms=3.5, color=color)
    if any(not math.isfinite(r) for r in res):
        bottom.set_ylim(-50, 50)
