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


@pytest.mark.slow
def test_healthy_pairs_with_noise_give_no_finding():
    for seed in range(200):
        dataset = Dataset(series=pattern_series(EIGHT, lambda a, b: 100.0, seed))
        assert kinds(dataset) == set(), seed


# --- the all-pairs matrix: a node or a path ------------------------------------------

SIX = ["r01n07", "r01n08", "r02n01", "r02n02", "r02n03", "r02n04"]


def matrix_latencies(time, seed) -> Dataset:
    """An all-pairs matrix over SIX (both directions, once each) at 128 KiB:
    each pair's time(a, b) in us times 0.1% of noise."""
    rng = np.random.default_rng(seed)
    pairs = [(a, b) for a in SIX for b in SIX if a != b]
    labels = np.array([f"{a}-{b}" for a, b in pairs], dtype=object)
    values = np.array([time(a, b) * rng.normal(1.0, 0.001) for a, b in pairs])
    return Dataset(series=[Series("pingpong.matrix", "latency.131072", "us", Direction.LOWER, LabelKind.PAIR,
                                  labels, values, np.ones(len(labels), dtype=np.int64))])


def crosses_racks(a: str, b: str) -> bool:
    return a[:3] != b[:3]


@pytest.mark.parametrize("seed", range(5))
def test_two_nodes_slow_with_the_same_others_and_fine_together_are_no_weak_members(seed):
    # Pairs between the racks 1.6% slower (more hops), but for two of
    # r01n07's: the slower pairs the smaller mode, the poor ones.  r01's two
    # nodes have most of their pairs among them, each with the same four
    # partners, and are fine with each other.
    def time(a, b):
        fast = ("r01n07-r02n01", "r01n07-r02n02")
        return 7110.0 if crosses_racks(a, b) and f"{a}-{b}" not in fast else 7000.0

    assert kinds(matrix_latencies(time, seed)) == set()


@pytest.mark.parametrize("seed", range(5))
def test_a_weak_node_of_the_matrix_is_named_beside_slower_paths(seed):
    def time(a, b):
        base = 7100.0 if crosses_racks(a, b) else 7000.0
        return base * 10 if "r02n03" in (a, b) else base

    assert kinds(matrix_latencies(time, seed)) == {("weak-pair-member", "r02n03")}
