"""Which nodes run together: sets of each ordering and scaling counts."""

from __future__ import annotations

from collections import Counter
from itertools import combinations

import pytest

from oddnode.readings.partition import scale_counts, scale_plans, set_plans

NODES = [f"cn-{i:04d}" for i in range(1, 13)]


def test_sorted_sets_keep_the_given_order_and_repeat_unchanged():
    plans = set_plans(NODES, 4, "sorted", 3)
    assert [p.repetition for p in plans] == [1, 2, 3]
    assert plans[0].sets == (tuple(NODES[0:4]), tuple(NODES[4:8]), tuple(NODES[8:12]))
    assert all(p.sets == plans[0].sets and p.idle == () for p in plans)
    # The given order, not the natural one.
    reversed_plan = set_plans(NODES[::-1], 4, "sorted", 1)[0]
    assert reversed_plan.sets[0] == tuple(NODES[::-1][:4])


def test_a_size_that_does_not_divide_the_nodes_leaves_the_remainder_out_and_says_so():
    (plan,) = set_plans(NODES, 5, "sorted", 1)
    assert [len(s) for s in plan.sets] == [5, 5]
    assert plan.idle == tuple(NODES[10:])
    assert "cn-[0011-0012] sat out" in plan.describe()
    shuffled = set_plans(NODES, 5, "shuffled", 6, seed=3)
    for p in shuffled:
        used = [n for s in p.sets for n in s] + list(p.idle)
        assert sorted(used) == sorted(NODES) and len(p.idle) == 2
    # Who sits out changes from one reshuffle to the next.
    assert len({p.idle for p in shuffled}) > 1


def test_shuffled_sets_change_every_repetition_and_depend_only_on_the_seed():
    plans = set_plans(NODES, 4, "shuffled", 4, seed=7)
    assert len({frozenset(frozenset(s) for s in p.sets) for p in plans}) == 4
    assert plans == set_plans(NODES, 4, "shuffled", 4, seed=7)
    assert plans != set_plans(NODES, 4, "shuffled", 4, seed=8)
    for p in plans:
        assert sorted(n for s in p.sets for n in s) == sorted(NODES)


def test_reshuffles_spread_the_meetings_of_set_mates():
    # Eight repetitions of 3 sets of 4: 144 meetings over 66 pairs.  A
    # plain shuffle lets some pair meet 5 or 6 times; the balanced one keeps
    # every pair near the 2.2 it averages.
    plans = set_plans(NODES, 4, "shuffled", 8, seed=1)
    met = Counter(pair for p in plans for s in p.sets for pair in combinations(sorted(s), 2))
    assert max(met.values()) <= 4
    assert len(met) >= 60


@pytest.mark.parametrize("size", [1, 13, 2.5])
def test_a_set_size_outside_the_nodes_is_refused(size):
    with pytest.raises(ValueError, match="at least"):
        set_plans(NODES, size, "sorted", 1)


def test_unknown_ordering_and_duplicate_nodes_are_refused():
    with pytest.raises(ValueError, match="no ordering named 'random'.*sorted, shuffled"):
        set_plans(NODES, 4, "random", 1)
    with pytest.raises(ValueError, match="named twice"):
        set_plans(NODES + NODES[:1], 4, "sorted", 1)


def test_scale_counts_double_up_to_the_whole_cluster():
    assert scale_counts(12) == [2, 4, 8, 12]
    assert scale_counts(16) == [2, 4, 8, 16]
    assert scale_counts(2) == [2]
    assert scale_counts(12, [8, 2, 2, 12]) == [2, 8, 12]
    with pytest.raises(ValueError, match="from 2 to 12.*13"):
        scale_counts(12, [2, 13])


def test_scale_plans_grow_one_list_per_repetition():
    plans = scale_plans(NODES, [2, 4, 8], "sorted", 2)
    assert plans[0] == (1, 2, tuple(NODES[:2])) and plans[2] == (1, 8, tuple(NODES[:8]))
    assert [p[:2] for p in plans] == [(1, 2), (1, 4), (1, 8), (2, 2), (2, 4), (2, 8)]
    shuffled = scale_plans(NODES, [2, 4, 8], "shuffled", 3, seed=2)
    for repetition in (1, 2, 3):
        sets = [s for r, _, s in shuffled if r == repetition]
        assert sets[1][:2] == sets[0] and sets[2][:4] == sets[1]
    assert len({s for _, c, s in shuffled if c == 8}) == 3
