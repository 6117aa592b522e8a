"""The pure readings of set results (oddnode.readings.sets) against numbers
worked out by hand from the runs that made them, read back through the store."""

from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np
import pytest

from support.foreign import node_names
from oddnode.core.model import Direction, LabelKind
from oddnode.core.nodes import expand
from oddnode.readings.sets import (
    failed_set_members,
    failed_set_runs,
    member_correlations,
    ordering_table,
    runs_by_ordering,
    scaling_curves,
    set_members,
    set_series_name,
)
from oddnode.readings.sets_series import SCALE, SETS, SHUFFLED, SORTED
from oddnode.store import open_store
from support.set_data import (
    Fabric,
    SIZE,
    direct_dataset,
    scale_rows,
    set_rows,
    store_rows,
    write_node_series,
    write_scale,
    write_sets,
)

BANDWIDTH, TIME = f"bandwidth.{SIZE}", f"time.{SIZE}"


def values_of(rows, ordering, metric=BANDWIDTH, family="sets"):
    chosen = [r.bandwidth for r in rows if r.ordering == ordering and r.series.startswith(family + ".")
              and r.bandwidth is not None]
    return np.array(chosen if metric == BANDWIDTH else [2.0 * SIZE / v for v in chosen])


# ---------------------------------------------------------------- loading


@pytest.mark.slow
def test_the_direct_dataset_is_what_the_store_loads(tmp_path):
    """The sweeps build set runs without a store; they must be the store's."""
    nodes = node_names("cn", 13)  # 13: a node sits out every repetition
    fabric = Fabric(nodes, slow={nodes[2]: 2.0}, failing={nodes[7]})
    rows = set_rows(fabric, 4, 3, seed=5) + scale_rows(fabric, 2, seed=5)
    with open_store(tmp_path / "s.duckdb") as store:
        store_rows(store, rows, nodes, failing=fabric.failing)
        loaded = store.load_dataset()
    direct = direct_dataset(rows)
    assert [(r.benchmark, r.metric) for r in loaded.set_runs] == [(r.benchmark, r.metric) for r in direct.set_runs]
    for a, b in zip(loaded.set_runs, direct.set_runs):
        assert (a.unit, a.direction) == (b.unit, b.direction)
        assert a.labels.tolist() == b.labels.tolist() and a.repetitions.tolist() == b.repetitions.tolist()
        np.testing.assert_allclose(a.values, b.values, rtol=1e-12)
    assert loaded.failures == direct.failures


def test_every_valid_repetition_is_kept_and_failed_runs_are_failures(tmp_path):
    nodes = node_names("unpadded", 12)
    fabric = Fabric(nodes, failing={nodes[0]})
    with open_store(tmp_path / "s.duckdb") as store:
        rows = write_sets(store, fabric, 4, 3, seed=1)
        dataset = store.load_dataset()
    failed = [r for r in rows if r.bandwidth is None]
    assert len(failed) == 6 and all(nodes[0] in r.members for r in failed)
    by_name = {r.name: r for r in dataset.set_runs}
    assert set(by_name) == {f"sets.sendrecv.{o}:{m}" for o in (SORTED, SHUFFLED) for m in (BANDWIDTH, TIME)}
    shuffled = by_name[f"sets.sendrecv.shuffled:{BANDWIDTH}"]
    assert len(shuffled) == 3 * 3 - 3 and shuffled.direction is Direction.HIGHER
    assert sorted(shuffled.repetitions.tolist()) == sorted(r.repetition for r in rows
                                                           if r.ordering == SHUFFLED and r.bandwidth is not None)
    # A failed run is one failure per metric it would have given.
    assert len(dataset.failures) == 2 * 6
    assert all(f.label_kind is LabelKind.SET and nodes[0] in f.members for f in dataset.failures)
    # The best value of each set is a series too (what member_correlations reads).
    best = {s.name: s for s in dataset.series}[f"sets.sendrecv.sorted:{BANDWIDTH}"]
    assert best.label_kind is LabelKind.SET and best.labels.tolist() == ["node[5-8]", "node[9-12]"]


def test_set_labels_of_foreign_names():
    assert set_members("cn-[0001-0004]") == ("cn-0001", "cn-0002", "cn-0003", "cn-0004")
    assert set_members("r01n[15-16],r02n[01-02]") == ("r01n15", "r01n16", "r02n01", "r02n02")
    assert set_members("node[1,9-10,12]") == ("node1", "node9", "node10", "node12")
    assert set_members("gpu007") == ("gpu007",)
    assert set_members("not a set!") == ()
    assert set_series_name("sets.npb.bt.B.shuffled") == ("sets", "npb.bt.B", "shuffled")
    assert set_series_name("scale.sendrecv.sorted") == ("scale", "sendrecv", "sorted")
    assert set_series_name("sets.sendrecv.random") is None
    assert set_series_name("pingpong.sort") is None


def test_runs_by_ordering_groups_sorted_next_to_shuffled_in_natural_order(tmp_path):
    nodes = node_names("unpadded", 8)
    rows = set_rows(Fabric(nodes), 4, 2, seed=1) + scale_rows(Fabric(nodes), 2, seed=1)
    dataset = direct_dataset(rows)
    grouped = runs_by_ordering(dataset)
    assert list(grouped) == [(SCALE, "sendrecv", BANDWIDTH), (SCALE, "sendrecv", TIME),
                             (SETS, "sendrecv", BANDWIDTH), (SETS, "sendrecv", TIME)]
    assert all(set(o) == {SORTED, SHUFFLED} for o in grouped.values())
    assert list(runs_by_ordering(dataset, SCALE)) == [(SCALE, "sendrecv", BANDWIDTH), (SCALE, "sendrecv", TIME)]


# ---------------------------------------------------------------- STAB's anal, sorted next to shuffled


def test_ordering_table_against_numpy(tmp_path):
    nodes = node_names("gpu", 24)
    fabric = Fabric(nodes, topology={n: f"leaf{i // 8}" for i, n in enumerate(nodes)}, contention=0.5, noise=0.03)
    with open_store(tmp_path / "s.duckdb") as store:
        rows = write_sets(store, fabric, 4, 5, seed=3)
        table = ordering_table(store.load_dataset())
    assert [(r.family, r.benchmark, r.metric) for r in table.rows] == [("sets", "sendrecv", BANDWIDTH),
                                                                      ("sets", "sendrecv", TIME)]
    for row in table.rows:
        assert row.unit == ("MB/s" if row.metric == BANDWIDTH else "us")
        for ordering, described in ((SORTED, row.sorted), (SHUFFLED, row.shuffled)):
            x = values_of(rows, ordering, row.metric)
            assert described.n == len(x) == 30
            assert described.low == pytest.approx(x.min()) and described.high == pytest.approx(x.max())
            assert described.variability_pct == pytest.approx((x.max() - x.min()) / x.min() * 100)
            assert described.mean == pytest.approx(x.mean()) and described.median == pytest.approx(np.median(x))
            assert described.std == pytest.approx(x.std(ddof=1))
        # Shuffled sets cross the busy core, sorted ones do not.
        assert row.shuffled.variability_pct > 3 * row.sorted.variability_pct
    json = table.to_json()
    assert json[0]["sorted"]["n"] == 30 and json[0]["direction"] == "higher" and json[1]["direction"] == "lower"


def test_an_ordering_not_measured_is_none():
    rows = set_rows(Fabric(node_names("unpadded", 8)), 4, 3, orderings=(SHUFFLED,))
    row, _ = ordering_table(direct_dataset(rows)).rows
    assert row.sorted is None and row.shuffled.n == 6 and row.to_json()["sorted"] is None


# ---------------------------------------------------------------- xcommon over failed set runs


@pytest.mark.slow
def test_failed_set_members_counts_each_failed_run_once_by_occurrence(tmp_path):
    nodes = node_names("rack", 32)
    bad, worse = nodes[3], nodes[20]
    fabric = Fabric(nodes, failing={bad, worse})
    with open_store(tmp_path / "s.duckdb") as store:
        rows = write_sets(store, fabric, 4, 4, seed=7)
        dataset = store.load_dataset()
    failed_rows = [r for r in rows if r.bandwidth is None]
    # Every failed run is stored under both metrics, and counted once.
    assert len([f for f in dataset.failures if f.label_kind is LabelKind.SET]) == 2 * len(failed_rows)
    assert len(failed_set_runs(dataset)[(SETS, "sendrecv")]) == len(failed_rows)
    (members,) = failed_set_members(dataset)
    assert (members.family, members.benchmark, members.runs) == (SETS, "sendrecv", len(failed_rows))
    expected = Counter(node for r in failed_rows for node in r.members)
    assert dict(members.counts) == dict(expected)
    # Most first: the two failing nodes, in all of their 8 runs each.
    assert {members.counts[0], members.counts[1]} == {(bad, 8), (worse, 8)}
    assert [c for _, c in members.counts] == sorted((c for _, c in members.counts), reverse=True)
    assert members.to_json()["counts"][bad] == 8


def test_failed_runs_of_each_benchmark_apart_and_not_scale_or_pairs_mixed_in(tmp_path):
    nodes = node_names("unpadded", 12)
    fabric = Fabric(nodes, failing={nodes[5]})
    rows = set_rows(fabric, 4, 2, seed=1) + set_rows(fabric, 4, 2, seed=1, benchmark="allreduce")
    rows += scale_rows(fabric, 2, seed=1)
    found = {(m.family, m.benchmark): m for m in failed_set_members(direct_dataset(rows))}
    assert set(found) == {(SCALE, "sendrecv"), (SETS, "allreduce"), (SETS, "sendrecv")}
    assert found[(SETS, "allreduce")].runs == found[(SETS, "sendrecv")].runs == 4
    assert found[(SETS, "sendrecv")].counts[0] == (nodes[5], 4)


# ---------------------------------------------------------------- a set against its worst member


@pytest.mark.slow
def test_sets_whose_worst_member_has_poor_memory_run_slowly(tmp_path):
    rng = np.random.default_rng(4)
    nodes = node_names("cn", 48)
    memory = dict(zip(nodes, rng.normal(2000.0, 60.0, len(nodes)).tolist()))
    for node in rng.choice(nodes, 10, replace=False).tolist():
        memory[node] *= rng.uniform(0.55, 0.9)  # a DIMM short, a slower configuration
    disk = dict(zip(nodes, rng.normal(900.0, 40.0, len(nodes)).tolist()))
    # A parallel code waits for its slowest rank: a set runs at its worst
    # member's memory bandwidth (relative to a healthy node's).
    fabric = Fabric(nodes, slow={n: 2000.0 / m for n, m in memory.items()}, noise=0.01)
    with open_store(tmp_path / "s.duckdb") as store:
        write_node_series(store, "memory.triad", memory)
        write_node_series(store, "disk.read", disk)
        write_node_series(store, "dgemm.few", {n: 100.0 + i for i, n in enumerate(nodes[:4])}, unit="Gflop/s")
        write_sets(store, fabric, 4, 3, seed=4)
        dataset = store.load_dataset()
    found = member_correlations(dataset)
    strongest = found[0]
    assert strongest.node_series == "memory.triad"
    assert strongest.set_series.startswith("sets.sendrecv.")
    assert strongest.correlation.spearman_r > 0.9 and strongest.correlation.spearman_p < 1e-6
    # Time: lower is better, so it falls as memory rises.
    time = next(c for c in found if c.set_series == "sets.sendrecv.shuffled:" + TIME
                and c.node_series == "memory.triad")
    assert time.correlation.spearman_r < -0.9
    # Disk has nothing to do with it: 36 shuffled sets show no correlation.
    disk = [c for c in found if c.node_series == "disk.read" and c.set_series.startswith("sets.sendrecv.shuffled")]
    assert len(disk) == 2 and all(abs(c.correlation.spearman_r) < 0.4 and c.correlation.n == 36 for c in disk)
    # Strongest first; a node series covering 4 of 48 nodes joins only when named.
    assert [c.strength for c in found] == sorted((c.strength for c in found), reverse=True)
    assert all(c.node_series != "dgemm.few" for c in found)
    assert member_correlations(dataset, ["memory.triad"])[0].node_series == "memory.triad"
    # The worst member's value, by hand, for one set.
    shuffled = next(s for s in dataset.series if s.name == "sets.sendrecv.shuffled:" + BANDWIDTH)
    label = shuffled.labels[0]
    assert min(memory[n] for n in expand(label)) == pytest.approx(
        _worst_of(dataset, shuffled, "memory.triad")[label])
    assert found[0].to_json()["n"] == strongest.correlation.n


def _worst_of(dataset, sets, node_benchmark):
    from oddnode.readings.sets import worst_member_series
    nodes = dataset.by_name(node_benchmark)
    derived, _ = worst_member_series(sets, nodes)
    return dict(zip(derived.labels.tolist(), derived.values.tolist()))


# ---------------------------------------------------------------- SCAB's scaling curves


def test_scaling_curves_median_min_max_per_count(tmp_path):
    nodes = node_names("unpadded", 12)
    fabric = Fabric(nodes, topology={n: f"leaf{i // 4}" for i, n in enumerate(nodes)}, uplink={"leaf1": 400.0},
                    noise=0.05)
    with open_store(tmp_path / "s.duckdb") as store:
        rows = write_scale(store, fabric, 5, seed=6)
        curves = scaling_curves(store.load_dataset())
    assert [(c.metric, c.ordering) for c in curves] == [(BANDWIDTH, SORTED), (BANDWIDTH, SHUFFLED),
                                                        (TIME, SORTED), (TIME, SHUFFLED)]
    expected = defaultdict(list)
    for r in rows:
        expected[(r.ordering, len(r.members))].append(r.bandwidth)
    for curve in curves:
        assert curve.counts == [2, 4, 8, 12] and curve.benchmark == "sendrecv"
        for point in curve.points:
            x = np.array(expected[(curve.ordering, point.nodes)])
            if curve.metric == TIME:
                x = 2.0 * SIZE / x
            assert point.n == len(x) == 5
            assert point.median == pytest.approx(np.median(x))
            assert (point.low, point.high) == (pytest.approx(x.min()), pytest.approx(x.max()))
            assert sorted(point.values) == pytest.approx(sorted(x))
        assert curve.at(3) is None and curve.at(8).nodes == 8
    assert curves[0].to_json()["points"][0] == {"nodes": 2, "median": curves[0].points[0].median,
                                                "min": curves[0].points[0].low, "max": curves[0].points[0].high,
                                                "n": 5}
    # Sets runs are not scaling curves.
    assert scaling_curves(direct_dataset(set_rows(fabric, 4, 2))) == []
