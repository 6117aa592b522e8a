"""The HTML report says each thing once and draws only what can mean something."""

from __future__ import annotations

import numpy as np

import pytest

from oddnode.judge.analysis import analyze
from oddnode.core.model import Dataset, LabelKind, Severity
from oddnode.report.html import render_report
from oddnode.report.summaries import MIN_CORRELATION_LABELS
from support.series import make_series, node_names


def correlated(n: int) -> Dataset:
    """Two benchmarks over n pairs, the second a multiple of the first: |r| = 1."""
    nodes = node_names(2 * n)
    pairs = [f"{a}-{b}" for a, b in zip(nodes[::2], nodes[1::2])]
    values = np.linspace(100.0, 200.0, n)
    return Dataset(series=[make_series("bisection.cut", pairs, values, kind=LabelKind.PAIR),
                           make_series("bisection.alone", pairs, 2.0 * values, kind=LabelKind.PAIR)])


@pytest.mark.slow
def test_a_correlation_over_a_handful_of_labels_is_neither_listed_nor_drawn():
    few = render_report(analyze(correlated(4)))
    section = few.split('id="correlations"')[1]
    assert "bisection.alone" not in section and "<svg" not in section.split('id="failures"')[0]
    many = render_report(analyze(correlated(MIN_CORRELATION_LABELS)))
    section = many.split('id="correlations"')[1].split('id="failures"')[0]
    assert "bisection.alone" in section and "<svg" in section



@pytest.mark.slow
def test_the_terminal_and_the_report_give_the_same_counts():
    """Findings by severity and strong correlations, counted alike: a
    report that says 12 findings or no correlation where the terminal says
    11 and lists some is read as a different verdict."""
    import io
    import re

    from rich.console import Console

    from oddnode.report.summaries import strong_correlations
    from oddnode.report.terminal import print_analysis

    rng = np.random.default_rng(7)
    nodes = [f"gpu{i:03d}" for i in range(1, 61)]
    base = rng.normal(9000.0, 30.0, len(nodes))
    base[5] = 4000.0  # an outlier: a warning
    skewed = rng.lognormal(0.0, 1.0, len(nodes)) + 100.0  # a long tail: a note
    analysis = analyze(Dataset(series=[make_series("stream.triad", nodes, base),
                                       make_series("stream.copy", nodes, 0.9 * base + rng.normal(0, 5, len(nodes))),
                                       make_series("disk.read", nodes, skewed)]))
    serious = sum(1 for f in analysis.findings if f.severity.rank >= Severity.WARNING.rank)
    assert serious and len(analysis.findings) > serious and strong_correlations(analysis)
    out = io.StringIO()
    print_analysis(Console(file=out, width=200), analysis)
    terminal = out.getvalue()
    html = render_report(analysis)
    heading = re.search(r"Findings \(([^;)]*)", terminal).group(1)
    assert heading.startswith(f"{serious} of warning severity or above, ") and f"Findings ({heading}" in html
    count = len(strong_correlations(analysis))
    assert f"{count} strong and significant correlations" in terminal
    assert f"Correlations ({count} strong and significant" in html


@pytest.mark.slow
def test_the_title_names_the_cluster_and_where_the_data_came_from():
    nodes = [f"cn-a{i:02d}" for i in range(1, 9)]
    analysis = analyze(Dataset(series=[make_series("stream.triad", nodes, np.linspace(9000, 9010, 8))]))
    html = render_report(analysis, source="/srv/results/<run 7>.duckdb")
    assert "<title>oddnode report: cn-a[01-08]: READY for production</title>" in html
    assert '<p id="source">Data: /srv/results/&lt;run 7&gt;.duckdb</p>' in html  # a path is text, not markup
    scattered = [f"{prefix}{i}" for prefix in ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf")
                 for i in (1, 3, 5)]
    many = analyze(Dataset(series=[make_series("stream.triad", scattered, np.linspace(9000, 9010, 21))]))
    assert "<h1>oddnode report: 21 nodes</h1>" in render_report(many)


@pytest.mark.slow
def test_healthy_histograms_are_folded_away_below_those_a_finding_names():
    nodes = [f"gpu{i:03d}" for i in range(1, 41)]
    rng = np.random.default_rng(3)
    slow = rng.normal(9000.0, 20.0, len(nodes))
    slow[7] = 4000.0
    analysis = analyze(Dataset(series=[make_series("stream.triad", nodes, slow),
                                       make_series("dgemm", nodes, rng.normal(50.0, 0.1, len(nodes)))]))
    assert {f.subject for f in analysis.findings if f.severity is Severity.WARNING} == {"stream.triad"}
    section = render_report(analysis).split('id="distributions"')[1].split("</details>")[0]
    named, folded = section.split("<details>")
    assert named.count("<svg") == 1 and folded.count("<svg") == 1
    assert "Histograms of the 1 benchmarks no finding names" in folded


def test_the_report_shows_three_significant_digits_where_the_terminal_shows_six():
    from oddnode.report.terminal import number, report_number

    nodes = [f"cn-a{i:02d}" for i in range(1, 9)]
    analysis = analyze(Dataset(series=[make_series("stream.triad", nodes, np.linspace(18431.7, 18433.9, 8))]))
    statistics = render_report(analysis).split('id="statistics"')[1].split("</table>")[0]
    assert '<td class="num">18400</td>' in statistics and "18432.8" not in statistics
    assert number(18432.8) == "18432.8"
    assert [report_number(v) for v in (18432.8, 0.0012345, 1.5e-7, 2.0, None, float("nan"))] == [
        "18400", "0.00123", "1.5e-07", "2.00", "—", "—"]
