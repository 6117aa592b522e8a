"""The cluster's list order: kept as given, natural where none is given,
and followed by the pair patterns (STAB's sort, cut and fold)."""

import pytest

from support.cli import write
from oddnode.app.check import read_hostfile, select_nodes
from oddnode.readings.patterns import pattern_pairs
from oddnode.core.nodes import NodeNameError, expand
from oddnode.core.order import natural_sorted
from oddnode.reach.slurm import allocation_nodes


def test_expand_keeps_the_written_order_of_its_parts():
    assert expand("node10,node9,node[1-3]") == ["node10", "node9", "node1", "node2", "node3"]
    assert expand("c,a,b,a") == ["c", "a", "b"]
    assert expand("rack2-n[1-2],rack1-n[1-2]") == ["rack2-n1", "rack2-n2", "rack1-n1", "rack1-n2"]


def test_ranges_and_set_operations_come_out_in_natural_order():
    assert expand("node[1-12]") == [f"node{i}" for i in range(1, 13)]
    assert expand("node[1-12]!node5") == [f"node{i}" for i in range(1, 13) if i != 5]
    assert expand("gpu[001-128]")[-3:] == ["gpu126", "gpu127", "gpu128"]
    with pytest.raises(NodeNameError, match="invalid node set"):
        expand("node[3-")


def test_natural_order_compares_numbers_as_numbers():
    names = ["node10", "node9", "node1", "r10n1", "r2n3", "r2n10", "cn-0002", "cn-0010", "cn-0001"]
    assert natural_sorted(names) == ["cn-0001", "cn-0002", "cn-0010", "node1", "node9", "node10",
                                     "r2n3", "r2n10", "r10n1"]
    # Unpadded names sort as a cluster's list reads, not as strings (node10 < node9).
    assert natural_sorted(f"node{i}" for i in range(100, 0, -1)) == [f"node{i}" for i in range(1, 101)]
    # Equal numbers written differently stay distinct and ordered.
    assert natural_sorted(["n07", "n7", "n007"]) == ["n007", "n07", "n7"]


def test_select_nodes_keeps_the_given_order(tmp_path):
    hosts = write(tmp_path / "hosts", "# cabling order\nnode12\nnode[3-4]\nnode2  # spare\n")
    assert read_hostfile(hosts) == ["node12", "node3", "node4", "node2"]
    assert select_nodes("node[9-11]", "node10,node4", hosts) == ["node9", "node11", "node12", "node3", "node2"]
    # A node in both -w and the host file keeps its first place.
    assert select_nodes("node3,node1", None, hosts) == ["node3", "node1", "node12", "node4", "node2"]


def test_patterns_pair_unpadded_names_in_list_order():
    nodes = select_nodes("node[1-10]")
    assert pattern_pairs("sort", nodes).pairs[-1] == ("node9", "node10")
    assert pattern_pairs("cut", nodes).pairs == [(f"node{i}", f"node{i + 5}") for i in range(1, 6)]
    assert pattern_pairs("fold", nodes).pairs == [(f"node{i}", f"node{11 - i}") for i in range(1, 6)]


def test_patterns_follow_the_order_given_with_w():
    nodes = select_nodes("r01n02,r01n01,r02n02,r02n01")
    assert pattern_pairs("sort", nodes).pairs == [("r01n02", "r01n01"), ("r02n02", "r02n01")]
    assert pattern_pairs("cut", nodes).pairs == [("r01n02", "r02n02"), ("r01n01", "r02n01")]


def test_slurm_allocation_is_in_natural_order():
    environ = {"SLURM_JOB_NODELIST": "node[9-11],node2", "SLURM_JOB_NUM_NODES": "4"}
    assert allocation_nodes(environ) == ["node2", "node9", "node10", "node11"]
