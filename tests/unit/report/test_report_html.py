"""The HTML report says each thing once and draws only what can mean something."""

from __future__ import annotations

import numpy as np

from oddnode.judge.analysis import analyze
from oddnode.core.model import Dataset, LabelKind
from oddnode.report.html import MIN_CORRELATION_LABELS, render_report
from support.series import make_series, node_names


def correlated(n: int) -> Dataset:
    """Two benchmarks over n pairs, the second a multiple of the first: |r| = 1."""
    nodes = node_names(2 * n)
    pairs = [f"{a}-{b}" for a, b in zip(nodes[::2], nodes[1::2])]
    values = np.linspace(100.0, 200.0, n)
    return Dataset(series=[make_series("bisection.cut", pairs, values, kind=LabelKind.PAIR),
                           make_series("bisection.alone", pairs, 2.0 * values, kind=LabelKind.PAIR)])


def test_a_correlation_over_a_handful_of_labels_is_neither_listed_nor_drawn():
    few = render_report(analyze(correlated(4)))
    section = few.split('id="correlations"')[1]
    assert "bisection.alone" not in section and "<svg" not in section.split('id="failures"')[0]
    many = render_report(analyze(correlated(MIN_CORRELATION_LABELS)))
    section = many.split('id="correlations"')[1].split('id="failures"')[0]
    assert "bisection.alone" in section and "<svg" in section

