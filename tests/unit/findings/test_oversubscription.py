"""Sorted against shuffled pairs: the oversubscription finding on synthetic
clusters of two or three leaf switches, with and without a fault."""

from __future__ import annotations

import numpy as np
import pytest

from oddnode.judge.analysis import analyze
from oddnode.findings import Sensitivity, find_all
from oddnode.findings.pairs import OVERSUBSCRIPTION_RATIO, compare_sorted_shuffled, comparison_metric
from oddnode.readings.patterns import pairs_shuffle, pairs_sort
from oddnode.core.model import Dataset, Direction, LabelKind, Series
from oddnode.store import ResultBatch, open_store

TWELVE = [f"node{i:02d}" for i in range(1, 13)]


def leaves(count: int) -> dict[str, str]:
    """Twelve nodes on ``count`` leaf switches, neighbours together."""
    size = len(TWELVE) // count
    return {node: f"leaf{i // size + 1}" for i, node in enumerate(TWELVE)}


def pair_series(benchmark: str, labels: list[str], values: list[float], metric: str = "bandwidth.4194304") -> Series:
    order = np.argsort(labels)
    return Series(benchmark, metric, "MB/s", Direction.HIGHER, LabelKind.PAIR, np.array(labels, dtype=object)[order],
                  np.array(values, dtype=np.float64)[order], np.full(len(labels), 3, dtype=np.int64))


def cluster(cross_rate, topology: dict[str, str], repetitions: int = 8, seed: int = 1) -> Dataset:
    """Sorted and shuffled pairs at 1000 MB/s ± 1%; a pair between two leaves
    gets ``cross_rate(group_a, group_b)`` instead."""
    rng = np.random.default_rng(seed)

    def rate(a: str, b: str) -> float:
        base = 1000.0 if topology[a] == topology[b] else cross_rate(topology[a], topology[b])
        return base * (1 + 0.01 * rng.standard_normal())

    sort = pairs_sort(TWELVE)
    shuffled = {}
    for repetition in range(1, repetitions + 1):
        for a, b in pairs_shuffle(TWELVE, seed, repetition).pairs:
            shuffled[f"{a}-{b}"] = max(shuffled.get(f"{a}-{b}", 0.0), rate(a, b))
    series = [pair_series("pingpong.sort", sort.labels, [rate(a, b) for a, b in sort.pairs]),
              pair_series("pingpong.shuffle", list(shuffled), list(shuffled.values()))]
    return Dataset(series=series, topology=topology)


def kinds(dataset: Dataset, level: str = "warning") -> list[str]:
    return [f.kind for f in find_all(dataset, Sensitivity()) if f.severity.value == level]


def test_shuffled_pairs_across_an_oversubscribed_uplink_are_named():
    # Two leaves of six behind uplinks that carry a third of what crosses.
    dataset = cluster(lambda a, b: 300.0, leaves(2))
    findings = [f for f in find_all(dataset, Sensitivity()) if f.kind == "oversubscription"]
    (finding,) = findings
    assert finding.severity.value == "warning" and finding.nodes == "node[01-12]"
    assert finding.evidence["ratio"] < OVERSUBSCRIPTION_RATIO and finding.evidence["p"] < 0.01
    assert finding.evidence["metric"] == "bandwidth.4194304"
    assert "ratio 0.3" in finding.message


def test_each_network_is_compared_with_itself():
    """The ib network's uplinks oversubscribed, the ordinary network's not:
    one finding, on the ib series; neither network's sorted pairs compared
    with the other's shuffled ones."""
    healthy, oversubscribed = cluster(lambda a, b: 1000.0, leaves(2), seed=3), cluster(lambda a, b: 300.0, leaves(2))
    renamed = [Series(f"{s.benchmark}@ib", s.metric, s.unit, s.direction, s.label_kind, s.labels, s.values,
                      s.repetitions) for s in oversubscribed.series]
    dataset = Dataset(series=healthy.series + renamed, topology=healthy.topology)
    comparisons = compare_sorted_shuffled(dataset, Sensitivity())
    assert [(c.sorted_benchmark, c.shuffled_benchmark, c.oversubscribed) for c in comparisons] == [
        ("pingpong.sort", "pingpong.shuffle", False), ("pingpong.sort@ib", "pingpong.shuffle@ib", True)]
    (finding,) = [f for f in find_all(dataset, Sensitivity()) if f.kind == "oversubscription"]
    assert finding.subject == "pingpong.shuffle@ib:bandwidth.4194304"
    # A network measured sorted only is compared with nothing.
    alone = Dataset(series=healthy.series + renamed[:1], topology=healthy.topology)
    assert [c.sorted_benchmark for c in compare_sorted_shuffled(alone, Sensitivity())] == ["pingpong.sort"]


@pytest.mark.parametrize("seed", range(1, 11))
def test_slow_crossings_between_two_leaves_never_blame_one_leaf(seed):
    """Every crossing pair runs through both uplinks: the pairs cannot tell
    leaf1's from leaf2's, so a finding names both or the fabric, never one."""
    findings = [f for f in find_all(cluster(lambda a, b: 300.0, leaves(2), seed=seed), Sensitivity())
                if f.severity.value == "warning"]
    assert {f.kind for f in findings} in ({"weak-group"}, {"oversubscription"}), findings
    for finding in findings:
        assert finding.nodes == "node[01-12]"
        if finding.kind == "weak-group":
            assert [finding.evidence["group"], *finding.evidence["alike"]] == ["leaf1", "leaf2"]
            assert "cannot tell which" in finding.message and "leaf1 or leaf2" in finding.remedy


def test_one_slow_uplink_among_three_leaves_is_named_alone():
    dataset = cluster(lambda a, b: 300.0 if "leaf1" in (a, b) else 1000.0, leaves(3), seed=1)
    (finding,) = [f for f in find_all(dataset, Sensitivity()) if f.severity.value == "warning"]
    assert (finding.kind, finding.nodes, finding.evidence["alike"]) == ("weak-group", "node[01-04]", [])


def test_pairs_across_an_accepted_slow_uplink_are_no_evidence_against_the_other_end():
    """leaf2's uplink a tenth as fast; in the latencies, 11 of leaf1's 15
    slow pairs cross to leaf2 (as a queue at leaf2's uplink makes them) and
    leaf2 alone is not significant there.  leaf1 stands on its other 4 slow
    pairs only: too few, so leaf2 is named and leaf1 is not."""
    from itertools import combinations

    topology = leaves(3)
    rng = np.random.default_rng(5)
    pairs = list(combinations(TWELVE, 2))
    crossing = {frozenset(("leaf1", "leaf2")): 11, frozenset(("leaf1", "leaf3")): 4}
    slow_latency = []
    for a, b in pairs:
        groups = frozenset((topology[a], topology[b]))
        if crossing.get(groups, 0) > 0:
            crossing[groups] -= 1
            slow_latency.append((a, b))

    def noisy(value: float) -> float:
        return value * (1 + 0.01 * rng.standard_normal())

    labels = [f"{a}-{b}" for a, b in pairs]
    bandwidth = [noisy(100.0 if topology[a] != topology[b] and "leaf2" in (topology[a], topology[b]) else 1000.0)
                 for a, b in pairs]
    latency = [noisy(30.0 if (a, b) in slow_latency else 10.0) for a, b in pairs]
    series = [pair_series("pingpong.matrix", labels, bandwidth),
              Series("pingpong.matrix", "latency.0", "us", Direction.LOWER, LabelKind.PAIR,
                     np.array(labels, dtype=object), np.array(latency), np.ones(len(labels), dtype=np.int64))]
    groups = [f for f in find_all(Dataset(series=series, topology=topology), Sensitivity()) if f.kind == "weak-group"]
    assert [(f.nodes, f.evidence["group"]) for f in groups] == [("node[05-08]", "leaf2")]


def test_a_healthy_fabric_and_mere_noise_raise_nothing():
    assert kinds(cluster(lambda a, b: 1000.0, leaves(2))) == []
    # Shuffled pairs 20% slower: a cost of crossing switches, not oversubscription.
    assert "oversubscription" not in kinds(cluster(lambda a, b: 800.0, leaves(2)))
    for seed in range(5):
        (comparison,) = compare_sorted_shuffled(cluster(lambda a, b: 1000.0, leaves(3), seed=seed), Sensitivity())
        assert 0.95 < comparison.ratio < 1.05 and not comparison.oversubscribed


def test_a_low_median_on_too_few_pairs_is_not_enough():
    dataset = Dataset(series=[pair_series("pingpong.sort", ["node01-node02", "node03-node04"], [1000.0, 990.0]),
                              pair_series("pingpong.shuffle", ["node01-node03", "node02-node04"], [300.0, 310.0])])
    (comparison,) = compare_sorted_shuffled(dataset, Sensitivity())
    assert comparison.ratio < OVERSUBSCRIPTION_RATIO and comparison.p > 0.1
    assert kinds(dataset) == []


def test_one_bad_uplink_is_a_weak_group_not_oversubscription():
    # Only leaf3's uplink is poor: its pairs are left out of the comparison.
    dataset = cluster(lambda a, b: 200.0 if "leaf3" in (a, b) else 1000.0, leaves(3), repetitions=12)
    found = kinds(dataset)
    assert "weak-group" in found and "oversubscription" not in found
    (comparison,) = compare_sorted_shuffled(dataset, Sensitivity())
    assert comparison.left_out_groups == ("leaf3",)


def test_the_comparison_uses_the_largest_common_size_else_the_fit():
    series = [pair_series("pingpong.sort", ["node01-node02"], [1.0], metric) for metric in
              ("bandwidth.1024", "bandwidth.65536", "fit.bandwidth")]
    series += [pair_series("pingpong.shuffle", ["node01-node03"], [1.0], metric) for metric in
               ("bandwidth.1024", "bandwidth.4096", "fit.bandwidth")]
    assert comparison_metric(Dataset(series=series), "pingpong.sort", "pingpong.shuffle") == "bandwidth.1024"
    fits = [s for s in series if s.metric == "fit.bandwidth"]
    assert comparison_metric(Dataset(series=fits), "pingpong.sort", "pingpong.shuffle") == "fit.bandwidth"
    assert comparison_metric(Dataset(series=fits[:1]), "pingpong.sort", "pingpong.shuffle") is None


def test_the_finding_comes_from_a_store(tmp_path):
    dataset = cluster(lambda a, b: 250.0, leaves(2))
    with open_store(tmp_path / "o.duckdb") as store:
        with store.transaction():
            run_id = store.new_run("test")
            batch = ResultBatch()
            for series in dataset.series:
                for label, value in zip(series.labels, series.values):
                    batch.add(series.benchmark, str(label), float(value), metric=series.metric, unit="MB/s",
                              label_kind=LabelKind.PAIR, repetition=1)
            store.add_results(run_id, batch)
        findings = analyze(store.load_dataset()).findings
    assert [f.kind for f in findings if f.severity.value == "warning"] == ["oversubscription"]
    assert findings[0].evidence["sorted_median"] == pytest.approx(1000.0, rel=0.05)


@pytest.mark.slow
def test_the_report_shows_sorted_against_shuffled():
    from oddnode.judge.analysis import analyze
    from oddnode.report.html import render_report

    html = render_report(analyze(cluster(lambda a, b: 300.0, leaves(2)), correlations=False))
    assert 'id="sorted-shuffled"' in html and 'id="pattern-pingpong.shuffle"' in html
    assert 'class="sev-warning">yes' in html
