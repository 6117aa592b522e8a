"""A real Slurm on the testbed (root, slurm-wlm and munge): slurmctld and
munged on this machine, a slurmd in every node under the node's own name and
address; Slurm's own commands reach every node, and `down` leaves no daemon
or mount of it behind.  oddnode inside an allocation (`salloc -N8 oddnode
... --transport slurm`, as an administrator runs it) names the same planted
faults as over ssh and nothing else, and MPI pairs whose second rank
mpirun starts through srun name the node behind a slow link.

Eight nodes, links shaped to 100 Mbit/s; the interconnect stage's pairs
at 0 B and 128 KiB, as tests/testbed/test_interconnect_testbed.py runs
them (whose docstring says why those sizes)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest

from oddnode import testbed as tb
from oddnode.nodes import expand
from oddnode.testbed import slurm
from oddnode.testbed._system import alive
from oddnode.testbed._state import read_state
from conftest import oddnode
from testbed_support import needs_root, running_testbed

pytestmark = [needs_root, pytest.mark.skipif(
    any(shutil.which(tool) is None for tool in slurm.TOOLS), reason="no Slurm (Debian: slurm-wlm, munge)")]


NODES = 8
LINK_RATE = 100 * 10**6  # bits/s
# --continue: past the diagnostics' finding (the BIOS date) to the pairs.
CHECK = ("check", "--continue", "--stages", "interconnect", "--skip", "bisection", "-r", 3, "--sizes", "0,131072",
         "--seconds-per-size", 0.05, "--json")


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    yield from running_testbed(tmp_path_factory, NODES, link_rate=LINK_RATE, slurm=True)


@pytest.fixture
def clean(bed):
    tb.clear_faults(bed.state_dir)
    yield bed
    tb.clear_faults(bed.state_dir)


def in_allocation(bed, tmp_path, *args, nodes: int = NODES) -> subprocess.CompletedProcess:
    """``salloc -N NODES oddnode ARGS`` as an administrator runs it."""
    return oddnode("--quiet", *args, cwd=tmp_path, check=False, env=slurm.environment(bed.state_dir),
                   launcher=("salloc", f"-N{nodes}"))


def warnings(result: subprocess.CompletedProcess) -> set[tuple[str, str]]:
    document = json.loads(result.stdout)
    return {(f["kind"], f["nodes"]) for f in document["findings"] if f["severity"] in ("warning", "error")}


def slurm_command(bed, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                            env={**os.environ, **slurm.environment(bed.state_dir)})
    assert result.returncode == 0, f"{' '.join(argv)}: {result.stderr}"
    return result


def test_down_ends_the_controller_and_unbinds_the_cgroups(tmp_path):
    # First in the module: before its testbed is up (one testbed a machine).
    state_dir = tmp_path / "bed"
    tb.up(2, state_dir, slurm=True)
    recorded = read_state(state_dir)["slurm"]
    try:
        assert alive(recorded["slurmctld"]) and alive(recorded["munged"])
        assert os.path.ismount(recorded["cgroup_bind"])
    finally:
        tb.down(state_dir)
    assert not alive(recorded["slurmctld"]) and not alive(recorded["munged"])
    assert not os.path.ismount(recorded["cgroup_bind"]) and not state_dir.exists()


def test_every_node_registers_under_its_own_name_and_address(bed):
    assert bed.slurm_conf == slurm.conf_path(bed.state_dir)
    assert slurm.node_states(bed.state_dir) == {node: "idle" for node in bed.nodes}
    shown = slurm_command(bed, "scontrol", "show", "node", "node03", "-o").stdout
    assert "NodeAddr=10.77.0.13" in shown and "State=IDLE" in shown


def test_srun_runs_a_task_inside_each_node(bed):
    names = slurm_command(bed, "srun", f"-N{NODES}", "--ntasks-per-node=1", "hostname").stdout.split()
    assert sorted(names) == bed.nodes
    # Inside the node's PID namespace: the task sees the node's init, not this machine's.
    inits = slurm_command(bed, "srun", "-N1", "-w", "node02", "cat", "/proc/1/comm").stdout.split()
    assert inits == ["oddnode-init"]


def test_status_names_the_partition_and_how_to_reach_it(bed):
    text = tb.status(bed.state_dir).summary()
    said = re.search(r"Slurm: partition testbed \((.+)\); export SLURM_CONF=(\S+)", text)
    assert said and said[2] == str(bed.slurm_conf), text
    # Every node in one of Slurm's states (idle; completing just after a job).
    states = [part.split(" ", 1) for part in said[1].split(", ")]
    assert sorted(node for _, members in states for node in expand(members)) == bed.nodes, text
    assert {state for state, _ in states} <= {"idle", "comp", "mix"}, text


def test_a_check_through_slurm_names_the_faults_a_check_over_ssh_names(clean, tmp_path):
    tb.fault_file(clean.state_dir, "node03", "/sys/class/dmi/id/bios_date", "09/02/2004\n")
    tb.fault_link(clean.state_dir, "node05", divisor=10)
    planted = {("inconsistent-fact", "node03"), ("weak-pair-member", "node05")}
    over_ssh = oddnode("--quiet", *CHECK, "--testbed", "--db", tmp_path / "ssh.duckdb", cwd=tmp_path, check=False,
                       env={"ODDNODE_TESTBED_DIR": str(clean.state_dir)})
    assert over_ssh.returncode == 1, over_ssh.stderr
    assert warnings(over_ssh) == planted
    through_slurm = in_allocation(clean, tmp_path, *CHECK, "--transport", "slurm", "--db", tmp_path / "slurm.duckdb")
    assert through_slurm.returncode == 1, through_slurm.stderr
    assert warnings(through_slurm) == planted


def test_mpi_pairs_through_slurm_name_the_node_behind_a_slow_link(clean, tmp_path):
    # Three repetitions, each pair judged by its best: one repetition of
    # each pattern once left node05's pairs short of the finding (a node's
    # CPU quota now and then stalls a healthy pair's ranks too).
    if shutil.which("mpirun") is None or shutil.which("mpicc") is None:
        pytest.skip("no mpirun or mpicc (Debian: openmpi-bin, libopenmpi-dev)")
    tb.fault_link(clean.state_dir, "node05", divisor=10)
    result = in_allocation(clean, tmp_path, "pairs", "--kernel", "mpi", "--mpi-yield", "--transport", "slurm",
                           "--patterns", "sort,cut,fold,shuffle", "-r", 3, "--sizes", "0,131072",
                           "--seconds-per-size", 0.05, "--json", "--db", tmp_path / "mpi.duckdb")
    document = json.loads(result.stdout)
    assert result.returncode == 1, (result.stderr, document["findings"], document["patterns"])
    for run in document["runs"].values():
        # (shuffle draws its pairs again every repetition)
        assert all(counts["ok"] and not counts["failed"] and not counts["invalid"]
                   for counts in run["per_pair"].values()), run["per_pair"]
    assert warnings(result) == {("weak-pair-member", "node05")}
