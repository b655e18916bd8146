"""How the report's PNGs are written (harness.analysis.plots._save) and when a helper process
draws some of them (harness.analysis.job.start_plot_helper). Fast: no Spark.

_save draws each figure once and writes an RGB PNG with pinned panel titles: these tests hold it
to the pixels matplotlib's own savefig writes, including a panel whose y axis has an offset
text ("1e7") that pushes its title up."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from matplotlib.figure import Figure
from PIL import Image

from harness.analysis import job, plots


def _figure(scale: float) -> Figure:
    """Two panels with titles, a legend and a suptitle, like the report's; ``scale`` sets the
    y values (1e7: the y axis shows an offset text where the title would be)."""
    fig, axes = plots._grid(1, 2, sharey=True, right_in=plots.LEGEND_IN)
    for k, ax in enumerate(axes[0]):
        ax.plot([1, 5, 10, 20], [scale * (1 + v + k) for v in (0.1, 0.5, 0.9, 1.2)], label=f"series {k}")
        ax.set_title(f"{k + 1} initiators, a long title that reaches the offset text's corner " * (1 + k // 2))
        ax.set_xlabel("total client threads")
    plots._legend_right(fig, axes[0], title="legend")
    ctx = plots.RunContext(run_id="r1", target="PostgreSQL emulation", profile_aliases=False, server_profiles={})
    plots._suptitle(fig, "Throughput", ctx)
    return fig


def _savefig_pixels(fig: Figure) -> np.ndarray:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=plots.DPI)
    return np.asarray(Image.open(buf).convert("RGBA"))


@pytest.mark.parametrize("scale", [1e3, 1e7])
def test_the_png_holds_the_pixels_savefig_would(tmp_path: Path, scale: float):
    (tmp_path / "plots").mkdir()
    fig = _figure(scale)
    rel = plots._save(fig, tmp_path / "plots", "fig")
    assert bool(fig.axes[0].yaxis.offsetText.get_text()) == (scale > 1e6)   # both placements are met
    png = Image.open(tmp_path / rel)
    assert png.mode == "RGB" and png.info["dpi"] == pytest.approx((plots.DPI, plots.DPI), abs=0.01)
    assert png.text["Title"] == "Throughput" and png.text["Description"] == "run r1; target PostgreSQL emulation"
    expected = _savefig_pixels(_figure(scale))      # matplotlib's own placement and encoding
    assert (expected[..., 3] == 255).all()           # opaque: RGB loses nothing
    assert png.size == (expected.shape[1], expected.shape[0])
    assert np.array_equal(np.asarray(png.convert("RGBA")), expected)


def test_titles_are_pinned_only_where_matplotlib_would_not_move_them():
    fig = _figure(1e3)
    top = fig.add_axes((0.1, 0.1, 0.2, 0.2))
    top.set_title("x ticks on top")
    top.xaxis.tick_top()
    pinned = plots._fix_titles(fig)
    assert len(pinned) == 2 and top not in pinned


def test_a_helper_draws_only_when_a_cpu_is_idle(monkeypatch):
    monkeypatch.setattr(job.os, "sched_getaffinity", lambda _pid: {0, 1}, raising=False)
    monkeypatch.setattr(job.os, "getloadavg", lambda: (2.5, 2.0, 1.0))
    assert not job.idle_cpu() and job.start_plot_helper() is None
    monkeypatch.setattr(job.os, "getloadavg", lambda: (0.3, 0.2, 0.1))
    assert job.idle_cpu()
    monkeypatch.setenv("SSBENCH_PLOT_HELPER", "0")
    assert job.start_plot_helper() is None
