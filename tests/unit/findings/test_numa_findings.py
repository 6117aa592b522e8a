"""numa-slow and numa-remote-ratio on stored synthetic clusters with a
known truth (tests/unit/numa_data.py): the NUMA node (its memory or its
CPUs) or the link named, nodes with one reading folded together, healthy
clusters over many seeds silent, foreign node names, machines with one
NUMA node beside two-socket ones; the matrices read back."""

from __future__ import annotations

import pytest

from support.numa_data import load, parameters_of, store_cluster
from oddnode.findings import find_all
from oddnode.findings.numa import RATIO, SLOW, attribute, numa_matrices, ratio_series
from oddnode.readings.numa_series import BANDWIDTH, LATENCY, PINGPONG, TRIAD
from oddnode.core.nodes import expand

NAMES = {"cn": "cn-a[01-12]", "gpu": "gpu[003-014]", "rack": "r01n[01-06],r02n[01-06]"}


def numa_findings(path):
    return [f for f in find_all(load(path)) if f.kind in (SLOW, RATIO)]


@pytest.mark.parametrize("scheme", sorted(NAMES))
def test_slow_memory_of_one_numa_node_is_named(tmp_path, scheme):
    nodes = expand(NAMES[scheme])
    bad = nodes[6]
    findings = numa_findings(store_cluster(tmp_path / "s.duckdb", nodes, faults={bad: ("slow-memory", 1)}))
    assert [(f.kind, f.subject, f.nodes) for f in findings] == [(SLOW, TRIAD, bad)]
    (finding,) = findings
    assert finding.evidence["where"] == "the memory of NUMA node 1"
    cells = {(c["cpu_node"], c["mem_node"]) for c in finding.evidence["nodes"][bad]["cells"]}
    assert cells == {(0, 1), (1, 1)}
    assert "dmidecode" in finding.remedy and bad in finding.message


def test_slow_cpus_are_named_in_both_kernels(tmp_path):
    nodes = expand("cn-a[01-12]")
    findings = numa_findings(store_cluster(tmp_path / "s.duckdb", nodes, faults={"cn-a03": ("slow-cpus", 0)}))
    slow = {f.subject: f for f in findings if f.kind == SLOW}
    assert slow[TRIAD].evidence["where"] == "the CPUs of NUMA node 0"
    assert slow[PINGPONG].evidence["where"] == "NUMA node 0"
    assert {f.nodes for f in findings} == {"cn-a03"}


def test_slow_link_between_sockets_is_remote_and_its_ratio_stands_out(tmp_path):
    nodes = expand("gpu[003-014]")
    findings = numa_findings(store_cluster(tmp_path / "s.duckdb", nodes, faults={"gpu005": ("slow-link", 0)}))
    slow = [f for f in findings if f.kind == SLOW]
    assert {f.evidence["where"] for f in slow} == {"every path between NUMA nodes (remote)"}
    ratios = {f.subject for f in findings if f.kind == RATIO}
    assert ratios == {"numa.triad:bandwidth", "numa.pingpong:latency", "numa.pingpong:bandwidth"}
    assert all(f.nodes == "gpu005" for f in findings)
    triad = next(f for f in findings if f.subject == "numa.triad:bandwidth")
    assert triad.evidence["nodes"]["gpu005"]["ratio"] < 0.5 * triad.evidence["others_median"]


@pytest.mark.slow
def test_nodes_with_the_same_fault_are_one_finding(tmp_path):
    nodes = expand("cn-a[01-16]")
    faults = {"cn-a04": ("slow-memory", 2), "cn-a11": ("slow-memory", 2)}
    findings = numa_findings(store_cluster(tmp_path / "s.duckdb", nodes, numa_nodes=4, faults=faults))
    assert [(f.kind, f.nodes, f.evidence["where"]) for f in findings] == [
        (SLOW, "cn-a[04,11]", "the memory of NUMA node 2")]


@pytest.mark.slow
@pytest.mark.parametrize("numa_nodes", [2, 4])
def test_healthy_clusters_give_no_numa_finding(tmp_path, numa_nodes):
    nodes = expand("cn-a[01-12]")
    for seed in range(12):
        path = store_cluster(tmp_path / f"s{seed}.duckdb", nodes, numa_nodes=numa_nodes, seed=seed)
        assert numa_findings(path) == [], seed


@pytest.mark.slow
def test_one_numa_node_machines_beside_two_socket_ones(tmp_path):
    nodes = expand("cn-a[01-12]")
    counts = {node: 1 if i < 4 else 2 for i, node in enumerate(nodes)}
    path = store_cluster(tmp_path / "s.duckdb", nodes, numa_nodes=counts, faults={"cn-a09": ("slow-link", 0)})
    matrices = numa_matrices(load(path))
    triad = matrices[(TRIAD, BANDWIDTH)]
    assert triad["cn-a01"].ratio is None and triad["cn-a01"].rows == [0]
    assert len(ratio_series(triad)) == 8  # only the two-socket nodes have a ratio
    findings = numa_findings(path)
    assert {f.nodes for f in findings} == {"cn-a09"}


def test_matrices_and_stored_parameters(tmp_path):
    nodes = expand("cn-a[01-06]")
    path = store_cluster(tmp_path / "s.duckdb", nodes)
    matrices = numa_matrices(load(path))
    assert list(matrices) == [(TRIAD, BANDWIDTH), (PINGPONG, LATENCY), (PINGPONG, BANDWIDTH)]
    latency = matrices[(PINGPONG, LATENCY)]["cn-a02"]
    assert latency.grid().shape == (2, 2) and latency.ratio > 3
    assert {(p["cpu_node"], p["mem_node"]) for p in parameters_of(path, "numa.triad.1.0")} == {(1, 0)}


def test_attribution():
    present = {(i, j) for i in range(4) for j in range(4)}
    assert attribute(TRIAD, [(0, 3), (1, 3), (2, 3), (3, 3)], present) == ("the memory of NUMA node 3", [3])
    assert attribute(TRIAD, [(2, 0), (2, 1)], present) == ("the CPUs of NUMA node 2", [2])
    assert attribute(TRIAD, [(2, 2)], present) == ("NUMA node 2", [2])
    assert attribute(PINGPONG, [(0, 1)], present) == ("cells 0->1", [0, 1])
    remote = [cell for cell in present if cell[0] != cell[1]]
    assert attribute(PINGPONG, remote, present)[0] == "every path between NUMA nodes (remote)"
