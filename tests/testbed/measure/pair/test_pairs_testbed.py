"""oddnode's ping-pong between pairs of real testbed nodes, over ssh (root),
on the first network and on a second one (a second fabric: its own switch,
each node reached there as NODE-ib)."""

from __future__ import annotations

import pytest

from oddnode import testbed as tb
from oddnode.app.check import make_target
from oddnode.measure.pair.pairs import Network, PingPongOptions, run_pairs
from oddnode.store import open_store
from support.testbed import clean, needs_root, running_testbed  # noqa: F401 (clean: a fixture)

pytestmark = needs_root

OPTIONS = PingPongOptions(sizes=(0, 1, 1024, 65536, 1 << 20), seconds_per_size=0.05)


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    yield from running_testbed(tmp_path_factory, 4, networks=("ib",))


def test_every_pair_of_each_pattern_measures_latency_and_bandwidth(clean, tmp_path):
    target = make_target(clean.nodes, "ssh", clean.ssh_config)
    with open_store(tmp_path / "pairs.duckdb") as store:
        sort = run_pairs(store, target, "sort", 2, options=OPTIONS)
        cut = run_pairs(store, target, "cut", 1, options=OPTIONS)
        rows = store.con.execute("""
            SELECT benchmark, metric, count(*), count(DISTINCT label), bool_and(valid), min(value) > 0
            FROM results WHERE metric IN ('latency.0', 'bandwidth.1048576', 'fit.bandwidth')
            GROUP BY 1, 2 ORDER BY 1, 2""").fetchall()
        troubles = store.con.execute("SELECT * FROM node_status").fetchall()
    assert sort.per_pair == {"node01-node02": {"ok": 2, "invalid": 0, "failed": 0},
                             "node03-node04": {"ok": 2, "invalid": 0, "failed": 0}}
    assert cut.per_pair == {"node01-node03": {"ok": 1, "invalid": 0, "failed": 0},
                            "node02-node04": {"ok": 1, "invalid": 0, "failed": 0}}
    assert rows == [
        ("pingpong.cut", "bandwidth.1048576", 2, 2, True, True),
        ("pingpong.cut", "fit.bandwidth", 2, 2, True, True),
        ("pingpong.cut", "latency.0", 2, 2, True, True),
        ("pingpong.sort", "bandwidth.1048576", 4, 2, True, True),
        ("pingpong.sort", "fit.bandwidth", 4, 2, True, True),
        ("pingpong.sort", "latency.0", 4, 2, True, True),
    ]
    assert troubles == []


def test_an_unreachable_node_fails_its_pair_and_the_other_pair_completes(clean, tmp_path):
    tb.stop_sshd(clean.state_dir, "node04")
    target = make_target(clean.nodes, "ssh", clean.ssh_config)
    quick = PingPongOptions(sizes=(0, 1024), seconds_per_size=0.05, connect_wait=5.0)
    with open_store(tmp_path / "pairs.duckdb") as store:
        summary = run_pairs(store, target, "sort", 1, options=quick)
        (error,) = store.con.execute("""SELECT DISTINCT json_extract_string(parameters, '$.error') FROM results
                                        WHERE label = 'node03-node04'""").fetchone()
        status = store.con.execute("SELECT node, status FROM node_status").fetchall()
    assert summary.per_pair == {"node01-node02": {"ok": 1, "invalid": 0, "failed": 0},
                                "node03-node04": {"ok": 0, "invalid": 0, "failed": 1}}
    assert "client node03" in error and "server node04: unreachable" in error
    assert status == [("node04", "unreachable")]


# A tenth of what an unshaped pair of nodes on two shared cores reaches
# (0.1-1 GB/s at 1 MiB): the slow link decides its pair's bandwidth.
SLOW_LINK = 10 * 10**6  # bits/s
BULK = 1 << 20


def bandwidths(store, benchmark: str) -> dict[str, float]:
    """Each pair's best 1 MiB bandwidth in one series."""
    return dict(store.con.execute(f"""
        SELECT label, max(value) FROM results WHERE benchmark = ? AND metric = 'bandwidth.{BULK}' AND valid
        GROUP BY label""", [benchmark]).fetchall())


def test_each_network_keeps_its_own_series_and_a_slow_link_shows_on_its_network_alone(clean, tmp_path):
    tb.fault_link(clean.state_dir, "node03", SLOW_LINK, on="ib")
    said = tb.status(clean.state_dir).summary()
    assert "network ib: switch" in said and "node03: link on ib shaped to 10mbit" in said, said
    target = make_target(clean.nodes, "ssh", clean.ssh_config)
    options = PingPongOptions(sizes=(0, BULK), seconds_per_size=0.05)
    with open_store(tmp_path / "pairs.duckdb") as store:
        first = run_pairs(store, target, "sort", 2, options=options)
        ib = run_pairs(store, target, "sort", 2, options=options, network=Network.parse("ib={node}-ib"))
        on_first, on_ib = bandwidths(store, "pingpong.sort"), bandwidths(store, "pingpong.sort@ib")
    every_one = {"ok": 2, "invalid": 0, "failed": 0}
    assert first.per_pair == ib.per_pair == {"node01-node02": every_one, "node03-node04": every_one}
    assert set(on_first) == set(on_ib) == {"node01-node02", "node03-node04"}
    # node03's link on ib holds its pair to 1.25 MB/s at most; on the first network it is as fast as the other.
    assert on_ib["node03-node04"] <= SLOW_LINK / 8 / 1e6 * 1.1 < on_ib["node01-node02"] / 10
    assert on_first["node03-node04"] > on_first["node01-node02"] / 3
