"""A real Slurm on the testbed (root, slurm-wlm and munge): slurmctld and
munged on this machine, a slurmd in every node under the node's own name and
address; Slurm's own commands reach every node, and `down` leaves no daemon
or mount of it behind.  oddnode inside an allocation (`salloc -N8 oddnode
... --transport slurm`, as an administrator runs it) names the same planted
faults as over ssh and nothing else, MPI pairs whose second rank
mpirun starts through srun name the node behind a slow link, and sets
whose ranks srun starts itself (PMIx) run valid.  Inside an allocation a
check needs no transport option; a batch job (sbatch) runs every node
stage on every node through srun.

Eight nodes, links shaped to 100 Mbit/s; the interconnect stage's pairs
at 0 B and 128 KiB, as tests/testbed/measure/pair/test_interconnect_testbed.py runs
them (whose docstring says why those sizes)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import oddnode as oddnode_package
from oddnode import testbed as tb
from oddnode.core.nodes import expand
from oddnode.testbed import slurm
from oddnode.testbed._system import alive
from oddnode.testbed._state import read_state
from oddnode.store import open_store
from support.cli import oddnode
from support.testbed import clean, needs_root, running_testbed, session_instance, slurm_testbed  # noqa: F401 (clean: a fixture)

pytestmark = [needs_root, slurm_testbed, pytest.mark.skipif(
    any(shutil.which(tool) is None for tool in slurm.TOOLS), reason="no Slurm (Debian: slurm-wlm, munge)")]


NODES = 8
SOURCE = Path(oddnode_package.__file__).resolve().parents[1]  # the src directory these tests import
LINK_RATE = 100 * 10**6  # bits/s
# --continue: past the diagnostics' finding (the BIOS date) to the pairs.
CHECK = ("check", "--continue", "--stages", "interconnect", "--skip", "bisection", "-r", 3, "--sizes", "0,131072",
         "--seconds-per-size", 0.3, "--json")


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    yield from running_testbed(tmp_path_factory, NODES, link_rate=LINK_RATE, slurm=True)


def in_allocation(bed, tmp_path, *args, nodes: int = NODES) -> subprocess.CompletedProcess:
    """``salloc -N NODES oddnode ARGS`` as an administrator runs it (the
    oddnode these tests import: its source tree first on the path)."""
    env = {**slurm.environment(bed.state_dir), "PYTHONPATH": str(SOURCE)}
    return oddnode("--quiet", *args, cwd=tmp_path, check=False, env=env, launcher=("salloc", f"-N{nodes}"))


def warnings(result: subprocess.CompletedProcess) -> set[tuple[str, str]]:
    document = json.loads(result.stdout)
    return {(f["kind"], f["nodes"]) for f in document["findings"] if f["severity"] in ("warning", "error")}


def slurm_command(bed, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                            env={**os.environ, **slurm.environment(bed.state_dir)})
    assert result.returncode == 0, f"{' '.join(argv)}: {result.stderr}"
    return result


def test_down_ends_the_controller_and_unbinds_the_cgroups(tmp_path):
    # First in the module: before its testbed is up (on this worker's testbed number).
    state_dir = tmp_path / "bed"
    tb.up(2, state_dir, slurm=True, instance=session_instance())
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
    assert f"NodeAddr={bed.addresses['node03']} " in shown and "State=IDLE" in shown


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
                           "--seconds-per-size", 0.3, "--json", "--db", tmp_path / "mpi.duckdb")
    document = json.loads(result.stdout)
    assert result.returncode == 1, (result.stderr, document["findings"], document["patterns"])
    for run in document["runs"].values():
        # (shuffle draws its pairs again every repetition)
        assert all(counts["ok"] and not counts["failed"] and not counts["invalid"]
                   for counts in run["per_pair"].values()), run["per_pair"]
    assert warnings(result) == {("weak-pair-member", "node05")}


def test_sets_through_slurm_start_their_ranks_with_srun(clean, tmp_path):
    # Every set's ranks a job step of srun's own, wired up by Slurm's PMIx
    # plugin rather than by mpirun's daemons; small sizes, one repetition of
    # each ordering (four launches: each one a few seconds).
    if shutil.which("mpicc") is None or shutil.which("ompi_info") is None:
        pytest.skip("no mpicc or ompi_info (Debian: openmpi-bin, libopenmpi-dev)")
    db = tmp_path / "sets.duckdb"
    result = in_allocation(clean, tmp_path, "sets", "--transport", "slurm", "--launcher", "srun", "--mpi-yield",
                           "-k", 4, "-r", 1, "--benchmarks", "sendrecv,allreduce", "--sizes", "0,1024",
                           "--seconds-per-size", 0.3, "--json", "--db", db)
    assert result.returncode in (0, 1), result.stderr
    runs = json.loads(result.stdout)["runs"]
    assert set(runs) == {"sorted", "shuffled"}
    outcomes = [r for run in runs.values() for r in run["runs"]]
    assert len(outcomes) == 4, runs
    # About one srun launch in 15 waits out its timeout on the testbed's capped
    # CPUs (docs/testbed.md#slurm-on-the-testbed): such a run is recorded as
    # failed, with its reason; the others run valid.
    bad = [r for r in outcomes if r["outcome"] != "ok"]
    assert len(bad) <= 1, "\n".join(f"{r['set']}: {r['outcome']}: {r['why']}" for r in bad)
    assert all(r["why"] for r in bad), bad
    with open_store(db) as store:
        stored = store.con.execute("SELECT DISTINCT parameters FROM results WHERE benchmark LIKE 'sets.%'").fetchall()
    launches = {(json.loads(p)["launcher"], json.loads(p)["mpi_plugin"]) for (p,) in stored}
    assert launches == {("srun", "pmix")}


def test_inside_an_allocation_a_check_needs_no_transport_option(clean, tmp_path):
    db = tmp_path / "default.duckdb"
    result = in_allocation(clean, tmp_path, "check", "--stages", "none", "--json", "--db", db, nodes=4)
    assert result.returncode in (0, 1), result.stderr
    with open_store(db) as store:
        _, status, target, _ = store.latest_check()
        facts = store.load_facts()
    assert status == "finished"
    assert target["transport"] == "slurm" and len(target["nodes"]) == 4
    assert set(target["nodes"]) <= set(clean.nodes)
    # Every allocated node answered the inventory, each from inside itself.
    assert {node for per_node in facts.values() for node in per_node} == set(target["nodes"])


# The node stages at sizes that take seconds on nodes with an eighth of a CPU.
EVERY_NODE_STAGE = ("--stages", "memory,noise,compute,disk", "--continue", "-r", 1, "--memory-elements", 2_000_000,
                    "--memory-ntimes", 3, "--threads", 1, "--noise-seconds", 1, "--dgemm-n", 200, "--hpl-n", 400,
                    "--disk-size", 16 * 2**20)


def test_a_batch_job_runs_every_node_stage_through_srun(clean, tmp_path):
    # sbatch runs the check on the allocation's first node, as a site's job
    # does; every benchmark of every node stage reaches every node.
    db, out = tmp_path / "batch.duckdb", tmp_path / "check.json"
    argv = [sys.executable, "-m", "oddnode", "--quiet", "check", *map(str, EVERY_NODE_STAGE), "--json", "--db",
            str(db), "--html", str(tmp_path / "batch.html")]
    script = tmp_path / "check.sh"
    script.write_text(f"#!/bin/sh\nexport PYTHONPATH={SOURCE}\nexec {shlex.join(argv)} > {out}\n")
    done = subprocess.run(["sbatch", "--wait", f"-N{NODES}", "-o", str(tmp_path / "job.log"), str(script)],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, **slurm.environment(clean.state_dir)})
    assert done.returncode in (0, 1), done.stderr + (tmp_path / "job.log").read_text()
    document = json.loads(out.read_text())
    counts = {row["benchmark"]: row["n"] for row in document["statistics"] if row["label_kind"] == "node"}
    for benchmark in ("memory.triad", "compute.dgemm", "compute.hpl"):
        assert counts.get(benchmark) == NODES, (benchmark, counts)
    assert any(name.startswith("noise.") and n == NODES for name, n in counts.items()), counts
    assert any(name.startswith("disk.") and n == NODES for name, n in counts.items()), counts
    with open_store(db) as store:
        assert store.latest_check()[2]["transport"] == "slurm"
