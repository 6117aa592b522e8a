"""The interconnect part of a report, from the stored series alone: per pair
pattern and message size the statistics STAB's ``anal spp <pattern> bw``
printed, the slowest pairs of each pattern, sorted against shuffled, the
bisection bandwidth, and the all-pairs matrix as heatmaps.

Every part is None or empty when the store holds no such data, so that the
report leaves its section out.  Figures of later interconnect benchmarks
plug in through :func:`interconnect_figures`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from oddnode.readings.interconnect_series import BISECTION as BISECTION_BENCHMARK
from oddnode.readings.interconnect_series import BISECTION_ALONE, BISECTION_CUT, MPI, PINGPONG
from oddnode.findings.pairs import (
    MATRIX_BENCHMARK,
    MATRIX_RETEST_BENCHMARK,
    compare_sorted_shuffled,
    link_verdicts,
)
from oddnode.findings.registry import Sensitivity
from oddnode.core.model import Dataset, LabelKind, Series
from oddnode.core.nodes import split_pair

# The series of ping-pong pairs: our TCP kernel's (pingpong.sort, the
# matrix) and our MPI kernel's (mpi.sort, ...).
# The bisection series (oddnode.measure.pair.bisection stores them).
BISECTION_PAIR_BENCHMARKS = (BISECTION_CUT, BISECTION_ALONE)
# How many of the slowest pairs each pattern lists.
SLOWEST_PAIRS = 5


@dataclass(frozen=True)
class SizeRow:
    """One message size of a pattern: bandwidth and latency over its pairs."""

    size: int
    n: int
    bandwidth: tuple[float, float, float, float] | None  # min, median, mean, max (MB/s)
    latency: tuple[float, float, float, float] | None  # min, median, mean, max (us)


@dataclass(frozen=True)
class SlowPair:
    label: str
    value: float
    percent_of_median: float


@dataclass
class PatternTable:
    """A pair benchmark's statistics per message size and its slowest pairs."""

    benchmark: str
    rows: list[SizeRow]
    slowest_metric: str | None = None
    slowest_unit: str = ""
    slowest: list[SlowPair] = field(default_factory=list)
    fit_latency_median: float | None = None
    fit_bandwidth_median: float | None = None


@dataclass(frozen=True)
class Bisection:
    """The stored bisection figures of the latest bisection run (MB/s)."""

    nodes: str
    pairs: int | None
    demonstrated: float | None
    single_pair: float | None
    full: float | None
    fraction: float | None
    slowest: list[SlowPair] = field(default_factory=list)  # the cut pairs all at once


@dataclass
class Matrix:
    """The all-pairs matrix: node order and the bandwidth and latency per
    ordered pair (NaN where not measured), with the judged slow pairs."""

    nodes: list[str]
    bandwidth_metric: str
    bandwidth: np.ndarray
    bandwidth_unit: str
    latency_metric: str | None
    latency: np.ndarray | None
    latency_unit: str
    slow: dict[str, str] = field(default_factory=dict)  # pair -> verdict


@dataclass(frozen=True)
class InterconnectFigure:
    """A figure some interconnect benchmark contributes: a title, a caption
    and the figure as inline SVG."""

    title: str
    caption: str
    svg: str


@dataclass(frozen=True)
class FigureSection:
    """Where registered figures are shown: a heading of the interconnect
    section and its anchor."""

    anchor: str
    heading: str


SWITCH_BENCHMARKS = FigureSection("switch-benchmarks", "Switch benchmarks")
SIZE_FITS = FigureSection("size-fits", "Latency and bandwidth against message size")

# name -> (its section, function of a dataset giving its figures: none when
# it holds no such data).  Switchbench's daisy chain (throughput vs k),
# pairwise streaming and all-to-all (phase vs minimum bandwidth) register
# here (report.switchbench), and the ping-pongs' fitted lines (report.fit).
FIGURE_SOURCES: dict[str, tuple[FigureSection, Callable[[Dataset], list[InterconnectFigure]]]] = {}


def interconnect_figures(name: str, section: FigureSection) -> Callable[
        [Callable[[Dataset], list[InterconnectFigure]]], Callable[[Dataset], list[InterconnectFigure]]]:
    """Register a source of report figures under ``name``, shown in ``section``."""

    def register(function: Callable[[Dataset], list[InterconnectFigure]]):
        if name in FIGURE_SOURCES:
            raise ValueError(f"a source of interconnect figures named {name!r} is already registered")
        FIGURE_SOURCES[name] = (section, function)
        return function

    return register


def sized_series(dataset: Dataset, benchmark: str, quantity: str) -> dict[int, Series]:
    """The series of a benchmark named ``<quantity>.<bytes>``, by size."""
    found = {}
    for series in dataset.series:
        if series.benchmark == benchmark and series.metric.startswith(quantity + "."):
            size = series.metric[len(quantity) + 1:]
            if size.isdigit():
                found[int(size)] = series
    return found


def _finite(series: Series) -> np.ndarray:
    return series.values[np.isfinite(series.values)]


def _summary(series: Series | None) -> tuple[float, float, float, float] | None:
    if series is None:
        return None
    x = _finite(series)
    if x.size == 0:
        return None
    return float(x.min()), float(np.median(x)), float(x.mean()), float(x.max())


def slowest_pairs(series: Series, count: int = SLOWEST_PAIRS) -> list[SlowPair]:
    """The worst pairs of a series (lowest when higher is better), with their value as a percentage of the median."""
    finite = np.flatnonzero(np.isfinite(series.values))
    if finite.size == 0:
        return []
    median = float(np.median(series.values[finite]))
    order = finite[np.argsort(series.values[finite], kind="stable")]
    if not series.higher_is_better:
        order = order[::-1]
    return [SlowPair(str(series.labels[i]), float(series.values[i]),
                     float(series.values[i]) / median * 100.0 if median else float("nan"))
            for i in order[:count]]


# Pair series with views of their own rather than a pattern table.
OWN_VIEWS = (BISECTION_CUT, BISECTION_ALONE, MATRIX_RETEST_BENCHMARK)


def _pair_benchmarks(dataset: Dataset) -> list[str]:
    """Every pair benchmark measured per message size (``bandwidth.N``,
    ``latency.N``): our ping-pong patterns and a site's own (imported plot
    files, IMB, OSU), less the series that have views of their own."""
    names = {s.benchmark for s in dataset.series if s.label_kind is LabelKind.PAIR
             and s.benchmark not in OWN_VIEWS and s.metric.startswith(("bandwidth.", "latency."))
             and s.metric.partition(".")[2].isdigit()}
    return sorted(names)


def pattern_tables(dataset: Dataset) -> list[PatternTable]:
    """A table per ping-pong pattern in the store (the matrix too)."""
    tables = []
    for benchmark in _pair_benchmarks(dataset):
        bandwidth, latency = sized_series(dataset, benchmark, "bandwidth"), sized_series(dataset, benchmark, "latency")
        rows = []
        for size in sorted(set(bandwidth) | set(latency)):
            n = max(len(_finite(s)) for s in (bandwidth.get(size), latency.get(size)) if s is not None)
            rows.append(SizeRow(size, n, _summary(bandwidth.get(size)), _summary(latency.get(size))))
        table = PatternTable(benchmark, rows)
        fits = {s.metric: s for s in dataset.series if s.benchmark == benchmark and s.metric.startswith("fit.")}
        for metric, attribute in (("fit.latency", "fit_latency_median"), ("fit.bandwidth", "fit_bandwidth_median")):
            summary = _summary(fits.get(metric))
            setattr(table, attribute, summary[1] if summary else None)
        judged = bandwidth[max(bandwidth)] if bandwidth else fits.get("fit.bandwidth")
        if judged is not None:
            table.slowest_metric, table.slowest_unit = judged.metric, judged.unit
            table.slowest = slowest_pairs(judged)
        if rows or judged is not None:
            tables.append(table)
    return tables


def comparison_rows(dataset: Dataset, sensitivity: Sensitivity) -> list[dict]:
    """Sorted against each shuffled pattern: medians, ratio, p and verdict."""
    return [c.to_json() | {"oversubscribed": c.oversubscribed} for c in compare_sorted_shuffled(dataset, sensitivity)]


def bisection(dataset: Dataset) -> Bisection | None:
    """The bisection figures, or None when no bisection was stored."""
    metrics = {s.metric: s for s in dataset.series if s.benchmark == BISECTION_BENCHMARK
               and s.label_kind is LabelKind.SET}
    if not metrics:
        return None
    reference = metrics.get("demonstrated") or next(iter(metrics.values()))
    nodes = str(reference.labels[0]) if len(reference) else ""

    def value(metric: str) -> float | None:
        series = metrics.get(metric)
        if series is None:
            return None
        hit = np.flatnonzero(series.labels == nodes)
        return float(series.values[hit[0]]) if hit.size and np.isfinite(series.values[hit[0]]) else None

    cut = next((s for s in dataset.series if s.benchmark == BISECTION_PAIR_BENCHMARKS[0]), None)
    full, single = value("full"), value("single_pair")
    pairs = int(round(full / single)) if full is not None and single else (len(cut) if cut is not None else None)
    return Bisection(nodes, pairs, value("demonstrated"), single, full, value("fraction"),
                     slowest_pairs(cut) if cut is not None else [])


def matrix(dataset: Dataset, sensitivity: Sensitivity) -> Matrix | None:
    """The all-pairs matrix at its largest message size (bandwidth) and its
    smallest (latency), or None when no matrix was stored."""
    bandwidth = sized_series(dataset, MATRIX_BENCHMARK, "bandwidth")
    if not bandwidth:
        return None
    latency = sized_series(dataset, MATRIX_BENCHMARK, "latency")
    by_bandwidth = bandwidth[max(bandwidth)]
    by_latency = latency[min(latency)] if latency else None
    known = {node for s in dataset.series if s.label_kind is LabelKind.NODE for node in s.labels.tolist()}
    known |= set(dataset.topology)
    pairs = {label: split_pair(label, known or None) for s in (by_bandwidth, by_latency) if s is not None
             for label in s.labels.tolist()}
    nodes = sorted({node for pair in pairs.values() if pair is not None for node in pair})
    where = {node: i for i, node in enumerate(nodes)}

    def grid(series: Series) -> np.ndarray:
        values = np.full((len(nodes), len(nodes)), np.nan)
        for label, value in zip(series.labels.tolist(), series.values.tolist()):
            pair = pairs.get(label)
            if pair is not None:
                values[where[pair[0]], where[pair[1]]] = value
        return values

    slow = {v.label: v.verdict for v in link_verdicts(dataset, sensitivity)}
    return Matrix(nodes, by_bandwidth.metric, grid(by_bandwidth), by_bandwidth.unit,
                  by_latency.metric if by_latency is not None else None,
                  grid(by_latency) if by_latency is not None else None,
                  by_latency.unit if by_latency is not None else "", slow)


def marked_cells(m: Matrix, verdicts: tuple[str, ...] | None = None) -> list[tuple[int, int]]:
    """The heatmap cells of the slow pairs (of the given verdicts, all by default)."""
    where = {node: i for i, node in enumerate(m.nodes)}
    cells = []
    for label, verdict in m.slow.items():
        pair = split_pair(label, set(m.nodes))
        if pair is not None and (verdicts is None or verdict in verdicts):
            cells.append((where[pair[0]], where[pair[1]]))
    return cells


def figure_sources(dataset: Dataset) -> list[tuple[FigureSection, list[InterconnectFigure]]]:
    """The figures every registered source gives for this dataset, by
    section in the order the sections were first registered; a section
    without figures is left out."""
    sections: dict[FigureSection, list[InterconnectFigure]] = {}
    for section, source in FIGURE_SOURCES.values():
        sections.setdefault(section, []).extend(source(dataset))
    return [(section, figures) for section, figures in sections.items() if figures]
