"""The check's interconnect stage on a scripted cluster: STAB's four pair
patterns, then bisection, judged on the pairs; a weak node is named, a
healthy fabric gives no warning, and a resumed check does not run a
finished step again."""

from __future__ import annotations

import dataclasses

import pytest

from oddnode.app.check import CheckPlan, run_check
from oddnode.reach.base import Target
from support.clusters.batches import unbatch
from support.clusters.bisection import BisectionCluster as SwitchCluster
from support.clusters.check import ScriptedCluster
from support.clusters.pairs import PairCluster, job_args

# A pattern over 12 nodes has 6 pairs: enough to call one of them an outlier.
TWELVE = [f"node{i:02d}" for i in range(1, 13)]
PLAN = CheckPlan(stages=("interconnect",), repetitions=2, parameters={
    "pairs": {"sizes": [0, 1, 64, 4096, 65536], "seconds_per_size": 0.02, "port": 6211},
    "bisection": {"message_size": 65536, "seconds": 0.3, "port": 6202}})


class FabricCluster:
    """The inventory of ScriptedCluster, the ping-pong of PairCluster and the
    streams of SwitchCluster, each answering its own kernel mode."""

    name = "scripted"

    def __init__(self, weak=None):
        self.inventory = ScriptedCluster()
        self.pairs = PairCluster(weak=weak)
        self.streams = SwitchCluster(link=1000.0, capacity=6000.0)
        self.steps: list[str] = []

    def run(self, nodes, argv, *, timeout):
        return self.inventory.run(nodes, argv, timeout=timeout)

    def run_each(self, commands, *, timeout):
        rounds = unbatch(commands, lambda host: self.pairs.hosts.get(host, host)) or [commands]
        modes = {job_args(argv)[0] for commands_of_round in rounds for argv in commands_of_round.values()}
        cluster = self.streams if "stream" in modes else self.pairs
        self.steps += ["stream" if "stream" in modes else "ping"] * len(rounds)  # one a round
        return cluster.run_each(commands, timeout=timeout)


def check(store, cluster, plan=PLAN, **options):
    return run_check(store, Target(TWELVE, cluster), plan, keep_going=True, **options)


@pytest.mark.slow
def test_the_pairs_step_measures_the_network_its_option_names(store):
    cluster = FabricCluster(weak="node04")
    cluster.pairs.hosts = {f"{node}-ib": node for node in TWELVE}
    plan = dataclasses.replace(PLAN, stages=("interconnect",), skip=("bisection",), parameters={
        "pairs": {**PLAN.parameters["pairs"], "network": "ib={node}-ib"}})
    result = check(store, cluster, plan)
    assert cluster.pairs.hosts_used and cluster.pairs.hosts_used <= set(cluster.pairs.hosts)
    benchmarks = {row[0] for row in store.con.execute("SELECT DISTINCT benchmark FROM results").fetchall()}
    assert {b for b in benchmarks if b.startswith("pingpong.")} == {
        f"pingpong.{p}@ib" for p in ("sort", "cut", "fold", "shuffle")}
    (stage,) = [s for s in result.stages if s.name == "interconnect"]
    assert {(f.kind, f.nodes) for f in stage.blocking} == {("weak-pair-member", "node04")}


@pytest.mark.slow
def test_a_weak_node_is_named_from_its_slow_pairs_and_bisection_is_reported(store):
    result = check(store, FabricCluster(weak="node04"))
    (stage,) = [s for s in result.stages if s.name == "interconnect"]
    warnings = {(f.kind, f.nodes) for f in stage.blocking}
    assert warnings == {("weak-pair-member", "node04")}, warnings
    for pattern in ("sort", "cut", "fold"):
        assert f"pairs.{pattern}: 2 repetitions, 6 of 6 pairs gave valid results" in stage.notes
    # A new shuffle each repetition: up to twice as many distinct pairs.
    assert any(note.startswith("pairs.shuffle: 2 repetitions, ") for note in stage.notes)
    (bisection,) = [note for note in stage.notes if note.startswith("bisection:")]
    # 6 cut pairs at 1000 MB/s each, all at once within the switch's 6000 MB/s.
    assert "demonstrated 6000 MB/s over 6 cut pairs, 100.0% of full bisection" in bisection
    assert not result.analysis.ready


@pytest.mark.slow
def test_a_healthy_fabric_gives_no_warning(store):
    result = check(store, FabricCluster())
    (stage,) = [s for s in result.stages if s.name == "interconnect"]
    assert stage.blocking == [], [(f.kind, f.nodes) for f in stage.blocking]
    assert result.analysis.ready


@pytest.mark.slow
def test_a_resumed_check_runs_only_the_steps_it_lacks(store):
    first = check(store, FabricCluster())
    with store.transaction():
        store.con.execute("DELETE FROM check_steps WHERE step IN ('pairs.shuffle', 'bisection')")
        store.set_check_status(first.check_id, "stopped")
    cluster = FabricCluster()
    again = check(store, cluster, resume=first.check_id)
    # shuffle's two repetitions, then bisection's streams; nothing else
    assert cluster.steps[:2] == ["ping", "ping"] and set(cluster.steps[2:]) == {"stream"}
    (stage,) = [s for s in again.stages if s.name == "interconnect"]
    assert "pairs.sort: finished by an earlier, interrupted invocation" in stage.notes


def test_one_node_has_no_interconnect_to_test(store):
    result = run_check(store, Target(["node01"], FabricCluster()), PLAN)
    (stage,) = [s for s in result.stages if s.name == "interconnect"]
    assert stage.notes == ["pairs: not run, it needs 2 nodes or more", "bisection: not run, it needs 2 nodes or more"]


def test_a_bad_pattern_is_refused_when_the_plan_is_made():
    with pytest.raises(ValueError, match="zigzag"):
        CheckPlan(stages=("interconnect",), parameters={"pairs": {"patterns": ["sort", "zigzag"]}})


class Progress:
    """An observer that keeps every repetition count it is told."""

    def __init__(self):
        self.told: dict[str, list[tuple[int, int]]] = {}

    def stage_started(self, stage): ...

    def benchmark_started(self, benchmark, done, total):
        self.told.setdefault(benchmark, []).append((done, total))

    def repetition_done(self, benchmark, done, total):
        self.told[benchmark].append((done, total))

    def stage_judged(self, result): ...


@pytest.mark.slow
def test_every_step_counts_its_progress_in_repetitions_up_to_those_wanted(store):
    progress = Progress()
    check(store, FabricCluster(), observer=progress)
    assert set(progress.told) == {"pairs.sort", "pairs.cut", "pairs.fold", "pairs.shuffle", "bisection"}
    for step, told in progress.told.items():
        assert all(total == PLAN.repetitions and 0 <= done <= total for done, total in told), (step, told)
        assert told[-1] == (PLAN.repetitions, PLAN.repetitions)
        assert [done for done, _ in told] == sorted(done for done, _ in told)


# -- steps a check runs only when asked: the matrix and Switchbench's three --------------


class Composite:
    """The inventory and builds of ScriptedCluster; the pairs, chains and
    meshes of another scripted cluster."""

    name = "scripted"

    def __init__(self, network):
        self.inventory, self.network = ScriptedCluster(), network

    def run(self, nodes, argv, *, timeout):
        return self.inventory.run(nodes, argv, timeout=timeout)

    def run_each(self, commands, *, timeout):
        return self.network.run_each(commands, timeout=timeout)


@pytest.mark.slow
def test_the_matrix_joins_a_check_and_names_the_bad_link(store):
    from support.clusters.matrix import MatrixCluster
    from support.clusters.pairs import NODES, OPTIONS

    plan = CheckPlan(stages=("interconnect",), skip=("pairs", "bisection"), add=("matrix",),
                     parameters={"matrix": dataclasses.asdict(OPTIONS)})
    result = run_check(store, Target(NODES, Composite(MatrixCluster(bad=[("node02", "node05")]))), plan,
                       keep_going=True)
    (stage,) = [s for s in result.stages if s.name == "interconnect"]
    assert stage.notes == ["matrix: 56 ordered pairs measured, 2 slow (2 bad-link)"]
    (slow,) = [f for f in stage.blocking if f.kind == "slow-link"]
    assert slow.nodes == "node[02,05]" and "slow alone too" in slow.message


@pytest.mark.slow
def test_switchbench_s_three_join_a_check(store):
    from support.clusters.switchbench import ALLTOALL, CHAIN, NODES, STREAMS, SwitchCluster

    plain = {"chain": CHAIN, "streams": STREAMS, "alltoall": ALLTOALL}
    plan = CheckPlan(stages=("interconnect",), repetitions=2, skip=("pairs", "bisection"), add=tuple(plain),
                     parameters={name: dataclasses.asdict(options) for name, options in plain.items()})
    result = run_check(store, Target(NODES, Composite(SwitchCluster())), plan, keep_going=True)
    (stage,) = [s for s in result.stages if s.name == "interconnect"]
    assert [note.split(":")[0] for note in stage.notes] == ["chain", "streams.sort", "streams.shuffle", "alltoall"]
    assert "8 of" not in stage.notes[0] and "4 of 4 pairs gave valid results" in stage.notes[1]
    # The scripted switch carries less than its links together: the chain finds where.
    assert {f.kind for f in stage.blocking} == {"switch-saturation"}
    assert {"chain", "stream.sort", "stream.shuffle", "alltoall"} <= {s.benchmark for s in store.load_dataset().series}
