"""The set rules on scripted set results with known truth: weak-set-member
names the node that slows or fails its sets and nothing else, set-contention
tells shuffled sets that vary from sorted ones that do not, scaling-loss
finds the shuffled curve that falls and the group whose uplink makes it."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from scipy import stats

from support.foreign import SCHEMES, node_names
from oddnode.judge.analysis import analyze
from oddnode.findings import RULES, Sensitivity, find_all, get_rule
from oddnode.findings.sets import (
    CONTENTION_FLOOR_PCT,
    LOSS_RATIO,
    SetRun,
    round_tails,
    weak_set_members,
)
from oddnode.core.model import Severity
from oddnode.core.nodes import expand, fold
from oddnode.readings.partition import set_plans
from oddnode.readings.sets_series import SHUFFLED, SORTED
from support.set_data import (
    Fabric,
    LINK,
    Row,
    direct_dataset,
    scale_rows,
    set_rows,
    write_node_series,
    write_scale,
    write_sets,
)
from oddnode.store import open_store

SET_RULES = ["weak-set-member", "set-contention", "scaling-loss"]


def judged(dataset, rules=SET_RULES, alpha=1e-4):
    return [(f.kind, f.nodes) for f in find_all(dataset, Sensitivity(alpha=alpha), rules)]


def stored(tmp_path, fabric, size, repetitions, seed=0, **options):
    """The dataset the store gives back for these set runs."""
    with open_store(tmp_path / f"sets-{seed}.duckdb") as store:
        write_sets(store, fabric, size, repetitions, seed, **options)
        return store.load_dataset()


def leaves(nodes, size):
    return {node: f"leaf{i // size + 1}" for i, node in enumerate(nodes)}


# ---------------------------------------------------------------- weak-set-member


@pytest.mark.slow
@pytest.mark.parametrize("n, size, repetitions", [(12, 4, 6), (12, 4, 10), (24, 4, 4), (24, 8, 6), (24, 8, 10),
                                                  (100, 4, 3), (100, 8, 4), (100, 8, 10)])
def test_one_slow_node_is_named_and_nothing_else(tmp_path, n, size, repetitions):
    nodes = node_names("unpadded", n)
    weak = nodes[n // 2 - 1]  # inside the list: it has sorted set-mates on both sides
    dataset = stored(tmp_path, Fabric(nodes, slow={weak: 3.0}), size, repetitions, seed=n + repetitions)
    assert judged(dataset) == [("weak-set-member", weak)]
    finding = find_all(dataset, rules=["weak-set-member"])[0]
    evidence = finding.evidence
    assert finding.severity is Severity.WARNING
    assert evidence["slow_runs"] == evidence["runs"] and evidence["failed_runs"] == 0
    assert evidence["p"] < 1e-4 and evidence["expected"] < evidence["runs"] / 2
    assert finding.subject.startswith("sets.sendrecv.sorted+shuffled:")
    assert set(evidence["metrics"]) == {"bandwidth.1048576", "time.1048576"}
    assert all(weak in expand(s["set"]) for s in evidence["slow_sets"])


def test_too_few_repetitions_name_nobody_but_say_what_would_decide(tmp_path):
    # 12 nodes in sets of 4: 3 sets a repetition, so chance puts a node in the
    # slow set of a repetition one time in 3; 3 repetitions of each ordering
    # make 3**-6 * 12 nodes = 0.016, far from alpha.  6 repetitions suffice
    # (see test_one_slow_node_is_named_and_nothing_else).
    # The slow node is named as undecided, with the repetitions that decide.
    nodes = node_names("unpadded", 12)
    dataset = stored(tmp_path, Fabric(nodes, slow={nodes[4]: 3.0}), 4, 3, seed=1)
    assert judged(dataset, ["weak-set-member"]) == [("weak-set-member-undecided", nodes[4])]
    finding, = find_all(dataset, rules=["weak-set-member"])
    assert finding.severity is Severity.INFO
    assert finding.evidence["repetitions"] == 3 and finding.evidence["repetitions_to_decide"] == 6
    assert finding.evidence["least_p"] == pytest.approx(12 * 3.0 ** -6)
    assert "-r 6" in finding.remedy and "6 repetitions or more can decide" in finding.message


def test_a_node_whose_sets_fail_is_named(tmp_path):
    nodes = node_names("unpadded", 24)
    dataset = stored(tmp_path, Fabric(nodes, failing={nodes[9]}), 4, 5, seed=3)
    assert not dataset.set_runs or all(nodes[9] not in expand(label) for r in dataset.set_runs
                                       for label in r.labels.tolist())
    findings = find_all(dataset, rules=["weak-set-member"])
    assert [(f.kind, f.nodes) for f in findings] == [("weak-set-member", nodes[9])]
    evidence = findings[0].evidence
    assert evidence["failed_runs"] == evidence["runs"] == 10 and evidence["slow_runs"] == 0
    assert "10 failed of its 10 set runs" in findings[0].message


def test_when_every_set_fails_no_node_is_singled_out(tmp_path):
    nodes = node_names("unpadded", 24)
    dataset = stored(tmp_path, Fabric(nodes, failing=set(nodes)), 4, 5, seed=3)
    assert dataset.set_runs == [] and len(dataset.failures) == 2 * 2 * 5 * 6
    assert judged(dataset, ["weak-set-member"]) == []


@pytest.mark.slow
@pytest.mark.parametrize("n, size, repetitions", [(24, 4, 8), (100, 4, 4), (100, 8, 4)])
def test_two_weak_nodes_are_both_named(tmp_path, n, size, repetitions):
    nodes = node_names("unpadded", n)
    first, second = nodes[5], nodes[n - 7]
    dataset = stored(tmp_path, Fabric(nodes, slow={first: 3.0, second: 2.5}), size, repetitions, seed=n)
    assert sorted(judged(dataset)) == sorted([("weak-set-member", first), ("weak-set-member", second)])


@pytest.mark.slow
def test_a_slow_node_and_a_failing_node_are_both_named(tmp_path):
    nodes = node_names("unpadded", 24)
    dataset = stored(tmp_path, Fabric(nodes, slow={nodes[3]: 2.0}, failing={nodes[9]}), 4, 8, seed=4)
    assert sorted(judged(dataset)) == [("weak-set-member", nodes[9]), ("weak-set-member", nodes[3])]


def test_the_sorted_set_mates_of_a_weak_node_are_not_named(tmp_path):
    nodes = node_names("unpadded", 24)
    weak = nodes[5]
    mates = next(s for s in set_plans(nodes, 4, SORTED, 1)[0].sets if weak in s)
    assert len(mates) == 4
    dataset = stored(tmp_path, Fabric(nodes, slow={weak: 3.0}), 4, 6, seed=8)
    finding, = find_all(dataset, rules=["weak-set-member"])
    assert finding.nodes == weak
    # The mates shared every sorted run with it, and more slow runs than any
    # other node: yet they are not named.
    shared = finding.evidence["co_members"]
    top = sorted(shared, key=lambda node: -shared[node])[:3]
    assert set(top) == set(mates) - {weak}
    assert all(shared[m] >= 6 for m in top)


def test_sorted_sets_alone_cannot_tell_a_weak_node_from_its_set_mates(tmp_path):
    nodes = node_names("unpadded", 24)
    dataset = stored(tmp_path, Fabric(nodes, slow={nodes[5]: 3.0}), 4, 10, seed=9, orderings=(SORTED,))
    assert judged(dataset, ["weak-set-member"]) == []


@pytest.mark.slow
@pytest.mark.parametrize("scheme", SCHEMES)
def test_foreign_node_names(tmp_path, scheme):
    nodes = node_names(scheme, 24)
    first, second = nodes[6], nodes[19]
    dataset = stored(tmp_path, Fabric(nodes, slow={first: 3.0, second: 4.0}), 4, 8, seed=11)
    assert sorted(judged(dataset)) == sorted([("weak-set-member", first), ("weak-set-member", second)])


def test_node_names_that_fold_into_odd_ranges(tmp_path):
    # Unpadded names: node1..node12 fold to node[1-12]; node9 and node10 sit
    # side by side in a sorted set.
    nodes = node_names("unpadded", 12)
    assert fold(nodes[8:12]) == "node[9-12]"
    dataset = stored(tmp_path, Fabric(nodes, slow={nodes[9]: 3.0}), 4, 8, seed=12)
    assert judged(dataset) == [("weak-set-member", "node10")]


@pytest.mark.slow
@pytest.mark.parametrize("n, size", [(12, 4), (16, 8), (40, 4), (100, 8)])
def test_healthy_clusters_give_no_weak_set_member(n, size):
    """Over many seeds, with noise and random slow runs (OS jitter, another
    job's burst: a run three times slower one time in ten), no node is named."""
    rule = get_rule("weak-set-member")
    nodes = node_names("unpadded", n)
    for seed in range(50 if n < 100 else 20):
        fabric = Fabric(nodes, noise=0.03, jitter=0.1 if seed % 2 else 0.0)
        rows = set_rows(fabric, size, 3 + seed % 8, seed)
        findings = rule(direct_dataset(rows), Sensitivity())
        assert findings == [], f"seed {seed}: {[f.message for f in findings]}"


def _one_random_slow_set_per_round(rows, seed):
    """Each repetition of each ordering, one set chosen at random runs three
    times slower: slow runs that follow no node, the null hypothesis itself."""
    rng = np.random.default_rng(seed)
    rounds = {}
    for index, row in enumerate(rows):
        rounds.setdefault((row.series, row.repetition), []).append(index)
    out = list(rows)
    for indices in rounds.values():
        chosen = int(rng.choice(indices))
        row = rows[chosen]
        out[chosen] = Row(row.series, row.label, row.members, row.repetition, row.ordering, row.bandwidth / 3)
    return out


@pytest.mark.slow
def test_slow_sets_that_follow_no_node_raise_false_alarms_at_most_at_alpha():
    """At alpha = 0.01, 12 nodes in sets of 4, 4 repetitions: chance alone
    puts some node in 7 of its 8 runs' slow sets one time in 30.  The test
    of a node's count must know that it sits in one set of each repetition
    (its runs are not drawn freely from all 24): pooled into one
    hypergeometric, that node's p is 2e-3 and it is named; per repetition,
    its p is 0.03 and only a node in all 8 (1 in 560) is."""
    rule = get_rule("weak-set-member")
    nodes = node_names("unpadded", 12)
    alpha, trials = 0.01, 300
    false_alarms = 0
    for seed in range(trials):
        rows = _one_random_slow_set_per_round(set_rows(Fabric(nodes, noise=0.01), 4, 4, seed), seed)
        false_alarms += bool(rule(direct_dataset(rows), Sensitivity(alpha=alpha)))
    # Expected about 0.6 at this alpha (a node in all 8); 3 is beyond it with
    # probability 2%, while the pooled test gives about 9.
    assert false_alarms <= 3, false_alarms


def test_round_tails_is_the_exact_tail_of_the_sum_over_rounds():
    runs = np.array([3, 3, 6, 5])
    bad = np.array([1, 2, 1, 0])
    node_runs = np.array([[1, 1, 1, 1], [1, 0, 2, 1], [0, 0, 0, 0], [1, 1, 1, 0]])
    node_bad = np.array([3, 2, 0, 1])
    tail, expected = round_tails(runs, bad, node_runs, node_bad)

    def exact(counts, k):
        # Convolution of the rounds' hypergeometric laws by enumeration.
        laws = [stats.hypergeom(int(runs[r]), int(bad[r]), int(c)) for r, c in enumerate(counts) if c]
        total = 0.0
        for outcome in itertools.product(*[range(int(c) + 1) for c in counts if c]):
            if sum(outcome) >= k:
                total += math.prod(law.pmf(x) for law, x in zip(laws, outcome))
        return total if laws else float(k <= 0)

    for i in range(len(node_runs)):
        assert tail[i] == pytest.approx(exact(node_runs[i], node_bad[i]), rel=1e-12, abs=1e-15)
        assert expected[i] == pytest.approx(float(np.sum(node_runs[i] * bad / runs)))
    # In every round of 3 sets, one slow: all 6 of a node's runs slow has
    # probability 3**-6, not the pooled hypergeometric's 1/C(18, 6).
    tail, _ = round_tails(np.full(6, 3), np.ones(6, dtype=int), np.ones((1, 6), dtype=int), np.array([6]))
    assert tail[0] == pytest.approx(3.0 ** -6)
    assert stats.hypergeom.sf(5, 18, 6, 6) == pytest.approx(1 / math.comb(18, 6))


def test_tiny_probabilities_keep_their_precision():
    tail, _ = round_tails(np.full(20, 100), np.ones(20, dtype=int), np.ones((1, 20), dtype=int), np.array([20]))
    assert tail[0] == pytest.approx(1e-40, rel=1e-9)


def test_weak_set_members_sets_aside_a_node_tied_with_its_set_mates():
    # Two runs per round, the same two sets every time (sorted only): the
    # slow set's four members are in exactly the same slow runs.
    runs = [SetRun(f"sets.x.{SORTED}", label, rep, value, 100.0, False, value < 50)
            for rep in range(1, 11) for label, value in (("node[1-4]", 30.0), ("node[5-8]", 100.0))]
    assert weak_set_members(runs, 1e-2) == []


# ---------------------------------------------------------------- set-contention


def contention_dataset(tmp_path, contention, repetitions=4, n=24, seed=0):
    nodes = node_names("unpadded", n)
    return stored(tmp_path, Fabric(nodes, topology=leaves(nodes, 8), contention=contention, noise=0.01), 4,
                  repetitions, seed=seed)


def test_shuffled_sets_far_more_variable_than_sorted_ones_are_contention(tmp_path):
    dataset = contention_dataset(tmp_path, 0.7)
    finding, = find_all(dataset, rules=["set-contention"])
    evidence = finding.evidence
    assert finding.subject == "sets.sendrecv.shuffled:bandwidth.1048576"
    assert evidence["shuffled_spread_pct"] >= max(CONTENTION_FLOOR_PCT, 2 * evidence["sorted_spread_pct"])
    assert evidence["p"] < 0.01 and evidence["sorted_runs"] == evidence["shuffled_runs"] == 24
    # Both figures, in the message and the evidence.
    assert f"{evidence['shuffled_spread_pct']:.3g}%" in finding.message
    assert f"{evidence['sorted_spread_pct']:.3g}%" in finding.message
    assert evidence["shuffled_variability_pct"] > evidence["sorted_variability_pct"]
    assert evidence["groups_spanned"] == {SORTED: 1.0, SHUFFLED: 3.0}
    assert set(evidence["metrics"]) == {"bandwidth.1048576", "time.1048576"}
    assert judged(dataset, ["weak-set-member"]) == []


@pytest.mark.parametrize("seed", range(5))
def test_equal_variability_is_no_contention(tmp_path, seed):
    nodes = node_names("unpadded", 24)
    dataset = stored(tmp_path, Fabric(nodes, topology=leaves(nodes, 8), noise=0.05), 4, 6, seed=seed)
    assert judged(dataset) == []


@pytest.mark.slow
def test_too_few_runs_say_nothing_of_contention(tmp_path):
    # 8 nodes in sets of 4, 2 repetitions: 4 runs per ordering.
    nodes = node_names("unpadded", 8)
    dataset = stored(tmp_path, Fabric(nodes, topology=leaves(nodes, 4), contention=0.8, noise=0.01), 4, 2)
    assert judged(dataset, ["set-contention"]) == []
    # The same fabric with enough runs is contention.
    dataset = stored(tmp_path, Fabric(nodes, topology=leaves(nodes, 4), contention=0.8, noise=0.01), 4, 6, seed=1)
    assert judged(dataset, ["set-contention"]) == [("set-contention", "node[1-8]")]


def test_contention_is_judged_on_relative_spread():
    """Shuffled sets at a fifth of the sorted bandwidth, spread twice as much
    in per cent, spread less in MB/s: contention all the same.  Sorted sets
    at 1000 ± 2%, shuffled at 200 ± 10%... (an absolute Levene test on the
    raw values sees the sorted ones as the wider)."""
    rng = np.random.default_rng(5)
    nodes = node_names("unpadded", 24)
    rows = []
    for ordering, centre, cv in ((SORTED, 1000.0, 0.04), (SHUFFLED, 200.0, 0.15)):
        for plan in set_plans(nodes, 4, ordering, 5, 5):
            for members in plan.sets:
                rows.append(Row(f"sets.sendrecv.{ordering}", fold(members), members, plan.repetition, ordering,
                                centre * math.exp(cv * rng.standard_normal())))
    finding, = find_all(direct_dataset(rows), rules=["set-contention"])
    assert finding.evidence["shuffled_spread_pct"] > 2 * finding.evidence["sorted_spread_pct"]


# ---------------------------------------------------------------- scaling-loss


def scale_fabric(n=12, group=4, bad="leaf2", divisor=10.0, uplink=None, **options):
    """n nodes, group to a leaf switch, non-blocking uplinks but the bad
    leaf's at 1/divisor of that (as ``oddnode testbed fault uplink --slower``)."""
    nodes = node_names("unpadded", n)
    uplink = dict(uplink or {})
    if bad:
        uplink[bad] = group * LINK / divisor
    return Fabric(nodes, topology=leaves(nodes, group), uplink=uplink, **options)


def test_a_poor_uplink_is_a_scaling_loss_that_names_its_group(tmp_path):
    fabric = scale_fabric()
    with open_store(tmp_path / "scale.duckdb") as store:
        write_scale(store, fabric, 5, seed=1)
        dataset = store.load_dataset()
        finding, = find_all(dataset, rules=SET_RULES)
        # Its evidence is plain JSON, as the store keeps it.
        store.record_findings("oddnode analyze", [finding])
        assert store.latest_findings()[0].evidence["slow_uplinks"] == ["leaf2"]
    assert (finding.kind, finding.nodes) == ("scaling-loss", "node[5-8]")
    evidence = finding.evidence
    assert finding.subject == "scale.sendrecv.shuffled:bandwidth.1048576"
    assert evidence["slow_uplinks"] == ["leaf2"] and evidence["ratio"][12] < LOSS_RATIO
    assert evidence["shuffled_fall"] <= LOSS_RATIO
    # A tenth of its 4 nodes' links: about 10:1.
    assert 7 <= evidence["oversubscription"]["leaf2"] <= 12
    assert evidence["uplinks"]["leaf2"]["best_crossing_run"] < 0.5 * min(
        v["best_crossing_run"] for g, v in evidence["uplinks"].items() if g != "leaf2")
    assert "leaf2 (node[5-8]" in finding.message and "leaf2" in finding.remedy


@pytest.mark.parametrize("bad", ["leaf1", "leaf2", "leaf3"])
def test_the_poor_uplink_is_found_over_seeds_and_never_blamed_on_another_group(bad):
    rule = get_rule("scaling-loss")
    fabric = scale_fabric(bad=bad)
    members = fold(n for n, g in fabric.topology.items() if g == bad)
    found = named = 0
    for seed in range(20):
        findings = rule(direct_dataset(scale_rows(fabric, 5, seed), fabric.topology), Sensitivity())
        found += len(findings)
        for finding in findings:
            assert finding.nodes in (members, "node[1-12]"), (seed, finding.message)
            named += finding.nodes == members
    # Shuffled sets of 12 nodes cross the uplink 2 or 3 times (a ratio near
    # the 0.5 bound) and few shuffled sets avoid it: not every seed is found.
    assert found >= 17 and named >= found - 2, (found, named)


def test_a_larger_cluster_names_the_poor_uplink_every_time():
    rule = get_rule("scaling-loss")
    # 8 nodes a leaf, leaf3's uplink at a twentieth: under half a link.
    fabric = scale_fabric(n=24, group=8, bad="leaf3", divisor=20)
    for seed in range(8):
        findings = rule(direct_dataset(scale_rows(fabric, 4, seed), fabric.topology), Sensitivity())
        assert [f.nodes for f in findings] == ["node[17-24]"], seed


def test_an_uplink_that_still_carries_most_of_a_link_is_a_loss_but_not_named():
    """8 nodes a leaf, leaf3's uplink at a tenth of 8 links: 0.8 of one.  A
    pair across it runs at 0.8 of a link, not slow; only large shuffled sets,
    crossing every uplink, are, and no run shows the other uplinks carrying
    twice what leaf3's did.  The loss is found; no group is blamed."""
    rule = get_rule("scaling-loss")
    fabric = scale_fabric(n=24, group=8, bad="leaf3")
    for seed in range(3):
        finding, = rule(direct_dataset(scale_rows(fabric, 4, seed), fabric.topology), Sensitivity())
        assert finding.nodes == "node[1-24]" and finding.evidence["slow_uplinks"] == []
        assert finding.evidence["uplink_candidates"] == ["leaf1", "leaf2", "leaf3"]


def three_leaf_scale(shuffled: list[tuple[tuple[int, ...], float]]):
    """Scale runs on 12 nodes cn01... under 3 leaves of 4 (MB/s, a link
    1000): the sorted ones healthy at 2, 4 and 12 nodes, 3 repetitions;
    the shuffled ones as given (member numbers, bandwidth), 3 counts a
    repetition."""
    from oddnode.readings.sets_series import SCALE, set_series

    nodes = [f"cn{i:02d}" for i in range(1, 13)]
    topology = {n: f"leaf{(i - 1) // 4 + 1}" for i, n in enumerate(nodes, 1)}
    runs = {SORTED: [((1, 2), 1000.0), ((1, 2, 3, 4), 1000.0), (tuple(range(1, 13)), 330.0)] * 3,
            SHUFFLED: shuffled}
    rows = []
    for ordering, ordered in runs.items():
        for index, (numbers, bandwidth) in enumerate(ordered):
            members = tuple(nodes[n - 1] for n in numbers)
            rows.append(Row(set_series(SCALE, "sendrecv", ordering), fold(members), members, index // 3, ordering,
                            bandwidth))
    return direct_dataset(rows, topology)


# leaf2's uplink poor: the shuffled runs that cross it at a third of a link.
EVERYONE = tuple(range(1, 13))
POOR_LEAF2 = [((8, 9), 330.0), ((1, 4, 9, 11), 1000.0), (EVERYONE, 145.0),
              ((1, 12), 1000.0), ((3, 8, 9, 12), 330.0), (EVERYONE, 140.0),
              ((6, 10), 330.0), ((1, 2, 10, 12), 1000.0), (EVERYONE, 145.0)]


def test_a_slow_run_that_crosses_no_uplink_does_not_hide_the_poor_one():
    # A pair inside leaf1 slowed by a busy moment: no uplink explains it.
    shuffled = [((1, 2), 400.0) if numbers == (1, 12) else (numbers, value) for numbers, value in POOR_LEAF2]
    finding, = get_rule("scaling-loss")(three_leaf_scale(shuffled), Sensitivity())
    assert finding.evidence["slow_uplinks"] == ["leaf2"] and finding.nodes == "cn[05-08]"


def test_a_group_is_not_named_where_another_uplink_carried_under_half_of_its_best_run():
    """A leaf1-leaf3 pair slowed by a busy moment: every slow run crosses
    leaf3, one misses leaf2.  But leaf3's uplink carried a full link in a
    set of four, against leaf2's third: no group is named rather than the
    wrong one."""
    shuffled = [((1, 12), 360.0) if numbers == (1, 12) else (numbers, value) for numbers, value in POOR_LEAF2]
    finding, = get_rule("scaling-loss")(three_leaf_scale(shuffled), Sensitivity())
    assert finding.evidence["uplink_candidates"] == ["leaf3"]
    assert finding.evidence["slow_uplinks"] == [] and finding.nodes == "cn[01-12]"


def test_the_poor_uplink_of_three_leaves_is_named():
    finding, = get_rule("scaling-loss")(three_leaf_scale(POOR_LEAF2), Sensitivity())
    assert finding.evidence["slow_uplinks"] == ["leaf2"] and finding.nodes == "cn[05-08]"


def test_without_a_topology_the_loss_names_the_nodes_of_the_runs():
    fabric = scale_fabric()
    rows = scale_rows(fabric, 5, seed=1)
    finding, = get_rule("scaling-loss")(direct_dataset(rows), Sensitivity())
    assert finding.nodes == "node[1-12]" and "uplinks" not in finding.evidence


@pytest.mark.parametrize("seed", range(10))
def test_a_healthy_fabric_has_no_scaling_loss(seed):
    fabric = scale_fabric(bad=None, noise=0.05)
    assert judged(direct_dataset(scale_rows(fabric, 3 + seed % 4, seed), fabric.topology)) == []


@pytest.mark.parametrize("seed", range(5))
def test_an_application_slow_in_both_orderings_alike_is_no_scaling_loss(seed):
    # Each node added costs 30%: 12 nodes run at a quarter of 2, in both orders.
    fabric = scale_fabric(bad=None, per_node_cost=0.3)
    dataset = direct_dataset(scale_rows(fabric, 4, seed), fabric.topology)
    assert judged(dataset) == []


def test_one_bad_shuffled_run_is_no_scaling_loss():
    fabric = scale_fabric(bad=None)

    def with_bad_runs(repetitions, bad):
        rows = scale_rows(fabric, repetitions, seed=2)
        # Shuffled repetitions at 12 nodes at a quarter of the others.
        at_largest = [i for i, r in enumerate(rows) if r.ordering == SHUFFLED and len(r.members) == 12]
        for index in at_largest[:bad]:
            row = rows[index]
            rows[index] = Row(row.series, row.label, row.members, row.repetition, row.ordering, row.bandwidth / 4)
        return judged(direct_dataset(rows, fabric.topology), ["scaling-loss"])

    assert with_bad_runs(1, 1) == []
    assert with_bad_runs(2, 2) == [("scaling-loss", "node[1-12]")]


def test_a_fabric_oversubscribed_everywhere_names_no_group():
    # Every uplink carries one link (4:1): shuffled chains cross each several
    # times, sorted ones once; no group is worse than another.
    fabric = scale_fabric(bad=None, uplink={g: 1000.0 for g in ("leaf1", "leaf2", "leaf3")})
    for seed in range(5):
        findings = get_rule("scaling-loss")(direct_dataset(scale_rows(fabric, 5, seed), fabric.topology),
                                            Sensitivity())
        assert [f.nodes for f in findings] in ([], ["node[1-12]"]), seed


# ---------------------------------------------------------------- the whole analysis


def test_the_rules_are_registered():
    assert set(SET_RULES) <= set(RULES)


@pytest.mark.slow
def test_analyze_runs_the_set_rules_beside_the_others(tmp_path):
    nodes = node_names("cn", 24)
    weak = nodes[10]
    fabric = Fabric(nodes, topology=leaves(nodes, 8), slow={weak: 3.0})
    rng = np.random.default_rng(0)
    with open_store(tmp_path / "all.duckdb") as store:
        write_node_series(store, "memory.triad", {n: float(v) for n, v in zip(nodes, rng.normal(2000, 20, 24))})
        write_sets(store, fabric, 4, 6, seed=2)
        write_scale(store, fabric, 3, seed=2)
        dataset = store.load_dataset()
    analysis = analyze(dataset)
    warnings = {(f.kind, f.nodes) for f in analysis.findings if f.severity.rank >= Severity.WARNING.rank}
    assert warnings == {("weak-set-member", weak)}
    assert json.loads(json.dumps(analysis.to_json()))["findings"]
