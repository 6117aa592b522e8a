"""The sync kernel on a real testbed (root): 8 nodes, each on a capped share
of the CPUs, sets of 4 and 8 shuffled twice, MPI (mpirun over the
testbed's ssh, ranks that sleep while they wait) and TCP (every rank
started by the ssh transport).  A daemon on one node that spawns short
commands back to back (seaborg's management subsystem) makes it the
sync-laggard, under both kernels; a healthy cluster has none; and
``oddnode compare`` of the run with the daemon against the run without it
says the cluster got faster (seaborg's before/after).

The daemon's period.  One round of its commands costs about 2-5 ms of CPU,
as much as a node's whole quota gives in 20 ms or more (2.5 ms here).
Every 20 ms it overran each round and then slept to the next 20 ms mark
(10 ms on average, skipping the deadlines it missed), leaving the node's
rank the quota to itself meanwhile: under TCP the node was last in only
32-39% of its iterations (12.5-25% by chance).  The TCP kernel's other
ranks are last unevenly (their places in the tree), so their last counts
are up to 11 times as dispersed as binomial ones and the iterations count
for that much less: at 32% and a dispersion of 11 the node's tail is 6e-4,
far from the 1.25e-5 it must reach, and a loaded machine gave both.  Every
2 ms it sleeps at most 2 ms between rounds, a full competing process in the
node's quota: last in 39-52% of the iterations, a tail of at most 1.2e-6
at that dispersion."""

from __future__ import annotations

import shutil

import pytest

from oddnode import testbed as tb
from oddnode.judge.analysis import analyze
from oddnode.app.check import make_target
from oddnode.store import open_store
from oddnode.measure.set.sync import SyncOptions, run_sync
from oddnode.readings.sync_series import EFFICIENCY, EXTRA_WAIT, TIME, WAIT, rank_series
from support.testbed import clean, needs_root, running_testbed  # noqa: F401 (clean: a fixture)

pytestmark = needs_root

DAEMON_NODE = "node05"
# A set run of 300 iterations of a 1 ms quantum takes 3-6 s on capped CPUs
# (each node has an eighth of a CPU: every iteration waits for its quota);
# sets of 4 and 8 twice, with mpirun's start, about 30 s.
OPTIONS = {"iterations": 300, "counts": (4, 8), "mpi_yield": True}
# Shorter than one round of the daemon's commands takes on a node's quota, so
# that it never leaves the node's CPU to the rank (see above).
DAEMON_PERIOD_MS = 2.0
REPETITIONS = 2
KERNELS = ["mpi", "tcp"]
# The per-rank series of a shuffled allreduce run, and its metrics the daemon
# makes worse for the whole cluster (see the compare test).
RANK_SERIES = rank_series("allreduce", "shuffled")
FAULT_METRICS = (TIME, WAIT)


def needs(kernel: str) -> None:
    if kernel == "mpi" and (shutil.which("mpicc") is None or shutil.which("mpirun") is None):
        pytest.skip("no mpicc or mpirun (Debian: openmpi-bin, libopenmpi-dev)")


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    yield from running_testbed(tmp_path_factory, 8)


def sync_run(bed, store, kernel: str) -> int:
    """One sync run into ``store``, every set run valid; its run id."""
    target = make_target(bed.nodes, "ssh", bed.ssh_config)
    options = SyncOptions(kernel=kernel, **OPTIONS)
    summary = run_sync(store, target, options, "shuffled", REPETITIONS, counts=options.counts,
                       kernel={"mpi": "mpi_sync", "tcp": "tcp_sync"}[kernel])
    assert summary.count("ok") == len(summary.outcomes) == 2 * REPETITIONS, summary.problems
    return summary.run_id


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every sync run of the module, one store per kernel: (kernel, state)
    -> its run id, state "healthy" or "daemon".  The compare test reads the
    tcp kernel's two runs from the tests that made them (and makes them
    itself when run alone)."""
    return {"dir": tmp_path_factory.mktemp("sync-runs")}


def measure(bed, runs, kernel: str, state: str) -> dict[str, str]:
    """One sync run of ``kernel`` (the daemon planted when ``state`` says
    so) into the kernel's store; the sync-laggard nodes of that run, each
    with its finding's message (every reading takes each series' newest
    run)."""
    if state == "daemon":
        tb.fault_daemon(bed.state_dir, DAEMON_NODE, period_ms=DAEMON_PERIOD_MS, seconds=180.0)
    with open_store(runs["dir"] / f"{kernel}.duckdb") as store:
        runs[kernel, state] = sync_run(bed, store, kernel)
        findings = analyze(store.load_dataset(), correlations=False).findings
    return {f.nodes: f.message for f in findings if f.kind == "sync-laggard"}


@pytest.mark.parametrize("kernel", KERNELS)
def test_a_healthy_cluster_has_no_sync_laggard(clean, runs, kernel):
    needs(kernel)
    laggards = measure(clean, runs, kernel, "healthy")
    assert set(laggards) == set(), laggards


@pytest.mark.parametrize("kernel", KERNELS)
def test_a_daemon_spawning_short_commands_makes_its_node_the_sync_laggard(clean, runs, kernel):
    needs(kernel)
    laggards = measure(clean, runs, kernel, "daemon")
    assert set(laggards) == {DAEMON_NODE}, laggards


def test_compare_says_the_cluster_got_faster_without_the_daemon(clean, runs):
    from oddnode.judge.compare import compare_runs
    from oddnode.judge.compare.verdicts import Verdict

    for state in ("daemon", "healthy"):
        if ("tcp", state) not in runs:
            measure(clean, runs, "tcp", state)
            tb.clear_faults(clean.state_dir)
    with open_store(runs["dir"] / "tcp.duckdb") as store:
        comparison = compare_runs(store, str(runs["tcp", "daemon"]), str(runs["tcp", "healthy"]))
    by_metric = {s.metric: s for s in comparison.series if s.benchmark == RANK_SERIES}
    verdicts = {(s.benchmark, s.metric): s.overall.verdict for s in comparison.series}
    # What the daemon costs the cluster: every rank's time per iteration and
    # its wait for the last rank.  Both must improve as a whole, and no
    # node's may regress.  Efficiency must not regress as a whole, though it
    # need not reach significance: the daemon's node's own falls (it no
    # longer arrives last, so it waits like the others) while the seven
    # others' rise, and with two repetitions of 300 iterations the median of
    # eight moved that way in 3 of 5 pairs of runs measured under load.
    for metric in FAULT_METRICS:
        assert by_metric[metric].overall.verdict is Verdict.IMPROVED, (metric, verdicts)
        assert by_metric[metric].worst is not Verdict.REGRESSED, (metric, verdicts)
    assert by_metric[EFFICIENCY].overall.verdict is not Verdict.REGRESSED, verdicts
    # Not judged: a rank's `last` and `extra_wait` are its share of the blame
    # for the waits.  With the daemon, its node is last in most iterations
    # and the other seven in few; without it every node takes its turn, so
    # the seven's shares (and the median over the nodes, which is one of
    # them) legitimately grow while the cluster gets faster.  The daemon's
    # node's own share is what must fall.
    extra = {j.subject: j for j in by_metric[EXTRA_WAIT].subjects}
    assert extra[DAEMON_NODE].after < extra[DAEMON_NODE].before, extra[DAEMON_NODE]
