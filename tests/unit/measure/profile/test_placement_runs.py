"""The placement model's runs on a scripted cluster: every placement's run
is a round of one launch, stored under its placement, and a launch that
fails leaves its runs to a launch each, the failed placement named."""

from __future__ import annotations

import pytest

from oddnode.measure.profile.placement_runs import measure
from oddnode.readings.placement import Candidate, Point, select
from oddnode.reach.base import Target

from support.clusters.sets import SetCluster, TWELVE
from support.placement import profile_of

# A job of 4 ranks spending its time in a 64 KiB all-to-all and a 1 KiB
# Sendrecv (sizes the kernel's genuine output holds).
PROFILE = profile_of({("MPI_Alltoall", 16): (100, 6.0, 100 * 65536), ("MPI_Sendrecv", 10): (400, 1.0, 409600)})
PACKED = Candidate("packed", ("node01", "node02", "node03", "node04"), ("leaf1",))
STRIPED = Candidate("striped", ("node01", "node05", "node09", "node02"), ("leaf1", "leaf2", "leaf3"))
# The packed nodes in another rank order: the same node set, a run of its own.
REVERSED = Candidate("shuffled", ("node04", "node03", "node02", "node01"))
USED = ["node01", "node02", "node03", "node04", "node05", "node09"]


def model(store, cluster, repetitions=3):
    selection = select(PROFILE, coverage=1.0)
    assert selection.points == [Point("alltoall", 65536), Point("sendrecv", 1024)]
    return measure(store, Target(TWELVE, cluster), selection, [PACKED, STRIPED, REVERSED], profile_id=None,
                   repetitions=repetitions, seconds_per_size=0.05)


def test_every_placements_run_is_a_round_of_one_launch_stored_under_its_placement(store):
    cluster = SetCluster(weak={"node09"})
    run = model(store, cluster)
    # One launch over the placements' nodes alone, a round per placement and repetition.
    assert cluster.launches == [USED]
    assert len(cluster.rounds) == 9 and all(len(sets) == 1 for sets in cluster.rounds)
    assert run.problems == []
    for name in ("packed", "striped", "shuffled"):
        assert sorted(run.measured[name]) == [1, 2, 3], name
    # The set holding the weak node runs three times slower: so is its prediction.
    for repetition in (1, 2, 3):
        assert run.predictions["striped"][repetition] == pytest.approx(3 * run.predictions["packed"][repetition],
                                                                       rel=0.02)
    labels = dict(store.con.execute("""SELECT benchmark, list(DISTINCT label) FROM results
                                        WHERE benchmark LIKE 'model.sendrecv.%' GROUP BY benchmark""").fetchall())
    assert labels == {"model.sendrecv.packed": ["node[01-04]"], "model.sendrecv.shuffled": ["node[01-04]"],
                      "model.sendrecv.striped": ["node[01-02,05,09]"]}


def test_a_failed_launch_leaves_each_run_to_a_launch_of_its_own_and_names_the_failed_placement(store):
    cluster = SetCluster(down={"node09"})
    run = model(store, cluster, repetitions=2)
    assert cluster.launches == [USED]
    assert len(run.problems) == 3, run.problems
    assert [p.split(":")[0] for p in run.problems[:2]] == ["striped", "striped"]
    assert all("failed" in problem for problem in run.problems[:2])
    assert "one launch of several rounds failed" in run.problems[2]
    assert sorted(run.measured) == ["packed", "shuffled"] and sorted(run.measured["packed"]) == [1, 2]
