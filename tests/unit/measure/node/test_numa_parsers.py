"""The NUMA pieces that need no node: the bound memory kernel's and the
shared-memory ping-pong's parsers on real output (tests/fixtures/numa), a
binding the kernel did not get, cut and garbled output; the layout probe's
reading on sysfs reports of two-socket, eight-NUMA-node, memoryless and
cpuset-restricted machines; the cells planned for a mixed cluster; the
cell parsers' cross-check of what was bound."""

from __future__ import annotations

import json

import pytest

from oddnode.reach.jobs import decode_job
from oddnode.measure.node.memory import memory_kernel_argv
from oddnode.parsers.oddnode_memory import parse_memory_output
from oddnode.onnode.cpu_topology import format_cpulist
from oddnode.measure.node.numa import (
    NumaOptions,
    numa_layout,
    parse_cpu_list,
    parse_layout_output,
    parse_pingpong_cell,
    parse_shm_pingpong_output,
    parse_triad_cell,
    plan_cells,
    shm_pingpong_argv,
)
from oddnode.readings.numa_series import PINGPONG, TRIAD, cell_series, is_numa_series, split_cell_series
from oddnode.core.model import Direction
from oddnode.parsers.base import ParseError, get_parser
from support.cli import FIXTURES as ALL_FIXTURES

FIXTURES = ALL_FIXTURES / "numa"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def runner_report(stdout: str, returncode: int = 0, stderr: str = "") -> str:
    """The node runner's JSON report around a kernel's output."""
    return json.dumps({"runner_version": 1, "cache_key": "k", "built": False, "compiler": "cc", "flags": [],
                       "cpu_model": "test", "build_seconds": None, "returncode": returncode, "stdout": stdout,
                       "stderr": stderr})


# --- the bound memory kernel ----------------------------------------------------------


def test_bound_memory_output_parses_with_its_binding():
    parsed = parse_memory_output(fixture("memory_bound.txt"), "cn-a17")
    assert parsed.valid and not parsed.problems
    triad = next(m for m in parsed.measurements if m.benchmark == "memory.triad")
    assert triad.value == pytest.approx(7690.600)
    assert triad.parameters["cpu_node"] == 0 and triad.parameters["mem_node"] == 0
    assert triad.parameters["bound_cpus"] == "0-1"
    assert parsed.configuration["mem_pages_checked"] == parsed.configuration["mem_pages_on_node"] == 192
    assert parsed.configuration["mem_policy"].startswith("bind")


def test_unmet_binding_makes_the_run_invalid_and_says_why():
    parsed = parse_memory_output(fixture("memory_binding_escaped.txt"), "cn-a17")
    assert not parsed.valid
    assert all(not m.valid for m in parsed.measurements)
    assert parsed.problems == ["binding not met: cpu: 1 of 1 threads ran or may run outside NUMA node 0 "
                               "(one on cpu 0)"]


def test_bound_output_without_its_binding_line_is_cut_short():
    text = "\n".join(line for line in fixture("memory_bound.txt").splitlines() if not line.startswith("binding"))
    with pytest.raises(ParseError, match="without its binding line"):
        parse_memory_output(text, "cn-a17")


def test_unbound_output_is_read_as_before():
    text = "\n".join(line for line in fixture("memory_bound.txt").splitlines()
                     if not line.startswith(("binding", "# cpu_", "# mem_", "# bound_", "# numa_")))
    parsed = parse_memory_output(text, "node01")
    assert parsed.valid
    assert "cpu_node" not in parsed.measurements[0].parameters


def test_memory_argv_binds_only_when_asked():
    def job(argv):
        import base64

        return decode_job(argv[-1])

    assert job(memory_kernel_argv(1000))["args"] == ["-n", "1000", "-t", "10"]
    bound = job(memory_kernel_argv(1000, cpu_node=1, mem_node=0, proc_bind=None))
    assert bound["args"] == ["-n", "1000", "-t", "10", "-C", "1", "-M", "0"]
    assert "OMP_PROC_BIND" not in bound["env"]
    with pytest.raises(ValueError, match="cpu_node"):
        memory_kernel_argv(1000, cpu_node=-1)


def test_triad_cell_is_the_triad_under_the_cells_name_and_checks_the_binding():
    parsed = parse_triad_cell(0, 0, runner_report(fixture("memory_bound.txt")), "cn-a17")
    (measurement,) = parsed.measurements
    assert (measurement.benchmark, measurement.metric) == ("numa.triad.0.0", "bandwidth")
    assert measurement.direction is Direction.HIGHER
    with pytest.raises(ParseError, match="not the cell 1->0"):
        parse_triad_cell(1, 0, runner_report(fixture("memory_bound.txt")), "cn-a17")


def test_a_binding_that_cannot_be_made_fails_the_cell_with_the_kernels_reason():
    report = runner_report("", returncode=4, stderr="error: no NUMA node 3 (online nodes: 0-1)\n")
    with pytest.raises(ParseError, match="exited with status 4: error: no NUMA node 3"):
        parse_triad_cell(3, 0, report, "gpu007")


# --- the shared-memory ping-pong ------------------------------------------------------


def test_shm_pingpong_output_parses():
    parsed = parse_shm_pingpong_output(fixture("shm_pingpong.txt"), "cn-a17")
    assert parsed.valid
    latency = next(m for m in parsed.measurements if m.metric == "latency.8")
    assert latency.value == pytest.approx(0.100)
    assert latency.parameters["a_cpu"] == 0 and latency.parameters["b_cpu"] == 1
    assert "peer" not in latency.parameters
    bandwidth = next(m for m in parsed.measurements if m.metric == "bandwidth.4194304")
    assert bandwidth.value == pytest.approx(4194304 / 780.394)
    assert get_parser("oddnode-shm-pingpong") is parse_shm_pingpong_output


def test_shm_pingpong_binding_failure_is_invalid():
    text = fixture("shm_pingpong.txt").replace(
        "validation ok", "validation failed binding what=cpu expected=0,1 got=0,0")
    parsed = parse_shm_pingpong_output(text, "cn-a17")
    assert not parsed.valid
    assert parsed.problems == ["validation failed: binding what=cpu expected=0,1 got=0,0"]


def test_shm_pingpong_without_its_ends_is_not_ours():
    text = "\n".join(line for line in fixture("shm_pingpong.txt").splitlines() if not line.startswith("# a_node"))
    with pytest.raises(ParseError, match="lacks 'a_node'"):
        parse_shm_pingpong_output(text, "cn-a17")
    with pytest.raises(ParseError, match="truncated"):
        parse_shm_pingpong_output(fixture("shm_pingpong.txt").rsplit("result", 1)[0], "cn-a17")


def test_pingpong_cell_keeps_latency_and_bandwidth_at_their_sizes():
    parsed = parse_pingpong_cell(0, 0, 8, 4194304, runner_report(fixture("shm_pingpong.txt")), "cn-a17")
    by_metric = {m.metric: m for m in parsed.measurements}
    assert set(by_metric) == {"latency", "bandwidth"}
    assert by_metric["latency"].benchmark == "numa.pingpong.0.0"
    assert by_metric["latency"].parameters["cpu_node"] == 0
    with pytest.raises(ParseError, match="lacks 64 or 4194304"):
        parse_pingpong_cell(0, 0, 64, 4194304, runner_report(fixture("shm_pingpong.txt")), "cn-a17")


def test_shm_argv_rejects_bad_input():
    with pytest.raises(ValueError, match="first_node"):
        shm_pingpong_argv(-1, 0)
    with pytest.raises(ValueError, match="distinct"):
        shm_pingpong_argv(0, 1, (8, 8))


# --- layouts and cells -----------------------------------------------------------------


def report(nodes: dict[int, tuple[str, int]], allowed: str, mems: str | None = None) -> dict:
    return {"numa": True, "online": format_cpulist(list(nodes)), "cpus_allowed": allowed, "mems_allowed": mems,
            "nodes": {str(n): {"cpus": cpus, "memory_kb": kb} for n, (cpus, kb) in nodes.items()}}


def test_layout_of_a_two_socket_machine():
    layout = parse_layout_output(json.dumps(report({0: ("0-15,32-47", 10**8), 1: ("16-31,48-63", 10**8)},
                                                   "0-63", "0-1")), "cn-a17")
    assert layout.cpu_nodes == (0, 1) and layout.mem_nodes == (0, 1)
    assert layout.cpus[1][:3] == (16, 17, 18) and len(layout.cpus[1]) == 32


def test_layout_of_eight_numa_nodes_under_a_cpuset_with_a_memoryless_node():
    nodes = {n: (f"{8 * n}-{8 * n + 7}", 0 if n == 7 else 2 * 10**7) for n in range(8)}
    layout = numa_layout(report(nodes, "0-23", "0-5,7"))
    assert layout.cpu_nodes == (0, 1, 2)  # the cpuset allows CPUs 0-23 only
    assert layout.mem_nodes == (0, 1, 2, 3, 4, 5)  # 6 not allowed, 7 without memory
    assert layout.has_triad_cell(2, 5) and not layout.has_triad_cell(3, 0)
    assert layout.has_pingpong_cell(0, 2) and not layout.has_pingpong_cell(0, 3)


def test_layout_without_numa_in_the_kernel_is_one_node():
    layout = numa_layout({"numa": False, "cpus_allowed": "0-3"})
    assert layout.cpu_nodes == (0,) and layout.mem_nodes == (0,) and not layout.numa


def test_the_real_probe_output_of_this_machine():
    layout = parse_layout_output(fixture("layout_probe.json"), "this machine")
    assert layout.cpu_nodes == (0,) and layout.cpus[0] == (0, 1)


def test_bad_layout_reports_are_errors_naming_the_node():
    with pytest.raises(ParseError, match="cn-a17.*not a NUMA layout report"):
        parse_layout_output("bash: python3: command not found", "cn-a17")
    with pytest.raises(ParseError, match="not a CPU or node list"):
        numa_layout(report({0: ("0-x", 1)}, "0-3"), "cn-a17")
    assert parse_cpu_list("0-2,5") == (0, 1, 2, 5) and format_cpulist([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"


def test_cells_of_a_mixed_cluster():
    two = numa_layout(report({0: ("0-7", 10**7), 1: ("8-15", 10**7)}, "0-15"))
    one = numa_layout(report({0: ("0-3", 10**7)}, "0-3"))
    lone_cpu = numa_layout(report({0: ("0", 10**7)}, "0"))
    cells = plan_cells({"cn-a01": two, "cn-a02": one, "gpu003": lone_cpu}, NumaOptions(),
                       ["cn-a01", "cn-a02", "gpu003"])
    by_name = {cell.name: cell.nodes for cell in cells}
    assert by_name["numa.triad.0.0"] == ("cn-a01", "cn-a02", "gpu003")
    assert by_name["numa.triad.1.0"] == ("cn-a01",)
    assert by_name["numa.pingpong.0.0"] == ("cn-a01", "cn-a02")  # one CPU cannot ping itself
    assert [c.family for c in cells][:4] == [TRIAD] * 4 and cells[-1].family == PINGPONG
    assert {c.family for c in plan_cells({"a": two}, NumaOptions(pingpong=False), ["a"])} == {TRIAD}
    with pytest.raises(ValueError, match="nothing to run"):
        NumaOptions(memory=False, pingpong=False)


def test_series_names_round_trip():
    assert split_cell_series(cell_series(TRIAD, 3, 12)) == (TRIAD, 3, 12)
    assert split_cell_series("numa.triad.0") is None and split_cell_series("memory.triad") is None
    assert is_numa_series("numa.pingpong.1.0:latency") and not is_numa_series("pingpong.sort:latency.8")
