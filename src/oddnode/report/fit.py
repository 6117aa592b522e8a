"""The least-squares line t = a + b·L of a stored series, for people and
as JSON (``oddnode fit``), and in the HTML report's interconnect section:
time and bandwidth against the message size with the fitted line, per
ping-pong pattern and per imported IMB, OSU or NetPIPE point-to-point run."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

# The fit itself is imported where it is used: loading the report (every
# analysis does) registers the figures without loading the interconnect.
from oddnode.readings.interconnect_series import MATRIX_RETEST, MPI, PINGPONG
from oddnode.core.model import Dataset, Series
from oddnode.report.interconnect import SIZE_FITS, InterconnectFigure, interconnect_figures
from oddnode.report.plots import figure_to_svg, fit_figure

if TYPE_CHECKING:
    from oddnode.report import documents
    from oddnode.readings.fit import LinearFit, SizedTimes

# The series the report draws a fit of: our ping-pong patterns, and the
# imported tools' point-to-point runs (a collective's time against its size
# is not one link's latency and bandwidth).
FIT_FAMILIES = (f"{PINGPONG}.", f"{MPI}.")
FIT_IMPORTED = ("imb.pingpong", "imb.pingping", "osu.latency", "osu.bw", "osu.bibw", "netpipe")
# A report draws at most this many fits: beyond it the figures are not read.
MAX_FIT_FIGURES = 12


@dataclass
class LabelFit:
    """One label's own line, when a series has several (``--each``)."""

    label: str
    fit: LinearFit | None
    error: str | None = None  # why this label has no line (too few sizes in the range)


def each_label(series: Iterable[Series], points: SizedTimes, min_size: float | None,
               max_size: float | None) -> list[LabelFit]:
    """The line of every label of the series on its own, over the same range."""
    from oddnode.readings.fit import fit_sized_times, sized_times

    series = list(series)
    fits = []
    for label in points.labels:
        try:
            own = sized_times(series, points.benchmark, points.quantity, label)
            fits.append(LabelFit(label, fit_sized_times(own, min_size, max_size)))
        except ValueError as err:
            fits.append(LabelFit(label, None, str(err)))
    return fits


def _number(value: float | None, digits: int = 4) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.{digits}g}"


def fit_text(points: SizedTimes, fit: LinearFit, each: list[LabelFit] | None = None) -> str:
    """What ``oddnode fit`` prints: where the times come from, the line in
    the NCSA notes' words, the observed-vs-fitted table and where it fails."""
    from oddnode.readings.fit import fit_table

    bandwidth = "none (the time does not grow with the size)" if fit.bandwidth_mb_s is None \
        else f"{fit.bandwidth_mb_s:.6g} MB/s"
    lines = [points.describe(), *(f"note: {note}" for note in points.notes),
             "least-squares fit: time = a + b * (message length)",
             f"  a = latency = {fit.latency_us:.6g} us",
             f"  b = inverse bandwidth = {fit.slope_us_per_byte:.6g} us/byte",
             f"  1/b = bandwidth = {bandwidth}", ""]
    text = "\n".join(lines) + "\n" + fit_table(fit)
    if each:
        width = max(len("label"), *(len(item.label) for item in each))
        rows = [f"{'label':<{width}}  {'latency us':>10}  {'MB/s':>10}  {'r^2':>8}  {'worst':>7}  fails at"]
        for item in each:
            if item.fit is None:
                rows.append(f"{item.label:<{width}}  {item.error}")
                continue
            f = item.fit
            rows.append(f"{item.label:<{width}}  {_number(f.latency_us):>10}  {_number(f.bandwidth_mb_s):>10}  "
                        f"{_number(f.r_squared, 5):>8}  {f.max_relative_error:>7.1%}  "
                        f"{', '.join(map(str, f.failing_sizes)) or '-'}")
        text += f"\neach label on its own, over the same range ({len(each)}):\n" + "\n".join(rows) + "\n"
    return text


def fit_json(points: SizedTimes, fit: LinearFit, each: list[LabelFit] | None = None) -> documents.Fit:
    """What ``oddnode fit --json`` prints."""
    document = {
        "benchmark": points.benchmark, "quantity": points.quantity, "label": points.label,
        "labels": list(points.labels), "label_kind": points.label_kind, "notes": list(points.notes),
        "points": [{"size": int(size), "time_us": float(time), "labels": int(count)}
                   for size, time, count in zip(points.sizes, points.times_us, points.counts)],
        "fit": fit.to_json(),
    }
    if each is not None:
        document["each"] = [{"label": item.label, "fit": item.fit.to_json() if item.fit else None,
                             "error": item.error} for item in each]
    return document


# --- the report -------------------------------------------------------------------


def report_benchmarks(dataset: Dataset) -> list[str]:
    """The series the report draws a fit of, in name order."""
    from oddnode.readings.fit import fittable_benchmarks

    return [name for name in fittable_benchmarks(dataset.series)
            if (name.startswith(FIT_FAMILIES) and name != MATRIX_RETEST)
            or any(name == stem or name.startswith(stem + ".") for stem in FIT_IMPORTED)]


def fit_caption(points: SizedTimes, fit: LinearFit) -> str:
    """What a fit figure says in words: the line, its r^2, where it fails."""
    from oddnode.readings.fit import MAX_RELATIVE_ERROR, sizes_text

    bandwidth = "no bandwidth" if fit.bandwidth_mb_s is None else f"bandwidth 1/b = {fit.bandwidth_mb_s:.4g} MB/s"
    low, high = fit.size_range
    caption = (f"{points.describe()}. Least-squares line time = a + b·L over {low}-{high} bytes: latency a = "
               f"{fit.latency_us:.4g} us, {bandwidth} (MB = 10^6 B), r² = {_number(fit.r_squared, 5)}. ")
    failing = fit.failing_sizes
    if not failing:
        caption += f"Every size is within {MAX_RELATIVE_ERROR:.0%} of the line."
    else:
        caption += (f"The line fails (more than {MAX_RELATIVE_ERROR:.0%} off) at "
                    f"{sizes_text(failing)} bytes")
        if fit.switch is not None:
            caption += (f"; one line up to {fit.switch.last_below} bytes and another from "
                        f"{fit.switch.first_above} bytes fit: a protocol switch (eager to rendezvous) between them")
        caption += "."
    slowest = points.slowest()
    if slowest is not None:
        label, size, behind = slowest
        caption += (f" Shaded: the fastest to the slowest of the {len(points.labels)} {points.label_kind}s at each "
                    f"size; the slowest, {label}, takes {behind:.3g} times the median's time at {size} bytes "
                    f"({1 / behind:.0%} of its bandwidth).")
    return caption


@interconnect_figures("fit", SIZE_FITS)
def fit_figures(dataset: Dataset) -> list[InterconnectFigure]:
    """Per ping-pong pattern and imported point-to-point run, time and
    bandwidth against the message size with the least-squares line."""
    from oddnode.readings.fit import fit_sized_times, sized_times

    figures = []
    for benchmark in report_benchmarks(dataset)[:MAX_FIT_FIGURES]:
        points = sized_times(dataset.series, benchmark)
        try:
            fit = fit_sized_times(points)
        except ValueError:
            continue  # fewer than two sizes with a time: nothing to draw a line through
        if not (points.sizes > 0).any():
            continue
        spread = (points.fastest_us, points.slowest_us) if len(points.labels) > 1 else None
        svg = figure_to_svg(fit_figure(points.sizes, points.times_us, fit.latency_us, fit.slope_us_per_byte,
                                       fit.size_range, f"{benchmark}: time = a + b·L", fit.failing_sizes, spread))
        figures.append(InterconnectFigure(f"Latency and bandwidth against message size: {benchmark}",
                                          fit_caption(points, fit), svg))
    return figures
