"""The MPI ping-pong kernel, built with mpicc by the node runner and started
as two ranks on this machine by Open MPI's mpirun; its launcher's argv and
its parser on real output; pattern runs with it on a scripted cluster."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from oddnode.judge.analysis import analyze
from oddnode.measure.pair.pairs import PingPongOptions, run_pairs
from oddnode.reach.jobs import PREPARE_OPTION, decode_job
from oddnode.store import open_store
from oddnode.reach.base import NodeResult, NodeStatus, Target

from oddnode.measure.pair.mpi_pingpong import (
    MPI_PINGPONG_BENCHMARK,
    mpi_ping_argv,
    mpirun_launcher,
    parse_mpi_pingpong_output,
    parse_mpi_pingpong_run,
)
from oddnode.reach.jobs import parse_runner_output
from oddnode.parsers.base import ParseError
from support.clusters.pairs import slowed
from support.outputs import GOOD_PING
from support.kernels import assert_cuts_said, run_alone
from support.outputs import prepared_report, runner_report

# Both ranks on this machine: Open MPI's TCP transport between them (no
# shared memory, as between two nodes), more ranks than cores allowed.
LOCAL = ["mpirun", "-np", "2", "--host", "localhost:2", "--oversubscribe", "--mca", "btl", "self,tcp"]
SIZES = [0, 1, 1024, 65536, 1 << 20]


@pytest.fixture(scope="module")
def mpi_env(tmp_path_factory):
    """A private build cache, where mpicc can build an MPI program."""
    missing = [tool for tool in ("mpicc", "mpirun") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"no {' or '.join(missing)} on PATH (Debian: openmpi-bin, libopenmpi-dev)")
    tmp = tmp_path_factory.mktemp("mpi_pingpong")
    source = tmp / "check.c"
    source.write_text("#include <mpi.h>\nint main(int c, char **v){MPI_Init(&c, &v); return MPI_Finalize();}\n")
    built = subprocess.run(["mpicc", "-o", str(tmp / "check"), str(source)], capture_output=True, text=True)
    assert built.returncode == 0, f"mpicc cannot build an MPI program: {built.stderr.strip()[:300]}"
    return dict(os.environ, XDG_CACHE_HOME=str(tmp / "cache"))


@pytest.mark.timing
def test_two_ranks_measure_every_size_and_check_their_echoes(mpi_env):
    argv = mpi_ping_argv("localhost", "localhost", SIZES, 0.05, launcher=LOCAL)
    parsed = parse_mpi_pingpong_run(run_alone(argv, mpi_env), "mpi")
    assert parsed.valid, parsed.problems
    assert parsed.configuration["mpi_library"].startswith("Open MPI")
    latency = {m.parameters["bytes"]: m for m in parsed.measurements if m.metric.startswith("latency.")}
    bandwidth = {m.parameters["bytes"]: m for m in parsed.measurements if m.metric.startswith("bandwidth.")}
    assert sorted(latency) == SIZES and sorted(bandwidth) == SIZES[1:]
    assert {m.benchmark for m in parsed.measurements} == {MPI_PINGPONG_BENCHMARK}
    for size, m in latency.items():
        assert 0 < m.value <= m.parameters["median_us"] < 1e5, (size, m)
    assert_cuts_said(parsed)
    # A megabyte takes longer than a byte, and moves faster per byte.
    assert latency[1 << 20].value > latency[1].value
    assert bandwidth[1 << 20].value > bandwidth[1].value


def test_a_size_out_of_time_ends_after_one_batch_and_says_so(mpi_env):
    argv = mpi_ping_argv("localhost", "localhost", [1, 1 << 20], 1e-4, launcher=LOCAL)
    parsed = parse_mpi_pingpong_run(run_alone(argv, mpi_env), "mpi")
    assert parsed.valid, parsed.problems
    assert {m.parameters["batches"] for m in parsed.measurements} == {1}
    assert all(m.parameters["cut_by_time"] for m in parsed.measurements)
    assert_cuts_said(parsed)


def test_more_than_two_ranks_are_refused(mpi_env):
    launcher = ["mpirun", "-np", "3", "--host", "localhost:3", "--oversubscribe", "--mca", "btl", "self,tcp"]
    report = parse_runner_output("mpi", run_alone(mpi_ping_argv("a", "b", [0], 0.01, launcher=launcher), mpi_env))
    assert report.returncode != 0
    assert "run as exactly two MPI ranks (mpirun -np 2), not 3" in report.stderr


def test_mpirun_puts_one_rank_on_each_node_and_reaches_the_second_as_told():
    assert mpirun_launcher("node01", "node02") == ["mpirun", "-np", "2", "--host", "node01,node02",
                                                   "--map-by", "node"]
    assert mpirun_launcher("node01", "node02", "ssh -F /etc/cluster/ssh_config")[-3:] == [
        "--mca", "plm_rsh_agent", "ssh -F /etc/cluster/ssh_config"]
    with pytest.raises(ValueError):
        mpirun_launcher("node01", "node02; rm -rf /")


# Rank 0's stdout of a run on this machine (the kernel as committed).
MPI_OUTPUT = """\
# oddnode mpi_pingpong kernel v1
# mode: ping
# compiler: gcc 12.2.0
# cflags: -O3 -march=native -fopenmp
# mpi_library: Open MPI v4.1.4
# host: vm
# peer: vm
# timer: clock_gettime(CLOCK_MONOTONIC)
# timer_granularity_ns: 20
# sizes: 0,1,1024,65536,1048576
# seconds_per_size: 0.2
# min_batches: 10
# min_batch_ns: 1000000
# time: one-way = batch time / round trips / 2; min and median over batches
# echo: rank 1 receives a whole message, then sends it back; the last echo of each batch compared
result 0 13724 6.444 7.053 146
result 1 14194 6.412 6.658 151
result 1024 14448 6.723 6.865 129
result 65536 2583 34.817 36.406 123
result 1048576 385 141.818 154.041 77
validation ok
"""


def test_the_parser_reads_the_kernels_output():
    parsed = parse_mpi_pingpong_output(MPI_OUTPUT, "mpi")
    assert parsed.valid and parsed.tool == "oddnode-mpi-pingpong"
    by_metric = {m.metric: m for m in parsed.measurements}
    assert by_metric["latency.0"].value == pytest.approx(6.444)
    assert by_metric["bandwidth.1048576"].value == pytest.approx(1048576 / 141.818)
    assert by_metric["latency.65536"].parameters["median_us"] == pytest.approx(36.406)


def test_the_parser_says_what_is_wrong():
    cut = MPI_OUTPUT[:MPI_OUTPUT.index("result 65536")]
    with pytest.raises(ParseError, match="no result line for 65536 bytes, 1048576 bytes"):
        parse_mpi_pingpong_output(cut, "mpi")
    # The TCP kernel's output is not the MPI kernel's.
    with pytest.raises(ParseError):
        parse_mpi_pingpong_output(GOOD_PING, "mpi")
    failed = MPI_OUTPUT.replace("validation ok",
                                "validation failed echo bad=1/940 size=1024 batch=7 offset=3 expected=17 got=0")
    parsed = parse_mpi_pingpong_output(failed, "mpi")
    assert not parsed.valid and "1 of 940 echoes differed" in parsed.problems[0]


# --- pattern runs with the MPI kernel, on a scripted cluster -------------------------

TWELVE = [f"node{i:02d}" for i in range(1, 13)]
PAIR_OPTIONS = PingPongOptions(sizes=(0, 1, 1024, 65536, 1 << 20), seconds_per_size=0.02)


def job_spec(argv: list[str]) -> dict:
    return decode_job(argv[-1])


class MpiPairCluster:
    """Runs the MPI kernel's pairs like 12 nodes on one switch: only the
    first node of a pair gets a command (mpirun there starts the second
    rank); pairs with ``weak`` are 10 times slower on large messages."""

    name = "scripted"

    def __init__(self, weak=None):
        self.weak = weak
        self.prepared: list[dict] = []
        self.rounds: list[dict[str, dict]] = []

    def run(self, nodes, argv, *, timeout):
        assert PREPARE_OPTION in argv
        self.prepared.append({"nodes": list(nodes), "spec": job_spec(argv)})
        return {node: NodeResult(node, NodeStatus.OK, prepared_report(), "", 0, 0.5) for node in nodes}

    def run_each(self, commands, *, timeout):
        specs = {node: job_spec(argv) for node, argv in commands.items()}
        self.rounds.append(specs)
        results = {}
        for index, (node, spec) in enumerate(sorted(specs.items())):
            launcher = spec["launcher"]
            first, second = launcher[launcher.index("--host") + 1].split(",")
            assert first == node
            factor = 10.0 if self.weak in (first, second) else 1.0
            results[node] = NodeResult(node, NodeStatus.OK, runner_report(slowed(factor, 1 + index / 1000, MPI_OUTPUT, 65536)),
                                       "", 0, 1.0)
        return results


def test_pattern_runs_start_both_ranks_from_the_first_node_and_store_mpi_series(store):
    cluster = MpiPairCluster()
    summary = run_pairs(store, Target(TWELVE, cluster), "sort", 2, options=PAIR_OPTIONS, kernel="mpi",
                        rsh_agent="ssh -F /etc/cluster/ssh_config")
    # Built with mpicc on every node, since mpirun starts the second rank from its build.
    (prepared,) = cluster.prepared
    assert prepared["nodes"] == TWELVE and prepared["spec"]["compiler"] == "mpicc"
    assert len(cluster.rounds) == 2
    for specs in cluster.rounds:
        assert sorted(specs) == TWELVE[0::2]  # the first node of each pair only
        for node, spec in specs.items():
            assert spec["kernel"] == "mpi_pingpong" and spec["compiler"] == "mpicc"
            assert spec["launcher"][-3:] == ["--mca", "plm_rsh_agent", "ssh -F /etc/cluster/ssh_config"]
    assert list(summary.per_pair.values()) == [{"ok": 2, "invalid": 0, "failed": 0}] * 6
    rows = dict(store.con.execute("""SELECT metric, count(DISTINCT label) FROM results
                                     WHERE benchmark = 'mpi.sort' GROUP BY 1""").fetchall())
    assert rows["latency.0"] == 6 and rows["bandwidth.1048576"] == 6


def test_the_node_common_to_slow_mpi_pairs_is_named_weak_and_a_healthy_run_names_nothing(store, tmp_path):
    for pattern in ("sort", "cut", "fold"):
        run_pairs(store, Target(TWELVE, MpiPairCluster(weak="node03")), pattern, 2, options=PAIR_OPTIONS,
                  kernel="mpi")
    findings = analyze(store.load_dataset()).findings
    assert [f.nodes for f in findings if f.kind == "weak-pair-member"] == ["node03"]
    assert any(f.subject.startswith("mpi.") for f in findings if f.kind == "weak-pair-member")
    with open_store(tmp_path / "healthy.duckdb") as healthy:
        for pattern in ("sort", "cut", "fold"):
            run_pairs(healthy, Target(TWELVE, MpiPairCluster()), pattern, 2, options=PAIR_OPTIONS, kernel="mpi")
        assert [f for f in analyze(healthy.load_dataset()).findings if f.severity.value == "warning"] == []


def test_an_unknown_pair_kernel_is_refused(store):
    with pytest.raises(ValueError, match="tcp or mpi"):
        run_pairs(store, Target(TWELVE, MpiPairCluster()), "sort", 1, kernel="udp")
