from collections import Counter
from itertools import combinations, permutations

import pytest

from oddnode.readings.patterns import (
    ALL_PAIRS,
    FILE_PATTERN,
    PATTERNS,
    PairPatternError,
    PairPlan,
    PairsFileError,
    UnknownPatternError,
    all_pairs_rounds,
    is_disjoint,
    ordered_rounds,
    pair_label,
    pattern_pairs,
    read_pairs_file,
    shared_nodes,
)
from oddnode.core.nodes import NodeNameError, split_pair


def names(n: int) -> list[str]:
    return [f"node{i:03d}" for i in range(1, n + 1)]


def numbered(plan: PairPlan) -> list[tuple[int, int]]:
    """The plan's pairs as 1-based positions, to compare with hand-written pairs."""
    return [(int(a[4:]), int(b[4:])) for a, b in plan.pairs]


def matching(plan: PairPlan) -> set[frozenset[str]]:
    return {frozenset(pair) for pair in plan.pairs}


def test_sort_cut_fold_of_eight_nodes():
    nodes = names(8)
    assert numbered(pattern_pairs("sort", nodes)) == [(1, 2), (3, 4), (5, 6), (7, 8)]
    assert numbered(pattern_pairs("cut", nodes)) == [(1, 5), (2, 6), (3, 7), (4, 8)]
    assert numbered(pattern_pairs("fold", nodes)) == [(1, 8), (2, 7), (3, 6), (4, 5)]
    for pattern in ("sort", "cut", "fold"):
        assert pattern_pairs(pattern, nodes).idle == []


def test_sort_cut_fold_of_seven_nodes_say_who_sits_out():
    nodes = names(7)
    sort, cut, fold = (pattern_pairs(p, nodes) for p in ("sort", "cut", "fold"))
    assert numbered(sort) == [(1, 2), (3, 4), (5, 6)] and sort.idle == ["node007"]
    assert numbered(cut) == [(1, 4), (2, 5), (3, 6)] and cut.idle == ["node007"]
    assert numbered(fold) == [(1, 7), (2, 6), (3, 5)] and fold.idle == ["node004"]
    assert "node004 sits out (the middle of an odd count)" in fold.describe()
    assert "node007 sits out (the last of an odd count)" in cut.describe()


@pytest.mark.parametrize("n", range(2, 14))
@pytest.mark.parametrize("pattern", PATTERNS)
def test_every_pattern_pairs_each_node_once_and_leaves_out_n_mod_2(pattern, n):
    nodes = names(n)
    for repetition in (1, 2, 3):
        plan = pattern_pairs(pattern, nodes, repetition=repetition, seed=7)
        members = Counter(node for pair in plan.pairs for node in pair)
        assert all(count == 1 for count in members.values())
        assert len(plan.idle) == n % 2
        assert set(members) | set(plan.idle) == set(nodes)
        assert not set(members) & set(plan.idle)
        assert len(plan.pairs) == n // 2
        assert plan.disjoint and plan.repetition == repetition and plan.pattern == pattern
        assert all(a != b for a, b in plan.pairs)


def test_shuffle_draws_a_new_matching_each_repetition_reproducibly():
    nodes = names(20)
    first, second = pattern_pairs("shuffle", nodes, 1, seed=3), pattern_pairs("shuffle", nodes, 2, seed=3)
    assert matching(first) != matching(second)
    assert pattern_pairs("shuffle", nodes, 1, seed=3).pairs == first.pairs
    assert pattern_pairs("shuffle", nodes, 1, seed=4).pairs != first.pairs
    draws = {frozenset(matching(pattern_pairs("shuffle", nodes, r, seed=3))) for r in range(1, 11)}
    assert len(draws) == 10
    assert first.seed == 3 and "seed 3" in first.describe()


def test_random_keeps_one_matching_for_every_repetition():
    nodes = names(21)
    plans = [pattern_pairs("random", nodes, r, seed=5) for r in range(1, 6)]
    assert all(plan.pairs == plans[0].pairs and plan.idle == plans[0].idle for plan in plans)
    assert [plan.repetition for plan in plans] == [1, 2, 3, 4, 5]
    assert pattern_pairs("random", nodes, 1, seed=6).pairs != plans[0].pairs
    assert pattern_pairs("shuffle", nodes, 1, seed=5).pairs != plans[0].pairs


def test_fixed_patterns_ignore_the_seed():
    nodes = names(9)
    for pattern in ("sort", "cut", "fold"):
        plan = pattern_pairs(pattern, nodes, repetition=4, seed=11)
        assert plan.pairs == pattern_pairs(pattern, nodes).pairs
        assert plan.seed is None and plan.repetition == 4


@pytest.mark.parametrize("n", range(2, 14))
def test_all_pairs_rounds_cover_every_pair_once_in_disjoint_rounds(n):
    nodes = names(n)
    rounds = all_pairs_rounds(nodes)
    assert len(rounds) == (n - 1 if n % 2 == 0 else n)
    assert [plan.repetition for plan in rounds] == list(range(1, len(rounds) + 1))
    seen = Counter(frozenset(pair) for plan in rounds for pair in plan.pairs)
    assert set(seen) == {frozenset(pair) for pair in combinations(nodes, 2)}
    assert all(count == 1 for count in seen.values())
    for plan in rounds:
        assert plan.pattern == ALL_PAIRS and plan.disjoint
        assert len(plan.idle) == n % 2
        assert {node for pair in plan.pairs for node in pair} | set(plan.idle) == set(nodes)
        assert all(nodes.index(a) < nodes.index(b) for a, b in plan.pairs)
    if n % 2:
        assert sorted(node for plan in rounds for node in plan.idle) == nodes
        assert "round 1" in rounds[0].describe()


@pytest.mark.parametrize("n", range(2, 14))
def test_ordered_rounds_cover_every_ordered_pair_once(n):
    nodes = names(n)
    rounds = ordered_rounds(nodes)
    assert len(rounds) == 2 * len(all_pairs_rounds(nodes))
    seen = Counter(pair for plan in rounds for pair in plan.pairs)
    assert set(seen) == set(permutations(nodes, 2))
    assert all(count == 1 for count in seen.values())
    assert all(plan.disjoint for plan in rounds)
    assert [plan.repetition for plan in rounds] == list(range(1, len(rounds) + 1))


@pytest.mark.parametrize("nodes", [[], ["node001"]])
def test_fewer_than_two_nodes_is_an_error(nodes):
    for pattern in PATTERNS:
        with pytest.raises(PairPatternError, match="at least 2 nodes"):
            pattern_pairs(pattern, nodes)
    with pytest.raises(PairPatternError, match="at least 2 nodes"):
        all_pairs_rounds(nodes)


def test_bad_node_lists_are_errors():
    with pytest.raises(PairPatternError, match=r"names node\[001-002\] more than once"):
        pattern_pairs("sort", ["node001", "node002", "node003", "node001", "node002"])
    with pytest.raises(PairPatternError, match="expand a node set"):
        pattern_pairs("sort", "node[001-004]")
    with pytest.raises(NodeNameError):
        pattern_pairs("cut", ["node001", "node 002"])


def test_pattern_errors_name_the_problem():
    nodes = names(4)
    with pytest.raises(UnknownPatternError, match="'ring'.*sort, cut, fold, shuffle, random, file"):
        pattern_pairs("ring", nodes)
    with pytest.raises(PairPatternError, match="repetitions count from 1"):
        pattern_pairs("sort", nodes, repetition=0)
    with pytest.raises(PairPatternError, match="non-negative integer"):
        pattern_pairs("shuffle", nodes, seed=-1)
    with pytest.raises(PairPatternError, match="needs a pairs file"):
        pattern_pairs(FILE_PATTERN, nodes)
    with pytest.raises(PairPatternError, match="goes with the 'file' pattern"):
        pattern_pairs("sort", nodes, pairs_file="pairs.txt")


def test_pair_labels_split_back_into_their_nodes():
    plan = pattern_pairs("fold", ["cn-001", "cn-002", "cn-003", "cn-004"])
    assert plan.labels == ["cn-001-cn-004", "cn-002-cn-003"]
    assert [split_pair(label, set(plan.nodes)) for label in plan.labels] == plan.pairs
    assert pair_label("node001", "node002") == "node001-node002"


def test_disjoint_pairs_and_shared_nodes():
    assert is_disjoint([("a1", "a2"), ("a3", "a4")])
    pairs = [("a1", "a2"), ("a2", "a3"), ("a1", "a4")]
    assert not is_disjoint(pairs)
    assert shared_nodes(pairs) == ["a1", "a2"]


def test_pairs_file_with_comments_separators_and_labels(tmp_path):
    path = tmp_path / "pairs.txt"
    path.write_text(
        "# the chassis uplink pairs\n"
        "\n"
        "node001 node005   # across the core\n"
        "node002,node006\n"
        "node003\tnode007\n"
        "  node004, node008\n"
        "node009-node010\n"
    )
    plan = pattern_pairs(FILE_PATTERN, names(11), repetition=2, pairs_file=path)
    assert numbered(plan) == [(1, 5), (2, 6), (3, 7), (4, 8), (9, 10)]
    assert plan.idle == ["node011"] and plan.disjoint and plan.repetition == 2
    assert plan.source == str(path)
    assert "node011 sits out (in no pair of the file)" in plan.describe()


def test_pairs_file_labels_with_dashed_names(tmp_path):
    path = tmp_path / "pairs"
    path.write_text("cn-001-cn-004\ncn-002 cn-003\n")
    plan = read_pairs_file(path, ["cn-001", "cn-002", "cn-003", "cn-004"])
    assert plan.pairs == [("cn-001", "cn-004"), ("cn-002", "cn-003")]


def test_pairs_file_may_share_nodes_to_run_one_at_a_time(tmp_path):
    path = tmp_path / "pairs"
    path.write_text("node001 node002\nnode001 node003\nnode002 node003\n")
    plan = read_pairs_file(path, names(4))
    assert len(plan.pairs) == 3 and not plan.disjoint
    assert plan.idle == ["node004"]
    assert "pairs share node[001-003]: run them one at a time" in plan.describe()


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("node001 node099", "node099 not in the node list"),
        ("node007 node008", "node007 and node008 not in the node list"),
        ("node002 node002", "node002 is paired with itself"),
        ("node002 node003 node004", "3 names where a pair has 2"),
        ("node002", "'node002' is not a pair"),
        ("node002-node099", "node099 not in the node list"),
        ("node004 node003", "the pair node004-node003 is already on line 2"),
    ],
)
def test_bad_pairs_file_lines_are_named(tmp_path, line, message):
    path = tmp_path / "pairs.txt"
    path.write_text(f"# header\nnode003 node004\n\n{line}\n")
    with pytest.raises(PairsFileError, match=message) as raised:
        read_pairs_file(path, names(6))
    assert str(raised.value).startswith(f"{path}:4: ")
    assert raised.value.line == 4 and raised.value.source == str(path)


def test_pairs_file_without_pairs_or_unreadable(tmp_path):
    empty = tmp_path / "empty"
    empty.write_text("# nothing yet\n\n")
    with pytest.raises(PairPatternError, match="no pairs in the file"):
        read_pairs_file(empty, names(4))
    with pytest.raises(PairPatternError, match="cannot read the pairs file"):
        read_pairs_file(tmp_path / "missing", names(4))
