"""The affinity findings on scripted samples and facts (every fault and its
healthy twin, on foreign node names), the sampler's output checked, and
the report's tables fitted to the terminal."""

from __future__ import annotations

import json

import pytest
from rich.console import Console

from oddnode.measure.collect.affinity import DEFAULT_MARGIN, parse_sampler_output, sampler_argv
from oddnode.readings.affinity import AffinityOutputError, node_affinity_from_json
from oddnode.onnode.node_affinity import AFFINITY_VERSION, DEFAULT_SECONDS
from oddnode.onnode.affinity_sampler import SelectionError, parse_listpids, parse_numa_maps
from oddnode.app.cli import affinity as cli_affinity
from oddnode.findings import find_all
from oddnode.findings.affinity import (
    AFFINITY_DETAILS,
    AFFINITY_KINDS,
    numa_imbalance,
    numa_layouts_from_facts,
    oversubscribed_cores,
    remote_memory,
    unpinned,
)
from oddnode.core.model import Dataset, Severity
from oddnode.core.nodes import expand
from oddnode.report.affinity import affinity_json, numa_view, process_view, thread_view
from support.affinity import GIB_KB, SAMPLES, bound_ranks, process, report, reports, thread


# -- oversubscribed-core --------------------------------------------------------------------------------


def test_ranks_bound_to_one_cpu_on_every_node_fold_into_one_finding():
    nodes = expand("gpu[003-010]")
    found = oversubscribed_cores(reports({node: report(bound_ranks([0, 0, 0, 1])) for node in nodes}))
    assert len(found) == 1
    finding = found[0]
    assert finding.nodes == "gpu[003-010]" and finding.kind == "oversubscribed-core"
    assert "CPU 0 runs 3 busy threads" in finding.message and "bound there" in finding.message
    assert "CPUs 2-31" in finding.message and finding.subject == "command a.out"
    assert set(finding.evidence["per_node"]) == set(nodes)


def test_hardware_threads_of_one_core_while_whole_cores_idle():
    # two free threads on CPUs 3 and 19, the two threads of one core; every other CPU idle
    ranks = [process(7, [thread(7, [[3, SAMPLES]]), thread(8, [[19, SAMPLES]])])]
    found = oversubscribed_cores(reports({"cn-a17": report(ranks, {cpu: 0.01 for cpu in range(32)})}))
    assert len(found) == 1 and "core 3,19 runs 2 busy threads" in found[0].message
    assert "free to move, yet left there" in found[0].message


def test_free_threads_sharing_while_the_other_cpus_are_busy_is_no_finding():
    ranks = [process(7, [thread(7, [[3, SAMPLES]], busy=0.5), thread(8, [[3, SAMPLES]], busy=0.5)])]
    assert oversubscribed_cores(reports({"cn-a17": report(ranks, {cpu: 0.95 for cpu in range(32)})})) == []


def test_one_rank_per_cpu_is_healthy():
    data = reports({node: report(bound_ranks(list(range(16)))) for node in expand("r01n[01-04]")})
    assert oversubscribed_cores(data) == [] and unpinned(data) == [] and remote_memory(data) == []


def test_more_ranks_than_allowed_cpus_is_asked_for_not_misplaced():
    ranks = [process(9 + i, [thread(9 + i, [[0, SAMPLES]], busy=0.5, allowed="0")], allowed="0", cpuset_cpus="0")
             for i in range(2)]
    assert oversubscribed_cores(reports({"cn-a17": report(ranks)})) == []


# -- unpinned -------------------------------------------------------------------------------------------


def test_busy_thread_moving_across_numa_nodes_is_unpinned():
    ranks = [process(5, [thread(5, [[0, 30], [3, 30], [0, 40]])]), *bound_ranks([1, 2])]
    found = unpinned(reports({"cn-a17": report(ranks)}))
    assert len(found) == 1
    moved = found[0].evidence["per_node"]["cn-a17"]["moved"]
    assert [(m["pid"], m["moves"], m["numa_moves"]) for m in moved] == [(5, 2, 0)]  # 0 and 3: one socket
    ranks = [process(5, [thread(5, [[0, 30], [8, 70]])])]  # CPU 8 is on socket 1
    found = unpinned(reports({"cn-a17": report(ranks)}))
    assert found[0].evidence["per_node"]["cn-a17"]["moved"][0]["numa_moves"] == 1
    assert "(1 across NUMA nodes)" in found[0].message


def test_one_short_move_and_idle_threads_are_not_unpinned():
    ranks = [process(5, [thread(5, [[0, 97], [1, 3]])]),  # 3% away: the balancer's occasional correction
             process(6, [thread(6, [[2, 2], [9, 2]], busy=0.01)])]  # idle
    assert unpinned(reports({"cn-a17": report(ranks)})) == []


# -- remote-memory --------------------------------------------------------------------------------------

NUMA_MAPS = """\
00400000 default file=/opt/app/a.out mapped=12 N0=12 kernelpagesize_kB=4
01b2e000 default heap anon=786432 dirty=786432 N0=700000 N1=86432 kernelpagesize_kB=4
7f3a00000000 default anon=1024 dirty=1024 N0=1024 kernelpagesize_kB=2048
7f3b00000000 interleave:0-1 anon=262144 dirty=262144 N0=131072 N1=131072 kernelpagesize_kB=4
7ffd4a1c2000 default stack anon=9 dirty=9 N1=9 kernelpagesize_kB=4
"""


def test_numa_maps_pages_in_kb_and_interleaving_apart():
    placed, interleaved = parse_numa_maps(NUMA_MAPS)
    assert placed == {0: (12 + 700000) * 4 + 1024 * 2048, 1: (86432 + 9) * 4}
    assert interleaved == 262144 * 4


def test_rank_on_socket_1_with_its_memory_on_socket_0_is_remote():
    placed, _ = parse_numa_maps(NUMA_MAPS)
    memory = {str(node): kb for node, kb in placed.items()}
    far = process(11, [thread(11, [[9, SAMPLES]])], memory=memory)  # CPU 9: NUMA node 1
    near = process(12, [thread(12, [[2, SAMPLES]])], memory=memory)  # CPU 2: NUMA node 0
    small = process(13, [thread(13, [[10, SAMPLES]])], memory={"0": 4096})
    found = remote_memory(reports({"cn-a17": report([far, near, small])}))
    assert len(found) == 1
    (entry,) = found[0].evidence["per_node"]["cn-a17"]["processes"]
    assert entry["pid"] == 11 and entry["ran_on"] == [1] and entry["remote_share"] > 0.9
    assert "pid 11 (a.out) ran on NUMA node 1 with 93% of its 5 GiB elsewhere" in found[0].message


# -- numa-imbalance -------------------------------------------------------------------------------------


def numa_facts(nodes: list[str], memory_kb: dict[str, tuple[int, int]] | None = None,
               cpus: dict[str, tuple[str, str]] | None = None) -> dict[str, dict[str, str]]:
    """Per-NUMA facts of two-socket nodes, MemTotal jittering by a few MB
    node to node and node 0 holding the kernel's 1 GiB more."""
    facts: dict[str, dict[str, str]] = {}
    for i, node in enumerate(nodes):
        mem = (memory_kb or {}).get(node, (64 * GIB_KB - GIB_KB - 1000 * i, 64 * GIB_KB - 200_000 - 700 * i))
        cpu = (cpus or {}).get(node, ("0-15,32-47", "16-31,48-63"))
        for index in (0, 1):
            facts.setdefault(f"numa.{index}.memory_kb", {})[node] = str(mem[index])
            facts.setdefault(f"numa.{index}.cpus", {})[node] = cpu[index]
            facts.setdefault(f"numa.{index}.distances", {})[node] = "10 21" if index == 0 else "21 10"
    return facts


def test_a_missing_dimm_on_one_socket_of_one_node():
    nodes = expand("cn-a[01-17]")
    short = {"cn-a17": (64 * GIB_KB - GIB_KB, 56 * GIB_KB)}  # one 8 GiB DIMM of eight gone on socket 1
    facts = numa_facts(nodes, memory_kb=short)
    found = numa_imbalance(numa_layouts_from_facts(facts))
    assert len(found) == 1
    finding = found[0]
    assert (finding.nodes, finding.subject, finding.severity) == ("cn-a17", "numa.1.memory_kb", Severity.WARNING)
    assert "NUMA node 1 has 56.0 GiB of memory" in finding.message
    # the inventory's own comparison names the same node's fact
    everything = find_all(Dataset(facts=facts), rules=["numa-imbalance", "inconsistent-fact"])
    assert {(f.kind, f.subject, f.nodes) for f in everything} == {
        ("numa-imbalance", "numa.1.memory_kb", "cn-a17"), ("inconsistent-fact", "numa.1.memory_kb", "cn-a17")}


def test_healthy_jittering_numa_memory_and_the_kernels_reservation_give_nothing():
    facts = numa_facts(expand("cn-a[01-17]"))
    assert find_all(Dataset(facts=facts), rules=["numa-imbalance", "inconsistent-fact"]) == []


def test_a_single_node_with_fewer_cpus_on_one_numa_node():
    cpus = {"gpu005": ("0-14,32-47", "16-31,48-63")}  # a core disabled in the BIOS on socket 0
    found = numa_imbalance(numa_layouts_from_facts(numa_facts(expand("gpu[003-010]"), cpus=cpus)))
    assert [(f.nodes, f.subject) for f in found] == [("gpu005", "numa.0.cpus")]
    assert "31 of CPUs, fewer than the 32" in found[0].message


def test_the_same_asymmetry_on_every_node_is_information():
    short = {node: (64 * GIB_KB, 32 * GIB_KB) for node in expand("cn-[1-4]")}
    found = numa_imbalance(numa_layouts_from_facts(numa_facts(expand("cn-[1-4]"), memory_kb=short)))
    assert [(f.nodes, f.severity) for f in found] == [("cn-[1-4]", Severity.INFO)]
    assert "the same on every node" in found[0].message


# -- the rules, through a dataset ------------------------------------------------------------------------


def test_registered_rules_read_the_samples_from_the_dataset():
    details = {AFFINITY_DETAILS: {"cn-a17": [report(bound_ranks([0, 0]))], "cn-b03": [report(bound_ranks([0, 1]))]}}
    found = find_all(Dataset(details=details), rules=list(AFFINITY_KINDS))
    assert [(f.kind, f.nodes) for f in found] == [("oversubscribed-core", "cn-a17")]
    assert find_all(Dataset(), rules=list(AFFINITY_KINDS)) == []  # nothing sampled: nothing to say


# -- the sampler's output --------------------------------------------------------------------------------


def test_sampler_output_errors_name_the_node_and_the_field():
    good = report(bound_ranks([0]))
    assert parse_sampler_output("cn-a17", "Welcome to cn-a17\n" + json.dumps(good)).processes[0].pid == 1000
    bad = json.loads(json.dumps(good))
    bad["processes"][0]["threads"][0]["runs"] = [[0, "x"]]
    with pytest.raises(AffinityOutputError, match=r"cn-a17: processes\[0\]\.threads\[0\]\.runs holds"):
        node_affinity_from_json("cn-a17", bad)
    with pytest.raises(AffinityOutputError, match="affinity_version is 9"):
        node_affinity_from_json("cn-a17", {**good, "affinity_version": 9})
    with pytest.raises(AffinityOutputError, match=r"topology.numa_nodes\[0\].cpus: '0-x'"):
        node_affinity_from_json("cn-a17", {**good, "topology": {**good["topology"], "numa_nodes": [
            {"node": 0, "cpus": "0-x", "memory_kb": 1, "distances": None}]}})
    with pytest.raises(AffinityOutputError, match="not JSON"):
        parse_sampler_output("cn-a17", "bash: python3: command not found")


def test_sampler_argv_checks_its_selection():
    with pytest.raises(ValueError, match="give one"):
        sampler_argv(pids=[1], command="a.out")
    with pytest.raises(ValueError, match="--seconds must be > 0"):
        sampler_argv(seconds=0)
    assert sampler_argv(command="a.out", seconds=1.5)[-2:] == ["--seconds=1.5", "--command=a.out"]


def test_the_sampler_fits_a_remote_command_line():
    from oddnode.reach.ssh import MAX_REMOTE_COMMAND, remote_command

    argv = sampler_argv(command="x" * 15, seconds=2)
    assert len(remote_command(argv).encode()) <= MAX_REMOTE_COMMAND * 0.75  # room for the modules to grow


def test_listpids_of_slurm():
    text = "PID      JOBID    STEPID   LOCALID GLOBALID\n2345     771      0        0       0\n2344     771      batch    -       -\n"
    assert parse_listpids(text, "771") == [2344, 2345]
    with pytest.raises(SelectionError, match="unexpected line"):
        parse_listpids("PID JOBID\nslurm_load_jobs error: Invalid job id\n", "9")


def test_cli_defaults_are_the_librarys():
    assert cli_affinity.DEFAULT_SECONDS == DEFAULT_SECONDS and cli_affinity.DEFAULT_MARGIN == DEFAULT_MARGIN


# -- the report ------------------------------------------------------------------------------------------


def test_tables_fold_identical_nodes_and_fit_the_terminal():
    data = reports({node: report(bound_ranks([0, 0, 5])) for node in expand("cn-a[01-16]")})
    console = Console(width=72, record=True)
    for view in (numa_view(data, 72), process_view(data, 72), thread_view(data, 72)):
        console.print(view)
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 72
    assert "cn-a[01-16]" in text and text.count("64.0") == 2  # one block for all sixteen nodes
    idle = reports({"cn-a17": report([process(3, [thread(3, [], busy=0.0)])])})
    assert thread_view(idle, 72) is None and thread_view(idle, 72, show_all=True) is not None
    document = affinity_json(data, {"cn-b01": "unreachable"}, [])
    assert list(document) == ["nodes", "unanswered", "findings"] and len(document["nodes"]) == 16
    assert json.loads(json.dumps(document))["nodes"]["cn-a01"]["affinity_version"] == AFFINITY_VERSION
