"""Our MPI collectives kernel (``oddnode/kernels/mpi_collectives.c``) over a
set of nodes, one rank on each: the argv that builds it with ``mpicc`` and
starts its ranks with Open MPI's ``mpirun`` from the first node, and the
runner's report of a run read with the parser of what comes back.  What the
kernel times and the measurements it gives are described with that parser,
``oddnode.parsers.oddnode_mpi_collectives``.  One launch may also run
rounds of sets (a plan, see round_plan): the ranks start once on every node
and each round splits them into its sets.
"""

from __future__ import annotations

from collections.abc import Sequence

from oddnode.measure.benchmarks import parse_kernel_run
from oddnode.readings.sets_series import MAX_SIZE
from oddnode.reach.jobs import runner_argv
from oddnode.reach.launch import OPEN_MPI_ROOT_ENV, mpirun_line
from oddnode.parsers.base import ParsedOutput
from oddnode.parsers.oddnode_mpi_collectives import (
    BENCHMARKS,
    KERNEL,
    benchmark_sizes,
    parse_collectives_output,
)

# The benchmarks a set run times unless told (of the kernel's BENCHMARKS,
# bcast is there for the placement model's profiles).
DEFAULT_BENCHMARKS: tuple[str, ...] = ("sendrecv", "allreduce", "alltoall", "barrier")
# 0, then 1 B to 4 MiB in powers of two: the kernel's own default list.
DEFAULT_SIZES: tuple[int, ...] = (0,) + tuple(2**k for k in range(23))
DEFAULT_SECONDS_PER_SIZE = 0.2
# Limits the kernel enforces, checked here first so that a typo fails at once
# (its largest size, and Allreduce's element, are in readings.sets_series).
MAX_SIZES = 64
MAX_SECONDS_PER_SIZE = 3600.0
# Environment variable that makes one rank spoil what it sends in the first
# timed batch of every size: a test of the kernel's check.
CORRUPT_RANK_VARIABLE = "ODDNODE_CORRUPT_RANK"

# Run-time bounds for the runner's timeout (see run_seconds).  Per size the
# kernel runs its seconds plus warm-up (at most a quarter of them), and at
# least MIN_BATCHES batches after up to MAX_WARMUP_ROUNDS one-call warm-up
# batches.  A timed batch lasts at least _MIN_BATCH_SECONDS and, as its
# calls are counted from the warm-up's fastest with a margin of 1.5 and
# doubled while too short, rarely beyond three times that.  A call of S
# bytes takes at most its bytes on the wire over SLOWEST_LINK_BYTES_PER_S
# (100 Mbit/s Ethernet); every batch also fills and checks its buffers, at
# no less than _PATTERN_BYTES_PER_S.
_MIN_BATCHES = 10
_MAX_WARMUP_ROUNDS = 16
_MIN_BATCH_SECONDS = 0.01
SLOWEST_LINK_BYTES_PER_S = 1e7
_PATTERN_BYTES_PER_S = 1e8
_SLACK_PER_SIZE = 1.0
# mpirun's start of the ranks (ssh to every node, the library's wire-up),
# its exit, and the runner's start, beyond the kernel's own run: a fixed part
# and a part per node.
_LAUNCH_SLACK = 60.0
_LAUNCH_SLACK_PER_NODE = 0.1


# The longest plan one launch takes: its text travels in the job's argv, which
# a node's kernel caps at 128 KiB an argument (MAX_ARG_STRLEN); the job's own
# encoding takes a third more.  Rounds beyond it go in further launches.
MAX_PLAN_CHARS = 64 * 1024


# --- the argv -----------------------------------------------------------------------


def _check_host(host: str) -> None:
    # Hosts travel inside the JSON job, never through a shell; a leading dash
    # would still read as an option, a comma splits mpirun's --host list, and
    # blanks are never a host name.
    if not isinstance(host, str) or not host or host.startswith("-") or any(c.isspace() or c == "," for c in host):
        raise ValueError(f"a node must be a host name or an address, got {host!r}")


def check_nodes(nodes: Sequence[str]) -> list[str]:
    """The nodes, one rank each, in rank order; ValueError unless they are
    two or more distinct host names."""
    nodes = list(nodes)
    for node in nodes:
        _check_host(node)
    if len(nodes) < 2:
        raise ValueError(f"the collectives need two or more nodes, got {len(nodes)}")
    if len(set(nodes)) != len(nodes):
        raise ValueError(f"the nodes must be distinct (one rank per node), got {nodes}")
    return nodes


def check_benchmarks(benchmarks: Sequence[str]) -> list[str]:
    """The benchmarks in the kernel's order; ValueError for an unknown or repeated one."""
    benchmarks = list(benchmarks)
    unknown = [name for name in benchmarks if name not in BENCHMARKS]
    if unknown or not benchmarks or len(set(benchmarks)) != len(benchmarks):
        raise ValueError(f"benchmarks must be distinct names of {', '.join(BENCHMARKS)}, got {benchmarks}")
    return [name for name in BENCHMARKS if name in benchmarks]


def check_sizes(sizes: Sequence[int]) -> list[int]:
    """ValueError unless ``sizes`` are 1 to MAX_SIZES distinct whole byte counts up to MAX_SIZE."""
    sizes = list(sizes)
    if not sizes or len(sizes) > MAX_SIZES:
        raise ValueError(f"sizes must list 1 to {MAX_SIZES} message sizes, got {len(sizes)}")
    for size in sizes:
        if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= MAX_SIZE:
            raise ValueError(f"a message size must be whole bytes 0-{MAX_SIZE}, got {size!r}")
    if len(set(sizes)) != len(sizes):
        raise ValueError(f"message sizes must be distinct, got {sizes}")
    return sizes


def check_seconds_per_size(seconds: float) -> None:
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 < seconds <= MAX_SECONDS_PER_SIZE:
        raise ValueError(f"seconds_per_size must be > 0 and <= {MAX_SECONDS_PER_SIZE:g}, got {seconds!r}")


def collectives_launcher(nodes: Sequence[str], rsh_agent: str | None = None, hostfile: bool = False,
                         yield_when_idle: bool = False, bind_to: str | None = None) -> list[str]:
    """Open MPI's mpirun for one rank on each node, in the nodes' order.
    ``rsh_agent`` is the command it reaches the other nodes with (``ssh -F
    FILE``); by default its own (ssh).  ``hostfile``: name no hosts and let
    mpirun take them from its allocation (Slurm, PBS) or its default
    hostfile, one rank per node all the same; the kernel's header records
    the order it chose.  ``yield_when_idle`` for nodes whose CPUs are
    capped or shared, as the testbed's (see reach/launch.py); ``bind_to``:
    what each rank is bound to (default: Open MPI's choice)."""
    nodes = check_nodes(nodes)
    return mpirun_line(len(nodes), None if hostfile else nodes, map_by="node", bind_to=bind_to, rsh_agent=rsh_agent,
                       yield_when_idle=yield_when_idle)


def pairs_only(sets: Sequence[Sequence[str]]) -> bool:
    """Whether every set of a round is of two nodes.  Open MPI binds each of
    a launch's ranks to a core when it starts two and to a package when it
    starts more: a launch of several rounds binds sets of two to a core,
    and takes rounds of pairs or rounds without, never both, so that every
    set is bound as a launch of it alone would bind it (a rank bound to a
    core shares it with a competing process pinned there, a free one does
    not)."""
    return all(len(members) == 2 for members in sets)


def kernel_args(benchmarks: Sequence[str] = DEFAULT_BENCHMARKS, sizes: Sequence[int] = DEFAULT_SIZES,
                seconds_per_size: float = DEFAULT_SECONDS_PER_SIZE) -> list[str]:
    """The kernel's own arguments (-b, -s, -T), checked."""
    benchmarks = check_benchmarks(benchmarks)
    sizes = check_sizes(sizes)
    check_seconds_per_size(seconds_per_size)
    return ["-b", ",".join(benchmarks), "-s", ",".join(str(size) for size in sizes), "-T", f"{seconds_per_size:g}"]


def moved_bytes(benchmark: str, size: int, ranks: int) -> int:
    """Bytes a rank sends and receives per call of ``benchmark`` at ``size``
    (alltoall: to and from every rank), on the wire and through the
    pattern check; 0 for the barrier."""
    return {"sendrecv": 2 * size, "allreduce": 2 * size, "alltoall": 2 * ranks * size,
            "bcast": 2 * size}.get(benchmark, 0)


def run_seconds(benchmarks: Sequence[str] = DEFAULT_BENCHMARKS, sizes: Sequence[int] = DEFAULT_SIZES,
                seconds_per_size: float = DEFAULT_SECONDS_PER_SIZE, *, ranks: int = 2) -> float:
    """An upper bound of the kernel's seconds on ``ranks`` nodes linked no
    slower than SLOWEST_LINK_BYTES_PER_S, for its timeout: per benchmark
    and size, its seconds (an upper bound the kernel keeps, but for the
    batch under way) and a quarter more or the length of MIN_BATCHES
    batches, whichever is longer, and that many batches' calls at that rate
    and their buffers' fill and check: a wide margin."""
    batches = _MIN_BATCHES + _MAX_WARMUP_ROUNDS
    fewest_batches = 3 * _MIN_BATCH_SECONDS * _MIN_BATCHES
    total = 0.0
    for benchmark in check_benchmarks(benchmarks):
        for size in benchmark_sizes(benchmark, check_sizes(sizes)):
            moved = moved_bytes(benchmark, size, ranks)
            per_batch = max(moved, 1) / SLOWEST_LINK_BYTES_PER_S + moved / _PATTERN_BYTES_PER_S
            total += max(1.25 * seconds_per_size, fewest_batches) + batches * per_batch + _SLACK_PER_SIZE
    return total


def round_plan(nodes: Sequence[str], rounds: Sequence[Sequence[Sequence[str]]]) -> str:
    """The kernel's -P text for ``rounds`` (each a round's sets, each set its
    members in order) over a launch of one rank on each of ``nodes``, in
    their order: rounds split by '/', sets by ';', ranks by ','.
    ValueError for a member not among the nodes, twice in a round, or a set
    of fewer than two."""
    place = {node: rank for rank, node in enumerate(check_nodes(nodes))}
    texts = []
    for number, sets in enumerate(rounds, start=1):
        if not sets:
            raise ValueError(f"round {number} of the plan has no set")
        members = [member for members in sets for member in members]
        unknown = sorted(set(members) - place.keys())
        if unknown:
            raise ValueError(f"round {number}: {', '.join(unknown)} not among the launch's nodes")
        if len(set(members)) != len(members) or any(len(members) < 2 for members in sets):
            raise ValueError(f"round {number}: each node in one set at most, each set of two or more")
        texts.append(";".join(",".join(str(place[member]) for member in members) for members in sets))
    return "/".join(texts)


def collectives_argv(
    nodes: Sequence[str],
    benchmarks: Sequence[str] = DEFAULT_BENCHMARKS,
    sizes: Sequence[int] = DEFAULT_SIZES,
    seconds_per_size: float = DEFAULT_SECONDS_PER_SIZE,
    *,
    rsh_agent: str | None = None,
    yield_when_idle: bool = False,
    launcher: Sequence[str] | None = None,
    hostfile: bool = False,
    timeout: float | None = None,
    interpreter: str = "python3",
    rounds: Sequence[Sequence[Sequence[str]]] | None = None,
) -> list[str]:
    """The argv, run on the first of ``nodes``, that times the collectives
    over all of them, one rank per node in their order (``launcher``
    replaces collectives_launcher's, for another MPI's launcher or a test's);
    with ``rounds``, over each set of each round instead (round_plan), its
    output one section per set (parsers.oddnode_mpi_collectives.plan_sections).
    Open MPI refuses to run as root unless its environment allows it, which
    changes nothing for other users."""
    nodes = check_nodes(nodes)
    args = kernel_args(benchmarks, sizes, seconds_per_size)
    bind_to = None
    if rounds is not None:
        plan = round_plan(nodes, rounds)
        if len(plan) > MAX_PLAN_CHARS:
            raise ValueError(f"a plan of {len(plan)} characters is longer than one launch takes "
                             f"({MAX_PLAN_CHARS}): run its rounds in several")
        kinds = {pairs_only(sets) for sets in rounds}
        if len(kinds) > 1:
            raise ValueError("a launch runs rounds of pairs or rounds of larger sets, not both (see pairs_only)")
        bind_to = "core" if kinds == {True} else None
        args += ["-P", plan]
    if timeout is None:
        timeout = (sum(run_seconds(benchmarks, sizes, seconds_per_size, ranks=len(max(sets, key=len)))
                       for sets in rounds)
                   if rounds is not None else run_seconds(benchmarks, sizes, seconds_per_size, ranks=len(nodes)))
        timeout += _LAUNCH_SLACK + _LAUNCH_SLACK_PER_NODE * len(nodes)
    env = dict(OPEN_MPI_ROOT_ENV)
    return runner_argv(KERNEL, args, env=env, timeout=timeout, interpreter=interpreter, compiler="mpicc",
                       launcher=launcher if launcher is not None
                       else collectives_launcher(nodes, rsh_agent, hostfile, yield_when_idle, bind_to))


def parse_collectives_run(text: str, source: str) -> ParsedOutput:
    """The node runner's JSON report of a collectives run, then the kernel's stdout."""
    return parse_kernel_run(text, source, KERNEL, parse_collectives_output)
