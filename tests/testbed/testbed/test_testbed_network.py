"""The testbed's switches and link faults: leaf switches under a core, shaped
links and uplinks, a delay where the kernel has netem (names and tc
arguments without root; the rest on a real testbed as root)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from oddnode import testbed as tb
from oddnode.app.check import make_target
from oddnode.measure.pair.pairs import PingPongOptions, run_pairs
from oddnode.store import open_store
from oddnode.testbed import config, network
from oddnode.testbed.faults import _shaped_rate
from oddnode.core.topology import read_topology
from support.testbed import clean, needs_root, running_testbed  # noqa: F401 (clean: a fixture)

# -- without root -----------------------------------------------------------


def test_leaves_are_contiguous_groups_whose_sizes_differ_by_one_at_most():
    nodes = [f"node{i:02d}" for i in range(1, 11)]
    groups = network.leaf_groups(nodes, 3)
    assert groups == {"leaf1": nodes[0:4], "leaf2": nodes[4:7], "leaf3": nodes[7:10]}
    assert network.leaf_groups(nodes, 1) == {"leaf1": nodes}
    for leaves in (0, 11):
        with pytest.raises(ValueError, match="10 nodes can hang from 1 to 10 leaves"):
            network.leaf_groups(nodes, leaves)


def test_leaf_and_uplink_names_fit_an_interface_name():
    names = config.Names()
    assert names.leaf_bridge(99) == "odd-leaf99" and names.uplink_names(99) == ("odd-u99c", "odd-u99l")
    last = config.Names(config.MAX_INSTANCES - 1)
    assert all(len(name) <= 15 for name in (last.leaf_bridge(99), *last.uplink_names(99), last.linecard_name(99)))
    with pytest.raises(ValueError):
        names.leaf_bridge(100)


@pytest.mark.parametrize("text, bits", [("100mbit", 10**8), ("1gbit", 10**9), ("1.5Gbit", 15 * 10**8),
                                        ("500kbit", 5 * 10**5), ("8000", 8000)])
def test_rates_read_as_tc_writes_them(text, bits):
    assert network.parse_rate(text) == bits
    assert network.parse_rate(network.format_rate(bits)) == bits


@pytest.mark.parametrize("text", ["fast", "100 mbps", "-1mbit", "1kbit", "2tbit", ""])
def test_a_bad_rate_is_refused_with_what_to_write(text):
    with pytest.raises(ValueError, match="rate"):
        network.parse_rate(text)


def test_token_bucket_and_delay_arguments():
    assert network.tbf_qdisc(10**8) == ["tbf", "rate", "100000000bit", "burst", "50000", "latency", "100ms"]
    # At low rates the bucket keeps its 16 KiB floor.
    assert network.tbf_qdisc(10**6)[4] == str(network.MIN_BURST_BYTES)
    assert network.netem_qdisc(5) == ["netem", "delay", "5ms"]
    assert network.netem_qdisc(2.5, 10**8) == ["netem", "delay", "2.5ms", "rate", "100000000bit"]


def test_a_fault_rate_is_given_or_divided_from_the_links_rate():
    assert _shaped_rate(10**7, None, None, "node01's link") == 10**7
    assert _shaped_rate(None, 10, 10**8, "node01's link") == 10**7
    with pytest.raises(tb.TestbedError, match="node01's link is not shaped .*--link-rate"):
        _shaped_rate(None, 10, None, "node01's link")
    with pytest.raises(tb.TestbedError, match="one of the two"):
        _shaped_rate(10**7, 10, 10**8, "x")
    with pytest.raises(tb.TestbedError, match="more than 1"):
        _shaped_rate(None, 0.5, 10**8, "x")


# -- on a real testbed ------------------------------------------------------

LINK_RATE = 100 * 10**6  # bits/s: 12.5 MB/s, which nodes sharing two cores still fill
# 256 KiB messages take 21 ms at the link rate and 210 ms on a link ten times
# slower; the token bucket's burst (50 kB at 100 Mbit/s) inflates the first only by ~20%.
# A size's 0.6 s hold a warm-up and 10 batches of a round trip or more on a
# healthy link.
MESSAGE = 1 << 18
OPTIONS = PingPongOptions(sizes=(0, MESSAGE), seconds_per_size=0.6)


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    yield from running_testbed(tmp_path_factory, 6, leaves=2, link_rate=LINK_RATE)


def _master(link: str) -> str:
    return Path(f"/sys/class/net/{link}/master").resolve().name


def _qdisc(netns: str | None, device: str) -> str:
    argv = ["tc", "qdisc", "show", "dev", device, "root"]
    if netns:
        argv = ["ip", "netns", "exec", netns, *argv]
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


def bandwidths(bed, tmp_path) -> dict[str, float]:
    """MB/s of each sort pair (node01-node02, node03-node04 across the leaves, node05-node06)."""
    target = make_target(bed.nodes, "ssh", bed.ssh_config)
    tmp_path.mkdir(parents=True, exist_ok=True)
    with open_store(tmp_path / "pairs.duckdb") as store:
        run_pairs(store, target, "sort", 1, options=OPTIONS)
        rows = store.con.execute("SELECT label, value FROM results WHERE metric = ? AND valid",
                                 [f"bandwidth.{MESSAGE}"]).fetchall()
    return dict(rows)


@needs_root
def test_nodes_hang_from_their_leaf_and_the_topology_file_says_so(bed):
    prefix = bed.names.prefix  # this testbed's object names (odd-, odd1-...)
    assert bed.leaves == {"leaf1": ["node01", "node02", "node03"], "leaf2": ["node04", "node05", "node06"]}
    assert read_topology(bed.topology) == {node: leaf for leaf, nodes in bed.leaves.items() for node in nodes}
    assert _master(f"{prefix}v01h") == f"{prefix}leaf1" and _master(f"{prefix}v06h") == f"{prefix}leaf2"
    assert _master(f"{prefix}u1c") == bed.names.bridge and _master(f"{prefix}u1l") == f"{prefix}leaf1"
    assert "leaf1 node[01-03], leaf2 node[04-06]" in tb.status(bed.state_dir).summary()
    # Every link is shaped at both ends; the uplinks are not.
    assert "rate 100Mbit" in _qdisc(None, f"{prefix}v01h") and "rate 100Mbit" in _qdisc(f"{prefix}node01", "eth0")
    assert "tbf" not in _qdisc(None, f"{prefix}u1c")


@needs_root
def test_a_node_link_a_tenth_as_fast_slows_its_pair_only_until_cleared(clean, tmp_path):
    prefix = clean.names.prefix  # this testbed's object names (odd-, odd1-...)
    healthy = bandwidths(clean, tmp_path / "before")
    assert all(6 < rate < 20 for rate in healthy.values()), healthy  # 12.5 MB/s and the burst
    assert tb.fault_link(clean.state_dir, "node02", divisor=10) == LINK_RATE // 10
    assert "node02: link shaped to 10mbit" in tb.status(clean.state_dir).summary()
    slowed = bandwidths(clean, tmp_path / "fault")
    assert slowed["node01-node02"] < 0.25 * min(slowed["node03-node04"], slowed["node05-node06"]), slowed
    tb.clear_faults(clean.state_dir)
    assert "rate 100Mbit" in _qdisc(f"{prefix}node02", "eth0")
    assert all(6 < rate < 20 for rate in bandwidths(clean, tmp_path / "after").values())


@needs_root
def test_a_slow_uplink_slows_the_pair_across_leaves_only(clean, tmp_path):
    prefix = clean.names.prefix  # this testbed's object names (odd-, odd1-...)
    tb.fault_uplink(clean.state_dir, "leaf2", 10 * 10**6)
    assert "rate 10Mbit" in _qdisc(None, f"{prefix}u2c") and "rate 10Mbit" in _qdisc(None, f"{prefix}u2l")
    assert "leaf2's uplink shaped to 10mbit" in tb.status(clean.state_dir).summary()
    rates = bandwidths(clean, tmp_path)
    assert rates["node03-node04"] < 0.25 * min(rates["node01-node02"], rates["node05-node06"]), rates
    with pytest.raises(tb.TestbedError, match="no leaf 'leaf9'.*leaf1, leaf2"):
        tb.fault_uplink(clean.state_dir, "leaf9", divisor=10)
    tb.clear_faults(clean.state_dir)
    assert "tbf" not in _qdisc(None, f"{prefix}u2c")


@needs_root
def test_a_line_card_slows_its_nodes_traffic_between_themselves_too_until_cleared(clean, tmp_path):
    prefix = clean.names.prefix  # this testbed's object names (odd-, odd1-...)
    tb.fault_linecard(clean.state_dir, "leaf1", 10 * 10**6)
    assert "rate 10Mbit" in _qdisc(None, f"{prefix}lc1") and "tbf" not in _qdisc(None, f"{prefix}u1c")
    assert "leaf1's line card: its nodes share one fabric link of 10mbit" in tb.status(clean.state_dir).summary()
    rates = bandwidths(clean, tmp_path)
    # node01-node02 never leave leaf1, node03-node04 cross from it: both
    # through its fabric link; node05-node06 on leaf2 keep their links' rate.
    assert max(rates["node01-node02"], rates["node03-node04"]) < 0.25 * rates["node05-node06"], rates
    tb.clear_faults(clean.state_dir)
    assert not Path("/sys/class/net/odd-lc1").exists()
    assert "line card" not in tb.status(clean.state_dir).summary()
    # --slower divides the leaf's non-blocking rate, its 3 links' 300 Mbit/s.
    tb.fault_linecard(clean.state_dir, "leaf2", divisor=10)
    assert "rate 30Mbit" in _qdisc(None, f"{prefix}lc2")


@needs_root
def test_a_delay_needs_netem_and_says_so_where_the_kernel_lacks_it(clean, tmp_path):
    prefix = clean.names.prefix  # this testbed's object names (odd-, odd1-...)
    missing = network.netem_available(clean.names)
    if missing is None:
        tb.fault_delay(clean.state_dir, "node03", 20)
        assert "delay 20ms" in _qdisc(f"{prefix}node03", "eth0")
        target = make_target(clean.nodes, "ssh", clean.ssh_config)
        with open_store(tmp_path / "pairs.duckdb") as store:
            run_pairs(store, target, "sort", 1, options=OPTIONS)
            latency = dict(store.con.execute("SELECT label, value FROM results WHERE metric = 'latency.0'").fetchall())
        # One way into or out of node03 waits 20 ms at its link; the other pairs do not.
        assert latency["node03-node04"] > 20_000 > 10 * latency["node01-node02"], latency
    else:
        with pytest.raises(tb.TestbedError, match="cannot delay packets: tc's netem qdisc .*sch_netem"):
            tb.fault_delay(clean.state_dir, "node03", 20)
        assert "netem" not in _qdisc(f"{prefix}node03", "eth0")
