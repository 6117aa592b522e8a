"""Tables and findings fitted to the terminal they are printed in: at any
width every cell is whole (no cut cell, no "…"), and written to a file
nothing is wrapped."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import numpy as np
import pytest
from rich.console import Console

from oddnode.judge.analysis import analyze
from oddnode.core.model import Dataset, Direction, LabelKind, Series
from oddnode.report.terminal import LEFT_OUT_FIRST, STATS_COLUMNS, print_analysis, print_stats, stats_table
from oddnode.stats.describe import describe


def series(benchmark: str, metric: str, kind: LabelKind, values, unit: str = "MB/s") -> Series:
    labels = [f"node{i:02d}" if kind is LabelKind.NODE else f"node{i:02d}-node{i + 1:02d}"
              for i in range(1, len(values) + 1)]
    return Series(benchmark=benchmark, metric=metric, unit=unit, direction=Direction.HIGHER, label_kind=kind,
                  labels=np.asarray(labels, dtype=object), values=np.asarray(values, dtype=np.float64),
                  repetitions=np.full(len(values), 3))


def demo_like_dataset() -> Dataset:
    """The names and magnitudes of the demo's check: long pattern metrics,
    small and large numbers, one node far below the others."""
    rng = np.random.default_rng(4)
    return Dataset(series=[
        series("pingpong.shuffle", "bandwidth.262144", LabelKind.PAIR, rng.normal(11.2, 0.3, 10)),
        series("pingpong.shuffle", "latency.1048576", LabelKind.PAIR, rng.normal(93512.4, 900.0, 10), "us"),
        series("compute.hpcc_dgemm", "performance", LabelKind.NODE, rng.normal(0.001234, 0.00001, 8), "GFLOP/s"),
        series("memory.triad", "bandwidth", LabelKind.NODE, np.r_[rng.normal(1873.0, 20.0, 7), 502.5]),
        series("bisection", "demonstrated", LabelKind.SET, [36.92]),
    ])


def rendered(width: int, print_with) -> str:
    out = io.StringIO()
    console = Console(file=out, width=width, color_system=None, legacy_windows=False)
    print_with(console)
    return out.getvalue()


def cells(dataset: Dataset) -> list[dict[str, str]]:
    from oddnode.report.terminal import _stats_cells

    return [_stats_cells(s, describe(s)) for s in dataset.series]


@pytest.mark.parametrize("width", [60, 80, 100, 120, 200])
def test_every_cell_of_the_statistics_table_is_whole_at_any_width(width):
    dataset = demo_like_dataset()
    statistics = [(s, describe(s)) for s in dataset.series]
    text = rendered(width, lambda console: print_stats(console, statistics))
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= width
    table = stats_table(statistics, width)
    shown = [column.header for column in table.columns]
    for s, row in zip(dataset.series, cells(dataset)):
        # Whole, or the metric under its benchmark's line where the names are too long.
        assert row["benchmark"] in text or (f"\n│ {s.benchmark} " in text and f"│   {s.metric} " in text)
        for column in shown[1:]:
            assert row[column] in text, (column, row[column])
    left_out = [c for c in STATS_COLUMNS if c not in shown]
    assert left_out == [c for c in STATS_COLUMNS if c in LEFT_OUT_FIRST[:len(left_out)]]
    if width >= 200:
        assert left_out == [] and "left out" not in text
    else:
        assert left_out and f"left out to fit {width} columns" in " ".join(text.split())


def test_wide_shows_every_column_however_narrow_the_console():
    dataset = demo_like_dataset()
    statistics = [(s, describe(s)) for s in dataset.series]
    text = rendered(60, lambda console: print_stats(console, statistics, wide=True))
    assert "…" not in text and "left out" not in text
    assert all(column in text for column in STATS_COLUMNS)
    assert max(len(line) for line in text.splitlines()) > 60


def test_the_verdict_and_the_problems_come_before_the_statistics():
    text = rendered(80, lambda console: print_analysis(console, analyze(demo_like_dataset())))
    lines = text.splitlines()
    assert lines[0].startswith("NOT READY")
    assert text.index("Findings (") < text.index("Benchmark statistics")
    assert "node08" in text.split("Benchmark statistics")[0]  # the slow memory node, named before the table
    assert lines[-1].startswith("NOT READY")


@pytest.mark.slow
def test_output_to_a_file_is_not_wrapped(tmp_path):
    """A long finding stays on one line when stdout is not a terminal, so that
    grep finds it whole; COLUMNS still sets a width when given."""
    results = tmp_path / "results"
    results.mkdir()
    names = [f"a-very-long-node-name-of-a-site-{i:03d}" for i in range(1, 13)]
    values = [1000.0 + i for i in range(12)]
    values[4] = 100.0
    (results / "plot.memory_triad_bandwidth_of_every_node").write_text(
        "".join(f"{v} {n}\n" for v, n in zip(values, names)))
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    run = subprocess.run([sys.executable, "-m", "oddnode", "analyze", str(results)], capture_output=True, text=True,
                         env=env, cwd=tmp_path)
    (line,) = [line for line in run.stdout.splitlines() if "is an outlier" in line]
    assert names[4] in line and "median" in line and line.rstrip().endswith("σ")
