"""oddnode as Slurm's health check, on a real Slurm in the testbed (root,
slurm-wlm and munge).

A memory check of the healthy cluster becomes the baseline; `oddnode
health --drain --resume-when-healthy` then runs on every node, as slurmd
runs a HealthCheckProgram (inside the node, SLURMD_NODENAME set).  With one
node showing a quarter less memory, that node, and only that one, is
drained with the reason, read back from `scontrol show node`; the others
stay idle; with the fault gone, it is resumed; a node an administrator
drained is never resumed by oddnode.  slurmd itself runs the program
`oddnode health --install` writes from slurm.conf's HealthCheckProgram to
the same end; and a competing process on a node drains that node for its
memory bandwidth.

Eight nodes; the memory kernel as tests/testbed/app/test_check_testbed.py runs
it (arrays of 64 MB, one thread, loops of half a second), so that every
node's CPU quota binds evenly and the healthy nodes' bandwidths agree.
The drain and resume tests judge the facts alone (--benchmarks never): the
memory kernel's seconds would add nothing to them."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import oddnode
from oddnode import testbed as tb
from oddnode.onnode.slurm_node import REASON_PREFIX, parse_node_state
from oddnode.testbed import slurm
from support.cli import oddnode as run_oddnode
from support.testbed import needs_root, running_testbed, slurm_testbed

pytestmark = [needs_root, slurm_testbed, pytest.mark.skipif(
    any(shutil.which(tool) is None for tool in slurm.TOOLS), reason="no Slurm (Debian: slurm-wlm, munge)")]

NODES = 8
FAULTY = "node06"  # a quarter of its memory missing from /proc/meminfo
BUSY = "node03"  # a competing process
HOG_WORKERS = 4  # its processes: the kernel's thread gets a fifth of the node's CPU time
MEMORY = ("--memory-elements", 8_000_000, "--memory-ntimes", 3, "--threads", 1, "--memory-min-seconds", 0.5)
SOURCE = Path(oddnode.__file__).resolve().parents[1]  # the src directory this test imports


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    yield from running_testbed(tmp_path_factory, NODES, slurm=True)


@pytest.fixture(scope="module")
def baseline(bed, tmp_path_factory) -> Path:
    """The healthy cluster's memory check, and the baseline written from it."""
    where = tmp_path_factory.mktemp("baseline")
    db = where / "check.duckdb"
    env = {"ODDNODE_TESTBED_DIR": str(bed.state_dir), "PYTHONPATH": str(SOURCE)}
    run_oddnode("--quiet", "check", "--testbed", "--stages", "memory", "-r", 2, *MEMORY, "--db", db,
                "--html", where / "report.html", cwd=where, env=env)
    path = where / "baseline.yaml"
    # Eight nodes on two shared CPUs, beside another test tier: a healthy
    # node's triad falls to 55-80% of the median when the machine is busy
    # (the CPUs' other hardware threads), the busy node's (four competing
    # processes beside the kernel's one thread) to 10-15%.  Half the median
    # keeps both clear of the line.
    run_oddnode("baseline", "--db", db, "-o", path, "--tolerance", 0.5, cwd=where, env=env)
    return path


def scontrol(bed, *args: str) -> str:
    result = subprocess.run(["scontrol", *args], capture_output=True, text=True, timeout=30,
                            env={**os.environ, **slurm.environment(bed.state_dir)})
    assert result.returncode == 0, f"scontrol {' '.join(args)}: {result.stderr}"
    return result.stdout


def state(bed, node: str):
    return parse_node_state(scontrol(bed, "show", "node", node))


def health_argv(bed, baseline: Path, *options: str) -> list[str]:
    """`oddnode health` as slurmd would start it on a node: only
    SLURMD_NODENAME set by Slurm, the rest by the site's wrapper."""
    return ["env", f"PYTHONPATH={SOURCE}", f"SLURM_CONF={slurm.conf_path(bed.state_dir)}", "SLURMD_NODENAME={node}",
            sys.executable, "-m", "oddnode", "health", "--baseline", str(baseline), *options]


def health_on_every_node(bed, baseline: Path, *options: str) -> dict[str, subprocess.CompletedProcess]:
    """Run the health check inside every node at once (over ssh), as slurmd
    does on each at its interval."""
    def one(node: str) -> subprocess.CompletedProcess:
        argv = [word.replace("{node}", node) for word in health_argv(bed, baseline, *options)]
        return subprocess.run(["ssh", "-F", str(bed.ssh_config), node, shlex.join(argv)], capture_output=True,
                              text=True, timeout=300)

    with ThreadPoolExecutor(max_workers=NODES) as pool:
        return dict(zip(bed.nodes, pool.map(one, bed.nodes)))


def less_memory(bed, node: str) -> None:
    """A quarter of the node's memory missing, as /proc/meminfo shows it there."""
    tb.fault_file(bed.state_dir, node, "/proc/meminfo", tb.meminfo_with_total(int(tb.real_memory_total_kib() * 0.75)))


@pytest.fixture
def undrained(bed):
    """Every node resumed and every fault cleared, before and after."""
    def reset():
        tb.clear_faults(bed.state_dir)
        for node in bed.nodes:
            if state(bed, node).drained:
                scontrol(bed, "update", f"NodeName={node}", "State=RESUME")
    reset()
    yield bed
    reset()


def test_the_faulty_node_alone_is_drained_with_its_reason_and_resumed_once_healthy(undrained, baseline):
    bed = undrained
    less_memory(bed, FAULTY)
    results = health_on_every_node(bed, baseline, "--drain", "--resume-when-healthy", "--benchmarks", "never")
    assert results[FAULTY].returncode == 1, results[FAULTY].stdout + results[FAULTY].stderr
    assert "memory_total_kb" in results[FAULTY].stdout
    for node, result in results.items():
        if node != FAULTY:
            assert result.returncode == 0, f"{node}: {result.stdout}{result.stderr}"
    drained = state(bed, FAULTY)
    assert drained.drained and drained.reason.startswith(REASON_PREFIX)
    assert "memory_total_kb=" in drained.reason
    assert {node for node in bed.nodes if state(bed, node).drained} == {FAULTY}
    assert all(state(bed, node).state == "IDLE" for node in bed.nodes if node != FAULTY)

    tb.clear_faults(bed.state_dir)
    results = health_on_every_node(bed, baseline, "--drain", "--resume-when-healthy", "--benchmarks", "never")
    assert all(result.returncode == 0 for result in results.values()), {n: r.stderr for n, r in results.items()}
    assert f"{FAULTY}: resumed" in results[FAULTY].stdout
    assert all(state(bed, node).state == "IDLE" for node in bed.nodes)


def test_a_node_drained_by_hand_is_never_resumed(undrained, baseline):
    bed = undrained
    scontrol(bed, "update", f"NodeName={FAULTY}", "State=DRAIN", "Reason=fan replaced, burn-in pending")
    results = health_on_every_node(bed, baseline, "--drain", "--resume-when-healthy", "--benchmarks", "never")
    assert results[FAULTY].returncode == 0
    assert "not by oddnode" in results[FAULTY].stdout
    kept = state(bed, FAULTY)
    assert kept.drained and kept.reason == "fan replaced, burn-in pending"
    # And a problem found on it later does not overwrite the administrator's reason.
    less_memory(bed, FAULTY)
    results = health_on_every_node(bed, baseline, "--drain", "--resume-when-healthy", "--benchmarks", "never")
    assert results[FAULTY].returncode == 1
    assert state(bed, FAULTY).reason == "fan replaced, burn-in pending"


def test_slurmd_runs_the_installed_program_and_it_drains_the_faulty_node(undrained, baseline, tmp_path):
    bed = undrained
    env = {"PYTHONPATH": str(SOURCE)}
    log = tmp_path / "oddnode-health.log"
    # On nodes with an eighth of a CPU, the facts alone.
    run_oddnode("health", "--install", tmp_path / "health", "--baseline", baseline, "--drain", "--resume-when-healthy",
                "--benchmarks", "never", "--log", log, cwd=tmp_path, env=env)
    # slurmd starts the program with SLURMD_NODENAME alone in its environment
    # and ends it after 60 s; the testbed's Slurm is found through SLURM_CONF.
    program = tmp_path / "slurmd-health"
    program.write_text(f"#!/bin/sh\nSLURM_CONF={shlex.quote(str(slurm.conf_path(bed.state_dir)))} "
                       f"exec {shlex.quote(str(tmp_path / 'health' / 'oddnode-health'))}\n")
    program.chmod(0o755)
    less_memory(bed, FAULTY)
    slurm.enable_health_check(bed.state_dir, program, interval=20)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not state(bed, FAULTY).drained:
            time.sleep(2)
        drained = state(bed, FAULTY)
        assert drained.drained and "memory_total_kb=" in drained.reason, drained
        tb.clear_faults(bed.state_dir)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and state(bed, FAULTY).drained:
            time.sleep(2)
        # (NOT_RESPONDING may come and go: slurmd answers pings late while it
        # runs the program on a node with an eighth of a CPU.)
        assert "IDLE" in state(bed, FAULTY).flags and not state(bed, FAULTY).drained
        logged = log.read_text()
        assert f"{FAULTY}: drained (oddnode: memory_total_kb=" in logged and f"{FAULTY}: resumed" in logged
        assert all(f"{node}: healthy in " in logged for node in bed.nodes), logged
        assert not any(state(bed, node).drained for node in bed.nodes)
    finally:
        slurm.enable_health_check(bed.state_dir, None)


def test_a_competing_process_drains_its_node_for_its_memory_bandwidth(undrained, baseline):
    bed = undrained
    tb.fault_process(bed.state_dir, BUSY, tb.hog_argv(600, workers=HOG_WORKERS), 600)
    results = health_on_every_node(bed, baseline, "--drain", "--json")
    assert results[BUSY].returncode == 1, results[BUSY].stdout + results[BUSY].stderr
    memory = {check["name"]: check for check in json.loads(results[BUSY].stdout)["checks"]}["memory"]
    assert memory["status"] == "problem" and memory["data"]["triad"] < memory["data"]["minimum"]
    busy = state(bed, BUSY)
    assert busy.drained and busy.reason.startswith(REASON_PREFIX + "triad "), busy
    for node, result in results.items():
        if node != BUSY:
            assert result.returncode == 0, f"{node}: {result.stdout}{result.stderr}"
    assert {node for node in bed.nodes if state(bed, node).drained} == {BUSY}


def test_a_check_drains_the_node_its_findings_name(undrained, tmp_path):
    bed = undrained
    tb.fault_file(bed.state_dir, FAULTY, "/sys/class/dmi/id/bios_date", "09/02/2004\n")
    env = {"ODDNODE_TESTBED_DIR": str(bed.state_dir), "PYTHONPATH": str(SOURCE), **slurm.environment(bed.state_dir)}
    common = ("check", "--testbed", "--stages", "none", "--db", tmp_path / "c.duckdb", "--html", tmp_path / "r.html")
    shown = run_oddnode(*common, "--drain", "--dry-run", cwd=tmp_path, env=env, check=False)
    assert shown.returncode == 1, shown.stdout + shown.stderr
    assert f"would run: scontrol update NodeName={FAULTY} State=DRAIN" in shown.stdout
    assert not any(state(bed, node).drained for node in bed.nodes)
    done = run_oddnode(*common, "--drain", "--json", cwd=tmp_path, env=env, check=False)
    assert done.returncode == 1, done.stderr
    assert [(a["node"], a["action"], a["done"]) for a in json.loads(done.stdout)["drain"]] == [(FAULTY, "drain", True)]
    drained = state(bed, FAULTY)
    assert drained.drained and drained.reason.startswith(REASON_PREFIX + "inconsistent-fact [bios_date]")
    assert {node for node in bed.nodes if state(bed, node).drained} == {FAULTY}
