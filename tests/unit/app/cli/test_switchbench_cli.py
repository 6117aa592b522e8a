"""``oddnode switchbench chain|stream|alltoall`` on a scripted cluster: the
options reach the runners, the results are stored, and the printed tables
and verdicts say what the switch did."""

from __future__ import annotations

import pytest

from support.cli import invoke
from oddnode.store import open_store
from support.clusters.switchbench import NODES, PORT, SwitchCluster, TWELVE, option

pytestmark = pytest.mark.slow

FAST = ["--message-size", 65536, "--seconds", 0.3, "--port", PORT]


def stored(db, benchmark):
    with open_store(db) as store:
        return store.con.execute("SELECT metric, count(*) FROM results WHERE benchmark = ? GROUP BY 1 ORDER BY 1",
                                 [benchmark]).fetchall()


def test_chain_prints_aggregate_per_length_and_where_the_switch_stops_scaling(scripted, tmp_path):
    cluster = scripted(SwitchCluster(), NODES)
    db = tmp_path / "c.duckdb"
    result = invoke("switchbench", "chain", "-r", 1, *FAST, "--db", db)
    assert result.exit_code == 1, result.output  # a finding
    # Links of 1000 MB/s behind a 4000 MB/s switch: 4 hops fill it, the 6th node adds nothing.
    assert [len(commands) for commands in cluster.rounds] == list(range(2, 9))
    assert "Daisy chain" in result.text
    assert "the switch stops scaling at k = 6, where node06 joined: aggregate 4000 MB/s" in result.text
    assert "| 6 | node06 | 800 | 4000 | +0.00 | stops scaling |" in result.text.replace("│", "|")
    assert "+1.00" in result.text and "+0.00" in result.text  # the gain in hops per length
    stream = cluster.rounds[0]["node01"]  # the source, its arguments
    assert option(stream, "-p") == str(PORT) and option(stream, "-s") == "65536"
    assert stored(db, "chain") == [("bandwidth.aggregate", 7), ("bandwidth.end_to_end", 7)]


def test_chain_lengths_are_chosen_and_checked(scripted, tmp_path):
    cluster = scripted(SwitchCluster(), NODES)
    result = invoke("switchbench", "chain", "-r", 1, "--lengths", "8,2,5", *FAST, "--db", tmp_path / "c.duckdb")
    assert result.exit_code == 1, result.output  # the switch stops scaling
    assert [len(commands) for commands in cluster.rounds] == [2, 5, 8]
    assert "the aggregate grew with every node added, 4000 MB/s at k = 8" not in result.text
    assert "stops scaling at k = 8" in result.text  # 3 hops added only 1000 MB/s after k = 5
    for bad, message in (("2,x", "chain lengths are whole numbers"), ("1,3", "chain lengths must be 2 to 8")):
        result = invoke("switchbench", "chain", "--lengths", bad, "--db", tmp_path / "bad.duckdb")
        assert result.exit_code == 2 and message in result.text, result.output


def test_chain_that_scales_says_so(scripted, tmp_path):
    scripted(SwitchCluster(), NODES[:4])
    result = invoke("switchbench", "chain", "-r", 1, *FAST, "--db", tmp_path / "c.duckdb")
    assert result.exit_code == 0, result.output
    assert "the aggregate grew with every node added, 3000 MB/s at k = 4" in result.text
    assert "stops scaling" not in result.text


def test_stream_prints_per_pair_rates_and_names_the_weak_node(scripted, tmp_path):
    cluster = scripted(SwitchCluster(weak="node05"), TWELVE)
    db = tmp_path / "s.duckdb"
    result = invoke("switchbench", "stream", "--patterns", "sort,cut,fold", "-r", 1, *FAST, "--db", db)
    assert result.exit_code == 1, result.output  # a finding
    assert len(cluster.rounds) == 3 and all(sorted(commands) == TWELVE for commands in cluster.rounds)
    for pattern in ("sort", "cut", "fold"):
        assert f"Pairwise streaming, {pattern}" in result.text
        assert stored(db, f"stream.{pattern}") == [("bandwidth.client_to_server", 6),
                                                   ("bandwidth.server_to_client", 6)]
    # The slowest pair is listed first, at a tenth of the others.
    sort = result.text[result.text.index("Pairwise streaming, sort"):]
    assert sort.index("node05-node06") < sort.index("node01-node02")
    assert "weak-pair-member" in result.text and "node05" in result.text.split("weak-pair-member")[0][-200:]
    assert "No node or group is common" not in result.text


def test_stream_serial_and_a_pairs_file(scripted, tmp_path):
    cluster = scripted(SwitchCluster(), NODES)
    pairs = tmp_path / "pairs"
    pairs.write_text("node01 node08\nnode02 node07\n")
    result = invoke("switchbench", "stream", "--pattern", "file", "--pairs-file", pairs, "--serial", "-r", 1, *FAST,
                    "--db", tmp_path / "s.duckdb")
    assert result.exit_code == 0, result.output
    assert [sorted(commands) for commands in cluster.rounds] == [["node01", "node08"], ["node02", "node07"]]
    assert "file: 2 pairs" in result.text and "node01-node08" in result.text
    assert "No node or group is common to the slow pairs." in result.text


def test_alltoall_prints_phases_total_aggregate_and_the_slowest_receiver(scripted, tmp_path):
    cluster = scripted(SwitchCluster(slow="node03"), NODES[:4])
    db = tmp_path / "a.duckdb"
    result = invoke("switchbench", "alltoall", "-r", 2, "--message-size", 100000, "--port", PORT, "--seed", 5,
                    "--db", db)
    assert result.exit_code == 0, result.output
    assert len(cluster.rounds) == 2
    assert all(option(args, "-s") == "100000" for args in cluster.rounds[0].values())
    assert "receive bandwidth per phase" in result.text
    total = 3 * 1e-6 * 100000 / 500.0
    assert f"total {total:.6g} s, aggregate 2000 MB/s" in result.text
    assert "slowest receiver node03 (lowest in 3 of 3 phases)" in result.text
    metrics = dict(stored(db, "alltoall"))
    assert metrics["bandwidth.min_phase.3"] == 2 and metrics["time.total"] == 2


@pytest.mark.parametrize(("cluster", "named", "why"), [
    (SwitchCluster(down={"node02"}), "node02", "unreachable"),
    (SwitchCluster(corrupted="node03"), "node03", "data check failed"),
])
def test_alltoall_without_a_valid_repetition_names_the_node_not_its_partners(scripted, tmp_path, cluster, named,
                                                                              why):
    scripted(cluster, NODES[:4])
    result = invoke("switchbench", "alltoall", "-r", 1, "--message-size", 100000, "--port", PORT,
                    "--db", tmp_path / "a.duckdb")
    assert result.exit_code == 1, result.output  # a finding
    assert "no repetition in which every node ran and checked its data" in result.text
    assert f"failed or invalid on {named} " in result.text and why in result.text
    assert "slowest receiver" not in result.text


def test_bad_options_are_one_line_and_nothing_runs(scripted, tmp_path):
    cluster = scripted(SwitchCluster(), NODES)
    db = tmp_path / "x.duckdb"
    for args in (("chain", "-r", 0), ("stream", "--pattern", "nosuch"), ("alltoall", "--message-size", 0)):
        result = invoke("switchbench", *args, "--db", db)
        assert result.exit_code == 2 and "error:" in result.text, result.output
    assert cluster.rounds == []
