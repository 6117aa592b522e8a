"""The MPI ping-pong of ``oddnode numa``, without a node: the pinned MPI
kernel's output (tests/fixtures/numa/mpi_pingpong_pinned.txt) read with its
binding, a rank that left its CPU, output without or with a garbled binding
line, a CPU the ranks may not use; the cell parser's cross-check of the
CPUs; the argv; which nodes run it (foreign node names, MPI missing);
the MPI matrices judged by the same findings as the shared-memory ones, and
shown by the report."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from support.numa_data import cluster_results
from oddnode.reach.jobs import decode_job
from oddnode.findings import find_all
from oddnode.findings.numa import RATIO, SLOW, measure_words, numa_matrices
from oddnode.measure.node.numa import (
    MPI_LAUNCHER,
    MPI_MISSING,
    NumaLayout,
    NumaOptions,
    mpi_plan,
    numa_layout,
    numa_mpi_argv,
    parse_mpi_cell,
    parse_numa_mpi_output,
)
from oddnode.readings.numa_series import BANDWIDTH, LATENCY, MPI_PINGPONG, PINGPONG, cell_series, split_cell_series
from oddnode.core.model import Direction, LabelKind
from oddnode.core.nodes import expand
from oddnode.parsers.base import ParseError
from oddnode.report.numa import node_table_view, numa_json
from oddnode.store import open_store
from oddnode.reach.ssh import MAX_REMOTE_COMMAND, remote_command
from support.cli import FIXTURES as ALL_FIXTURES

FIXTURES = ALL_FIXTURES / "numa"
PINNED = (FIXTURES / "mpi_pingpong_pinned.txt").read_text()
# The stderr of mpirun and the kernel when rank 1 was asked for CPU 7 on this
# two-CPU machine (exit status 4), as the node runner reported it.
BAD_CPU_STDERR = ("mpi_pingpong: rank 1: -P CPU 7 is not one this rank may use (allowed: 0-1; see "
                  "Cpus_allowed_list in /proc/self/status)\nmpirun detected that one or more processes exited "
                  "with non-zero status")


def runner_report(stdout: str, returncode: int = 0, stderr: str = "") -> str:
    return json.dumps({"runner_version": 1, "cache_key": "k", "built": False, "compiler": "mpicc", "flags": [],
                       "cpu_model": "test", "build_seconds": None, "returncode": returncode, "stdout": stdout,
                       "stderr": stderr})


# --- the kernel's output --------------------------------------------------------------


def test_pinned_output_parses_with_its_ranks_cpus():
    parsed = parse_numa_mpi_output(PINNED, "vm")
    assert parsed.valid, parsed.problems
    assert (parsed.configuration["a_cpu"], parsed.configuration["b_cpu"]) == (0, 1)
    assert parsed.configuration["mpi_library"].startswith("Open MPI")
    by_metric = {m.metric: m for m in parsed.measurements}
    assert by_metric["latency.8"].value == pytest.approx(0.125)
    # 4 MiB in 388.132 us one way: 10^6 bytes per MB.
    assert by_metric["bandwidth.4194304"].value == pytest.approx(4194304 / 388.132)


def test_a_rank_that_left_its_cpu_makes_the_run_invalid():
    moved = PINNED.replace("validation ok", "validation failed binding what=cpu expected=0,1 got=0,0")
    parsed = parse_numa_mpi_output(moved, "vm")
    assert not parsed.valid
    assert parsed.problems == ["validation failed: binding what=cpu expected=0,1 got=0,0"]
    cell = parse_mpi_cell(0, 0, (0, 1), 8, 4194304, runner_report(moved), "vm")
    assert not cell.valid and not any(m.valid for m in cell.measurements)


def test_output_without_or_with_a_garbled_binding_is_an_error():
    unpinned = "".join(line for line in PINNED.splitlines(keepends=True) if not line.startswith("# binding:"))
    with pytest.raises(ParseError, match="no '# binding' line"):
        parse_numa_mpi_output(unpinned, "cn-a17")
    with pytest.raises(ParseError, match="not a binding of two ranks"):
        parse_numa_mpi_output(PINNED.replace("rank1 cpu 1", "rank1 cpu one"), "cn-a17")


def test_cell_is_latency_and_bandwidth_under_the_cells_name():
    parsed = parse_mpi_cell(1, 0, (0, 1), 8, 4194304, runner_report(PINNED), "gpu[003]")
    assert parsed.valid
    assert [(m.benchmark, m.metric, m.direction) for m in parsed.measurements] == [
        ("numa.mpi_pingpong.1.0", LATENCY, Direction.LOWER), ("numa.mpi_pingpong.1.0", BANDWIDTH, Direction.HIGHER)]
    parameters = parsed.measurements[0].parameters
    assert (parameters["cpu_node"], parameters["mem_node"], parameters["a_cpu"], parameters["b_cpu"]) == (1, 0, 0, 1)
    assert "peer" not in parameters
    assert parsed.configuration["compiler"] == "mpicc"


def test_cell_checks_the_cpus_and_the_sizes():
    with pytest.raises(ParseError, match="ranks on CPUs 0,1, not 2,3 as asked"):
        parse_mpi_cell(0, 0, (2, 3), 8, 4194304, runner_report(PINNED), "cn-a17")
    with pytest.raises(ParseError, match="lacks 16 or 4194304 bytes"):
        parse_mpi_cell(0, 0, (0, 1), 16, 4194304, runner_report(PINNED), "cn-a17")


def test_a_cpu_the_ranks_may_not_use_fails_the_cell_with_the_kernels_reason():
    with pytest.raises(ParseError, match="exited with status 4: .*rank 1: -P CPU 7 is not one this rank may use"):
        parse_mpi_cell(0, 0, (0, 7), 8, 4194304, runner_report("", 4, BAD_CPU_STDERR), "cn-a17")


# --- the argv and the plan -------------------------------------------------------------


def test_argv_pins_the_ranks_and_starts_them_on_the_node_alone():
    job = decode_job(numa_mpi_argv((2, 5), (8, 1024), 0.2)[-1])
    assert job["kernel"] == "mpi_pingpong" and job["compiler"] == "mpicc"
    assert job["args"] == ["-s", "8,1024", "-T", "0.2", "-P", "2,5"]
    assert job["launcher"] == list(MPI_LAUNCHER)
    assert "--bind-to" in job["launcher"] and "localhost:2" in job["launcher"]
    for bad in [(1,), (0, -1), (0, 1, 2), ("0", "1")]:
        with pytest.raises(ValueError, match="two CPU numbers"):
            numa_mpi_argv(bad)
    with pytest.raises(ValueError, match="seconds_per_size"):
        numa_mpi_argv((0, 1), seconds_per_size=0)
    # The job travels as one ssh command line (oddnode_numa.h pasted in).
    assert len(remote_command(numa_mpi_argv((1022, 1023))).encode()) <= MAX_REMOTE_COMMAND


def test_the_probe_says_whether_mpi_is_there():
    report = {"numa": True, "nodes": {"0": {"cpus": "0-3", "memory_kb": 1 << 20}}, "cpus_allowed": "0-3"}
    assert numa_layout({**report, "mpi": True}).mpi
    assert not numa_layout(report).mpi and not numa_layout({**report, "mpi": "yes"}).mpi
    assert numa_layout({"numa": False, "cpus_allowed": "0-1", "mpi": True}).to_json()["mpi"] is True


def test_mpi_runs_where_it_is_installed_and_says_once_where_not():
    with_mpi = NumaLayout(True, {0: (0, 1), 1: (2, 3)}, {0: 1, 1: 1}, mpi=True)
    without = NumaLayout(True, {0: (0, 1), 1: (2, 3)}, {0: 1, 1: 1}, mpi=False)
    layouts = {"cn-a17": with_mpi, "gpu003": without, "gpu004": without, "r01n02": with_mpi}
    skipped: dict[str, str] = {}
    assert mpi_plan(layouts, NumaOptions(), skipped) == {"cn-a17", "r01n02"}
    assert skipped == {"gpu[003-004]": MPI_MISSING}
    skipped = {}
    assert mpi_plan(layouts, NumaOptions(mpi=False), skipped) == set() and skipped == {}
    assert mpi_plan(layouts, NumaOptions(pingpong=False), skipped) == set()
    assert list(skipped.values()) == ["it runs on the shared-memory ping-pong's CPUs, and that is left out"]


# --- the findings and the report ------------------------------------------------------


def _store_with_mpi(path: Path, nodes: list[str], slow: dict[str, float], seed: int = 0) -> Path:
    """The synthetic cluster (numa_data) plus MPI cells: 0.3 us and 8,000
    MB/s within a NUMA node, 0.9 us and 4,000 MB/s across, 1.5% between
    nodes; ``slow``: node -> factor on its MPI cells touching NUMA node 0."""
    rng = np.random.default_rng(seed + 1000)
    batch = cluster_results(nodes, seed=seed)
    healthy = {LATENCY: (0.3, 0.9, "us", Direction.LOWER), BANDWIDTH: (8000.0, 4000.0, "MB/s", Direction.HIGHER)}
    for node in nodes:
        for i in range(2):
            for j in range(2):
                level = rng.normal(1.0, 0.015)
                factor = slow.get(node, 1.0) if 0 in (i, j) else 1.0
                for metric, (local, remote, unit, direction) in healthy.items():
                    base = (local if i == j else remote) * level
                    value = base * factor if direction is Direction.HIGHER else base / factor
                    for repetition in (1, 2, 3):
                        batch.add(cell_series(MPI_PINGPONG, i, j), node, float(value * rng.normal(1.0, 0.005)),
                                  metric=metric, unit=unit, direction=direction, label_kind=LabelKind.NODE,
                                  repetition=repetition, valid=True, parameters={"cpu_node": i, "mem_node": j},
                                  raw_ref=f"raw:{cell_series(MPI_PINGPONG, i, j)}:{node}:{repetition}")
    with open_store(path, read_only=False) as store:
        with store.transaction():
            run_id = store.new_run("oddnode numa", source="synthetic", nodes=nodes)
            store.add_results(run_id, batch)
    return path


def _load(path: Path):
    with open_store(path) as store:
        return store.load_dataset()


def test_series_names_and_words():
    assert split_cell_series("numa.mpi_pingpong.3.12") == (MPI_PINGPONG, 3, 12)
    assert measure_words(MPI_PINGPONG, LATENCY) == "MPI ping-pong latency"
    assert measure_words(PINGPONG, BANDWIDTH) == "ping-pong bandwidth"


@pytest.mark.parametrize("names", ["cn-a[01-12]", "gpu[003-014]"])
def test_a_slow_mpi_path_is_found_by_the_same_rule(tmp_path, names):
    nodes = expand(names)
    bad = nodes[4]
    dataset = _load(_store_with_mpi(tmp_path / "s.duckdb", nodes, {bad: 0.55}))
    findings = [f for f in find_all(dataset) if f.kind in (SLOW, RATIO)]
    # Only the MPI matrices, only that node; three of its four cells slower
    # also moves its remote/local ratio.
    assert {f.nodes for f in findings} == {bad}
    assert all(f.subject.startswith(MPI_PINGPONG) for f in findings)
    (finding,) = [f for f in findings if f.kind == SLOW]
    assert finding.evidence["where"] == "NUMA node 0"
    assert "NUMA MPI ping-pong slower" in finding.message and "latency 0->0" in finding.message


@pytest.mark.slow
def test_healthy_mpi_cells_give_no_finding(tmp_path):
    nodes = expand("cn-a[01-12]")
    for seed in range(8):
        dataset = _load(_store_with_mpi(tmp_path / f"s{seed}.duckdb", nodes, {}, seed=seed))
        assert [f for f in find_all(dataset) if f.kind in (SLOW, RATIO)] == [], seed


@pytest.mark.slow
def test_report_shows_the_mpi_matrices(tmp_path):
    nodes = expand("r01n[01-06]")
    dataset = _load(_store_with_mpi(tmp_path / "s.duckdb", nodes, {}))
    matrices = numa_matrices(dataset)
    assert (MPI_PINGPONG, LATENCY) in matrices and (MPI_PINGPONG, BANDWIDTH) in matrices
    assert set(numa_json(dataset)["measures"]) >= {"numa.mpi_pingpong:latency", "numa.mpi_pingpong:bandwidth"}
    from rich.console import Console

    console = Console(width=400, record=True)
    console.print(node_table_view(matrices, width=400))
    text = console.export_text()
    assert "mpi lat local" in text and "mpi bw ratio" in text
    narrow = Console(width=80, record=True)
    narrow.print(node_table_view(matrices, width=80))
    assert max(len(line) for line in narrow.export_text().splitlines()) <= 80
