"""Report figures and the terminal histogram."""

import base64
import re

import numpy as np
import pytest
from matplotlib.figure import Figure

from oddnode.core.model import Direction, LabelKind, Series
from oddnode.report.plots import (
    figure_to_png_base64,
    figure_to_svg,
    histogram_figure,
    save_figure,
    scatter_figure,
)
from oddnode.report.text_histogram import text_histogram
from oddnode.stats.correlation import correlate
from oddnode.stats.distribution import bin_edges

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def make_series(benchmark, values, unit="MB/s", kind=LabelKind.NODE):
    values = np.asarray(values, dtype=np.float64)
    labels = np.array([f"node{i:03d}" for i in range(len(values))], dtype=object)
    return Series(
        benchmark=benchmark,
        metric="value",
        unit=unit,
        direction=Direction.HIGHER,
        label_kind=kind,
        labels=labels,
        values=values,
        repetitions=np.ones(len(values), dtype=np.int64),
    )


@pytest.fixture
def bimodal():
    rng = np.random.default_rng(5)
    return make_series("stream", np.concatenate([rng.normal(12_000, 100, 216), rng.normal(11_000, 100, 84)]))


def test_histogram_figure_has_title_axes_and_marks(bimodal):
    figure = histogram_figure(bimodal, highlight={"node001": "outlier", "node250": "suspect", "nodeXYZ": "outlier"})
    assert isinstance(figure, Figure)
    axes = figure.axes[0]
    assert axes.get_title() == "stream"
    assert axes.get_xlabel() == "MB/s"
    assert axes.get_ylabel() == "nodes"
    assert tuple(figure.get_size_inches()) == (6.4, 3.6)
    texts = {t.get_text() for t in axes.texts}
    assert {"μ", "+1σ", "−1σ", "+2σ", "−2σ", "+3σ", "−3σ"} <= texts
    assert any("n = 300" in t for t in texts)
    assert len(axes.patches) == len(bin_edges(bimodal.values, "auto")) - 1
    line_labels = {line.get_label() for line in axes.get_lines()}
    assert {"normal fit", "outlier", "suspect"} <= line_labels


def test_histogram_without_overlay_or_marks(bimodal):
    axes = histogram_figure(bimodal, bins=10, normal_overlay=False, sigma_marks=False).axes[0]
    assert len(axes.patches) == 10
    assert not any(t.get_text() == "μ" for t in axes.texts)
    assert not any(line.get_label() == "normal fit" for line in axes.get_lines())


def test_pair_series_counts_pairs():
    series = make_series("pingpong", np.arange(20.0), unit="us", kind=LabelKind.PAIR)
    assert histogram_figure(series).axes[0].get_ylabel() == "pairs"


def test_constant_series_still_plots():
    figure = histogram_figure(make_series("flat", np.full(8, 3.0)))
    assert len(figure.axes[0].patches) == 1


@pytest.mark.slow
def test_save_png_and_svg(tmp_path, bimodal):
    figure = histogram_figure(bimodal)
    png, svg = tmp_path / "h.png", tmp_path / "h.SVG"
    save_figure(figure, png)
    save_figure(figure, svg)
    assert png.read_bytes().startswith(PNG_MAGIC)
    text = svg.read_text()
    assert re.search(r"<svg\b", text) and text.rstrip().endswith("</svg>")


def test_save_rejects_unknown_suffix(tmp_path, bimodal):
    with pytest.raises(ValueError, match=r"\.jpg"):
        save_figure(histogram_figure(bimodal), tmp_path / "h.jpg")


@pytest.mark.slow
def test_inline_svg_and_base64_png(bimodal):
    figure = histogram_figure(bimodal)
    svg = figure_to_svg(figure)
    assert svg.startswith("<svg")
    assert "<?xml" not in svg and "<!DOCTYPE" not in svg
    assert base64.b64decode(figure_to_png_base64(figure)).startswith(PNG_MAGIC)


def test_scatter_figure_title_and_fit_line(bimodal):
    rng = np.random.default_rng(9)
    other = make_series("dgemm", bimodal.values * 0.1 + rng.normal(0, 20, len(bimodal)), unit="GFLOP/s")
    corr = correlate(bimodal, other)
    figure = scatter_figure(bimodal, other, corr)
    axes = figure.axes[0]
    title = axes.get_title()
    assert f"r = {corr.pearson_r:.3f}" in title and "ρ" in title and "n = 300" in title
    assert axes.get_xlabel() == "stream [MB/s]" and axes.get_ylabel() == "dgemm [GFLOP/s]"
    (fit_line,) = axes.get_lines()
    x, y = fit_line.get_data()
    assert np.allclose(y, corr.intercept + corr.slope * np.asarray(x))


ROW = re.compile(r"^\s*(?P<range>.+?) │ +(?P<count>\d+) │")


@pytest.mark.parametrize("bins", ["auto", 7, "whole"])
def test_text_histogram_one_row_per_bin_counts_sum_to_n(bins):
    rng = np.random.default_rng(3)
    values = rng.poisson(20, 150).astype(float)
    text = text_histogram(values, bins=bins)
    rows = [m for m in map(ROW.match, text.splitlines()) if m]
    assert len(rows) == len(bin_edges(values, bins)) - 1
    assert sum(int(m["count"]) for m in rows) == 150
    assert all(len(line) <= 80 for line in text.splitlines())
    assert "·" in text and "█" in text


def test_text_histogram_bar_scales_to_width():
    values = np.concatenate([np.zeros(10), np.ones(40)])
    text = text_histogram(values, bins=2, width=20)
    longest = max(line.count("█") for line in text.splitlines() if "│" in line)
    assert longest <= 20
    assert any(line.count("█") + line.count("·") >= 19 for line in text.splitlines() if "│" in line)


def test_heatmap_has_a_cell_per_pair_blank_diagonal_and_frames():
    from oddnode.report.plots import heatmap_figure

    values = np.arange(16, dtype=float).reshape(4, 4)
    np.fill_diagonal(values, np.nan)
    nodes = ["n1", "n2", "n3", "n4"]
    figure = heatmap_figure(values, nodes, "bandwidth", "MB/s", marked=[(0, 1), (2, 3)])
    axes = figure.axes[0]
    image = axes.get_images()[0]
    assert image.get_array().shape == (4, 4) and image.get_array().mask.sum() == 4
    assert [t.get_text() for t in axes.get_xticklabels()] == nodes
    assert len(axes.patches) == 2 and axes.get_title() == "bandwidth"
    assert figure.axes[1].get_ylabel() == "MB/s"  # the colour bar
    with pytest.raises(ValueError):
        heatmap_figure(values[:3], nodes, "t", "MB/s")
    many = [f"node{i:03d}" for i in range(100)]
    crowded = heatmap_figure(np.ones((100, 100)), many, "t", "us", higher_is_better=False).axes[0]
    assert len(crowded.get_xticklabels()) <= 32


def test_log_axes_write_their_ticks_as_plain_text_and_sizes_as_sizes():
    from oddnode.report.plots import fit_figure

    sizes = [1, 1024, 4096, 65536, 1048576]
    figure = fit_figure(sizes, [6 + s / 900 for s in sizes], 6.0, 1 / 900, (1, 1048576), "pingpong.sort",
                        spread=([5 + s / 1000 for s in sizes], [50 + s / 100 for s in sizes]))
    time_axes, bandwidth_axes = figure.axes
    figure.canvas.draw()
    sizes_shown = [t.get_text() for t in time_axes.get_xticklabels() if t.get_text()]
    times_shown = [t.get_text() for t in time_axes.get_yticklabels() if t.get_text()]
    assert {"1", "512", "4K", "256K"} <= set(sizes_shown), sizes_shown
    assert {"10", "100", "1000"} <= set(times_shown), times_shown
    assert not any("$" in text or "mathdefault" in text for text in sizes_shown + times_shown)
    # The band from the fastest to the slowest label, on both axes.
    assert len(time_axes.collections) == len(bandwidth_axes.collections) == 1
