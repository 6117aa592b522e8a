"""Sets by topology group: packed (a group filled before the next) and
striped (round-robin across the groups), and one job's placement."""

from __future__ import annotations

import pytest

from oddnode.core.nodes import expand
from oddnode.readings.partition import (
    UNGROUPED,
    node_groups,
    packed_order,
    placement,
    set_plans,
    spanned_groups,
    striped_order,
    topology_notes,
)

# A site's own names: three racks' switches of unequal size, the nodes listed
# as the site lists them (not grouped).
GPUS = expand("gpu[003-010]")
TOPOLOGY = {**dict.fromkeys(["cn-a17", "cn-a18", "cn-a19"], "r12-sw3"),
            **dict.fromkeys(GPUS[:5], "r12-sw4"),
            **dict.fromkeys(GPUS[5:], "r13-sw1")}
LISTED = ["cn-a17", GPUS[0], "cn-a18", *GPUS[1:], "cn-a19"]  # 11 nodes


def test_packed_keeps_a_group_together_groups_in_the_order_of_their_first_node():
    assert packed_order(LISTED, TOPOLOGY) == ["cn-a17", "cn-a18", "cn-a19", *GPUS]
    assert list(node_groups(LISTED, TOPOLOGY)) == ["r12-sw3", "r12-sw4", "r13-sw1"]


def test_striped_takes_a_node_of_every_group_in_turn_until_the_small_groups_run_out():
    assert striped_order(LISTED, TOPOLOGY) == [
        "cn-a17", "gpu003", "gpu008",
        "cn-a18", "gpu004", "gpu009",
        "cn-a19", "gpu005", "gpu010",
        "gpu006", "gpu007"]  # r12-sw3 and r13-sw1 used up: r12-sw4 alone


def test_packed_sets_fill_a_group_before_the_next_and_striped_sets_span_all_they_can():
    # 11 nodes in sets of 3: 3 sets and 2 sitting out, the same every repetition.
    packed = set_plans(LISTED, 3, "packed", 3, groups=TOPOLOGY)
    striped = set_plans(LISTED, 3, "striped", 3, groups=TOPOLOGY)
    assert all(p.sets == packed[0].sets and p.idle == packed[0].idle for p in packed)
    assert all(p.sets == striped[0].sets for p in striped)
    assert [spanned_groups(s, TOPOLOGY) for s in packed[0].sets] == [
        ("r12-sw3",), ("r12-sw4",), ("r12-sw4", "r13-sw1")]
    assert all(len(spanned_groups(s, TOPOLOGY)) == 3 for s in striped[0].sets)
    assert packed[0].idle == ("gpu009", "gpu010") and striped[0].idle == ("gpu006", "gpu007")
    for plan in (*packed, *striped):
        assert sorted([n for s in plan.sets for n in s] + list(plan.idle)) == sorted(LISTED)


def test_nodes_the_topology_does_not_place_form_one_group_and_a_note_names_them():
    listed = ["cn-a17", "login1", "cn-a18", "login2", "gpu003"]
    groups = {"cn-a17": "r12-sw3", "cn-a18": "r12-sw3", "gpu003": "r12-sw4"}
    assert list(node_groups(listed, groups)) == ["r12-sw3", UNGROUPED, "r12-sw4"]
    assert packed_order(listed, groups) == ["cn-a17", "cn-a18", "login1", "login2", "gpu003"]
    # Not spread over as if each hung from a switch of its own.
    assert striped_order(listed, groups) == ["cn-a17", "login1", "gpu003", "cn-a18", "login2"]
    assert spanned_groups(["login1", "cn-a17"], groups) == (UNGROUPED, "r12-sw3")
    (note,) = topology_notes(listed, groups, "striped")
    assert "2 nodes not in the topology, login[1-2], form one group (ungrouped)" in note


def test_one_group_only_packed_is_striped_is_the_list_and_a_note_says_so():
    nodes = expand("gpu[003-010]")
    groups = dict.fromkeys(nodes, "leaf1")
    assert packed_order(nodes, groups) == striped_order(nodes, groups) == nodes
    assert set_plans(nodes, 4, "packed", 1, groups=groups) == [
        p.__class__("packed", 1, p.sets, p.idle) for p in set_plans(nodes, 4, "striped", 1, groups=groups)]
    (note,) = topology_notes(nodes, groups, "packed")
    assert "one group (leaf1): packed and striped sets are the same" in note


def test_equal_groups_dividing_the_nodes_give_packed_sets_of_one_group_striped_of_every_group():
    nodes = [f"node{i:02d}" for i in range(1, 13)]
    groups = {n: f"leaf{(i // 4) + 1}" for i, n in enumerate(nodes)}
    packed = set_plans(nodes, 4, "packed", 1, groups=groups)[0]
    striped = set_plans(nodes, 4, "striped", 1, groups=groups)[0]
    assert [spanned_groups(s, groups) for s in packed.sets] == [("leaf1",), ("leaf2",), ("leaf3",)]
    assert [len(spanned_groups(s, groups)) for s in striped.sets] == [3, 3, 3]
    assert topology_notes(nodes, groups, "packed") == []


@pytest.mark.parametrize("groups", [None, {}])
def test_packed_or_striped_without_a_topology_is_refused(groups):
    for ordering in ("packed", "striped"):
        with pytest.raises(ValueError, match=f"ordering {ordering} needs a topology"):
            set_plans(LISTED, 3, ordering, 1, groups=groups)
        with pytest.raises(ValueError, match="needs a topology"):
            placement(LISTED, groups, ordering, 4)


def test_a_topology_of_other_nodes_is_refused():
    with pytest.raises(ValueError, match="places none of the 3 nodes"):
        set_plans(["x1", "x2", "x3"], 2, "packed", 1, groups=TOPOLOGY)


def test_placement_gives_one_job_of_each_ordering():
    assert placement(LISTED, TOPOLOGY, "given", 4) == tuple(LISTED[:4])
    assert placement(LISTED, TOPOLOGY, "sorted", 4) == ("cn-a17", "cn-a18", "cn-a19", "gpu003")
    assert placement(LISTED, TOPOLOGY, "packed", 4) == ("cn-a17", "cn-a18", "cn-a19", "gpu003")
    assert placement(LISTED, TOPOLOGY, "striped", 4) == ("cn-a17", "gpu003", "gpu008", "cn-a18")
    assert placement(LISTED, TOPOLOGY, "packed", 11) == tuple(packed_order(LISTED, TOPOLOGY))
    shuffled = placement(LISTED, TOPOLOGY, "shuffled", 5, seed=4)
    assert shuffled == placement(LISTED, None, "shuffled", 5, seed=4)  # the seed alone decides
    assert len(set(shuffled)) == 5 and set(shuffled) <= set(LISTED)
    assert {placement(LISTED, None, "shuffled", 5, seed=s) for s in range(6)} != {shuffled}
    # given and sorted need no topology
    assert placement(GPUS[::-1], None, "sorted", 2) == ("gpu003", "gpu004")


@pytest.mark.parametrize("ordering, count, problem", [
    ("compact", 4, "no placement named 'compact'"),
    ("packed", 0, "a job of 0 nodes"),
    ("striped", 12, "a job of 12 nodes cannot be placed on 11 nodes"),
])
def test_a_placement_that_cannot_be_made_is_refused(ordering, count, problem):
    with pytest.raises(ValueError, match=problem):
        placement(LISTED, TOPOLOGY, ordering, count)


def test_a_node_named_twice_is_refused_naming_it():
    with pytest.raises(ValueError, match="named twice in the node list: cn-a17"):
        packed_order([*LISTED, "cn-a17"], TOPOLOGY)


def test_scale_orderings_stay_those_of_the_node_list():
    from oddnode.readings.partition import scale_plans

    with pytest.raises(ValueError, match="packed only for oddnode sets|only for oddnode sets"):
        scale_plans(LISTED, [2, 4], "packed", 1)
