"""Pair patterns judged together on small clusters: with 8 nodes each pattern
has 4 pairs, too few for an outlier, but the four patterns pooled name a weak
node or a weak uplink, and healthy pairs with a few per cent of noise give
nothing."""

from __future__ import annotations

import numpy as np
import pytest

from oddnode.findings import find_all
from oddnode.findings.pairs import pair_series
from oddnode.readings.patterns import pair_label, pattern_pairs
from oddnode.core.model import Dataset, Direction, LabelKind, Series

EIGHT = [f"node{i:02d}" for i in range(1, 9)]
TWELVE = [f"node{i:02d}" for i in range(1, 13)]
PAIR_RULES = ["weak-pair-member", "weak-group", "oversubscription"]


def pattern_series(nodes, rate, seed) -> list[Series]:
    """STAB's four patterns over `nodes`, each pair's bandwidth rate(a, b)
    times a few per cent of noise."""
    rng = np.random.default_rng(seed)
    series = []
    for pattern in ("sort", "cut", "fold", "shuffle"):
        pairs = pattern_pairs(pattern, nodes, 1, seed).pairs
        labels = np.array(sorted(pair_label(a, b) for a, b in pairs), dtype=object)
        by_label = {pair_label(a, b): rate(a, b) for a, b in pairs}
        values = np.array([by_label[label] * rng.normal(1.0, 0.03) for label in labels])
        series.append(Series(f"pingpong.{pattern}", "bandwidth.1048576", "MB/s", Direction.HIGHER, LabelKind.PAIR,
                             labels, values, np.full(len(labels), 3)))
    return series


def kinds(dataset):
    return {(f.kind, f.nodes) for f in find_all(dataset, rules=PAIR_RULES)}


def test_the_patterns_of_one_kernel_become_one_population_per_metric():
    pooled = pair_series(Dataset(series=pattern_series(EIGHT, lambda a, b: 100.0, seed=1)))
    assert [(s.name, len(s)) for s in pooled] == [("pingpong.sort+cut+fold+shuffle:bandwidth.1048576", 16)]
    assert list(pooled[0].labels) == sorted(pooled[0].labels)


@pytest.mark.parametrize("seed", range(5))
def test_a_weak_node_among_eight_is_named(seed):
    def rate(a, b):
        return 10.0 if "node03" in (a, b) else 100.0  # its link a tenth of the others

    assert kinds(Dataset(series=pattern_series(EIGHT, rate, seed))) == {("weak-pair-member", "node03")}


@pytest.mark.parametrize("seed", range(5))
def test_a_slow_uplink_is_named_as_its_leaf_not_its_nodes(seed):
    topology = {node: f"leaf{(int(node[4:]) - 1) // 4 + 1}" for node in TWELVE}

    def rate(a, b):
        crosses_leaf2 = (topology[a] == "leaf2") != (topology[b] == "leaf2")
        return 10.0 if crosses_leaf2 else 100.0

    found = kinds(Dataset(series=pattern_series(TWELVE, rate, seed), topology=topology))
    assert found == {("weak-group", "node[05-08]")}, found


def test_a_node_in_two_slow_pairs_among_fast_ones_is_not_called_weak():
    # As latencies on busy hosts: two pairs of node04 slow by chance, its other two fast.
    slow = {("node03", "node04"), ("node04", "node08")}

    def rate(a, b):
        return 20.0 if tuple(sorted((a, b))) in slow else 100.0

    dataset = Dataset(series=pattern_series(EIGHT, rate, seed=3))
    assert kinds(dataset) == set()


def test_healthy_pairs_with_noise_give_no_finding():
    for seed in range(200):
        dataset = Dataset(series=pattern_series(EIGHT, lambda a, b: 100.0, seed))
        assert kinds(dataset) == set(), seed
