"""Switchbench's runners on a scripted cluster: what each node runs in each
round (chain positions, stream pairs, all-to-all ranks), what is stored,
what a dead node leaves, and the summaries the report plots."""

from __future__ import annotations

import json
import re

import pytest

from oddnode.judge.analysis import analyze
from oddnode.measure import runner
from oddnode.measure.pair.switchbench import ChainOptions, chain_saturation, run_alltoall, run_chain, run_streams
from oddnode.reach.base import Target
from support.clusters.switchbench import ALLTOALL, CHAIN, LINK_MBPS, NODES, PORT, STREAMS, SwitchCluster, TWELVE, option


def rows(store, benchmark, metric=None):
    query = "SELECT label, label_kind, repetition, value, valid, parameters FROM results WHERE benchmark = ?"
    arguments = [benchmark]
    if metric is not None:
        query += " AND metric = ?"
        arguments.append(metric)
    return [(label, kind, repetition, value, valid, json.loads(parameters or "{}"))
            for label, kind, repetition, value, valid, parameters
            in store.con.execute(query + " ORDER BY repetition, label", arguments).fetchall()]


# --- the daisy chain ------------------------------------------------------------------------


class CountedSwitchCluster(SwitchCluster):
    """SwitchCluster, counting the transport's calls (a batch of rounds each)."""

    calls = 0

    def run_each(self, commands, *, timeout):
        self.calls += 1
        return super().run_each(commands, timeout=timeout)


def test_the_chains_go_to_the_nodes_together_a_slot_apart(store):
    cluster = CountedSwitchCluster()
    summary = run_chain(store, Target(NODES[:4], cluster), 2, options=CHAIN)
    assert cluster.calls == 1 and [sorted(commands) for commands in cluster.rounds] == 2 * [NODES[:k] for k in (2, 3, 4)]
    starts = [float(commands["node01"][-1].split("=")[1]) for commands in cluster.rounds]
    slot = runner.round_slot(CHAIN.seconds)
    assert [b - a for a, b in zip(starts, starts[1:])] == pytest.approx(5 * [slot], abs=2e-3)
    assert [point.length for point in summary.points] == [2, 3, 4, 2, 3, 4] and all(p.valid for p in summary.points)
    assert store.con.execute("SELECT DISTINCT repetition FROM results ORDER BY 1").fetchall() == [(1,), (2,)]


@pytest.mark.slow
def test_each_chain_streams_from_the_first_node_through_relays_to_the_last(store):
    cluster = SwitchCluster()
    summary = run_chain(store, Target(NODES[:6], cluster), 1, options=CHAIN)
    assert len(cluster.prepared) == 1 and cluster.prepared[0][0] == "serve"
    assert [sorted(commands) for commands in cluster.rounds] == [NODES[:k] for k in range(2, 7)]
    four = cluster.rounds[2]
    assert four["node01"][:3] == ["stream", "-H", "node02"] and four["node01"][-1].startswith("--start-at=")
    assert "--both" not in four["node01"]
    assert four["node02"][:7] == ["relay", "-p", str(PORT), "-H", "node03", "-P", str(PORT)]
    assert four["node03"][:7] == ["relay", "-p", str(PORT), "-H", "node04", "-P", str(PORT)]
    assert four["node04"][:3] == ["serve", "-p", str(PORT)]
    assert not any(arg.startswith("--start-at=") for node in ("node02", "node03", "node04") for arg in four[node])
    # Links of 1000 MB/s behind a 4000 MB/s switch: the aggregate grows to 4000 and stops at 5 hops.
    assert summary.best_aggregate() == pytest.approx({2: 1000, 3: 2000, 4: 3000, 5: 4000, 6: 4000})
    assert summary.saturation == 6
    stored = rows(store, "chain", "bandwidth.aggregate")
    assert [(label, kind, valid) for label, kind, _, _, valid, _ in stored] == [
        ("node[01-02]", "set", True), ("node[01-03]", "set", True), ("node[01-04]", "set", True),
        ("node[01-05]", "set", True), ("node[01-06]", "set", True)]
    six = stored[-1]
    assert six[3] == pytest.approx(4000) and six[5]["length"] == 6 and six[5]["hops"] == 5
    assert six[5]["nodes"] == "node01,node02,node03,node04,node05,node06"
    end_to_end = rows(store, "chain", "bandwidth.end_to_end")
    assert [round(value) for *_, value, _, _ in end_to_end] == [1000, 1000, 1000, 1000, 800]
    assert store.con.execute("SELECT DISTINCT unit FROM results").fetchall() == [("MB/s",)]
    # Every node of every chain left its output.
    raw = store.con.execute("SELECT count(*) FROM raw_outputs WHERE stage = 'chain'").fetchone()
    assert raw == (2 + 3 + 4 + 5 + 6,)


@pytest.mark.slow
def test_a_dead_node_fails_the_chains_through_it_and_only_those(store):
    cluster = SwitchCluster(down={"node04"})
    summary = run_chain(store, Target(NODES[:6], cluster), 2, options=CHAIN)
    assert [(p.length, p.repetition, p.valid) for p in summary.points] == [
        (k, r, k < 4) for r in (1, 2) for k in range(2, 7)]
    assert summary.best_aggregate() == pytest.approx({2: 1000, 3: 2000})
    failed = [row for row in rows(store, "chain", "bandwidth.aggregate") if not row[4]]
    assert {row[0] for row in failed} == {"node[01-04]", "node[01-05]", "node[01-06]"} and len(failed) == 6
    for *_, value, _, parameters in failed:
        assert value is None and parameters["suspects"] == "node04"
        assert "source node01: " in parameters["error"] and "node04: unreachable" in parameters["error"]
    status = store.con.execute("SELECT DISTINCT node, status FROM node_status WHERE status <> 'ok'").fetchall()
    assert status == [("node04", "unreachable")]


@pytest.mark.slow
def test_chain_lengths_can_be_chosen(store):
    cluster = SwitchCluster()
    summary = run_chain(store, Target(NODES, cluster), 1, options=ChainOptions(port=PORT, lengths=(8, 2, 5)))
    assert [len(commands) for commands in cluster.rounds] == [2, 5, 8]
    assert sorted(summary.best_aggregate()) == [2, 5, 8]
    with pytest.raises(ValueError, match="chain lengths must be 2 to 8"):
        run_chain(store, Target(NODES, cluster), 1, options=ChainOptions(lengths=(1, 3)))
    with pytest.raises(ValueError, match="at least 2 nodes"):
        run_chain(store, Target(NODES[:1], cluster), 1)


@pytest.mark.parametrize(
    ("aggregate", "saturation"),
    [
        ({2: 1000, 3: 2000, 4: 3000, 5: 4000}, None),  # scales all the way
        ({2: 1000, 3: 2000, 4: 2400, 5: 2500}, 4),  # the 4th node added 400 of a 1000 MB/s hop
        ({2: 1000, 3: 1900, 4: 2850}, None),  # a little loss per hop is not saturation
        ({2: 1000, 4: 2200, 8: 3500}, 8),  # 4 hops added 1300: below half of 4000
        ({3: 2000, 4: 2000}, 4),  # the hop is the shortest chain's per-hop rate
        ({2: 1000}, None),
        ({}, None),
    ],
)
def test_chain_saturation(aggregate, saturation):
    assert chain_saturation(aggregate) == saturation


# --- pairwise streaming --------------------------------------------------------------------


def test_every_pair_of_a_pattern_streams_both_ways_at_once(store):
    cluster = SwitchCluster()
    summary = run_streams(store, Target(NODES, cluster), "sort", 2, options=STREAMS)
    assert len(cluster.rounds) == 2 and cluster.prepared[0][0] == "serve"
    for commands in cluster.rounds:
        assert sorted(commands) == NODES
        for client, server in [("node01", "node02"), ("node03", "node04"), ("node05", "node06"), ("node07", "node08")]:
            assert commands[server][:3] == ["serve", "-p", str(PORT)]
            assert commands[client][:5] == ["stream", "-H", server, "-p", str(PORT)]
            assert "--both" in commands[client] and commands[client][-1].startswith("--start-at=")
    labels = ["node01-node02", "node03-node04", "node05-node06", "node07-node08"]
    assert summary.per_pair == {label: {"ok": 2, "invalid": 0, "failed": 0} for label in labels}
    assert summary.best_per_pair() == pytest.approx(dict.fromkeys(labels, 2 * LINK_MBPS))
    stored = store.con.execute("""SELECT metric, count(*), count(DISTINCT label), bool_and(valid), min(value)
                                  FROM results WHERE benchmark = 'stream.sort' GROUP BY 1 ORDER BY 1""").fetchall()
    assert stored == [("bandwidth.client_to_server", 8, 4, True, LINK_MBPS),
                      ("bandwidth.server_to_client", 8, 4, True, LINK_MBPS)]
    assert store.con.execute("SELECT DISTINCT label_kind FROM results").fetchall() == [("pair",)]


def test_a_dead_partner_fails_its_stream_pair_only(store):
    cluster = SwitchCluster(down={"node04"})
    summary = run_streams(store, Target(NODES, cluster), "sort", 1, options=STREAMS, serial=True)
    assert [sorted(commands) for commands in cluster.rounds] == [NODES[i:i + 2] for i in range(0, 8, 2)]
    assert summary.per_pair["node03-node04"] == {"ok": 0, "invalid": 0, "failed": 1}
    (failed,) = [rate for rate in summary.rates if not rate.valid]
    assert failed.label == "node03-node04" and failed.total is None
    assert "client node03" in failed.problem and "server node04: unreachable" in failed.problem
    values = store.con.execute("SELECT label, bool_or(value IS NULL), bool_and(valid) FROM results "
                               "GROUP BY 1 ORDER BY 1").fetchall()
    assert values == [("node01-node02", False, True), ("node03-node04", True, False),
                      ("node05-node06", False, True), ("node07-node08", False, True)]


@pytest.mark.slow
def test_the_node_common_to_slow_streams_is_named_weak(store):
    cluster = SwitchCluster(weak="node05")
    for pattern in ("sort", "cut", "fold"):
        run_streams(store, Target(TWELVE, cluster), pattern, 2, options=STREAMS)
    weak = [f for f in analyze(store.load_dataset()).findings if f.kind == "weak-pair-member"]
    assert [f.nodes for f in weak] == ["node05"]


# --- the all-to-all ----------------------------------------------------------------------------


def test_every_node_is_one_rank_of_the_same_alltoall(store):
    cluster = SwitchCluster(slow="node03")
    summary = run_alltoall(store, Target(NODES[:4], cluster), 2, options=ALLTOALL, seed=5)
    assert cluster.prepared[0][:2] == ["-r", "0"]
    assert len(cluster.rounds) == 2
    seeds = []
    for commands in cluster.rounds:
        listed = {option(args, "-R") for args in commands.values()}
        assert listed == {",".join(f"{node}:{PORT}" for node in NODES[:4])}
        assert [int(option(commands[node], "-r")) for node in NODES[:4]] == [0, 1, 2, 3]
        assert all(args[-1].startswith("--start-at=") for args in commands.values())
        assert len({option(args, "-S") for args in commands.values()}) == 1
        seeds.append(option(commands["node01"], "-S"))
    assert seeds[0] != seeds[1]  # each repetition its own data pattern
    # node03 receives slowly in every phase, each time from another sender.
    best = summary.best()
    assert best is not None and best.valid
    assert [(p.phase, p.min_bandwidth, p.slowest_receiver, p.slowest_sender) for p in best.phases] == [
        (1, 200.0, "node03", "node02"), (2, 200.0, "node03", "node01"), (3, 200.0, "node03", "node04")]
    assert summary.phase_min_bandwidth() == {1: 200.0, 2: 200.0, 3: 200.0}
    total = 3 * 1e-6 * 100000 / 500.0
    assert best.total_seconds == pytest.approx(total)
    assert best.aggregate_bandwidth == pytest.approx(1e-6 * 4 * 3 * 100000 / total)
    assert summary.per_node == {node: {"ok": 2, "invalid": 0, "failed": 0} for node in NODES[:4]}
    receive = rows(store, "alltoall", "bandwidth.receive")
    assert [(label, kind, valid) for label, kind, repetition, _, valid, _ in receive if repetition == 1] == [
        (node, "node", True) for node in NODES[:4]]
    assert [round(value) for label, _, repetition, value, _, _ in receive if repetition == 1] == [1000, 1000, 200, 1000]
    set_rows = store.con.execute("""SELECT metric, unit, direction, count(*), bool_and(valid) FROM results
                                    WHERE label_kind = 'set' GROUP BY ALL ORDER BY 1""").fetchall()
    assert set_rows == [("bandwidth.aggregate", "MB/s", "higher", 2, True),
                        ("bandwidth.min_phase.1", "MB/s", "higher", 2, True),
                        ("bandwidth.min_phase.2", "MB/s", "higher", 2, True),
                        ("bandwidth.min_phase.3", "MB/s", "higher", 2, True),
                        ("time.total", "s", "lower", 2, True)]
    (label,) = store.con.execute("SELECT DISTINCT label FROM results WHERE label_kind = 'set'").fetchone()
    assert label == "node[01-04]"
    assert store.con.execute("SELECT count(*) FROM raw_outputs WHERE stage = 'alltoall'").fetchone() == (8,)


def test_a_dead_rank_is_charged_not_the_ranks_it_stopped(store):
    cluster = SwitchCluster(down={"node03"})
    summary = run_alltoall(store, Target(NODES[:4], cluster), 1, options=ALLTOALL)
    (repetition,) = summary.repetitions
    assert not repetition.valid and repetition.phases == [] and repetition.total_seconds is None
    assert any(problem.startswith("node03: unreachable") for problem in repetition.problems)
    assert summary.per_node["node03"] == {"ok": 0, "invalid": 0, "failed": 1}
    assert summary.best() is None and summary.phase_min_bandwidth() == {}
    node_rows = store.con.execute("""SELECT label, metric, value, valid FROM results WHERE label_kind = 'node'
                                     ORDER BY 1, 2""").fetchall()
    assert node_rows == [("node03", "bandwidth.receive", None, False), ("node03", "bandwidth.send", None, False)]
    set_rows = rows(store, "alltoall", "time.total")
    assert [(label, value, valid, parameters["suspects"]) for label, _, _, value, valid, parameters in set_rows] == [
        ("node[01-04]", None, False, "node03")]
    assert "node01: alltoall kernel exited with status 3" in set_rows[0][5]["error"]
    status = dict(store.con.execute("SELECT node, status FROM node_status").fetchall())
    assert status == {"node03": "unreachable", "node01": "ok", "node02": "ok", "node04": "ok"}
    # Every rank's output is kept, the dead one's empty.
    assert store.con.execute("SELECT count(*) FROM raw_outputs").fetchone() == (4,)


def test_a_rank_that_fails_on_its_own_is_the_one_named(store):
    cluster = SwitchCluster(refuse="node02")
    run_alltoall(store, Target(NODES[:4], cluster), 1, options=ALLTOALL)
    failed = store.con.execute("SELECT DISTINCT label FROM results WHERE NOT valid AND label_kind = 'node'").fetchall()
    assert failed == [("node02",)]
    (parameters,) = store.con.execute("SELECT DISTINCT parameters FROM results WHERE label_kind = 'set'").fetchone()
    assert json.loads(parameters)["suspects"] == "node02"
    assert re.search(r"node02: alltoall kernel exited with status 4: error: rank 1: cannot listen",
                     json.loads(parameters)["error"])


def test_corrupted_data_leaves_the_alltoall_invalid_and_its_receiver_named(store):
    cluster = SwitchCluster(corrupted="node02")
    summary = run_alltoall(store, Target(NODES[:4], cluster), 1, options=ALLTOALL)
    (repetition,) = summary.repetitions
    assert not repetition.valid and len(repetition.phases) == 3  # measured, not trusted
    assert repetition.problems == ["node02: data check failed: 1 of 6 messages received differed from what was "
                                   "sent; the first in phase 2 from rank 3, byte offset 8: expected 0x00, got 0xff "
                                   "(data corrupted or misrouted between the nodes)"]
    assert summary.per_node["node02"] == {"ok": 0, "invalid": 1, "failed": 0}
    assert summary.best() is None
    invalid = store.con.execute("SELECT DISTINCT label FROM results WHERE NOT valid ORDER BY 1").fetchall()
    assert invalid == [("node02",), ("node[01-04]",)]
    (detail,) = store.con.execute("SELECT detail FROM node_status WHERE node = 'node02'").fetchone()
    assert "phase 2 from rank 3" in detail
