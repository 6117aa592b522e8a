"""A histogram for the terminal, like STAB's ``dplot`` in text mode: one row
per bin with its range, its count, a bar, and a dot where the fitted normal
expects the bar to end."""

from __future__ import annotations

import math

import numpy as np

from oddnode.stats.distribution import bin_edges
from oddnode.stats.tails import normal_cdf

BAR = "█"
EXPECTED = "·"

# Decimals beyond the bin width's leading digit that a bin range keeps, and the
# most any range shows; wider or tinier numbers switch to 4 significant digits.
EXTRA_DECIMALS = 1
MAX_DECIMALS = 6
MAX_FIXED_MAGNITUDE = 1e9


def _range_formatter(edges: np.ndarray, whole: bool):
    """A function printing one edge, precise enough to tell bins apart."""
    if whole:
        return lambda x: f"{x:.0f}"
    width = float(edges[1] - edges[0])
    largest = float(np.max(np.abs(edges)))
    if largest >= MAX_FIXED_MAGNITUDE or width < 10.0**-MAX_DECIMALS:
        return lambda x: f"{x:.4g}"
    decimals = min(MAX_DECIMALS, max(0, -math.floor(math.log10(width)) + EXTRA_DECIMALS))
    return lambda x: f"{x:.{decimals}f}"


def text_histogram(values, bins: str | int = "auto", width: int = 50) -> str:
    """One row per bin: ``low – high │ count │ bar``, the bar scaled so the
    longest bar or expected count fills ``width`` columns, ``·`` marking the
    normal fit's expected count; a last line explains the marks."""
    array = np.asarray(values, dtype=np.float64).ravel()
    if width < 1:
        raise ValueError(f"width must be at least 1 column, got {width}")
    edges = bin_edges(array, bins)
    counts, _ = np.histogram(array, edges)
    n = len(array)
    mean = float(array.mean())
    std = float(array.std(ddof=1)) if n > 1 else 0.0
    if std > 0:
        # Expected count in each bin's own range under the fitted normal.
        expected = n * np.diff(normal_cdf(edges, mean, std))
    else:
        expected = None

    scale_top = max(float(counts.max()), float(expected.max()) if expected is not None else 0.0, 1.0)
    whole = bins == "whole"
    show = _range_formatter(edges, whole)
    if whole:
        ranges = [show((low + high) / 2) for low, high in zip(edges[:-1], edges[1:])]
    else:
        ranges = [f"{show(low)} – {show(high)}" for low, high in zip(edges[:-1], edges[1:])]
    range_width = max(len(r) for r in ranges)
    count_width = max(len(str(int(c))) for c in counts)

    rows = []
    for k, (label, count) in enumerate(zip(ranges, counts)):
        bar = list(BAR * round(count / scale_top * width))
        if expected is not None:
            # Column of the expected count, 0 .. width-1, drawn over or after the bar.
            column = min(width - 1, max(0, round(expected[k] / scale_top * width) - 1))
            bar.extend(" " * (column + 1 - len(bar)))
            bar[column] = EXPECTED
        rows.append(f"{label:>{range_width}} │ {int(count):>{count_width}} │ {''.join(bar).rstrip()}")
    legend = f"{BAR} count of {n}"
    if expected is not None:
        shown_mean = f"{mean:.4g}" if whole else show(mean)
        legend += f"   {EXPECTED} normal fit (mean {shown_mean}, std {std:.4g})"
    rows.append(legend)
    return "\n".join(rows)
