"""Correlation between benchmarks (cplot/findc), checked against scipy."""

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from oddnode.core.model import Direction, LabelKind, Series
from oddnode.stats.correlation import (
    CORRELATION_CAVEAT,
    Correlation,
    correlate,
    correlate_all,
    join_by_label,
)


def make_series(benchmark, labels, values, unit="MB/s"):
    labels = np.asarray(labels, dtype=object)
    values = np.asarray(values, dtype=np.float64)
    return Series(
        benchmark=benchmark,
        metric="value",
        unit=unit,
        direction=Direction.HIGHER,
        label_kind=LabelKind.NODE,
        labels=labels,
        values=values,
        repetitions=np.ones(len(values), dtype=np.int64),
    )


def node_labels(count):
    return np.array([f"node{i:05d}" for i in range(count)], dtype=object)


@pytest.fixture
def rng():
    return np.random.default_rng(31337)


def test_join_by_label_fast_path_and_intersection():
    a = make_series("a", ["n1", "n2", "n3", "n5"], [1, 2, 3, 5])
    b = make_series("b", ["n2", "n3", "n4", "n5"], [20, 30, 40, 50])
    labels, x, y = join_by_label(a, b)
    assert labels.tolist() == ["n2", "n3", "n5"]
    assert x.tolist() == [2, 3, 5] and y.tolist() == [20, 30, 50]

    same = make_series("c", ["n1", "n2", "n3", "n5"], [9, 8, 7, 6])
    labels, x, y = join_by_label(a, same)
    assert labels.tolist() == ["n1", "n2", "n3", "n5"]
    assert y.tolist() == [9, 8, 7, 6]


def test_correlate_matches_scipy(rng):
    labels = node_labels(500)
    x = rng.normal(20_000, 300, 500)
    y = 0.02 * x + rng.normal(0, 5, 500)
    result = correlate(make_series("stream", labels, x), make_series("hpl", labels, y, unit="GFLOP/s"))
    pearson = stats.pearsonr(x, y)
    spearman = stats.spearmanr(x, y)
    fit = stats.linregress(x, y)
    assert isinstance(result, Correlation)
    assert (result.x, result.y, result.n) == ("stream", "hpl", 500)
    assert result.pearson_r == pytest.approx(pearson.statistic, rel=1e-9)
    assert result.pearson_p == pytest.approx(pearson.pvalue, rel=1e-9)
    assert result.spearman_r == pytest.approx(spearman.statistic, rel=1e-9)
    assert result.spearman_p == pytest.approx(spearman.pvalue, rel=1e-9)
    assert result.slope == pytest.approx(fit.slope, rel=1e-9)
    assert result.intercept == pytest.approx(fit.intercept, rel=1e-9)


def test_correlate_needs_three_shared_labels_and_names_both():
    a = make_series("stream", ["n1", "n2", "n3"], [1, 2, 3])
    b = make_series("ptrans", ["n2", "n3", "n4"], [1, 2, 3])
    with pytest.raises(ValueError, match="stream.*ptrans"):
        correlate(a, b)


def test_correlate_constant_series_is_nan_without_warnings():
    labels = node_labels(10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = correlate(make_series("a", labels, np.arange(10.0)), make_series("b", labels, np.full(10, 4.0)))
    assert math.isnan(result.pearson_r) and math.isnan(result.spearman_r)


def build_cluster(rng, benchmarks=8, nodes=300):
    labels = node_labels(nodes)
    memory = rng.normal(size=nodes)
    series = []
    for k in range(benchmarks):
        weight = rng.uniform(-1, 1)
        values = 1000 + 50 * (weight * memory + rng.normal(size=nodes))
        if k == 2:
            values = np.round(values / 20) * 20  # ties, for Spearman's average ranks
        series.append(make_series(f"bench{k}", labels, values))
    return series


def assert_same_correlation(found, reference):
    assert (found.x, found.y, found.n) == (reference.x, reference.y, reference.n)
    for field in ("pearson_r", "pearson_p", "spearman_r", "spearman_p", "slope", "intercept"):
        assert getattr(found, field) == pytest.approx(getattr(reference, field), rel=1e-9, abs=1e-300), field


def test_correlate_all_equals_pairwise_correlate(rng):
    series = build_cluster(rng)
    # One benchmark misses some nodes: its pairs use only the shared ones.
    keep = np.sort(rng.choice(300, 280, replace=False))
    series[5] = make_series("bench5", series[5].labels[keep], series[5].values[keep])
    # Another has its own copy of the labels (not the same array object).
    series[6] = make_series("bench6", series[6].labels.copy(), series[6].values)

    results = correlate_all(series)
    assert len(results) == 8 * 7 // 2
    by_pair = {(c.x, c.y): c for c in results}
    for i, j in [(0, 1), (1, 2), (2, 7), (0, 5), (5, 6), (3, 5), (6, 7)]:
        reference = correlate(series[i], series[j])
        assert_same_correlation(by_pair[(series[i].name, series[j].name)], reference)
    assert by_pair[("bench0", "bench5")].n == 280


def test_correlate_all_two_partial_label_sets(rng):
    series = build_cluster(rng, benchmarks=3, nodes=100)
    series[0] = make_series("bench0", series[0].labels[:80], series[0].values[:80])
    series[1] = make_series("bench1", series[1].labels[30:], series[1].values[30:])
    by_pair = {(c.x, c.y): c for c in correlate_all(series)}
    assert by_pair[("bench0", "bench1")].n == 50
    for i, j in [(0, 1), (0, 2), (1, 2)]:
        assert_same_correlation(by_pair[(f"bench{i}", f"bench{j}")], correlate(series[i], series[j]))


def test_correlate_all_orders_by_absolute_pearson_r(rng):
    results = correlate_all(build_cluster(rng, benchmarks=10))
    strengths = [abs(c.pearson_r) for c in results]
    assert strengths == sorted(strengths, reverse=True)


def test_correlate_all_skips_constant_series_quietly(rng):
    series = build_cluster(rng, benchmarks=4)
    series.append(make_series("flat", series[0].labels, np.full(300, 5.0)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        results = correlate_all(series)
    assert len(results) == 6
    assert all("flat" not in (c.x, c.y) for c in results)


def test_correlate_all_skips_pairs_with_too_few_shared_labels(rng):
    a = make_series("a", ["n1", "n2", "n3", "n4"], [1, 2, 3, 4])
    b = make_series("b", ["n3", "n4", "n5", "n6"], [1, 3, 2, 4])
    c = make_series("c", ["n1", "n2", "n3", "n4"], [4, 1, 3, 2])
    results = correlate_all([a, b, c])
    assert [(r.x, r.y) for r in results] == [("a", "c")]
    with pytest.raises(ValueError):
        correlate_all([a, b, c], min_n=2)


def test_caveat_is_one_sentence():
    assert CORRELATION_CAVEAT.endswith(".")
    assert CORRELATION_CAVEAT.count(". ") == 0
    assert "cause" in CORRELATION_CAVEAT
