"""The topology reader on sysfs trees written here (a two-socket Intel-style
machine with hyper-threads numbered N and N+16, an eight-NUMA-node
AMD-style machine in NPS4 mode with an offline CPU) and on hwloc's XML
(tests/fixtures/hwloc, made by lstopo), checked against known answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.cli import FIXTURES
from oddnode.readings.affinity import node_affinity_from_json
from oddnode.onnode.node_affinity import AFFINITY_VERSION
from oddnode.onnode.cpu_topology import (
    TopologyError,
    format_cpulist,
    parse_cpulist,
    parse_hwloc_bitmap,
    parse_hwloc_xml,
    read_sysfs,
    read_topology,
)
from oddnode.onnode.node_probe import NUMA_CPUS_KEY, NUMA_DISTANCES_KEY, NUMA_MEMORY_KEY

HWLOC = FIXTURES / "hwloc"
GIB_KB = 1024 * 1024


def write_sysfs(root: Path, cpus: list[dict], numa: list[dict], offline: tuple[int, ...] = ()) -> Path:
    """A sysfs tree: cpu<N>/topology/* for every online CPU, a bare cpu<N>
    for offline ones, node<N>/{cpulist,meminfo,distance}."""
    base = root / "devices" / "system"
    for cpu in cpus:
        topology = base / "cpu" / f"cpu{cpu['cpu']}" / "topology"
        topology.mkdir(parents=True)
        (topology / "physical_package_id").write_text(f"{cpu['package']}\n")
        (topology / "core_id").write_text(f"{cpu['core']}\n")
        (topology / "die_id").write_text(f"{cpu.get('die', 0)}\n")
        (topology / "thread_siblings_list").write_text(f"{cpu['siblings']}\n")
    for number in offline:
        (base / "cpu" / f"cpu{number}").mkdir(parents=True)
    for node in numa:
        path = base / "node" / f"node{node['node']}"
        path.mkdir(parents=True)
        (path / "cpulist").write_text(node["cpus"] + "\n")
        (path / "meminfo").write_text(f"Node {node['node']} MemTotal:       {node['memory_kb']} kB\n"
                                      f"Node {node['node']} MemFree:        {node['memory_kb'] // 2} kB\n")
        (path / "distance").write_text(" ".join(map(str, node["distances"])) + "\n")
    return root


def two_socket(root: Path) -> Path:
    """2 sockets x 8 cores x 2 threads; core ids 0-3,8-11 (Intel leaves gaps);
    CPU c and c+16 are one core's threads; 64 GiB a socket, less on node 0."""
    core_ids = [0, 1, 2, 3, 8, 9, 10, 11]
    cpus = []
    for cpu in range(32):
        first = cpu % 16
        cpus.append({"cpu": cpu, "package": first // 8, "core": core_ids[first % 8],
                     "siblings": f"{first},{first + 16}"})
    numa = [{"node": 0, "cpus": "0-7,16-23", "memory_kb": 64 * GIB_KB - 800_000, "distances": [10, 21]},
            {"node": 1, "cpus": "8-15,24-31", "memory_kb": 64 * GIB_KB - 100_000, "distances": [21, 10]}]
    return write_sysfs(root, cpus, numa)


def eight_numa(root: Path) -> Path:
    """AMD-style, NPS4: 2 sockets x 4 NUMA nodes x 4 cores x 2 threads;
    CPUs 0-31 are the first threads, 32-63 the second; CPU 64 offline."""
    cpus = []
    for cpu in range(64):
        first = cpu % 32
        cpus.append({"cpu": cpu, "package": first // 16, "core": first % 16, "die": first // 16,
                     "siblings": f"{first},{first + 32}"})
    numa = []
    for node in range(8):
        low = 4 * node
        distances = [10 if other == node else 12 if other // 4 == node // 4 else 32 for other in range(8)]
        numa.append({"node": node, "cpus": f"{low}-{low + 3},{low + 32}-{low + 35}",
                     "memory_kb": 32 * GIB_KB - 50_000 * (node == 0), "distances": distances})
    return write_sysfs(root, cpus, numa, offline=(64,))


def typed(data: dict):
    """The topology as the report reads it."""
    report = {"affinity_version": AFFINITY_VERSION, "topology": data, "processes": [], "cpu_busy": {},
              "seconds": 0, "samples": 0, "selection": {}, "notes": []}
    return node_affinity_from_json("cn-a17", report).topology


def test_two_socket_sysfs_tree(tmp_path):
    notes: list[str] = []
    topology = typed(read_sysfs(str(two_socket(tmp_path)), notes))
    assert notes == []
    assert topology.summary() == "2 sockets, 2 NUMA nodes, 16 cores, 32 CPUs"
    assert topology.packages() == {0: tuple([*range(8), *range(16, 24)]), 1: tuple([*range(8, 16), *range(24, 32)])}
    assert topology.cpu(19).siblings == (3, 19) and topology.cpu(19).core == 3
    assert topology.cpu(13).core == 9 and topology.cpu(13).package == 1  # core ids with Intel's gaps
    assert topology.numa_of(20) == 0 and topology.numa_of(24) == 1
    assert [(n.node, n.memory_kb, n.distances) for n in topology.numa_nodes] == [
        (0, 64 * GIB_KB - 800_000, (10, 21)), (1, 64 * GIB_KB - 100_000, (21, 10))]
    assert topology.facts() == {
        "numa_nodes": "2", NUMA_CPUS_KEY % 0: "0-7,16-23", NUMA_CPUS_KEY % 1: "8-15,24-31",
        NUMA_MEMORY_KEY % 0: str(64 * GIB_KB - 800_000), NUMA_MEMORY_KEY % 1: str(64 * GIB_KB - 100_000),
        NUMA_DISTANCES_KEY % 0: "10 21", NUMA_DISTANCES_KEY % 1: "21 10"}


def test_eight_numa_node_sysfs_tree_leaves_the_offline_cpu_out(tmp_path):
    topology = typed(read_sysfs(str(eight_numa(tmp_path))))
    assert topology.summary() == "2 sockets, 8 NUMA nodes, 32 cores, 64 CPUs"
    assert [n.cpus for n in topology.numa_nodes][5] == (20, 21, 22, 23, 52, 53, 54, 55)
    assert topology.numa_nodes[6].distances == (32, 32, 32, 32, 12, 12, 10, 12)
    assert topology.cpu(64) is None
    assert topology.numa_of(53) == 5 and topology.cpu(53).package == 1 and topology.cpu(53).die == 1
    assert len(topology.cores()) == 32 and (7, 39) in topology.cores()
    assert topology.numa_nodes[0].memory_kb == 32 * GIB_KB - 50_000


def test_sysfs_without_numa_nodes_notes_it(tmp_path):
    write_sysfs(tmp_path, [{"cpu": 0, "package": 0, "core": 0, "siblings": "0"}], [])
    notes: list[str] = []
    data = read_sysfs(str(tmp_path), notes)
    assert data["numa_nodes"] == [] and data["cpus"][0]["numa"] is None
    assert "no NUMA nodes" in notes[0]


def test_read_topology_of_a_tree_does_not_ask_hwloc(tmp_path):
    data = read_topology(str(two_socket(tmp_path)), [], hwloc=True)  # lstopo reads the real /sys only
    assert data["source"] == "sysfs" and "hwloc" not in data


def test_bad_sysfs_files_name_the_file(tmp_path):
    write_sysfs(tmp_path, [{"cpu": 0, "package": 0, "core": 0, "siblings": "0-x"}], [])
    with pytest.raises(TopologyError, match=r"cpu0/topology/thread_siblings_list: '0-x'"):
        read_sysfs(str(tmp_path))
    with pytest.raises(TopologyError, match="no CPU with a topology directory"):
        read_sysfs(str(tmp_path / "empty"))


def test_hwloc_two_socket_xml():
    topology = typed(parse_hwloc_xml((HWLOC / "two_socket.xml").read_text()))
    assert topology.source == "hwloc"
    assert topology.summary() == "2 sockets, 2 NUMA nodes, 16 cores, 32 CPUs"
    assert topology.cpu(17).siblings == (16, 17) and topology.numa_of(17) == 1 and topology.cpu(17).package == 1
    assert [(n.memory_kb, n.distances) for n in topology.numa_nodes] == [(64 * GIB_KB, (10, 21)),
                                                                         (64 * GIB_KB, (21, 10))]


def test_hwloc_eight_numa_xml_beyond_32_cpus():
    topology = typed(parse_hwloc_xml((HWLOC / "eight_numa.xml").read_text()))
    assert topology.summary() == "2 sockets, 8 NUMA nodes, 32 cores, 64 CPUs"
    assert topology.numa_nodes[5].cpus == tuple(range(40, 48))  # a cpuset written "0x0000ff00,0x0"
    assert topology.numa_nodes[7].distances == (32, 32, 32, 32, 12, 12, 12, 10)  # values over several elements
    assert {n.memory_kb for n in topology.numa_nodes} == {32 * GIB_KB}


def test_hwloc_xml_of_this_kind_of_machine():
    topology = typed(parse_hwloc_xml((HWLOC / "this_machine.xml").read_text()))
    assert topology.summary() == "1 socket, 1 NUMA node, 2 cores, 2 CPUs"
    assert topology.numa_nodes[0].memory_kb == 7342338048 // 1024


def test_bad_hwloc_xml_says_what():
    with pytest.raises(TopologyError, match="not well-formed"):
        parse_hwloc_xml("<topology><object")
    with pytest.raises(TopologyError, match="no PU"):
        parse_hwloc_xml('<topology><object type="Machine"/></topology>')
    with pytest.raises(TopologyError, match="not <topology>"):
        parse_hwloc_xml("<html/>")


def test_cpu_lists_and_bitmaps():
    assert parse_cpulist("0-3,8,10-11") == [0, 1, 2, 3, 8, 10, 11]
    assert parse_cpulist("") == [] and format_cpulist([]) == ""
    assert format_cpulist([11, 0, 1, 2, 3, 8, 10]) == "0-3,8,10-11"
    assert parse_hwloc_bitmap("0x00000003,0x80000001") == [0, 31, 32, 33]
    with pytest.raises(TopologyError, match="infinite"):
        parse_hwloc_bitmap("0xf...f,0x00000001")
    with pytest.raises(TopologyError, match="backwards"):
        parse_cpulist("5-3")
