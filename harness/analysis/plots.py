"""PNG plots (matplotlib, Agg backend) from the job's small aggregated tables.

Every function takes plain Python rows (dicts, as collected from the aggregated frames), a
:class:`RunContext` and an output directory, and returns a list of :class:`Plot`: a written
file, or a skip with the reason (an axis with one value still plots; a strategy or a table that
is absent is skipped, never a crash). Every figure names the run id and the target; embedded
runs are labelled "PostgreSQL emulation", never "SQL Server".
"""

from __future__ import annotations

import io
import math
import re
import textwrap
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import matplotlib
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from ..results import write_atomic  # noqa: E402

matplotlib.use("Agg")  # no display; figures are built with the object API (no pyplot state)

Row = dict[str, Any]

STRATEGY_LABEL = {"per_thread": "one dialog per thread", "trick150": "150 trick (every 150th dialog)",
                  "shared": "one shared dialog"}
STRATEGY_ORDER = {"per_thread": 0, "trick150": 1, "shared": 2}
STRATEGY_COLOR = {"per_thread": "#d62728", "trick150": "#1f77b4", "shared": "#2ca02c"}
VERDICT_ABBREV = {"page latch": "PL", "log flush": "LF", "lock": "LK", "client-bound": "CB",
                  "other": "OT", "unknown": "?"}
DPI = 100


@dataclass(frozen=True)
class RunContext:
    run_id: str
    target: str            # display text, see target_text()
    kind: str | None       # embedded | mssql | None
    server_profiles: dict[str, str]  # matrix server -> embedded profile

    def server_label(self, server: str) -> str:
        profile = self.server_profiles.get(server)
        if self.kind == "embedded":
            if profile and profile != server:
                return f"profile {profile} (axis {server})"
            return f"profile {server}"
        return f"server {server}"


@dataclass(frozen=True)
class Plot:
    section: str
    title: str
    file: str | None = None          # relative to the report directory
    note: str | None = None          # why it was skipped, or a caption
    run_id: str | None = None

    @property
    def skipped(self) -> bool:
        return self.file is None


def target_text(kind: str | None, label: str | None) -> str:
    """How a target is named in titles: embedded runs always read "PostgreSQL emulation" and
    never "SQL Server" (a label that says so is not shown)."""
    label = (label or "").strip()
    if kind == "embedded":
        if label and not re.search(r"sql\s*server", label, re.I):
            return label if "postgresql emulation" in label.lower() else f"PostgreSQL emulation ({label})"
        return "PostgreSQL emulation of Service Broker"
    if label:
        return label
    return f"target kind {kind}" if kind else "unknown target"


def strategy_label(s: str) -> str:
    return STRATEGY_LABEL.get(s, s)


def _slug(*parts: Any) -> str:
    return "-".join(re.sub(r"[^A-Za-z0-9_.]+", "_", str(p)) for p in parts if p is not None and p != "")


def _payload_label(p: int) -> str:
    return f"{p} B payload"


def _colors(values: Iterable[Any]) -> dict[Any, Any]:
    cmap = matplotlib.colormaps["tab10"]
    return {v: cmap(i % 10) for i, v in enumerate(sorted(set(values)))}


TITLE_FONTSIZE = 11
TITLE_LINE_IN = 0.2          # height of one title line, inches
TITLE_TOP_IN = 0.85          # _grid's top margin: room for two title lines


def _suptitle(fig, title: str, ctx: RunContext) -> None:
    """Title, run and target, wrapped to the figure's width (never clipped at its edges); a
    title longer than two lines gets a taller top margin."""
    width_chars = max(40, int(fig.get_figwidth() * 72 / (TITLE_FONTSIZE * 0.55)))
    lines = [piece for line in (title, f"run {ctx.run_id} · {ctx.target}")
             for piece in textwrap.wrap(line, width_chars)]
    fig.suptitle("\n".join(lines), fontsize=TITLE_FONTSIZE)
    if len(lines) > 2:
        top_in = TITLE_TOP_IN + TITLE_LINE_IN * (len(lines) - 2)
        fig.subplots_adjust(top=1 - top_in / fig.get_figheight())
    fig._ssbench_meta = {"Title": title, "Description": f"run {ctx.run_id}; target {ctx.target}",
                         "Software": "ssbench analyze (matplotlib)"}


def _save(fig, out_dir: Path, name: str) -> str:
    """Write ``out_dir/name.png`` (title, run and target also in the PNG's text chunks)."""
    path = out_dir / f"{name}.png"
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata=getattr(fig, "_ssbench_meta", None))
    write_atomic(path, buf.getvalue())
    return f"{out_dir.name}/{path.name}"


def _grid(nrows: int, ncols: int, w: float = 4.6, h: float = 3.6, sharey: bool | str = False,
          right_in: float = 0.25):
    """A figure of nrows x ncols panels of about w x h inches, with fixed margins in inches
    (a layout engine would cost every figure an extra full draw when saved)."""
    left_in, bottom_in, top_in = 0.85, 0.6, TITLE_TOP_IN     # y label, x label, two-line title
    width = max(6.4, w * ncols) + right_in
    height = h * nrows + 0.5
    fig = Figure(figsize=(width, height))
    axes = fig.subplots(nrows, ncols, squeeze=False, sharey=sharey)
    fig.subplots_adjust(left=left_in / width, right=1 - right_in / width, bottom=bottom_in / height,
                        top=1 - top_in / height, wspace=0.12 if sharey else 0.28, hspace=0.5)
    return fig, axes


def _x_ticks(ax, xs: list[int]) -> None:
    xs = sorted(set(xs))
    if len(xs) <= 12:
        ax.set_xticks(xs)
    if len(xs) == 1:
        ax.set_xlim(xs[0] - 1, xs[0] + 1)


def _by(rows: Iterable[Row], *keys: str) -> dict[tuple, list[Row]]:
    out: dict[tuple, list[Row]] = defaultdict(list)
    for r in rows:
        out[tuple(r.get(k) for k in keys)].append(r)
    return out


def _by1(rows: Iterable[Row], key: str) -> dict[Any, list[Row]]:
    out: dict[Any, list[Row]] = defaultdict(list)
    for r in rows:
        out[r.get(key)].append(r)
    return out


def _num(v: Any) -> float:
    return float("nan") if v is None else float(v)


# --------------------------------------------------------------------------- Figures 2-4

def throughput(perms: list[Row], ctx: RunContext, out_dir: Path) -> list[Plot]:
    """The paper's Figures 2-4: messages/s processed by the target (median receive rate,
    IQR error bars) vs total client threads, one line per payload, one panel per initiator
    count; one figure per (server, dialog strategy)."""
    section = "Throughput vs client threads (paper Figures 2-4)"
    if not perms:
        return [Plot(section, "Throughput", note="no permutation data", run_id=ctx.run_id)]
    out = []
    colors = _colors(r["payload_bytes"] for r in perms)
    for (server, strategy), rows in sorted(_by(perms, "server", "dialogs").items()):
        inits = sorted({r["initiators"] for r in rows})
        fig, axes = _grid(1, len(inits), sharey=True)
        for ax, i in zip(axes[0], inits):
            sub = [r for r in rows if r["initiators"] == i]
            for p, prow in sorted(_by(sub, "payload_bytes").items()):
                prow.sort(key=lambda r: r["total_threads"])
                x = [r["total_threads"] for r in prow]
                y = [_num(r["receive_rate_median"]) for r in prow]
                lo = [max(0.0, yv - _num(r["receive_rate_q1"])) for yv, r in zip(y, prow)]
                hi = [max(0.0, _num(r["receive_rate_q3"]) - yv) for yv, r in zip(y, prow)]
                ax.errorbar(x, y, yerr=[lo, hi], marker="o", ms=4, capsize=2, color=colors[p[0]],
                            label=_payload_label(p[0]))
            ax.set_title(f"{i} initiator{'s' if i > 1 else ''}")
            ax.set_xlabel("total client threads (initiators × threads)")
            ax.grid(alpha=0.3)
            _x_ticks(ax, [r["total_threads"] for r in sub])
        for ax in axes[0]:
            ax.set_ylim(bottom=0)
        axes[0][0].set_ylabel("messages/s processed by the target")
        axes[0][0].legend(title="median of repetitions, IQR bars", fontsize=8, title_fontsize=8, loc="upper left")
        title = f"Messages/s processed by one target — {strategy_label(strategy)}, {ctx.server_label(server)}"
        _suptitle(fig, title, ctx)
        f = _save(fig, out_dir, _slug("throughput", ctx.run_id, server, strategy))
        out.append(Plot(section, title, f, run_id=ctx.run_id))
    return out


# --------------------------------------------------------------------------- Figure 5 and shared

def strategy_gain(perms: list[Row], gains: list[Row], cross: list[Row], ctx: RunContext, out_dir: Path,
                  strategy: str, threshold_pct: float, section: str) -> list[Plot]:
    """Throughput of one dialog per thread vs ``strategy`` (top row) and the gain in percent
    (bottom row) vs total threads, one panel column per initiator count; one figure per server.
    Skipped (with a note) when either strategy is absent."""
    present = {r["dialogs"] for r in perms}
    name = strategy_label(strategy)
    if "per_thread" not in present or strategy not in present:
        missing = [s for s in ("per_thread", strategy) if s not in present]
        return [Plot(section, f"One dialog per thread vs {name}", run_id=ctx.run_id,
                     note=f"skipped: the run has no {' and no '.join(strategy_label(m) for m in missing)} "
                          f"permutations")]
    gsel = [g for g in gains if g["strategy"] == strategy]
    if not gsel:
        return [Plot(section, f"One dialog per thread vs {name}", run_id=ctx.run_id,
                     note="skipped: no permutation pairs that differ only in the dialog strategy")]
    out = []
    colors = _colors(r["payload_bytes"] for r in perms)
    for (server,), grows in sorted(_by(gsel, "server").items()):
        inits = sorted({g["initiators"] for g in grows})
        fig, axes = _grid(2, len(inits), h=3.3, sharey="row")
        for c, i in enumerate(inits):
            ax, axg = axes[0][c], axes[1][c]
            for p, prow in sorted(_by([g for g in grows if g["initiators"] == i], "payload_bytes").items()):
                prow.sort(key=lambda r: r["total_threads"])
                x = [r["total_threads"] for r in prow]
                col = colors[p[0]]
                ax.plot(x, [_num(r["receive_rate"]) for r in prow], "o-", ms=4, color=col,
                        label=f"{_payload_label(p[0])}, {strategy}")
                ax.plot(x, [_num(r["baseline_receive_rate"]) for r in prow], "s--", ms=3, color=col, alpha=0.7,
                        label=f"{_payload_label(p[0])}, per_thread")
                axg.plot(x, [_num(r["gain_pct"]) for r in prow], "o-", ms=4, color=col, label=_payload_label(p[0]))
                for cr in cross:
                    if (cr["server"], cr["strategy"], cr["initiators"], cr["payload_bytes"]) == (server, strategy, i, p[0]) \
                            and cr["crossover_total_threads"] is not None:
                        axg.axvline(cr["crossover_total_threads"], color=col, ls=":", lw=1)
            axg.axhline(threshold_pct, color="grey", ls="--", lw=1, label=f"threshold {threshold_pct:g} %")
            axg.axhline(0, color="black", lw=0.6)
            ax.set_title(f"{i} initiator{'s' if i > 1 else ''}")
            for a in (ax, axg):
                a.grid(alpha=0.3)
                _x_ticks(a, [g["total_threads"] for g in grows if g["initiators"] == i])
            axg.set_xlabel("total client threads (initiators × threads)")
        for ax in axes[0]:
            ax.set_ylim(bottom=0)
        axes[0][0].set_ylabel("messages/s processed by the target")
        axes[1][0].set_ylabel(f"gain of {strategy} over per_thread (%)")
        axes[0][0].legend(fontsize=7, ncol=1, loc="upper left")
        axes[1][0].legend(fontsize=7, title="dotted: crossover", title_fontsize=7, loc="upper left")
        title = f"One dialog per thread vs {name} — {ctx.server_label(server)}"
        _suptitle(fig, title, ctx)
        f = _save(fig, out_dir, _slug("gain", ctx.run_id, strategy, server))
        out.append(Plot(section, title, f, run_id=ctx.run_id))
    return out


# --------------------------------------------------------------------------- waits

def wait_profile(perms: list[Row], waits: list[Row], ctx: RunContext, out_dir: Path, top: int = 6) -> list[Plot]:
    """Stacked bars of the top waits (ms of wait per second) per thread count; rows
    = dialog strategies, columns = initiator counts, at the smallest payload; one figure per
    server. The verdict is written above each bar (PL page latch, LF log flush, LK lock,
    CB client-bound, OT other)."""
    section = "Wait profile per thread count"
    if not waits:
        return [Plot(section, "Wait profile", note="skipped: no wait data (no samples, no top_waits)",
                     run_id=ctx.run_id)]
    by_perm = _by1(waits, "perm_id")
    out = []
    for (server,), srows in sorted(_by(perms, "server").items()):
        payload = min(r["payload_bytes"] for r in srows)
        rows = [r for r in srows if r["payload_bytes"] == payload and r["perm_id"] in by_perm]
        if not rows:
            out.append(Plot(section, f"Wait profile — {ctx.server_label(server)}", run_id=ctx.run_id,
                            note="skipped: no wait data for these permutations"))
            continue
        totals: dict[str, float] = defaultdict(float)
        for r in rows:
            for w in by_perm[r["perm_id"]]:
                totals[w["wait_type"]] += _num(w["wait_ms_per_s"])
        kept = [w for w, _ in sorted(totals.items(), key=lambda kv: -kv[1])[:top]]
        cmap = matplotlib.colormaps["tab10"]
        wcolor = {w: cmap(i) for i, w in enumerate(kept)}
        strategies = sorted({r["dialogs"] for r in rows}, key=lambda s: (STRATEGY_ORDER.get(s, 9), s))
        inits = sorted({r["initiators"] for r in rows})
        fig, axes = _grid(len(strategies), len(inits), h=3.0, sharey=True, right_in=2.1)
        for a, s in enumerate(strategies):
            for c, i in enumerate(inits):
                ax = axes[a][c]
                sub = sorted((r for r in rows if r["dialogs"] == s and r["initiators"] == i),
                             key=lambda r: r["threads"])
                labels = [str(r["threads"]) for r in sub]
                xs = list(range(len(sub)))
                bottom = [0.0] * len(sub)
                for wt in kept + ["other"]:
                    vals = []
                    for r in sub:
                        ws = by_perm[r["perm_id"]]
                        if wt == "other":
                            vals.append(sum(_num(w["wait_ms_per_s"]) for w in ws if w["wait_type"] not in kept))
                        else:
                            vals.append(sum(_num(w["wait_ms_per_s"]) for w in ws if w["wait_type"] == wt))
                    ax.bar(xs, vals, bottom=bottom, color=wcolor.get(wt, "#bbbbbb"), width=0.75,
                           label=wt if (a, c) == (0, 0) else None)
                    bottom = [b + v for b, v in zip(bottom, vals)]
                for x, r, b in zip(xs, sub, bottom):
                    ax.text(x, b, VERDICT_ABBREV.get(r.get("verdict") or "unknown", "?"), ha="center",
                            va="bottom", fontsize=7)
                ax.set_xticks(xs, labels)
                ax.set_title(f"{strategy_label(s)}, {i} initiator{'s' if i > 1 else ''}", fontsize=9)
                ax.set_xlabel("client threads per initiator")
                ax.grid(axis="y", alpha=0.3)
                ax.margins(y=0.12)
            axes[a][0].set_ylabel("wait time (ms per second)")
        handles, labels = axes[0][0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="center right", fontsize=8,
                   title="wait type\n(verdict above bars:\nPL page latch, LF log flush,\nLK lock, CB client-bound,\nOT other)",
                   title_fontsize=7)
        title = f"Top waits per thread count — {ctx.server_label(server)}, {_payload_label(payload)}"
        _suptitle(fig, title, ctx)
        f = _save(fig, out_dir, _slug("waits", ctx.run_id, server))
        out.append(Plot(section, title, f, run_id=ctx.run_id))
    return out


# --------------------------------------------------------------------------- queues over time

def queue_depth(series: list[Row], chosen: list[Row], ctx: RunContext, out_dir: Path) -> list[Plot]:
    """Transmission-queue (per initiator) and target-queue depth over time for the chosen
    (highest-load) permutations, one panel each; the measured window is shaded."""
    section = "Queue depth over time"
    if not series:
        return [Plot(section, "Queue depth over time", run_id=ctx.run_id,
                     note="skipped: no queue samples for the chosen permutations")]
    by_perm = _by1(series, "perm_id")
    chosen = [c for c in chosen if c["perm_id"] in by_perm]
    n = len(chosen)
    if not n:
        return [Plot(section, "Queue depth over time", run_id=ctx.run_id,
                     note="skipped: no queue samples for the chosen permutations")]
    ncols = 2 if n > 1 else 1
    nrows = math.ceil(n / ncols)
    fig, axes = _grid(nrows, ncols, w=6.0, h=3.2)
    for k, c in enumerate(chosen):
        ax = axes[k // ncols][k % ncols]
        rows = by_perm[c["perm_id"]]
        meas = [r["elapsed_s"] for r in rows if r["phase"] == "measure"]
        if meas:
            ax.axvspan(min(meas), max(meas), color="#f0f0f0", label="measured window")
        for (key,), krows in sorted(_by(rows, "key").items()):
            krows.sort(key=lambda r: r["elapsed_s"])
            style = "-" if key.startswith("xmitq") else "--"
            lab = f"transmission queue {key.split('.', 1)[-1]}" if key.startswith("xmitq") else \
                ("target queue" if key == "queue" else key)
            ax.plot([r["elapsed_s"] for r in krows], [r["depth"] for r in krows], style, lw=1.2, label=lab)
        ax.set_title(f"{c['perm_id']} (rep {c['rep']})", fontsize=9)
        ax.set_xlabel("time since the collectors started (s)")
        ax.set_ylabel("queue depth (messages)")
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7, loc="upper right")
    for k in range(n, nrows * ncols):
        axes[k // ncols][k % ncols].set_visible(False)
    title = "Queue depth over time — highest-load permutation of each dialog strategy"
    _suptitle(fig, title, ctx)
    f = _save(fig, out_dir, _slug("queues", ctx.run_id))
    return [Plot(section, title, f, run_id=ctx.run_id)]


# --------------------------------------------------------------------------- send vs receive

def send_vs_receive(perms: list[Row], ctx: RunContext, out_dir: Path) -> list[Plot]:
    """Does the target keep up? Median send rate vs median receive rate per permutation
    (diagonal = keeps up), and receive/send in percent vs total threads."""
    section = "Send vs receive rate"
    rows = [r for r in perms if r["send_rate_median"] is not None and r["receive_rate_median"] is not None]
    if not rows:
        return [Plot(section, "Send vs receive rate", note="skipped: no rates", run_id=ctx.run_id)]
    fig, axes = _grid(1, 2, w=5.2, h=4.0)
    ax, ax2 = axes[0]
    markers = {i: m for i, m in zip(sorted({r["initiators"] for r in rows}), "os^Dv<>p*h")}
    top = max(max(r["send_rate_median"], r["receive_rate_median"]) for r in rows) * 1.05 or 1.0
    ax.plot([0, top], [0, top], color="grey", lw=1, ls="--", label="receive = send")
    for (s, i), srows in sorted(_by(rows, "dialogs", "initiators").items()):
        col = STRATEGY_COLOR.get(s)
        ax.scatter([r["send_rate_median"] for r in srows], [r["receive_rate_median"] for r in srows], s=18,
                   marker=markers[i], color=col, alpha=0.8, label=f"{s}, {i} initiator{'s' if i > 1 else ''}")
        srows.sort(key=lambda r: r["total_threads"])
        ratio = [100.0 * r["receive_rate_median"] / r["send_rate_median"] if r["send_rate_median"] else float("nan")
                 for r in srows]
        ax2.scatter([r["total_threads"] for r in srows], ratio, s=18, marker=markers[i], color=col, alpha=0.8,
                    label=f"{s}, {i} initiator{'s' if i > 1 else ''}")
    ax2.axhline(100, color="grey", lw=1, ls="--")
    ax.set_xlabel("SENDs/s (median)")
    ax.set_ylabel("messages/s processed by the target (median)")
    ax.set_xlim(0, top)
    ax.set_ylim(0, top)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    ax2.set_xlabel("total client threads (initiators × threads)")
    ax2.set_ylabel("received / sent in the measured window (%)")
    ax2.grid(alpha=0.3)
    ax2.legend(fontsize=7)
    _x_ticks(ax2, [r["total_threads"] for r in rows])
    title = "Does the target keep up? Send vs receive rate (all payloads and servers)"
    _suptitle(fig, title, ctx)
    f = _save(fig, out_dir, _slug("send_vs_receive", ctx.run_id))
    return [Plot(section, title, f, run_id=ctx.run_id)]


# --------------------------------------------------------------------------- latency

def latency(perms: list[Row], ctx: RunContext, out_dir: Path) -> list[Plot]:
    """SEND and end-to-end latency percentiles (p50, p95, p99; medians of repetitions) vs total
    threads; rows = SEND / end-to-end, columns = initiator counts, colour = dialog strategy,
    line style = percentile; smallest payload; one figure per server. Log scale."""
    section = "Latency percentiles vs threads"
    out = []
    styles = {"p50": "-", "p95": "--", "p99": ":"}
    for (server,), srows in sorted(_by(perms, "server").items()):
        payload = min(r["payload_bytes"] for r in srows)
        rows = [r for r in srows if r["payload_bytes"] == payload]
        inits = sorted({r["initiators"] for r in rows})
        fig, axes = _grid(2, len(inits), h=3.2, sharey="row")
        any_data = False
        for c, i in enumerate(inits):
            for a, (kind, name) in enumerate((("send", "SEND"), ("e2e", "end-to-end"))):
                ax = axes[a][c]
                for (s,), drows in sorted(_by([r for r in rows if r["initiators"] == i], "dialogs").items()):
                    drows.sort(key=lambda r: r["total_threads"])
                    for pct, ls in styles.items():
                        ys = [_num(r[f"{kind}_{pct}_ms_median"]) for r in drows]
                        if all(math.isnan(y) for y in ys):
                            continue
                        any_data = True
                        ax.plot([r["total_threads"] for r in drows], ys, ls, marker="o", ms=3,
                                color=STRATEGY_COLOR.get(s), label=f"{s} {pct}")
                ax.set_yscale("log")
                ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
                ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
                ax.yaxis.set_minor_formatter(NullFormatter())
                ax.grid(alpha=0.3, which="both")
                ax.set_title(f"{name} latency, {i} initiator{'s' if i > 1 else ''}", fontsize=9)
                ax.set_xlabel("total client threads (initiators × threads)")
                _x_ticks(ax, [r["total_threads"] for r in rows if r["initiators"] == i])
        if not any_data:
            out.append(Plot(section, f"Latency — {ctx.server_label(server)}", run_id=ctx.run_id,
                            note="skipped: no latency percentiles in the summaries"))
            continue
        axes[0][0].set_ylabel("SEND latency (ms, log scale)")
        axes[1][0].set_ylabel("end-to-end latency (ms, log scale)")
        axes[0][0].legend(fontsize=7, ncol=1, loc="upper left")
        title = f"Latency percentiles vs threads — {ctx.server_label(server)}, {_payload_label(payload)}"
        _suptitle(fig, title, ctx)
        f = _save(fig, out_dir, _slug("latency", ctx.run_id, server))
        out.append(Plot(section, title, f, run_id=ctx.run_id))
    return out
