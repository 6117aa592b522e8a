"""Our MPI ping-pong kernel (``oddnode/kernels/mpi_pingpong.c``) between two
nodes: the argv that builds it with ``mpicc`` and starts its two ranks with
Open MPI's ``mpirun`` from the first node, and the parser of what comes back.

The kernel measures as the TCP one does (warm-up, timed batches of at least
1 ms, the minimum and the median one-way time over them) and prints the same
lines, so that the two compare directly: the MPI library's own latency
beside the bare socket's.  Both nodes need the kernel built (the runner
builds it on each at first use, in a cache directory named after the same
hash) and Open MPI with ``mpicc``; the first node starts the second rank over
ssh, as ``mpirun`` does.

Measurements: ``mpi.pingpong``, ``latency.<bytes>`` (us) and
``bandwidth.<bytes>`` (MB/s, 10^6 bytes) as ``tcp.pingpong``; size 0 is an
empty MPI message.  Pattern runs (``oddnode pairs --kernel mpi``) store them
as ``mpi.<pattern>``.
"""

from __future__ import annotations

from collections.abc import Sequence

from oddnode.measure.benchmarks import parse_kernel_run
from oddnode.measure.pair.pingpong import (
    DEFAULT_SECONDS_PER_SIZE,
    DEFAULT_SIZES,
    check_host,
    check_seconds,
    check_sizes,
    ping_run_seconds,
)
from oddnode.reach.jobs import runner_argv
from oddnode.reach.launch import OPEN_MPI_ROOT_ENV, mpirun_line
from oddnode.parsers.base import ParsedOutput
from oddnode.parsers.oddnode_pingpong import parse_ping_output

KERNEL = "mpi_pingpong"
MPI_PINGPONG_BENCHMARK = "mpi.pingpong"
# mpirun's start of the two ranks (ssh to the second node, the library's
# wire-up) and its exit, beyond the kernel's own run.
_LAUNCH_SLACK = 60.0


def mpirun_launcher(first: str, second: str, rsh_agent: str | None = None,
                    yield_when_idle: bool = False) -> list[str]:
    """Open MPI's mpirun for one rank on each of two nodes.  ``rsh_agent``
    is the command it reaches the second node with (``ssh -F FILE`` for a
    cluster's own ssh configuration); by default its own (ssh).
    ``yield_when_idle`` for nodes whose CPUs are capped or shared, as the
    testbed's (see oddnode.reach.launch.mpirun_options)."""
    check_host(first)
    check_host(second)
    return mpirun_line(2, [first, second], map_by="node", rsh_agent=rsh_agent, yield_when_idle=yield_when_idle)


def mpi_ping_argv(
    first: str,
    second: str,
    sizes: Sequence[int] = DEFAULT_SIZES,
    seconds_per_size: float = DEFAULT_SECONDS_PER_SIZE,
    *,
    rsh_agent: str | None = None,
    yield_when_idle: bool = False,
    launcher: Sequence[str] | None = None,
    timeout: float | None = None,
    interpreter: str = "python3",
) -> list[str]:
    """The argv, run on ``first``, that measures the one-way time per
    message size between a rank there and one on ``second``
    (``launcher`` replaces mpirun_launcher's, for another MPI's launcher or
    a test's; ``yield_when_idle`` on capped or shared CPUs, as the
    testbed's).  Open MPI refuses to run as root unless its environment
    allows it, which changes nothing for other users."""
    sizes = check_sizes(sizes)
    check_seconds("seconds_per_size", seconds_per_size, 0.0, 3600.0, inclusive=False)
    if timeout is None:
        timeout = ping_run_seconds(sizes, seconds_per_size) + _LAUNCH_SLACK
    env = dict(OPEN_MPI_ROOT_ENV)
    return runner_argv(KERNEL, ["-s", ",".join(str(s) for s in sizes), "-T", f"{seconds_per_size:g}"],
                       env=env, timeout=timeout, interpreter=interpreter, compiler="mpicc",
                       launcher=launcher if launcher is not None
                       else mpirun_launcher(first, second, rsh_agent, yield_when_idle))


def parse_mpi_pingpong_output(text: str, source: str) -> ParsedOutput:
    """Parse one run of the MPI kernel (rank 0's stdout): latency and
    bandwidth per size, its configuration and its echo check."""
    return parse_ping_output(text, source, KERNEL, MPI_PINGPONG_BENCHMARK, "oddnode-mpi-pingpong")


def parse_mpi_pingpong_run(text: str, source: str) -> ParsedOutput:
    """The node runner's JSON report of an MPI ping run, then the kernel's stdout."""
    return parse_kernel_run(text, source, KERNEL, parse_mpi_pingpong_output)
