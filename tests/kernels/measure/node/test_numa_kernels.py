"""The NUMA kernels built and run for real on this machine through the node
runner: the memory kernel bound to NUMA node 0 (its threads on the node's
CPUs, 192 sampled pages on its memory), a binding that cannot be made (no
such node) and one that is lost after it was made (a test build whose
threads leave their CPUs); the shared-memory ping-pong; the MPI ping-pong
(mpicc, mpirun) with its ranks pinned to CPUs 0 and 1, and to a CPU they may
not use; the whole matrix through the local transport into a store;
``oddnode numa --json`` (the 1x1 case on a one-node machine)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from oddnode.app.check import make_target
from oddnode.reach.jobs import runner_argv
from oddnode.measure.node.memory import memory_kernel_argv
from oddnode.measure.node.numa import (
    NumaOptions,
    numa_mpi_argv,
    parse_mpi_cell,
    parse_pingpong_cell,
    parse_triad_cell,
    run_numa,
    shm_pingpong_argv,
)
from oddnode.parsers.base import ParseError
from oddnode.store import open_store

ELEMENTS = 2_000_000
HAVE_MPI = shutil.which("mpicc") is not None and shutil.which("mpirun") is not None
needs_mpi = pytest.mark.skipif(not HAVE_MPI or len(os.sched_getaffinity(0)) < 2,
                               reason="needs mpicc, mpirun and two CPUs (Debian: openmpi-bin, libopenmpi-dev)")
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("cc") is None,
                                reason="needs Linux and cc")


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """A build cache private to this module."""
    return {**os.environ, "XDG_CACHE_HOME": str(tmp_path_factory.mktemp("numa_cache"))}


def run(argv: list[str], env: dict[str, str]) -> str:
    completed = subprocess.run([sys.executable] + argv[1:], capture_output=True, text=True, env=env, timeout=300)
    assert completed.returncode == 0, completed.stderr
    return completed.stdout


def test_memory_kernel_bound_to_node_0(env):
    parsed = parse_triad_cell(0, 0, run(memory_kernel_argv(ELEMENTS, 3, proc_bind=None, cpu_node=0, mem_node=0),
                                        env), "localhost")
    assert parsed.valid, parsed.problems
    configuration = parsed.configuration
    assert configuration["mem_pages_on_node"] == configuration["mem_pages_checked"] == 192
    cpus = set(os.sched_getaffinity(0))
    thread_cpus = {int(c) for c in configuration["thread_cpus"].split(",")}
    assert thread_cpus <= cpus and configuration["threads_counted"] == len(cpus)


def test_binding_to_a_missing_node_fails_naming_it(env):
    with pytest.raises(ParseError, match="exited with status 4: error: no NUMA node 1023"):
        parse_triad_cell(1023, 0, run(memory_kernel_argv(ELEMENTS, 3, cpu_node=1023, mem_node=0), env), "here")
    with pytest.raises(ParseError, match="no NUMA node 1023"):
        parse_pingpong_cell(0, 1023, 8, 4096, run(shm_pingpong_argv(0, 1023, (8, 4096), 0.05), env), "here")


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_threads_that_leave_their_cpus_make_the_run_invalid(env):
    # The test build takes NUMA node 0 to be CPU 0 alone, and lets every
    # thread run anywhere again after the timed loops: the check must see it.
    argv = runner_argv("memory", ["-n", str(ELEMENTS), "-t", "3", "-C", "0", "-M", "0"],
                       defines=['ODDNODE_TEST_NODE_CPUS="0"', "ODDNODE_TEST_ESCAPE"])
    parsed = parse_triad_cell(0, 0, run(argv, env), "localhost")
    assert not parsed.valid
    assert parsed.problems[0].startswith("binding not met: cpu: 1 of 1 threads ran or may run outside NUMA node 0")


@pytest.mark.timing
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="the ping-pong needs two CPUs")
def test_shm_pingpong_runs_between_two_cpus(env):
    parsed = parse_pingpong_cell(0, 0, 8, 1 << 20, run(shm_pingpong_argv(0, 0, (8, 1 << 20), 0.1), env), "here")
    assert parsed.valid, parsed.problems
    assert parsed.configuration["a_cpu"] != parsed.configuration["b_cpu"]
    latency = next(m for m in parsed.measurements if m.metric == "latency")
    assert 0 < latency.value < 1000


@pytest.mark.timing
@needs_mpi
def test_mpi_pingpong_pinned_to_cpus_0_and_1(env):
    cpus = sorted(os.sched_getaffinity(0))[:2]
    report = run(numa_mpi_argv(cpus, (8, 1 << 20), 0.1), env)
    stdout = json.loads(report.strip().splitlines()[-1])["stdout"]
    assert f"# binding: rank0 cpu {cpus[0]}, rank1 cpu {cpus[1]}\n" in stdout
    parsed = parse_mpi_cell(0, 0, tuple(cpus), 8, 1 << 20, report, "here")
    assert parsed.valid, parsed.problems
    assert stdout.rstrip().endswith("validation ok")
    assert [m.benchmark for m in parsed.measurements] == ["numa.mpi_pingpong.0.0"] * 2
    latency = next(m for m in parsed.measurements if m.metric == "latency")
    assert 0 < latency.value < 1000


@needs_mpi
def test_mpi_pingpong_on_a_cpu_it_may_not_use_is_refused(env):
    outside = next(cpu for cpu in range(1023, -1, -1) if cpu not in os.sched_getaffinity(0))
    report = run(numa_mpi_argv((0, outside), (8, 1024), 0.05), env)
    assert json.loads(report.strip().splitlines()[-1])["returncode"] == 4
    with pytest.raises(ParseError, match=f"exited with status 4: .*rank 1: -P CPU {outside} is not one this rank "
                                         "may use"):
        parse_mpi_cell(0, 0, (0, outside), 8, 1024, report, "here")


def test_matrix_through_the_local_transport(env, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", env["XDG_CACHE_HOME"])
    target = make_target([], None)
    with open_store(tmp_path / "s.duckdb", read_only=False) as store:
        options = NumaOptions(elements=ELEMENTS, ntimes=3, seconds_per_size=0.05,
                              pingpong=len(os.sched_getaffinity(0)) >= 2)
        result = run_numa(store, target, options, 2)
        names = {s.name for s in store.load_dataset().series}
    node = target.nodes[0]
    assert result.layouts[node].cpu_nodes and not result.unanswered
    assert all(summary.per_node[node]["ok"] == 2 for _, summary in result.cells)
    assert "numa.triad.0.0:bandwidth" in names
    if HAVE_MPI and options.pingpong:  # the MPI ping-pong on the shared-memory one's CPUs
        mpi = next(summary for cell, summary in result.cells if cell.name == "numa.mpi_pingpong.0.0")
        assert mpi.per_node[node]["ok"] == 2 and not result.mpi_skipped
        assert {"numa.mpi_pingpong.0.0:latency", "numa.mpi_pingpong.0.0:bandwidth"} <= names


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="the ping-pong needs two CPUs")
def test_numa_command_json(env, tmp_path):
    if Path("/sys/devices/system/node/node1").exists():
        pytest.skip("the 1x1 case needs a one-node machine")
    completed = subprocess.run(
        [sys.executable, "-m", "oddnode", "numa", "--db", str(tmp_path / "c.duckdb"), "--elements", str(ELEMENTS),
         "--ntimes", "3", "--seconds-per-size", "0.05", "-r", "1", "--json"],
        capture_output=True, text=True, env=env, timeout=300)
    assert completed.returncode == 0, completed.stderr
    document = json.loads(completed.stdout)
    assert document["findings"] == []
    assert set(document["numa"]["measures"]) == {"numa.triad:bandwidth", "numa.pingpong:latency",
                                                 "numa.pingpong:bandwidth"} | (
        {"numa.mpi_pingpong:latency", "numa.mpi_pingpong:bandwidth"} if HAVE_MPI else set())
    assert len(document["numa"]["one_numa_node"]) == 1
