"""The rounds of a pair run sent to the nodes together, on a scripted
cluster: each node's runner starts once a batch, a batch's rounds start a
slot apart, each round is stored as its own, and a round that outlasts its
slot is said and widens the next batch's slots."""

from __future__ import annotations

import json

import pytest

from oddnode.measure import runner
from oddnode.measure.pair.pairs import PingPongOptions, run_pairs
from oddnode.reach.base import NodeResult, Target
from support.clusters.batches import round_by_round
from support.clusters.pairs import NODES, OPTIONS, PairCluster


class CountedCluster(PairCluster):
    """PairCluster, counting the transport's calls (a batch each)."""

    def __init__(self, **options):
        super().__init__(**options)
        self.calls = 0

    def run_each(self, commands, *, timeout):
        self.calls += 1
        return super().run_each(commands, timeout=timeout)


def client_starts(cluster, client="node01"):
    """When each round's client was asked to start, round by round."""
    return [float(next(a for a in commands[client] if a.startswith("--start-at=")).split("=")[1])
            for commands in cluster.rounds]


def test_a_run_goes_to_the_nodes_once_its_rounds_a_slot_apart_each_stored_as_its_own(store):
    cluster = CountedCluster()
    summary = run_pairs(store, Target(NODES, cluster), "sort", 3, options=OPTIONS)
    assert cluster.calls == 1 and len(cluster.rounds) == 3
    slot = runner.ROUND_SAFETY * OPTIONS.measure_seconds + runner.ROUND_MARGIN
    starts = client_starts(cluster)
    assert [b - a for a, b in zip(starts, starts[1:])] == pytest.approx([slot, slot], abs=2e-3)
    assert summary.per_pair["node01-node02"] == {"ok": 3, "invalid": 0, "failed": 0}
    assert store.con.execute("SELECT DISTINCT repetition FROM results ORDER BY 1").fetchall() == [(1,), (2,), (3,)]
    assert store.con.execute("SELECT count(*) FROM raw_outputs").fetchone() == (24,)  # each end of each pair


def test_a_batch_holds_a_minute_of_rounds(store):
    options = PingPongOptions(sizes=OPTIONS.sizes, seconds_per_size=2.6, port=OPTIONS.port)  # slots of 20 s
    cluster = CountedCluster()
    run_pairs(store, Target(NODES, cluster), "sort", 7, options=options)
    assert runner.rounds_per_batch(runner.round_slot(options.measure_seconds)) == 3
    assert cluster.calls == 3 and len(cluster.rounds) == 7


def test_an_unreachable_node_fails_its_pair_in_every_round_of_the_batch(store):
    summary = run_pairs(store, Target(NODES, CountedCluster(down={"node04"})), "sort", 3, options=OPTIONS)
    assert summary.per_pair["node03-node04"] == {"ok": 0, "invalid": 0, "failed": 3}
    assert summary.per_pair["node01-node02"] == {"ok": 3, "invalid": 0, "failed": 0}
    troubles = store.con.execute("SELECT count(*) FROM node_status WHERE node = 'node04' AND status = "
                                 "'unreachable'").fetchone()
    assert troubles == (3,)


class TimedCluster(PairCluster):
    """PairCluster whose clients say when they began and ended: each takes
    ``first`` seconds in the run's first round and a tenth of a second in
    the others; the transport's calls (a batch each) counted."""

    def __init__(self, first: float):
        super().__init__()
        self.first, self.calls = first, 0

    def run_each(self, commands, *, timeout):
        self.calls += 1
        return self._answer(commands, timeout=timeout)

    @round_by_round
    def _answer(self, commands, *, timeout):
        results = PairCluster.run_each.__wrapped__(self, commands, timeout=timeout)  # one round's answer
        seconds = self.first if len(self.rounds) == 1 else 0.1
        for node, argv in commands.items():
            start = [float(a.split("=")[1]) for a in argv if a.startswith("--start-at=")]
            if start:  # a client
                report = {**json.loads(results[node].stdout), "finished": start[0] + seconds,
                          "start": {"at": start[0], "launched": start[0] - 1.0, "arrived": start[0] - 0.5}}
                results[node] = NodeResult(node, results[node].status, json.dumps(report), "", 0, 1.0)
        return results


def test_a_round_that_outlasts_its_slot_is_said_and_widens_the_next_slots(store, monkeypatch):
    monkeypatch.setattr(runner, "MAX_BATCH_ROUNDS", 2)
    cluster = TimedCluster(first=2.0)
    run_pairs(store, Target(NODES, cluster), "sort", 4, options=OPTIONS)
    assert cluster.calls == 2 and len(cluster.rounds) == 4
    starts = client_starts(cluster)
    slot = runner.ROUND_SAFETY * OPTIONS.measure_seconds + runner.ROUND_MARGIN
    assert starts[1] - starts[0] == pytest.approx(slot, abs=2e-3)
    # The first round took 2 s: the second began before it had ended, and
    # the next batch's slots fit a 2 s round.
    assert starts[3] - starts[2] == pytest.approx(runner.ROUND_SAFETY * 2.0 + runner.ROUND_MARGIN, abs=2e-3)
    late = store.con.execute("SELECT node, detail FROM node_status WHERE detail LIKE '%outlasted%' "
                             "ORDER BY node").fetchall()
    assert [node for node, _ in late] == ["node01", "node03", "node05", "node07"]
    assert late[0][1] == (f"repetition 2, pair node01-node02: began {2.0 - slot:.2f} s before the round before it "
                          "had ended, which outlasted its slot")


def test_rounds_within_their_slots_say_nothing_of_it(store):
    run_pairs(store, Target(NODES, TimedCluster(first=0.1)), "sort", 3, options=OPTIONS)
    assert store.con.execute("SELECT count(*) FROM node_status WHERE detail LIKE '%outlasted%'").fetchone() == (0,)
