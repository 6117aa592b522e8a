"""The pair runner on a scripted cluster: who serves and who pings in each
round, what is stored per pair, what a dead partner leaves, and the weak
node the analysis then names."""

from __future__ import annotations

import pytest

from oddnode.judge.analysis import analyze
from oddnode.measure.pair.pairs import Network, run_pairs
from oddnode.measure.pair.pingpong import parse_pingpong_output
from oddnode.reach.base import Target
from support.clusters.pairs import NODES, OPTIONS, PairCluster, TWELVE, cut
from support.outputs import GOOD_PING


def test_all_pairs_of_a_pattern_run_at_once_clients_pinging_their_servers(store):
    cluster = PairCluster()
    summary = run_pairs(store, Target(NODES, cluster), "sort", 2, options=OPTIONS)
    assert cluster.prepared == 1 and len(cluster.rounds) == 2
    for commands in cluster.rounds:
        assert sorted(commands) == NODES  # every node, one round per repetition
        for client, server in [("node01", "node02"), ("node03", "node04"), ("node05", "node06"), ("node07", "node08")]:
            assert commands[server][:3] == ["serve", "-p", "6211"]
            assert commands[client][:3] == ["ping", "-H", server]
            assert commands[client][-1].startswith("--start-at=") and not commands[server][-1].startswith("--")
    assert summary.per_pair == {label: {"ok": 2, "invalid": 0, "failed": 0}
                                for label in ["node01-node02", "node03-node04", "node05-node06", "node07-node08"]}
    rows = store.con.execute("""SELECT metric, count(*), count(DISTINCT label), bool_and(valid) FROM results
                                WHERE benchmark = 'pingpong.sort' GROUP BY 1 ORDER BY 1""").fetchall()
    assert rows == [("bandwidth.1", 8, 4, True), ("bandwidth.4096", 8, 4, True), ("bandwidth.64", 8, 4, True),
                    ("bandwidth.65536", 8, 4, True), ("fit.bandwidth", 8, 4, True), ("fit.latency", 8, 4, True),
                    ("latency.0", 8, 4, True), ("latency.1", 8, 4, True), ("latency.4096", 8, 4, True),
                    ("latency.64", 8, 4, True), ("latency.65536", 8, 4, True)]
    assert store.con.execute("SELECT DISTINCT label_kind FROM results").fetchall() == [("pair",)]
    assert store.con.execute("SELECT count(*) FROM raw_outputs").fetchone() == (16,)


def test_serial_runs_one_pair_at_a_time_and_odd_counts_say_who_sits_out(store):
    cluster = PairCluster()
    summary = run_pairs(store, Target(NODES[:7], cluster), "fold", 1, options=OPTIONS, serial=True)
    assert [sorted(commands) for commands in cluster.rounds] == [
        ["node01", "node07"], ["node02", "node06"], ["node03", "node05"]]
    assert summary.notes == [summary.plans[0].describe()] and "node04" in summary.notes[0]


def test_a_dead_partner_fails_its_pair_only(store):
    cluster = PairCluster(down={"node04"})
    summary = run_pairs(store, Target(NODES, cluster), "sort", 1, options=OPTIONS)
    assert summary.per_pair["node03-node04"] == {"ok": 0, "invalid": 0, "failed": 1}
    assert all(counts["ok"] == 1 for label, counts in summary.per_pair.items() if label != "node03-node04")
    (error,) = store.con.execute("""SELECT DISTINCT json_extract_string(parameters, '$.error') FROM results
                                    WHERE label = 'node03-node04'""").fetchone()
    assert "client node03" in error and "no server at node04" in error and "server node04: unreachable" in error
    status = store.con.execute("SELECT node, status FROM node_status ORDER BY node").fetchall()
    assert status == [("node04", "unreachable")]


@pytest.mark.slow
def test_the_node_common_to_slow_pairs_is_named_weak(store):
    cluster = PairCluster(weak="node03")
    for pattern in ("sort", "cut", "fold"):
        run_pairs(store, Target(TWELVE, cluster), pattern, 2, options=OPTIONS)
    findings = analyze(store.load_dataset()).findings
    weak = [f for f in findings if f.kind == "weak-pair-member"]
    assert [f.nodes for f in weak] == ["node03"]
    assert {f.nodes for f in findings if f.severity.value == "warning"} <= {"node03", "node01-node03",
                                                                            "node03-node04", "node03-node06",
                                                                            "node03-node07"}


@pytest.mark.slow
def test_sizes_cut_by_their_time_are_stored_so_and_named_once_per_run(store):
    cluster = PairCluster(weak="node03", cut_sizes={4096, 65536})
    summary = run_pairs(store, Target(NODES, cluster), "sort", 2, options=OPTIONS)
    assert summary.notes == ["sort: sizes cut by their time (--seconds-per-size) before the timed batches they "
                             "want, their medians resting on fewer samples: 4096 B in 2 runs, 65536 B in 2 runs"]
    rows = store.con.execute("""SELECT DISTINCT label, metric FROM results
                                WHERE json_extract(parameters, '$.cut_by_time')::BOOLEAN ORDER BY 1, 2""").fetchall()
    assert rows == [("node03-node04", f"{metric}.{size}") for metric in ("bandwidth", "latency")
                    for size in (4096, 65536)]
    assert run_pairs(store, Target(NODES, PairCluster()), "sort", 1, options=OPTIONS).notes == []


def test_the_cut_of_genuine_output_reads_as_the_kernel_writes_it():
    parsed = parse_pingpong_output(cut(GOOD_PING, {64}, batches=4), "n1")
    assert parsed.configuration["warnings"] == ["size 64: cut by its time of 0.02 s after 4 of 10 timed batches"]
    assert {m.metric for m in parsed.measurements if m.parameters.get("cut_by_time")} == {"latency.64", "bandwidth.64"}


@pytest.mark.slow
def test_no_weak_node_no_pair_finding(store):
    cluster = PairCluster()
    for pattern in ("sort", "cut", "fold"):
        run_pairs(store, Target(TWELVE, cluster), pattern, 2, options=OPTIONS)
    findings = analyze(store.load_dataset()).findings
    assert [f for f in findings if f.severity.value == "warning"] == []


@pytest.mark.slow
def test_over_a_network_each_server_is_reached_at_its_address_there_and_the_series_are_that_network_s(store):
    network = Network.parse("ib={node}-ib")
    cluster = PairCluster(weak="node03", hosts={network.address(node): node for node in TWELVE})
    for pattern in ("sort", "cut", "fold"):
        run_pairs(store, Target(TWELVE, cluster), pattern, 2, options=OPTIONS, network=network)
    # Every client reached its server by the server's name on the network.
    assert cluster.hosts_used and cluster.hosts_used <= {f"{node}-ib" for node in TWELVE}
    # The ordinary network, measured after, is its own series and replaces nothing.
    for pattern in ("sort", "cut", "fold"):
        run_pairs(store, Target(TWELVE, PairCluster()), pattern, 2, options=OPTIONS)
    benchmarks = {row[0] for row in store.con.execute("SELECT DISTINCT benchmark FROM results").fetchall()}
    assert benchmarks == {f"pingpong.{p}{suffix}" for p in ("sort", "cut", "fold") for suffix in ("@ib", "")}
    findings = analyze(store.load_dataset()).findings
    weak = [f for f in findings if f.kind == "weak-pair-member"]
    # The weak node is named once, from the ib network's three patterns pooled;
    # the healthy network's pairs raise nothing.
    assert [(f.nodes, f.subject.split(":")[0]) for f in weak] == [("node03", "pingpong.cut+fold+sort@ib")]
    assert all(f.subject.split(":")[0].endswith("@ib") for f in findings if f.severity.value == "warning")


@pytest.mark.parametrize("text", ["ib", "ib=node-ib", "ib={node}{node}", "i b={node}", "ib={node};reboot",
                                  "ib=$(reboot){node}", "ib=-{node}", "=x{node}"])
def test_a_network_is_a_name_and_an_address_template_and_nothing_else(text):
    with pytest.raises(ValueError):
        Network.parse(text)


def test_mpi_chooses_its_own_network(store):
    with pytest.raises(ValueError, match="for the TCP kernel"):
        run_pairs(store, Target(NODES, PairCluster()), "sort", 1, options=OPTIONS, kernel="mpi",
                  network=Network.parse("ib={node}-ib"))
