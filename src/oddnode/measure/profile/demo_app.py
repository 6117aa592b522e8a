"""Our MPI demo application (``oddnode/kernels/mpi_demo_app.c``): a small
bulk-synchronous program whose every MPI call is known from its options,
to profile and to model.  The argv that builds it with ``mpicc`` and starts
its ranks with Open MPI's ``mpirun``, and rank 0's output read from the
runner's report; the parser of what rank 0 prints and the count of every MPI
call a rank makes are in ``oddnode.parsers.oddnode_mpi_demo_app``.

Every iteration each rank computes a fixed amount of floating-point work
(rank r of K: ``W + floor(W * imbalance * r / (K-1) + 0.5)`` units),
exchanges a halo with both neighbours of a periodic ring (two
MPI_Sendrecv), and every ``alltoall_every`` iterations joins an
MPI_Alltoall; a final MPI_Allreduce sums the ranks' checksums.  Halos and
alltoall blocks carry patterns checked on receipt.
"""

from __future__ import annotations

from collections.abc import Sequence

from oddnode.reach.jobs import parse_runner_output, runner_argv
from oddnode.measure.set.collectives import check_nodes, collectives_launcher
from oddnode.reach.launch import OPEN_MPI_ROOT_ENV
from oddnode.parsers.base import ParseError
from oddnode.parsers.oddnode_mpi_demo_app import KERNEL, DemoAppRun, parse_demo_app_output

DEFAULT_ITERATIONS = 100
DEFAULT_WORK_UNITS = 500
DEFAULT_HALO_BYTES = 4096
DEFAULT_ALLTOALL_EVERY = 10
DEFAULT_ALLTOALL_BYTES = 1024
# The kernel's limits, checked here first so that a typo fails at once.
MAX_ITERATIONS = 100_000_000
MAX_WORK_UNITS = 1_000_000_000
MAX_HALO_BYTES = 64 << 20
MAX_ALLTOALL_BYTES = 16 << 20
MAX_IMBALANCE = 1000.0
CORRUPT_RANK_VARIABLE = "ODDNODE_CORRUPT_RANK"
# Run-time bound for the runner's timeout: a work unit is about 1.1 us on a
# 2-core EPYC guest; _UNIT_SECONDS allows a node 20 times slower (or shared).
# Messages at no less than 100 Mbit/s (1e7 bytes/s), patterns filled and
# checked at no less than 1e8 bytes/s; a fixed slack for mpirun's launch.
_UNIT_SECONDS = 2e-5
_LINK_BYTES_PER_S = 1e7
_PATTERN_BYTES_PER_S = 1e8
_LAUNCH_SLACK = 60.0
_LAUNCH_SLACK_PER_NODE = 0.1


# --- the argv -----------------------------------------------------------------------


def _check_whole(name: str, value: int, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name} must be a whole number {low}-{high}, got {value!r}")


def kernel_args(iterations: int = DEFAULT_ITERATIONS, work_units: int = DEFAULT_WORK_UNITS,
                halo_bytes: int = DEFAULT_HALO_BYTES, alltoall_every: int = DEFAULT_ALLTOALL_EVERY,
                alltoall_bytes: int = DEFAULT_ALLTOALL_BYTES, imbalance: float = 0.0) -> list[str]:
    """The kernel's own arguments (-n, -w, -h, -a, -A, -i), checked."""
    _check_whole("iterations", iterations, 1, MAX_ITERATIONS)
    _check_whole("work_units", work_units, 0, MAX_WORK_UNITS)
    _check_whole("halo_bytes", halo_bytes, 0, MAX_HALO_BYTES)
    _check_whole("alltoall_every", alltoall_every, 0, MAX_ITERATIONS)
    _check_whole("alltoall_bytes", alltoall_bytes, 0, MAX_ALLTOALL_BYTES)
    if isinstance(imbalance, bool) or not isinstance(imbalance, (int, float)) or not 0 <= imbalance <= MAX_IMBALANCE:
        raise ValueError(f"imbalance must be a fraction 0-{MAX_IMBALANCE:g}, got {imbalance!r}")
    return ["-n", str(iterations), "-w", str(work_units), "-h", str(halo_bytes), "-a", str(alltoall_every),
            "-A", str(alltoall_bytes), "-i", repr(float(imbalance))]


def work_units_of(rank: int, ranks: int, work_units: int, imbalance: float) -> int:
    """Rank ``rank``'s work units per iteration: W + floor(W·imbalance·r/(K-1) + 0.5)."""
    return work_units + int(work_units * imbalance * rank / (ranks - 1) + 0.5)


def run_seconds(ranks: int, iterations: int = DEFAULT_ITERATIONS, work_units: int = DEFAULT_WORK_UNITS,
                halo_bytes: int = DEFAULT_HALO_BYTES, alltoall_every: int = DEFAULT_ALLTOALL_EVERY,
                alltoall_bytes: int = DEFAULT_ALLTOALL_BYTES, imbalance: float = 0.0) -> float:
    """An upper bound of the kernel's seconds: the slowest rank's work, every
    message over a slow link and through the pattern check."""
    units = work_units_of(ranks - 1, ranks, work_units, imbalance)
    alltoalls = iterations // alltoall_every if alltoall_every > 0 else 0
    moved = 4 * halo_bytes * iterations + 2 * ranks * alltoall_bytes * alltoalls
    return (units * iterations * _UNIT_SECONDS + moved / _LINK_BYTES_PER_S + moved / _PATTERN_BYTES_PER_S
            + 0.01 * iterations)


def demo_app_argv(nodes: Sequence[str], iterations: int = DEFAULT_ITERATIONS, work_units: int = DEFAULT_WORK_UNITS,
                  halo_bytes: int = DEFAULT_HALO_BYTES, alltoall_every: int = DEFAULT_ALLTOALL_EVERY,
                  alltoall_bytes: int = DEFAULT_ALLTOALL_BYTES, imbalance: float = 0.0, *,
                  rsh_agent: str | None = None, yield_when_idle: bool = False,
                  launcher: Sequence[str] | None = None, hostfile: bool = False,
                  env: dict[str, str] | None = None, timeout: float | None = None,
                  interpreter: str = "python3") -> list[str]:
    """The argv, run on the first of ``nodes``, that runs the demo
    application with one rank per node in their order (``launcher`` replaces
    the collectives' mpirun launcher, for another MPI's or a test's)."""
    nodes = check_nodes(nodes)
    args = kernel_args(iterations, work_units, halo_bytes, alltoall_every, alltoall_bytes, imbalance)
    if timeout is None:
        timeout = (run_seconds(len(nodes), iterations, work_units, halo_bytes, alltoall_every, alltoall_bytes,
                               imbalance) + _LAUNCH_SLACK + _LAUNCH_SLACK_PER_NODE * len(nodes))
    environment = {**OPEN_MPI_ROOT_ENV, **(env or {})}
    return runner_argv(KERNEL, args, env=environment, timeout=timeout, interpreter=interpreter, compiler="mpicc",
                       launcher=launcher if launcher is not None
                       else collectives_launcher(nodes, rsh_agent, hostfile, yield_when_idle))


def parse_demo_app_run(text: str, source: str) -> DemoAppRun:
    """The node runner's JSON report of a run, then rank 0's stdout; a
    failing exit status makes the run invalid."""
    report = parse_runner_output(source, text)
    try:
        run = parse_demo_app_output(report.stdout, source)
    except ParseError as problem:
        if report.returncode != 0:
            stderr = report.stderr.strip()[:2000]
            raise ParseError(source, None, f"{KERNEL} kernel exited with status {report.returncode}: "
                                           f"{stderr or problem.detail}") from None
        raise
    configuration = {**run.configuration, "compiler": report.compiler, "cache_key": report.cache_key,
                     "built": report.built}
    problems = list(run.problems)
    if report.returncode != 0:
        problems.append(f"{KERNEL} kernel exited with status {report.returncode}")
    return DemoAppRun(configuration, run.ranks, run.checksum, not problems, problems)
