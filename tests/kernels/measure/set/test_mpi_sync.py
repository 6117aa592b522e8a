"""The bulk-synchronous kernel built and run for real on this machine through
the node runner: the MPI kernel as two and three ranks under Open MPI's
mpirun (allreduce, barrier, a run of about so many seconds, ranks that
sleep while they wait), the TCP kernel as three ranks on loopback ports;
a rank that spoils its contribution or its work named by the check; the
kernels' refusals; a TCP rank that never starts or belongs to another
run; the argv checks.  No timing is asserted beyond what any run must
satisfy."""

from __future__ import annotations

import os
import shutil
import subprocess
from contextlib import ExitStack

import pytest

from oddnode.reach.jobs import decode_job, encode_job, parse_runner_output, runner_argv
from oddnode.measure.set.mpi_sync import (
    CAPPED_TEST_INTERVAL_US,
    CORRUPT_RANK_VARIABLE,
    KERNEL,
    MAX_ITERATIONS,
    TCP_KERNEL,
    kernel_args,
    parse_sync_run,
    run_seconds,
    sync_argv,
    tcp_sync_argvs,
)
from oddnode.parsers.base import ParseError
from support.kernels import local_launcher
from support.kernels import finish, free_port, run_alone, started

NODES = ["cn-a17", "cn-b03", "gpu007"]
QUANTUM = 100  # us: short runs on two shared cores
ITERATIONS = 120


def job_spec(argv: list[str]) -> dict:
    return decode_job(argv[-1])


@pytest.fixture(scope="module")
def cache_env(tmp_path_factory):
    """A private build cache for both kernels."""
    if shutil.which("cc") is None:
        pytest.skip("the kernels need a C compiler: no 'cc' on PATH")
    return dict(os.environ, XDG_CACHE_HOME=str(tmp_path_factory.mktemp("mpi_sync") / "cache"))


@pytest.fixture(scope="module")
def mpi_env(cache_env, tmp_path_factory):
    missing = [tool for tool in ("mpicc", "mpirun") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"no {' or '.join(missing)} on PATH (Debian: openmpi-bin, libopenmpi-dev)")
    tmp = tmp_path_factory.mktemp("mpicheck")
    source = tmp / "check.c"
    source.write_text("#include <mpi.h>\nint main(int c, char **v){MPI_Init(&c, &v); return MPI_Finalize();}\n")
    built = subprocess.run(["mpicc", "-o", str(tmp / "check"), str(source)], capture_output=True, text=True)
    assert built.returncode == 0, f"mpicc cannot build an MPI program: {built.stderr.strip()[:300]}"
    return cache_env


def mpi_argv(ranks: int, operation: str = "allreduce", **options) -> list[str]:
    options.setdefault("iterations", ITERATIONS)
    return sync_argv(NODES[:ranks], operation, QUANTUM, launcher=local_launcher(ranks), **options)


def assert_complete(parsed, ranks: int, kernel: str) -> None:
    config = parsed.configuration
    assert config["kernel"] == kernel and config["processes"] == ranks and config["nodes"] == NODES[:ranks]
    assert config["quantum_us"] == QUANTUM and config["work_steps"] > 0
    table = config["rank_table"]
    assert sum(row["last"] for row in table) == config["iterations"]
    for row in table:
        # Every rank did the same work, at least most of a quantum each time.
        assert row["compute_median_us"] > 0.5 * QUANTUM and row["compute_max_us"] >= row["compute_median_us"]
        assert row["wait_total_us"] >= 0 and row["extra_wait_us"] >= 0
    metrics = {m.metric: m.value for m in parsed.measurements}
    assert metrics["time"] > 0.5 * QUANTUM and 0 < metrics["efficiency"] < 100


# --- MPI ------------------------------------------------------------------------


@pytest.mark.parametrize("ranks, operation", [(2, "allreduce"), (3, "allreduce"), (3, "barrier")])
def test_mpi_ranks_run_the_iterations_and_check_the_sums(mpi_env, ranks, operation):
    parsed = parse_sync_run(run_alone(mpi_argv(ranks, operation), mpi_env), f"np{ranks}")
    assert parsed.valid, parsed.problems
    assert_complete(parsed, ranks, KERNEL)
    assert parsed.configuration["operation"] == operation and parsed.configuration["iterations"] == ITERATIONS
    assert parsed.configuration["wait"].startswith("blocking collective")


def test_mpi_ranks_that_sleep_while_they_wait_and_run_about_so_long(mpi_env):
    argv = mpi_argv(3, iterations=None, seconds=0.2, yield_when_idle=True)
    parsed = parse_sync_run(run_alone(argv, mpi_env), "sleeping")
    assert parsed.valid, parsed.problems
    assert_complete(parsed, 3, KERNEL)
    assert parsed.configuration["wait"].startswith(f"non-blocking collective tested every {CAPPED_TEST_INTERVAL_US}")
    assert parsed.configuration["seconds"] == 0.2 and parsed.configuration["iterations"] >= 10


@pytest.mark.parametrize("operation, check", [("allreduce", "allreduce"), ("barrier", "work")])
def test_an_mpi_rank_that_spoils_its_part_is_caught(mpi_env, operation, check):
    env = dict(mpi_env, **{CORRUPT_RANK_VARIABLE: "1"})
    parsed = parse_sync_run(run_alone(mpi_argv(3, operation), env), "corrupt")
    assert not parsed.valid and parsed.configuration["corrupt_rank"] == 1
    failures = parsed.configuration["validation_failures"]
    assert {f["check"] for f in failures} == {check}
    # A wrong contribution spoils every rank's sum; other work is one rank's.
    assert [f["rank"] for f in failures] == ([0, 1, 2] if check == "allreduce" else [1])


@pytest.mark.parametrize("ranks, env, args, status, message", [
    (1, {}, None, 3, "run as two or more MPI ranks (mpirun -np K, K >= 2), not 1"),
    (2, {CORRUPT_RANK_VARIABLE: "2"}, None, 2, "ODDNODE_CORRUPT_RANK wants a rank number below the ranks' count"),
    (2, {}, ["-o", "alltoall"], 2, "-o wants allreduce or barrier"),
    (2, {}, ["-q", "0"], 2, "-q wants the work quantum in microseconds"),
    (2, {}, ["-n", "0"], 2, "-n wants iterations"),
    (2, {}, ["-N", "a,b,c"], 2, "-N wants one name per rank"),
    (2, {}, ["-y", "0"], 2, "-y wants microseconds between tests"),
    (2, {}, ["-x", "1"], 2, "unknown option"),
])
def test_the_mpi_kernel_refuses_what_it_cannot_run(mpi_env, ranks, env, args, status, message):
    spec = job_spec(mpi_argv(2))
    spec["launcher"] = local_launcher(ranks)
    if args is not None:
        spec["args"] = args
    argv = mpi_argv(2)[:-1] + [encode_job(spec)]
    stdout = run_alone(argv, dict(mpi_env, **env))
    report = parse_runner_output("refused", stdout)
    assert report.returncode == status, report.stderr
    assert message in report.stderr
    with pytest.raises(ParseError, match=f"sync kernel exited with status {status}"):
        parse_sync_run(stdout, "refused")


# --- TCP ------------------------------------------------------------------------


def run_ranks(argvs: dict[str, list[str]], env: dict[str, str], only: list[str] | None = None) -> dict[str, str]:
    """Every rank's runner started at the same moment; their stdout by node."""
    nodes = only if only is not None else list(argvs)
    with ExitStack() as stack:
        processes = {node: stack.enter_context(started(argvs[node], env)) for node in nodes}
        return {node: finish(process) for node, process in processes.items()}


def loopback(ranks: int, **options) -> dict[str, list[str]]:
    options.setdefault("iterations", ITERATIONS)
    ports = [free_port() for _ in range(ranks)]
    return tcp_sync_argvs(NODES[:ranks], quantum_us=QUANTUM, port=ports, addresses=["127.0.0.1"] * ranks, **options)


@pytest.mark.parametrize("operation", ["allreduce", "barrier"])
def test_tcp_ranks_run_the_same_iterations_and_only_rank_0_reports(cache_env, operation):
    outputs = run_ranks(loopback(3, operation=operation), cache_env)
    parsed = parse_sync_run(outputs[NODES[0]], "rank0")
    assert parsed.valid, parsed.problems
    assert_complete(parsed, 3, TCP_KERNEL)
    assert parsed.configuration["transport"] == "tcp"
    for node in NODES[1:3]:
        report = parse_runner_output(node, outputs[node])
        assert report.returncode == 0 and report.stdout == "", report.stderr


def test_a_tcp_rank_whose_work_differs_is_named(cache_env):
    outputs = run_ranks(loopback(3, operation="barrier"), dict(cache_env, **{CORRUPT_RANK_VARIABLE: "2"}))
    parsed = parse_sync_run(outputs[NODES[0]], "rank0")
    (failure,) = parsed.configuration["validation_failures"]
    assert not parsed.valid and (failure["check"], failure["rank"]) == ("work", 2)


def test_two_tcp_ranks_in_seconds_mode(cache_env):
    outputs = run_ranks(loopback(2, iterations=None, seconds=0.2), cache_env)
    parsed = parse_sync_run(outputs[NODES[0]], "rank0")
    assert parsed.valid and parsed.configuration["seconds"] == 0.2


def test_a_tcp_rank_that_never_starts_fails_its_neighbours_clearly(cache_env):
    argvs = loopback(3, wait=2, io_timeout=3)
    # Rank 2 hangs from rank 0 in the binomial tree (0 -> 1, 0 -> 2).
    outputs = run_ranks(argvs, cache_env, only=NODES[:2])
    report = parse_runner_output("rank0", outputs[NODES[0]])
    assert report.returncode == 3 and "rank 2 (127.0.0.1:" in report.stderr
    assert "never connected within 2 s" in report.stderr
    with pytest.raises(ParseError, match="sync kernel exited with status 3"):
        parse_sync_run(outputs[NODES[0]], "rank0")


def test_a_tcp_rank_of_another_run_is_refused(cache_env):
    ports = [free_port(), free_port()]
    ours = tcp_sync_argvs(NODES[:2], quantum_us=QUANTUM, iterations=20, port=ports, addresses=["127.0.0.1"] * 2,
                          seed=1, wait=2, io_timeout=3)
    theirs = tcp_sync_argvs(NODES[:2], quantum_us=QUANTUM, iterations=20, port=ports, addresses=["127.0.0.1"] * 2,
                            seed=2, wait=2, io_timeout=3)
    outputs = run_ranks({NODES[0]: ours[NODES[0]], NODES[1]: theirs[NODES[1]]}, cache_env)
    report = parse_runner_output("rank0", outputs[NODES[0]])
    assert report.returncode == 4 and "is of another run" in report.stderr


@pytest.mark.parametrize("args, complaint", [
    ([], "-r RANK and -R HOST:PORT,... are needed"),
    (["-r", "0", "-R", "127.0.0.1:5000"], "-R names 1 rank"),
    (["-r", "2", "-R", "a:1,b:2"], "-r 2 is not a rank of the 2 in -R"),
    (["-r", "0", "-R", "a:1,::1:2"], "entry 2 is not one"),
    (["-r", "0", "-R", "a:1,b:2", "-N", "x"], "-N names 1 nodes for the 2 ranks of -R"),
    (["-r", "0", "-R", "a:1,b:2", "-S", "-1"], "-S wants a whole number"),
    (["-r", "0", "-R", "a:1,b:2", "-i", "0"], "-i wants whole seconds"),
    (["-r", "0", "-R", "a:1,b:2", "-q", "x"], "-q wants the work quantum"),
    (["-r", "0", "-R", "a:1,b:2", "-z", "1"], "unknown option '-z'"),
])
def test_the_tcp_kernel_refuses_bad_arguments(cache_env, args, complaint):
    report = parse_runner_output("refused", run_alone(runner_argv(TCP_KERNEL, args), cache_env))
    assert report.returncode == 2 and complaint in report.stderr, report.stderr


# --- the argv -------------------------------------------------------------------


def test_the_mpi_argv_builds_with_mpicc_and_names_the_nodes():
    spec = job_spec(sync_argv(NODES, "barrier", 500, 300, rsh_agent="ssh -F /etc/c", yield_when_idle=True))
    assert spec["kernel"] == KERNEL and spec["compiler"] == "mpicc"
    assert spec["launcher"][:5] == ["mpirun", "-np", "3", "--host", ",".join(NODES)]
    assert spec["launcher"][-6:] == ["--mca", "mpi_yield_when_idle", "1", "--mca", "plm_rsh_agent", "ssh -F /etc/c"]
    assert spec["args"] == ["-o", "barrier", "-q", "500", "-W", "10", "-n", "300", "-N", ",".join(NODES),
                            "-y", str(CAPPED_TEST_INTERVAL_US)]
    assert spec["timeout"] > run_seconds(500, 300)
    assert '#include "oddnode_' not in spec["source"] and "merge_laggard" in spec["source"]


def test_the_tcp_argvs_give_every_node_its_rank_and_one_seed():
    argvs = tcp_sync_argvs(NODES, iterations=None, seconds=2.0, port=29_200, seed=7)
    for rank, node in enumerate(NODES):
        args = job_spec(argvs[node])["args"]
        assert args[args.index("-r") + 1] == str(rank) and args[args.index("-S") + 1] == "7"
        assert args[args.index("-R") + 1] == ",".join(f"{n}:29200" for n in NODES)
        assert args[args.index("-s") + 1] == "2"
    assert job_spec(tcp_sync_argvs(["::1", "fe80::2"], port=5)["::1"])["args"][-7] == "[::1]:5,[fe80::2]:5"


@pytest.mark.parametrize("call, match", [
    (lambda: kernel_args(NODES, "alltoall"), "operation is one of allreduce, barrier"),
    (lambda: kernel_args(NODES, quantum_us=0), "quantum_us must be a whole number 1-1000000"),
    (lambda: kernel_args(NODES, iterations=MAX_ITERATIONS + 1), "iterations must be a whole number"),
    (lambda: kernel_args(NODES, iterations=None, seconds=0), "seconds must be 0.001-3600"),
    (lambda: kernel_args(NODES, warmup=0), "warmup must be a whole number 1-10000"),
    (lambda: kernel_args(["a", "b" * 64]), "node names of more than 63 characters"),
    (lambda: sync_argv(["a"]), "two or more nodes"),
    (lambda: sync_argv(["a", "a"]), "distinct"),
    (lambda: tcp_sync_argvs(["a", "a,b"]), "a host name or an address"),
    (lambda: tcp_sync_argvs(["a", "b"], port=0), "port must be a whole number 1-65535"),
    (lambda: tcp_sync_argvs(["a", "b"], addresses=["h", "h"]), "two ranks have the same address"),
    (lambda: tcp_sync_argvs(["a", "b"], port=[1]), "one address and one port per node"),
])
def test_bad_arguments_are_refused_before_any_run(call, match):
    with pytest.raises(ValueError, match=match):
        call()
