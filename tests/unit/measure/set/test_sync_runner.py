"""Sync runs on a scripted cluster: the kernel chosen (MPI where every node
has it, else TCP), what each kernel's set run starts where (mpirun from the
first member; every member's TCP rank at once), what is stored per set and
per rank, the step of the check's sets stage, and the ``sync`` command's
tables, JSON and findings."""

from __future__ import annotations

import json
import re

import pytest

from oddnode.measure.catalog import get_step
from oddnode.measure.set.mpi_sync import CAPPED_TEST_INTERVAL_US, KERNEL, TCP_KERNEL
from oddnode.core.nodes import fold
from oddnode.measure.steps import StepContext, make_options
from oddnode.readings.sync import sync_nodes, sync_scaling
from oddnode.measure.set.sync import SyncOptions, choose_kernel, run_sync
from oddnode.reach.base import Target

from support.cli import invoke
from support.clusters.sync import ITERATIONS, NODES, ScriptedSyncCluster as SyncCluster


def test_the_kernel_is_mpi_where_every_node_has_it_else_tcp():
    assert choose_kernel(Target(NODES, SyncCluster()))[0] == KERNEL
    kernel, note = choose_kernel(Target(NODES, SyncCluster(without_mpi={"cn-a03", "cn-a04"})))
    assert kernel == TCP_KERNEL and "cn-a[03-04] have no MPI" in note
    assert choose_kernel(Target(NODES, SyncCluster()), "tcp")[0] == TCP_KERNEL
    assert choose_kernel(Target(NODES, SyncCluster(without_mpi={"cn-a01"})), "mpi")[0] == KERNEL


@pytest.mark.slow
def test_an_mpi_set_run_is_launched_from_its_first_member_and_stored_per_set_and_per_rank(store):
    cluster = SyncCluster(slow={"cn-a06"})
    target = Target(NODES, cluster)
    options = SyncOptions(iterations=ITERATIONS, mpi_yield=True)
    summary = run_sync(store, target, options, "shuffled", 2, counts=[2, 4, 8], kernel=KERNEL)
    assert cluster.prepared == [KERNEL] and summary.count("ok") == 6
    for specs in cluster.rounds:
        ((first, spec),) = specs.items()
        launcher = spec["launcher"]
        members = launcher[launcher.index("--host") + 1].split(",")
        assert members[0] == first and spec["compiler"] == "mpicc"
        assert spec["args"][spec["args"].index("-y") + 1] == str(CAPPED_TEST_INTERVAL_US)
    dataset = store.load_dataset()
    names = {(r.benchmark, r.metric) for r in dataset.set_runs}
    assert ("scale.sync.allreduce.shuffled", "time") in names
    assert ("sync.allreduce.shuffled", "last") in names and ("sync.allreduce.shuffled", "time") in names
    ranks = [r for r in dataset.set_runs if (r.benchmark, r.metric) == ("sync.allreduce.shuffled", "last")][0]
    assert len(ranks) == 2 * (2 + 4 + 8) and set(ranks.labels.tolist()) <= set(NODES)
    (reading,) = sync_nodes(dataset)
    assert max(reading.nodes, key=lambda n: n.ratio).node == "cn-a06"
    (scaling,) = sync_scaling(dataset)
    assert [p.ranks for p in scaling.points] == [2, 4, 8]


@pytest.mark.slow
def test_a_tcp_set_run_starts_every_members_rank_at_once(store):
    cluster = SyncCluster()
    target = Target(NODES, cluster)
    run_sync(store, target, SyncOptions(iterations=ITERATIONS, port=30001), "sorted", 1, counts=[2, 4],
             kernel=TCP_KERNEL)
    assert cluster.prepared == [TCP_KERNEL]
    first, second = cluster.rounds
    assert sorted(first) == NODES[:2] and sorted(second) == NODES[:4]
    for node, spec in second.items():
        args = spec["args"]
        assert args[args.index("-R") + 1] == ",".join(f"{n}:30001" for n in NODES[:4])
        assert NODES[int(args[args.index("-r") + 1])] == node and "compiler" not in spec
    seeds = {spec["args"][spec["args"].index("-S") + 1] for spec in second.values()}
    assert len(seeds) == 1  # one run, one seed: ranks of other runs are refused
    assert len(store.load_dataset().set_runs) > 0


def test_the_step_is_opt_in_and_takes_its_options_from_plans():
    step = get_step("sync")
    assert step.stage == "sets" and not step.default and "opt-in" in (type(step).__doc__ or "").lower()
    options = make_options(step, {"counts": "2,4", "operation": "barrier", "quantum_us": "500"})
    assert options.counts == (2, 4) and options.operation == "barrier" and options.quantum_us == 500
    with pytest.raises(ValueError, match="sync.kernel|kernel is one of"):
        make_options(step, {"kernel": "pvm"})


@pytest.mark.slow
def test_the_step_runs_its_orderings_and_says_which_kernel(store):
    cluster = SyncCluster(without_mpi={"cn-a02"})
    context = StepContext(store, Target(NODES, cluster), repetitions=1, timeout=60)
    outcome = get_step("sync").run(context, SyncOptions(iterations=ITERATIONS, counts=(2, 8)))
    assert outcome.notes[0].startswith("kernel: TCP, as cn-a02 has no MPI")
    assert any("sync.shuffled: 1 repetitions, 2 set runs: 2 valid" in note for note in outcome.notes)


@pytest.mark.parametrize("options, message", [
    ({"operation": "alltoall"}, "operation is one of allreduce, barrier"),
    ({"quantum_us": 0}, "quantum_us must be a whole number 1-1000000"),
    ({"iterations": 2_000_000}, "iterations must be a whole number 1-1000000"),
    ({"orderings": ("sorted", "sorted")}, "orderings must be distinct"),
    ({"orderings": ("random",)}, "no ordering named 'random'"),
    ({"port": 0}, "port must be a whole number"),
])
def test_options_refuse_what_the_kernel_cannot_run(options, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        SyncOptions(**options)


@pytest.mark.slow
def test_the_command_prints_the_tables_and_names_the_laggard(scripted, tmp_path):
    scripted(SyncCluster(slow={"cn-a03"}), NODES)
    db = tmp_path / "sync.duckdb"
    result = invoke("sync", "--db", db, "--iterations", ITERATIONS, "-r", 3, "--extrapolate", 1250)
    assert result.exit_code == 1, result.output  # a finding
    text = result.text
    assert "kernel: MPI (every node has mpicc and mpirun)" in text
    assert "sync.allreduce.shuffled: how often the others waited for each node" in text
    assert "time = a + b·ranks" in text and "At 1250 ranks the line gives" in text
    assert "sync-laggard" in text and "cn-a03 arrived last at MPI_Allreduce" in text


@pytest.mark.slow
def test_the_command_gives_it_all_as_json(scripted, tmp_path):
    scripted(SyncCluster(slow={"cn-a03"}, without_mpi={"cn-a01"}), NODES)
    result = invoke("sync", "--db", tmp_path / "s.duckdb", "--iterations", ITERATIONS, "--sizes", "4,8", "--json",
                    "--extrapolate", 100)
    assert result.exit_code == 1, result.output  # a finding
    document = json.loads(result.stdout)
    assert document["kernel"] == TCP_KERNEL and list(document["runs"]) == ["shuffled"]
    (nodes,) = document["sync"]["nodes"]
    assert {n["node"] for n in nodes["nodes"]} == set(NODES)
    (scaling,) = document["sync"]["scaling"]
    assert [p["ranks"] for p in scaling["points"]] == [4, 8] and scaling["extrapolation"]["ranks"] == 100
    assert [f["nodes"] for f in document["findings"]] == ["cn-a03"]


def test_the_command_refuses_bad_input_clearly(scripted, tmp_path):
    scripted(SyncCluster(), NODES)
    result = invoke("sync", "--db", tmp_path / "s.duckdb", "--sizes", "2,16")
    assert result.exit_code != 0 and "node counts must be whole numbers from 2 to 8" in result.text
    result = invoke("sync", "--db", tmp_path / "s.duckdb", "--extrapolate", "1")
    assert result.exit_code != 0 and "--extrapolate wants a number of ranks of at least 2" in result.text
    result = invoke("sync", "cn-a[01-04]", "-w", "cn-a01", "--db", tmp_path / "s.duckdb")
    assert result.exit_code != 0 and "give the nodes once" in result.text
    assert fold(NODES) == "cn-a[01-08]"
