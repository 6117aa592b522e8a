"""The check's noise stage on a real testbed (root): 8 nodes sharing this
machine's CPUs, each capped at its share by a CPU quota.  A daemon that
spawns short-lived commands on one node every 200 ms makes that node the
noisy one, named with the daemon's period; a healthy cluster gives no
noisy-node and no warning from the stage.

The nodes' quotas would make a kernel that never stops measure the quota
itself: a thread that works all the time is throttled at the quota's 10 ms
period on every node alike (87.5% of its time lost on each of 8 nodes),
which hides what else runs there.  So the kernel runs as `--testbed` runs
it: one thread per node, working 5% of the time in bursts at random
moments, within the quota; a node loses time only when something else of
its own takes the CPU or the quota.

The daemon's period.  Each of its rounds forks and execs three commands
from Python, about 5 ms of CPU: every 20 ms that is a quarter of a CPU,
twice a node's whole quota here (1/8 of the half of 2 CPUs the nodes
share), so it would fall behind and spawn whenever it could, with no period
left to find.  Every 100 ms it takes 40% of the quota, and under the
load of a whole test suite more, until the node is throttled at the
quota's own 10 ms period (seen once); every 200 ms, 20%, it keeps its
schedule."""

from __future__ import annotations

import pytest

from oddnode import testbed as tb
from oddnode.testbed import cgroups
from oddnode.app.check import CheckPlan, make_target, run_check
from oddnode.findings.noise import KIND
from oddnode.measure.node.noise import capped_noise_options
from oddnode.store import open_store
from support.testbed import clean, needs_root, running_testbed  # noqa: F401 (clean: a fixture)

pytestmark = [needs_root]

NODES = 8
DAEMON_NODE = "node03"
DAEMON_PERIOD_MS = 200.0
# Three repetitions of 5 s: 25 of the daemon's periods in each, and the
# best (quietest) of three per node to judge.
CPUS = cgroups.available_cpus()
# As `oddnode check --testbed` runs the kernel: within each node's quota.
PLAN = CheckPlan(stages=("noise",), repetitions=3, parameters={"noise": {
    "seconds": 5.0, **capped_noise_options(cgroups.node_quota_us(CPUS, NODES) / cgroups.PERIOD_US, CPUS)}})


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    yield from running_testbed(tmp_path_factory, NODES)


def noise_stage(bed, tmp_path, name: str):
    """The judged noise stage of a check of the testbed; every repetition
    of every node must have given a valid result."""
    target = make_target(bed.nodes, "ssh", bed.ssh_config)
    with open_store(tmp_path / f"{name}.duckdb") as store:
        result = run_check(store, target, PLAN, keep_going=True)
    (stage,) = [s for s in result.stages if s.name == "noise"]
    summary = stage.runs["noise"]
    assert summary is not None and summary.per_node
    assert all(counts["ok"] == PLAN.repetitions for counts in summary.per_node.values()), summary.per_node
    return stage


def test_a_healthy_cluster_gives_no_noisy_node_and_no_warning(clean, tmp_path):
    stage = noise_stage(clean, tmp_path, "healthy")
    assert [(f.kind, f.nodes, f.subject) for f in stage.blocking] == []


def test_a_spawning_daemon_makes_its_node_the_noisy_one_with_its_period(clean, tmp_path):
    tb.fault_daemon(clean.state_dir, DAEMON_NODE, period_ms=DAEMON_PERIOD_MS, seconds=300)
    stage = noise_stage(clean, tmp_path, "daemon")
    noisy = [f for f in stage.findings if f.kind == KIND]
    assert [f.nodes for f in noisy] == [DAEMON_NODE], [f.message for f in noisy]
    (finding,) = noisy
    assert finding.evidence["period_ms"] == pytest.approx(DAEMON_PERIOD_MS, rel=0.1), finding.message
    # Nothing else is named: every warning of the stage is about the daemon's node.
    assert {f.nodes for f in stage.blocking} == {DAEMON_NODE}
