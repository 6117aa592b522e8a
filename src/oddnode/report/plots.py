"""Figures for reports: STAB's ``dplot`` histogram with its normal overlay,
``cplot`` scatter, the heatmap of an all-pairs matrix, Switchbench's
three plots (chain scaling, streaming pairs, all-to-all phases), and the
set runs' two (SCAB's scaling curves, sorted against shuffled spread).  Figures
are built on ``matplotlib.figure.Figure`` directly, so nothing is registered
with pyplot and nothing leaks between reports."""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
# Labels, titles and legends hold benchmark, node and file names: text, never
# mathtext (a name with two dollar signs, as a$\x$, would end the figure with
# a ParseFatalException).
matplotlib.rcParams["text.parse_math"] = False
# SVG text as text (escaped), not as a path per glyph: a report's figures
# draw in 40% less time, weigh half as much and their names can be searched.
matplotlib.rcParams["svg.fonttype"] = "none"

import matplotlib.lines  # noqa: E402
import matplotlib.patches  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib import colors as mcolors  # noqa: E402
from matplotlib import ticker  # noqa: E402
from matplotlib import transforms  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from oddnode.core.atomic import write_atomically  # noqa: E402
from oddnode.core.model import LabelKind, Series  # noqa: E402
from oddnode.stats.correlation import Correlation, join_by_label  # noqa: E402
from oddnode.stats.describe import describe_values  # noqa: E402
from oddnode.stats.distribution import bin_edges  # noqa: E402
from oddnode.stats.tails import normal_pdf  # noqa: E402

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
        counts = summary.n * float(edges[1] - edges[0]) * normal_pdf(xs, summary.mean, summary.std)
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


# Beyond this many nodes a heatmap labels every k-th node only, so that its
# tick labels stay legible at the figure's size.
HEATMAP_LABELLED_NODES = 32


def heatmap_figure(values: np.ndarray, nodes: list[str], title: str, unit: str, higher_is_better: bool = True,
                   marked: list[tuple[int, int]] | None = None) -> Figure:
    """A square matrix of pair values, row = the pair's first node (client),
    column = its second; NaN cells (the diagonal, pairs not measured) blank.
    The colour map runs from red (worse) to green (better) whatever the
    direction; ``marked`` cells (row, column) get a black frame."""
    matrix = np.asarray(values, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape != (len(nodes), len(nodes)):
        raise ValueError(f"a heatmap needs a {len(nodes)}x{len(nodes)} matrix, got shape {matrix.shape}")
    side = max(FIGURE_SIZE_INCHES[1], min(9.0, 2.5 + 0.18 * len(nodes)))
    figure = Figure(figsize=(side + 1.2, side), dpi=FIGURE_DPI, layout="constrained")
    axes = figure.add_subplot()
    colours = matplotlib.colormaps["RdYlGn" if higher_is_better else "RdYlGn_r"].with_extremes(bad="white")
    image = axes.imshow(np.ma.masked_invalid(matrix), cmap=colours, interpolation="nearest")
    figure.colorbar(image, ax=axes, label=unit or "value", shrink=0.85)
    step = max(1, -(-len(nodes) // HEATMAP_LABELLED_NODES))
    ticks = np.arange(0, len(nodes), step)
    axes.set_xticks(ticks, [nodes[i] for i in ticks], rotation=90, fontsize=7)
    axes.set_yticks(ticks, [nodes[i] for i in ticks], fontsize=7)
    axes.set_xlabel("second node (server)")
    axes.set_ylabel("first node (client)")
    for row, column in marked or ():
        axes.add_patch(matplotlib.patches.Rectangle((column - 0.5, row - 0.5), 1, 1, fill=False,
                                                    edgecolor="black", linewidth=1.5))
    axes.set_title(title, fontsize=9)
    return figure


def save_figure(fig: Figure, path: str | Path) -> None:
    """Write a figure as PNG or SVG, chosen by the file's suffix."""
    path = Path(path)
    fmt = _SAVE_FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise ValueError(f"cannot save a figure as {path.suffix or '(no suffix)'!r}: use .png or .svg")
    buffer = io.BytesIO()
    fig.savefig(buffer, format=fmt, dpi=FIGURE_DPI, metadata=_metadata(fmt))
    write_atomically(path, buffer.getvalue())


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


def chain_figure(aggregate: dict[int, float], saturation: int | None, title: str, unit: str = "MB/s") -> Figure:
    """Switchbench's daisy chain: aggregate throughput against the chain's
    length k, beside perfect scaling (one shortest-chain hop per node added),
    the length where the switch stopped scaling marked."""
    if not aggregate:
        raise ValueError("a chain figure needs at least one chain length")
    lengths = sorted(aggregate)
    values = [aggregate[k] for k in lengths]
    figure, axes = _new_figure()
    hop = values[0] / max(lengths[0] - 1, 1)
    axes.plot(lengths, [hop * (k - 1) for k in lengths], color="dimgray", linestyle="--", linewidth=1.0,
              label="scaling by one hop per node")
    axes.plot(lengths, values, color="tab:blue", marker="o", linewidth=1.4, label="aggregate")
    if saturation is not None and saturation in aggregate:
        axes.axvline(saturation, color="tab:red", linewidth=1.0, linestyle=":")
        axes.plot([saturation], [aggregate[saturation]], linestyle="none", marker="o", markersize=10,
                  markerfacecolor="none", markeredgecolor="tab:red", markeredgewidth=2,
                  label=f"stops scaling at k = {saturation}")
    axes.xaxis.set_major_locator(ticker.MaxNLocator(integer=True))
    axes.set_xlabel("chain length k (nodes; k-1 hops at once)")
    axes.set_ylabel(f"aggregate throughput [{unit}]")
    axes.set_ylim(bottom=0)
    axes.legend(loc="upper left", fontsize=7, frameon=False)
    axes.set_title(title, fontsize=9)
    return figure


# Beyond this many pairs a streaming figure names only its slow pairs (and
# the slowest few) on the axis, so that the names stay legible.
STREAM_LABELLED_PAIRS = 40


def stream_pairs_figure(labels: list[str], client_to_server: np.ndarray, server_to_client: np.ndarray,
                        title: str, slow: set[str] | None = None, named: int = 5, unit: str = "MB/s") -> Figure:
    """Switchbench's pairwise streaming: each pair's two directions stacked,
    pairs sorted slowest first; ``slow`` pairs in red."""
    forth = np.asarray(client_to_server, dtype=np.float64)
    back = np.asarray(server_to_client, dtype=np.float64)
    if not (len(labels) == len(forth) == len(back)) or not labels:
        raise ValueError("a streaming figure needs the same number (at least one) of labels and rates each way")
    slow = slow or set()
    total = np.nan_to_num(forth) + np.nan_to_num(back)
    order = np.argsort(total, kind="stable")
    names = [labels[i] for i in order]
    width = max(FIGURE_SIZE_INCHES[0], min(14.0, 2.0 + 0.22 * len(labels)))
    figure = Figure(figsize=(width, FIGURE_SIZE_INCHES[1] + 0.8), dpi=FIGURE_DPI, layout="constrained")
    axes = figure.add_subplot()
    x = np.arange(len(labels))
    edge = ["tab:red" if name in slow else "none" for name in names]
    axes.bar(x, np.nan_to_num(forth[order]), color=["tab:red" if n in slow else "tab:blue" for n in names],
             edgecolor=edge)
    axes.bar(x, np.nan_to_num(back[order]), bottom=np.nan_to_num(forth[order]),
             color=["salmon" if n in slow else "lightsteelblue" for n in names], edgecolor=edge)
    median = float(np.median(total))
    median_line = axes.axhline(median, color="dimgray", linewidth=0.8, linestyle="--")
    handles = [matplotlib.patches.Patch(color="tab:blue", label="client to server"),
               matplotlib.patches.Patch(color="lightsteelblue", label="server to client"),
               matplotlib.lines.Line2D([], [], color=median_line.get_color(), linewidth=0.8, linestyle="--",
                                       label=f"median pair {median:.4g} {unit}")]
    if slow & set(names):
        handles.append(matplotlib.patches.Patch(color="tab:red", label="slow pair"))
    if len(labels) <= STREAM_LABELLED_PAIRS:
        ticks = list(x)
    else:
        ticks = sorted({i for i, name in enumerate(names) if name in slow} | set(range(min(named, len(names)))))
    axes.set_xticks(ticks, [names[i] for i in ticks], rotation=90, fontsize=7)
    for tick, i in zip(axes.get_xticklabels(), ticks):
        if names[i] in slow:
            tick.set_color("tab:red")
    axes.set_xlabel("pair (client-server), slowest first")
    axes.set_ylabel(f"throughput, both ways [{unit}]")
    # Headroom above the fastest pair for the legend.
    axes.set_ylim(0, 1.3 * max(float(total.max()), median, 1e-9))
    axes.legend(handles=handles, loc="upper left", fontsize=7, frameon=False, ncols=len(handles))
    axes.set_title(title, fontsize=9)
    return figure


def phase_figure(curves: dict[str, dict[int, float]], title: str, unit: str = "MB/s") -> Figure:
    """Switchbench's all-to-all: per phase the lowest bandwidth over the
    nodes, a line per node set; the worst phase of each marked."""
    if not any(curves.values()):
        raise ValueError("a phase figure needs at least one phase")
    figure, axes = _new_figure()
    for name, by_phase in curves.items():
        if not by_phase:
            continue
        phases = sorted(by_phase)
        line, = axes.plot(phases, [by_phase[p] for p in phases], marker="o", markersize=4, linewidth=1.2,
                          label=name)
        worst = min(phases, key=lambda p: by_phase[p])
        if by_phase[worst] < max(by_phase.values()):  # a dip, not a flat line
            axes.plot([worst], [by_phase[worst]], linestyle="none", marker="v", markersize=9, color="tab:red")
            axes.annotate(f"phase {worst}", (worst, by_phase[worst]), textcoords="offset points", xytext=(6, -4),
                          fontsize=7, color="tab:red")
    axes.xaxis.set_major_locator(ticker.MaxNLocator(integer=True))
    axes.set_xlabel("phase i (each node sends to node + i, receives from node - i)")
    axes.set_ylabel(f"minimum bandwidth [{unit}]")
    # Headroom above the best phase for the legend.
    axes.set_ylim(0, 1.25 * max(max(c.values()) for c in curves.values() if c))
    axes.legend(loc="upper left", fontsize=7, frameon=False, ncols=min(len(curves), 3))
    axes.set_title(title, fontsize=9)
    return figure


# The two orderings of set runs, in the same colours in every figure.
ORDERING_COLOURS = {"sorted": "tab:blue", "shuffled": "tab:orange"}
# Beyond this many runs an ordering's points are a fixed sample (its lowest
# and highest always among them): the box still summarizes every run, and
# an SVG of tens of thousands of dots is slow to open.
MAX_SPREAD_POINTS = 2000


def _ordering_colour(name: str, index: int) -> str:
    return ORDERING_COLOURS.get(name, _ROLE_CYCLE[index % len(_ROLE_CYCLE)])


def scaling_figure(curves: Mapping[str, Sequence[tuple[int, float, float, float]]], title: str, metric: str,
                   unit: str) -> Figure:
    """SCAB's scaling curves: one metric against the set's node count, a
    line of medians per ordering (sorted, shuffled) over the band from its
    lowest to its highest repetition; node counts on a log2 axis.  Each
    curve is (nodes, median, min, max) points."""
    order = sorted(curves, key=lambda name: list(ORDERING_COLOURS).index(name) if name in ORDERING_COLOURS
                   else len(ORDERING_COLOURS))
    drawn = {name: sorted(curves[name]) for name in order if curves[name]}
    if not drawn:
        raise ValueError("a scaling figure needs at least one node count")
    figure, axes = _new_figure()
    counts: set[int] = set()
    for index, (name, points) in enumerate(drawn.items()):
        nodes, medians, lows, highs = (list(column) for column in zip(*points))
        colour = _ordering_colour(name, index)
        axes.fill_between(nodes, lows, highs, color=colour, alpha=0.2, linewidth=0)
        axes.plot(nodes, medians, color=colour, marker="o", markersize=4, linewidth=1.4,
                  label=f"{name}: median, min-max band")
        counts.update(nodes)
    axes.set_xscale("log", base=2)
    ticks = sorted(counts)
    axes.xaxis.set_major_locator(ticker.FixedLocator(ticks))
    axes.xaxis.set_major_formatter(ticker.FixedFormatter([str(count) for count in ticks]))
    axes.xaxis.set_minor_locator(ticker.NullLocator())
    if len(ticks) == 1:  # one count: a little room either side
        axes.set_xlim(ticks[0] / 1.5, ticks[0] * 1.5)
    axes.set_xlabel("nodes in the set (log2 scale)")
    axes.set_ylabel(f"{metric} [{unit}]" if unit else metric)
    axes.set_ylim(bottom=0)
    axes.legend(loc="best", fontsize=7, frameon=False)
    axes.set_title(title, fontsize=9)
    return figure


def ordering_spread_figure(values: Mapping[str, np.ndarray], title: str, metric: str, unit: str) -> Figure:
    """Sorted against shuffled sets: every run of one metric (every
    repetition of every set) per ordering, as a box of its quartiles and its
    points beside it, the runs and %variability under each."""
    # Sorted first, then shuffled, then any other, whatever order they come in.
    order = sorted(values, key=lambda name: list(ORDERING_COLOURS).index(name) if name in ORDERING_COLOURS
                   else len(ORDERING_COLOURS))
    drawn = {name: np.asarray(values[name], dtype=np.float64) for name in order}
    drawn = {name: v[np.isfinite(v)] for name, v in drawn.items()}
    drawn = {name: v for name, v in drawn.items() if v.size}
    if not drawn:
        raise ValueError("a spread figure needs at least one run")
    figure, axes = _new_figure()
    positions = np.arange(1, len(drawn) + 1)
    axes.boxplot(list(drawn.values()), positions=positions, widths=0.5, showfliers=False,
                 medianprops={"color": "black"})
    rng = np.random.default_rng(0)  # a fixed jitter: the same figure from the same runs
    labels = []
    for index, (position, (name, v)) in enumerate(zip(positions, drawn.items())):
        points = v
        if v.size > MAX_SPREAD_POINTS:
            keep = rng.choice(v.size, MAX_SPREAD_POINTS - 2, replace=False)
            points = np.concatenate([v[keep], [v.min(), v.max()]])
        # The points in a strip right of the box (which spans ±0.25).
        beside = 0.33 + rng.uniform(-0.06, 0.06, points.size)
        axes.scatter(position + beside, points, s=7, alpha=0.55, color=_ordering_colour(name, index),
                     edgecolors="none")
        summary = describe_values(v)
        sample = f", {MAX_SPREAD_POINTS} drawn" if v.size > MAX_SPREAD_POINTS else ""
        labels.append(f"{name}\n{summary.n} runs{sample}, %var {summary.variability_pct:.3g}")
    axes.set_xticks(positions, labels, fontsize=8)
    axes.set_xlim(0.5, len(drawn) + 0.9)
    axes.set_ylabel(f"{metric} [{unit}]" if unit else metric)
    axes.set_title(title, fontsize=9)
    return figure


def log_scale(axis, base: float = 10) -> None:
    """Put a log scale on `axis` (axes.xaxis or .yaxis) with plain tick
    labels (1024, 1e+06): matplotlib's default writes them as mathtext,
    which the figures do not parse (names are text), so they would show as
    $\\mathdefault{10^{4}}$."""
    if axis is axis.axes.xaxis:
        axis.axes.set_xscale("log", base=base)
    else:
        axis.axes.set_yscale("log", base=base)
    axis.set_major_formatter(ticker.FuncFormatter(lambda value, _: _power_text(value, base)))
    axis.set_minor_formatter(ticker.NullFormatter())


def _power_text(value: float, base: float) -> str:
    """A log axis' tick: powers of two as sizes are written (4K, 2M),
    others as %g (0.1, 1000, 1e+06)."""
    if base == 2 and value >= 1024:
        for exponent, suffix in ((30, "G"), (20, "M"), (10, "K")):
            if value % 2 ** exponent == 0:
                return f"{value / 2 ** exponent:g}{suffix}"
    return f"{value:g}"


def fit_figure(sizes: Sequence[int], times_us: Sequence[float], latency_us: float, slope_us_per_byte: float,
               size_range: tuple[int, int], title: str, failing: Sequence[int] = (),
               spread: tuple[Sequence[float], Sequence[float]] | None = None) -> Figure:
    """The least-squares line t = a + b·L beside the observed one-way times:
    time and bandwidth (L / t) against the message size, both log-log; the
    line solid over the fitted range, dotted outside it; sizes more than the
    fit's tolerance off the line (``failing``) in red; with ``spread`` (the
    fastest and the slowest label's time at each size, when the times are
    medians over labels) the band between them shaded, so that a pair at
    half the median's bandwidth shows.  Size 0 has no place on a log axis
    and is left out."""
    s = np.asarray(sizes, dtype=float)
    t = np.asarray(times_us, dtype=float)
    shown = s > 0
    if shown.sum() < 1:
        raise ValueError("a fit figure needs a message size above 0 bytes")
    s, t = s[shown], t[shown]
    band = None if spread is None else tuple(np.asarray(edge, dtype=float)[shown] for edge in spread)
    figure = Figure(figsize=(FIGURE_SIZE_INCHES[0] * 1.5, FIGURE_SIZE_INCHES[1]), dpi=FIGURE_DPI, layout="constrained")
    time_axes, bandwidth_axes = figure.subplots(1, 2)
    grid = np.geomspace(s.min(), s.max(), 200)
    fitted = latency_us + slope_us_per_byte * grid
    low, high = size_range
    positive = fitted > 0  # a negative latency leaves no time to draw at the smallest sizes
    bad = np.isin(s, np.asarray(failing, dtype=float))
    for axes, observed, line, label, edges in (
            (time_axes, t, fitted, "one-way time [us]", band),
            (bandwidth_axes, s / t, grid / np.where(positive, fitted, np.nan), "bandwidth = bytes / time [MB/s]",
             None if band is None else (s / band[1], s / band[0]))):
        if edges is not None:
            axes.fill_between(s, edges[0], edges[1], color="tab:gray", alpha=0.3, linewidth=0,
                              label="fastest to slowest")
        inside = positive & (grid >= max(low, 1)) & (grid <= high)
        axes.plot(grid[inside], line[inside], color="tab:blue", linewidth=1.4, label="a + b·L")
        axes.plot(np.where(positive & ~inside, grid, np.nan), np.where(positive & ~inside, line, np.nan),
                  color="tab:blue", linewidth=1.0, linestyle=":", label="outside the fitted range")
        axes.plot(s[~bad], observed[~bad], linestyle="none", marker="o", markersize=4, color="black",
                  label="observed")
        if bad.any():
            axes.plot(s[bad], observed[bad], linestyle="none", marker="o", markersize=5, color="tab:red",
                      label="off the line")
        log_scale(axes.xaxis, 2)
        log_scale(axes.yaxis)
        axes.set_xlabel("message size [bytes]")
        axes.set_ylabel(label)
    time_axes.legend(loc="upper left", fontsize=7, frameon=False)
    figure.suptitle(title, fontsize=9)
    return figure
