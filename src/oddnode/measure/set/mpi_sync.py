"""Our bulk-synchronous kernel over a set of nodes, one rank on each: the
argv that runs it (``mpi_sync.c`` built with ``mpicc`` and started by Open
MPI's ``mpirun`` from the first node; or, where the nodes have no MPI,
``tcp_sync.c``, whose ranks oddnode starts on every node and which
synchronise over a binomial tree of TCP connections), and rank 0's
output read from the runner's report with the parser of what it prints,
the same for both (``oddnode.parsers.oddnode_mpi_sync``).

Every iteration each rank computes the same work quantum, then calls an
allreduce of one double or a barrier; each times both.  Per iteration the
rank that waited least arrived last, and its *extra wait* (the second
shortest wait minus its own) is what it cost the others (see
``oddnode_sync.h``).

Measurements, benchmark ``sync.<operation>`` (``sync.allreduce``,
``sync.barrier``), one per set run:

* ``time``: microseconds per iteration, rank 0's loop time over the
  iterations (lower is better);
* ``efficiency``: the ranks' compute over their compute and wait, percent;
* ``compute``, ``wait``: microseconds per iteration, the mean over ranks;
* ``extra_wait``: microseconds per iteration by which the last rank made
  the others wait (the sum of every iteration's extra wait over the
  iterations).

Every rank's own numbers (its host, node, compute total, median and
maximum, wait total and median, iterations it was last and the extra wait
it caused) are in the configuration's ``rank_table`` and in the
parameters of ``time``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from oddnode.measure.benchmarks import parse_kernel_run
from oddnode.reach.jobs import runner_argv
from oddnode.measure.set.collectives import check_nodes, collectives_launcher
from oddnode.reach.launch import OPEN_MPI_ROOT_ENV
from oddnode.parsers.base import ParsedOutput
from oddnode.parsers.oddnode_mpi_sync import KERNEL, OPERATIONS, TCP_KERNEL, parse_sync_output

# A work quantum of 1 ms: about an application's compute between two
# synchronisations (FWQ's usual quantum), and far above a small collective
# on a fast network, so that the waits are not hidden in its own time.
DEFAULT_QUANTUM_US = 1000
DEFAULT_ITERATIONS = 1000
DEFAULT_WARMUP = 10
DEFAULT_PORT = 29_172
# The kernel's limits, checked here first so that a typo fails at once.
MAX_QUANTUM_US = 1_000_000
MAX_ITERATIONS = 1_000_000
MAX_WARMUP = 10_000
MAX_SECONDS = 3600.0
MAX_TCP_RANKS = 4096
MAX_NAME = 63
# With yield_when_idle (capped or shared CPUs), the MPI kernel waits in a
# non-blocking collective tested every this many microseconds, asleep in
# between (-y): a polling wait would spend the CPU quota the next quantum
# needs.  50 us is near the shortest sleep Linux gives a normal thread (its
# default timer slack is 50 us), and short against the testbed's 10 ms
# quota period; each hop of a tree collective waits at most one interval more.
CAPPED_TEST_INTERVAL_US = 50
# Environment variable that makes one rank spoil its contribution to the
# first allreduce (or its work, under a barrier): a test of the check.
CORRUPT_RANK_VARIABLE = "ODDNODE_CORRUPT_RANK"
# Seconds to wait for the tree's connections (tcp_sync's -w) and for any
# read or write to move (-i).
DEFAULT_CONNECT_WAIT = 30.0
DEFAULT_IO_TIMEOUT = 30

# Run-time bound for the runner's timeout (run_seconds): an iteration may
# take SLOWDOWN times its quantum (a node that gets a tenth of a CPU, as a
# capped testbed node with a competing process does) plus COLLECTIVE_SECONDS
# for the collective on a slow or loaded network; calibration, warm-up and
# the final reductions take at most SETUP_SECONDS.
SLOWDOWN = 10.0
COLLECTIVE_SECONDS = 0.02
SETUP_SECONDS = 10.0
# mpirun's start of the ranks (ssh to every node, the library's wire-up) and
# its exit, beyond the kernel's own run: a fixed part and a part per node.
_LAUNCH_SLACK = 60.0
_LAUNCH_SLACK_PER_NODE = 0.1


# --- the argv -----------------------------------------------------------------------


def _check_whole(name: str, value: int, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name} must be a whole number {low}-{high}, got {value!r}")


def _check_host(host: str) -> None:
    # Hosts travel inside the JSON job, never through a shell; a leading dash
    # would still read as an option, a comma splits the -R list, and blanks
    # are never a host name.
    if not isinstance(host, str) or not host or host.startswith("-") or any(c.isspace() or c == "," for c in host):
        raise ValueError(f"a node must be a host name or an address, got {host!r}")


def check_operation(operation: str) -> str:
    if operation not in OPERATIONS:
        raise ValueError(f"the operation is one of {', '.join(OPERATIONS)}, not {operation!r}")
    return operation


def kernel_args(nodes: Sequence[str], operation: str = "allreduce", quantum_us: int = DEFAULT_QUANTUM_US,
                iterations: int | None = DEFAULT_ITERATIONS, seconds: float | None = None,
                warmup: int = DEFAULT_WARMUP) -> list[str]:
    """The kernel's own arguments (-o, -q, -n or -s, -W, -N), checked:
    ``iterations``, or about ``seconds`` when iterations is None."""
    check_operation(operation)
    _check_whole("quantum_us", quantum_us, 1, MAX_QUANTUM_US)
    _check_whole("warmup", warmup, 1, MAX_WARMUP)
    args = ["-o", operation, "-q", str(quantum_us), "-W", str(warmup)]
    if iterations is not None:
        _check_whole("iterations", iterations, 1, MAX_ITERATIONS)
        args += ["-n", str(iterations)]
    else:
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 1e-3 <= seconds <= MAX_SECONDS:
            raise ValueError(f"seconds must be 0.001-{MAX_SECONDS:g}, got {seconds!r}")
        args += ["-s", f"{seconds:g}"]
    # The names oddnode knows the nodes by, printed back with each rank
    # (the kernel keeps names of up to 63 characters).
    long = [node for node in nodes if len(node) > MAX_NAME]
    if long:
        raise ValueError(f"node names of more than {MAX_NAME} characters: {long[0]!r}")
    return args + ["-N", ",".join(nodes)]


def run_seconds(quantum_us: int = DEFAULT_QUANTUM_US, iterations: int | None = DEFAULT_ITERATIONS,
                seconds: float | None = None, warmup: int = DEFAULT_WARMUP) -> float:
    """An upper bound of the kernel's seconds (see SLOWDOWN): every
    iteration, warm-up included, at SLOWDOWN times its quantum plus
    COLLECTIVE_SECONDS; with ``seconds``, SLOWDOWN times them."""
    per_iteration = SLOWDOWN * quantum_us * 1e-6 + COLLECTIVE_SECONDS
    timed = per_iteration * iterations if iterations is not None else SLOWDOWN * float(seconds or 0.0)
    return timed + warmup * per_iteration + SETUP_SECONDS


def sync_argv(nodes: Sequence[str], operation: str = "allreduce", quantum_us: int = DEFAULT_QUANTUM_US,
              iterations: int | None = DEFAULT_ITERATIONS, seconds: float | None = None, *,
              warmup: int = DEFAULT_WARMUP, rsh_agent: str | None = None, yield_when_idle: bool = False,
              launcher: Sequence[str] | None = None, hostfile: bool = False, timeout: float | None = None,
              interpreter: str = "python3") -> list[str]:
    """The argv, run on the first of ``nodes``, that runs the MPI kernel on
    all of them, one rank per node in their order (``launcher`` replaces
    the mpirun of the collectives kernel, for another MPI's or a test's).
    ``yield_when_idle`` (capped or shared CPUs): idle ranks yield, and the
    kernel's ranks sleep while they wait (CAPPED_TEST_INTERVAL_US).
    Open MPI refuses to run as root unless its environment allows it, which
    changes nothing for other users."""
    nodes = check_nodes(nodes)
    args = kernel_args(nodes, operation, quantum_us, iterations, seconds, warmup)
    if yield_when_idle:
        args += ["-y", str(CAPPED_TEST_INTERVAL_US)]
    if timeout is None:
        timeout = (run_seconds(quantum_us, iterations, seconds, warmup) + _LAUNCH_SLACK
                   + _LAUNCH_SLACK_PER_NODE * len(nodes))
    env = dict(OPEN_MPI_ROOT_ENV)
    return runner_argv(KERNEL, args, env=env, timeout=timeout, interpreter=interpreter, compiler="mpicc",
                       launcher=launcher if launcher is not None
                       else collectives_launcher(nodes, rsh_agent, hostfile, yield_when_idle))


def _rank_address(host: str, port: int) -> str:
    """HOST:PORT, an IPv6 address in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def tcp_sync_argvs(nodes: Sequence[str], operation: str = "allreduce", quantum_us: int = DEFAULT_QUANTUM_US,
                   iterations: int | None = DEFAULT_ITERATIONS, seconds: float | None = None, *,
                   warmup: int = DEFAULT_WARMUP, port: int | Sequence[int] = DEFAULT_PORT, seed: int | None = None,
                   wait: float = DEFAULT_CONNECT_WAIT, io_timeout: int = DEFAULT_IO_TIMEOUT,
                   addresses: Sequence[str] | None = None, timeout: float | None = None,
                   interpreter: str = "python3") -> dict[str, list[str]]:
    """Node -> the argv of its rank of the TCP kernel, ranks in the nodes'
    order, every rank listening on ``port`` (one per rank where several
    share a host, as in a test).  ``addresses`` are the hosts the ranks
    reach each other by (default the node names).  ``seed`` tells this run
    from any other (default random): a rank of another run is refused."""
    nodes = list(nodes)
    for node in nodes:
        _check_host(node)
    if not 2 <= len(nodes) <= MAX_TCP_RANKS or len(set(nodes)) != len(nodes):
        raise ValueError(f"the TCP kernel needs 2 to {MAX_TCP_RANKS} distinct nodes, got {nodes}")
    hosts = list(addresses) if addresses is not None else nodes
    ports = [port] * len(nodes) if isinstance(port, int) else list(port)
    if len(hosts) != len(nodes) or len(ports) != len(nodes):
        raise ValueError("give one address and one port per node")
    for host, each in zip(hosts, ports):
        _check_host(host)
        _check_whole("port", each, 1, 65535)
    if len(set(zip(hosts, ports))) != len(nodes):
        raise ValueError("two ranks have the same address: give each rank its own host or port")
    args = kernel_args(nodes, operation, quantum_us, iterations, seconds, warmup)
    seed = random.getrandbits(62) if seed is None else seed
    _check_whole("seed", seed, 0, 2**63 - 1)
    _check_whole("io_timeout", io_timeout, 1, 86400)
    if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not 0 <= wait <= 86400:
        raise ValueError(f"wait must be seconds 0-86400, got {wait!r}")
    if timeout is None:
        # Every rank waits for the tree, runs, and may wait io_timeout for a silent neighbour.
        timeout = wait + run_seconds(quantum_us, iterations, seconds, warmup) + io_timeout + _LAUNCH_SLACK
    listing = ",".join(_rank_address(host, each) for host, each in zip(hosts, ports))
    waits = ["-w", f"{wait:g}", "-i", str(io_timeout)]
    return {node: runner_argv(TCP_KERNEL, [*args, "-r", str(rank), "-R", listing, "-S", str(seed), *waits],
                              timeout=timeout, interpreter=interpreter)
            for rank, node in enumerate(nodes)}


def parse_sync_run(text: str, source: str) -> ParsedOutput:
    """The node runner's JSON report of a sync run (MPI or TCP), then rank 0's stdout."""
    return parse_kernel_run(text, source, "sync", parse_sync_output)
