"""The all-pairs matrix on a scripted cluster: its rounds, the retest of slow
pairs with halving concurrency, and the verdict the slow-link rule reads
back: a bad link (slow alone too) or contention (fine with fewer pairs)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from oddnode.judge.analysis import analyze
from oddnode.findings import Sensitivity
from oddnode.findings.pairs import (
    BAD_LINK,
    CONTENTION,
    MATRIX_BENCHMARK,
    MATRIX_RETEST_BENCHMARK,
    NOT_RETESTED,
    SLOW_LINK_FRACTION,
    slow_pair_limit,
)
from oddnode.measure.pair.matrix import halving_levels, retest_rounds, run_matrix
from oddnode.measure.pair.pairs import PingPongOptions
from oddnode.readings.patterns import is_disjoint
from oddnode.store import open_store
from oddnode.reach.base import Target
from support.clusters.pairs import NODES, OPTIONS
from support.clusters.matrix import MatrixCluster


@pytest.mark.slow
def test_every_ordered_pair_once_in_rounds_of_disjoint_pairs(store):
    cluster = MatrixCluster()
    summary = run_matrix(store, Target(NODES, cluster), options=OPTIONS)
    assert len(cluster.rounds) == 2 * (len(NODES) - 1) == len(summary.plans)
    for pairs in cluster.rounds:
        assert len(pairs) == len(NODES) // 2 and is_disjoint(pairs)
    ordered = Counter(pair for pairs in cluster.rounds for pair in pairs)
    assert set(ordered.values()) == {1}
    assert set(ordered) == {(a, b) for a in NODES for b in NODES if a != b}
    assert summary.metric == "bandwidth.65536" and len(summary.values) == 56
    assert summary.verdicts == {} and summary.retests == []
    (labels,) = store.con.execute(f"""SELECT count(DISTINCT label) FROM results
                                      WHERE benchmark = '{MATRIX_BENCHMARK}' AND metric = 'latency.0'""").fetchone()
    assert labels == 56
    assert [f for f in analyze(store.load_dataset()).findings if f.severity.value != "info"] == []


@pytest.mark.slow
def test_retest_tells_a_bad_link_from_contention(store):
    # 8 nodes: 4 pairs a round, so retests run at most 2 pairs at once, then 1.
    cluster = MatrixCluster(bad=[("node02", "node05")],
                            contended={("node03", "node07"): 2, ("node01", "node08"): 1})
    summary = run_matrix(store, Target(NODES, cluster), options=OPTIONS)
    assert sorted(summary.with_verdict(BAD_LINK)) == ["node02-node05", "node05-node02"]
    assert sorted(summary.with_verdict(CONTENTION)) == ["node01-node08", "node03-node07",
                                                        "node07-node03", "node08-node01"]
    assert [(r.level, r.concurrency) for r in summary.retests][:1] == [(1, 2)]
    assert {r.concurrency for r in summary.retests} == {2, 1}
    for retest in summary.retests:
        assert len(retest.pairs) <= retest.concurrency and is_disjoint(retest.pairs)
    # Level 2 (alone) retests only the pairs that did not recover at level 1.
    alone = sorted(f"{a}-{b}" for r in summary.retests if r.level == 2 for a, b in r.pairs)
    assert alone == ["node01-node08", "node02-node05", "node05-node02", "node08-node01"]
    # The rule reads the same verdicts back from the store.
    findings = analyze(store.load_dataset()).findings
    (slow,) = [f for f in findings if f.kind == "slow-link"]
    assert slow.severity.value == "warning" and slow.nodes == "node[02,05]"
    assert {link["pair"]: link["verdict"] for link in slow.evidence["links"]} == {
        "node02-node05": BAD_LINK, "node05-node02": BAD_LINK}
    (contention,) = [f for f in findings if f.kind == "link-contention"]
    assert contention.severity.value == "info"
    by_pair = {link["pair"]: link for link in contention.evidence["links"]}
    assert by_pair["node03-node07"]["concurrency"] == 2 and by_pair["node01-node08"]["concurrency"] == 1
    assert not [f for f in findings if f.kind == "weak-pair-member"]


@pytest.mark.slow
def test_a_weak_node_makes_every_link_of_it_bad_and_is_named(store):
    cluster = MatrixCluster(bad=[("node04", other) for other in NODES if other != "node04"])
    summary = run_matrix(store, Target(NODES, cluster), options=OPTIONS)
    assert len(summary.with_verdict(BAD_LINK)) == 14
    findings = analyze(store.load_dataset()).findings
    (slow,) = [f for f in findings if f.kind == "slow-link"]
    assert "all of them through node04" in slow.message and slow.nodes == "node04"
    assert [f.nodes for f in findings if f.kind == "weak-pair-member"] == ["node04"]


@pytest.mark.slow
def test_a_node_held_up_in_the_matrix_and_fine_in_its_retests_is_not_named(store, tmp_path):
    # node04 five times slower in every round of the matrix (14 rounds) on
    # every message size, latency included, then fine: its pairs retested
    # are back above the limit, so no card, cable or port of it is to blame.
    cluster = MatrixCluster(held_up={"node04": 14})
    summary = run_matrix(store, Target(NODES, cluster), options=OPTIONS)
    assert sorted(summary.with_verdict(CONTENTION)) == sorted(
        label for other in NODES if other != "node04" for label in (f"node04-{other}", f"{other}-node04"))
    findings = analyze(store.load_dataset()).findings
    assert [f for f in findings if f.severity.value != "info"] == []
    # Without its retests the same matrix names node04, in latency too.
    with open_store(tmp_path / "unretested.duckdb") as unretested:
        run_matrix(unretested, Target(NODES, MatrixCluster(held_up={"node04": 14})), options=OPTIONS, retest=False)
        (weak,) = [f for f in analyze(unretested.load_dataset()).findings if f.kind == "weak-pair-member"]
    assert weak.nodes == "node04" and any("latency.0" in series for series in weak.evidence["series"])


@pytest.mark.slow
def test_without_retest_the_slow_pairs_are_said_untested(store):
    cluster = MatrixCluster(bad=[("node02", "node05")])
    summary = run_matrix(store, Target(NODES, cluster), options=OPTIONS, retest=False)
    assert set(summary.verdicts.values()) == {NOT_RETESTED} and len(cluster.rounds) == 14
    (slow,) = [f for f in analyze(store.load_dataset()).findings if f.kind == "slow-link"]
    assert "not retested" in slow.message


def test_retest_rounds_pack_disjoint_pairs_up_to_the_concurrency():
    pairs = [("a", "b"), ("a", "c"), ("d", "e"), ("f", "g"), ("b", "c")]
    assert retest_rounds(pairs, 2) == [[("a", "b"), ("d", "e")], [("a", "c"), ("f", "g")], [("b", "c")]]
    assert retest_rounds(pairs, 1) == [[pair] for pair in pairs]
    with pytest.raises(ValueError):
        retest_rounds(pairs, 0)
    assert halving_levels(6) == [3, 1] and halving_levels(8) == [4, 2, 1] and halving_levels(1) == [1]


def test_slow_limit_is_the_outlier_bound_or_half_the_median():
    rng = np.random.default_rng(5)
    values = rng.normal(1000.0, 10.0, 200)
    limit = slow_pair_limit(values, Sensitivity())
    assert 900 < limit < 990  # several sigma below the median, not a fixed half
    # Many slow pairs widen the MAD; half the median still catches them.
    wide = np.concatenate([rng.normal(1000.0, 10.0, 60), rng.normal(300.0, 10.0, 40)])
    assert slow_pair_limit(wide, Sensitivity()) >= SLOW_LINK_FRACTION * np.median(wide)
    # Too few values for the outlier rule: only the fixed fraction.
    assert slow_pair_limit(np.array([100.0, 100.0, 40.0]), Sensitivity()) == pytest.approx(50.0)


def test_matrix_needs_a_size_that_has_a_bandwidth(store):
    with pytest.raises(ValueError, match="above 0 bytes"):
        run_matrix(store, Target(NODES, MatrixCluster()), options=PingPongOptions(sizes=(0,)))
    assert store.con.execute(f"SELECT count(*) FROM results WHERE benchmark = '{MATRIX_RETEST_BENCHMARK}'"
                             ).fetchone() == (0,)
