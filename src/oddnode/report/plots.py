"""Figures for reports: STAB's ``dplot`` histogram with its normal overlay and
``cplot`` scatter.  Figures are built on ``matplotlib.figure.Figure`` directly,
so nothing is registered with pyplot and nothing leaks between reports."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
from matplotlib import colors as mcolors  # noqa: E402
from matplotlib import transforms  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from scipy import stats  # noqa: E402

from oddnode.model import LabelKind, Series  # noqa: E402
from oddnode.stats.correlation import Correlation, join_by_label  # noqa: E402
from oddnode.stats.describe import describe_values  # noqa: E402
from oddnode.stats.distribution import bin_edges  # noqa: E402

FIGURE_SIZE_INCHES = (6.4, 3.6)
FIGURE_DPI = 100

# Colours for the usual roles of highlighted labels; other roles take colours
# from a fixed cycle, and a role that is already a colour is used as is.
ROLE_COLOURS = {
    "outlier": "tab:red",
    "slow": "tab:red",
    "bad": "tab:red",
    "suspect": "tab:orange",
    "warning": "tab:orange",
    "fast": "tab:green",
    "good": "tab:green",
    "reference": "tab:blue",
}
_ROLE_CYCLE = ["tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan", "tab:gray"]

_COUNT_AXIS_LABELS = {LabelKind.NODE: "nodes", LabelKind.PAIR: "pairs", LabelKind.SET: "node sets"}

_SAVE_FORMATS = {".png": "png", ".svg": "svg"}


def _new_figure() -> tuple[Figure, object]:
    figure = Figure(figsize=FIGURE_SIZE_INCHES, dpi=FIGURE_DPI, layout="constrained")
    return figure, figure.add_subplot()


def _role_colours(roles: list[str]) -> dict[str, str]:
    colours: dict[str, str] = {}
    cycle = iter(_ROLE_CYCLE * (len(roles) // len(_ROLE_CYCLE) + 1))
    for role in roles:
        if role in colours:
            continue
        if role.lower() in ROLE_COLOURS:
            colours[role] = ROLE_COLOURS[role.lower()]
        elif mcolors.is_color_like(role):
            colours[role] = role
        else:
            colours[role] = next(cycle)
    return colours


def histogram_figure(
    series: Series,
    bins: str | int = "auto",
    normal_overlay: bool = True,
    sigma_marks: bool = True,
    highlight: dict[str, str] | None = None,
) -> Figure:
    """Histogram of a series with the fitted normal, mean and ±1-3σ lines,
    highlighted labels as rug ticks and a box of summary statistics."""
    values = np.asarray(series.values, dtype=np.float64)
    if len(values) == 0:
        raise ValueError(f"{series.name} has no values to plot")
    edges = bin_edges(values, bins)
    summary = describe_values(values)
    figure, axes = _new_figure()
    axes.hist(values, bins=edges, color="tab:blue", alpha=0.75, edgecolor="white", linewidth=0.5)

    has_spread = summary.n > 1 and summary.std > 0
    if normal_overlay and has_spread:
        # The normal density scaled to counts: n × bin width × pdf.
        low = min(edges[0], summary.mean - 3.5 * summary.std)
        high = max(edges[-1], summary.mean + 3.5 * summary.std)
        xs = np.linspace(low, high, 300)
        counts = summary.n * float(edges[1] - edges[0]) * stats.norm.pdf(xs, summary.mean, summary.std)
        axes.plot(xs, counts, color="black", linewidth=1.2, label="normal fit")
    if sigma_marks and has_spread:
        # Labels sit just above the plot area: x in data, y in axes fraction.
        top = transforms.blended_transform_factory(axes.transData, axes.transAxes)
        axes.axvline(summary.mean, color="black", linewidth=1.0)
        axes.text(summary.mean, 1.01, "μ", transform=top, ha="center", va="bottom", fontsize=8)
        for k, style in ((1, "--"), (2, "-."), (3, ":")):
            for sign in (-1, 1):
                x = summary.mean + sign * k * summary.std
                axes.axvline(x, color="dimgray", linewidth=0.8, linestyle=style)
                mark = f"{'+' if sign > 0 else '−'}{k}σ"
                axes.text(x, 1.01, mark, transform=top, ha="center", va="bottom", fontsize=7)

    if highlight:
        _add_rug(axes, series, highlight)

    axes.set_title(series.name, pad=14 if sigma_marks and has_spread else 6)
    axes.set_xlabel(series.unit or "value")
    axes.set_ylabel(_COUNT_AXIS_LABELS.get(series.label_kind, "labels"))
    box = (
        f"n = {summary.n}\nmean = {summary.mean:.6g}\nmedian = {summary.median:.6g}\n"
        f"std = {summary.std:.4g}\nvariability = {summary.variability_pct:.3g}%"
    )
    frame = {"boxstyle": "round", "facecolor": "white", "alpha": 0.85, "edgecolor": "lightgray"}
    axes.text(0.99, 0.97, box, transform=axes.transAxes, ha="right", va="top", fontsize=7, bbox=frame)
    return figure


def _add_rug(axes, series: Series, highlight: dict[str, str]) -> None:
    """Tick marks on the x axis at the values of the highlighted labels,
    one colour per role; labels not in the series are ignored."""
    position = {label: k for k, label in enumerate(series.labels)}
    colours = _role_colours(list(highlight.values()))
    # x in data coordinates, y in axes fraction: the ticks sit on the axis.
    on_axis = transforms.blended_transform_factory(axes.transData, axes.transAxes)
    for role, colour in colours.items():
        xs = [series.values[position[label]] for label, r in highlight.items() if r == role and label in position]
        if xs:
            ticks = {"linestyle": "none", "marker": "|", "markersize": 14, "markeredgewidth": 2}
            axes.plot(xs, np.zeros(len(xs)), color=colour, transform=on_axis, clip_on=False, label=role, **ticks)
    if any(line.get_label() in colours for line in axes.get_lines()):
        axes.legend(loc="upper left", fontsize=7, frameon=False)


def scatter_figure(a: Series, b: Series, corr: Correlation) -> Figure:
    """Scatter of two benchmarks over their shared labels with the
    least-squares line (STAB's ``cplot``)."""
    _, x, y = join_by_label(a, b)
    figure, axes = _new_figure()
    axes.scatter(x, y, s=10, alpha=0.7, color="tab:blue", edgecolors="none")
    if len(x) and np.isfinite(corr.slope) and np.isfinite(corr.intercept):
        line_x = np.array([x.min(), x.max()])
        axes.plot(line_x, corr.intercept + corr.slope * line_x, color="tab:red", linewidth=1.2)
    axes.set_title(
        f"{a.name} vs {b.name}\nr = {corr.pearson_r:.3f}, ρ = {corr.spearman_r:.3f}, "
        f"p = {corr.pearson_p:.2g}, n = {corr.n}",
        fontsize=9,
    )
    axes.set_xlabel(f"{a.name} [{a.unit}]" if a.unit else a.name)
    axes.set_ylabel(f"{b.name} [{b.unit}]" if b.unit else b.name)
    return figure


def save_figure(fig: Figure, path: str | Path) -> None:
    """Write a figure as PNG or SVG, chosen by the file's suffix."""
    path = Path(path)
    fmt = _SAVE_FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise ValueError(f"cannot save a figure as {path.suffix or '(no suffix)'!r}: use .png or .svg")
    fig.savefig(path, format=fmt, dpi=FIGURE_DPI, metadata=_metadata(fmt))


def _metadata(fmt: str) -> dict[str, None]:
    # No creation date in the file, so reports regenerate byte-for-byte.
    return {"Date": None} if fmt == "svg" else {}


def figure_to_svg(fig: Figure) -> str:
    """The figure as an inline ``<svg>`` element (no XML prolog or doctype),
    ready to embed in HTML."""
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata=_metadata("svg"))
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def figure_to_png_base64(fig: Figure) -> str:
    """The figure as base64 PNG, for a ``data:image/png;base64,`` URL."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=FIGURE_DPI)
    return base64.b64encode(buffer.getvalue()).decode("ascii")
