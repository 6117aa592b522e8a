"""Run the sync kernel on node sets of growing size: ``oddnode sync`` and the
``sync`` step of a check's sets stage.

Each node count (2, 4, 8, … and all the nodes, or those asked for) runs
alone on the cluster, R times, through the scaling curve's runner
(``sets.runner.run_scale``): every set run is stored under its folded node
set in ``scale.sync.<operation>.<ordering>``.  Every rank of every valid set
run is stored too, under its node in ``sync.<operation>.<ordering>`` (see
``sync.series``), so that the analysis can count how often each node was
last over all its set runs.

The kernel is our MPI one, launched by ``mpirun`` from the set's first node,
where every node has ``mpicc`` and ``mpirun``; else the same iterations over
TCP (``tcp_sync``), whose ranks the transport starts on every member at one
moment.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from oddnode.measure.set import mpi_sync
from oddnode.core.model import Direction, LabelKind
from oddnode.core.nodes import fold
from oddnode.parsers.base import ParsedOutput
from oddnode.measure.set.jobs import SetJob, mpi_rsh_agent
from oddnode.readings.partition import check_ordering, scale_counts
from oddnode.measure.set.runner import SetRunSummary, run_orderings, run_scale
from oddnode.readings.sets_series import SCALE, SHUFFLED
from oddnode.measure.steps import Step, StepContext, StepOutcome, option
from oddnode.store import ResultBatch, Store
from oddnode.readings.sync_series import (
    COMPUTE,
    EFFICIENCY,
    EXTRA_WAIT,
    ITERATIONS,
    LAST,
    RANKS,
    SYNC,
    TIME,
    WAIT,
    rank_series,
    sync_benchmark,
)
from oddnode.reach.base import NodeStatus, Target
from oddnode.core.units import canonical_unit

KERNEL_CHOICES = ("auto", "mpi", "tcp")
# Seconds every node has to say whether it has mpicc and mpirun.
PROBE_SECONDS = 20.0
# Both MPI tools on the node's PATH, as the node runner and mpirun find them.
MPI_PROBE = ["sh", "-c", "command -v mpicc >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1"]

_US, _PERCENT, _COUNT = canonical_unit("us"), canonical_unit("%"), canonical_unit("count")


@dataclass(frozen=True)
class SyncOptions:
    """What the sync kernel runs (operation, work quantum, iterations), on
    which node counts (None: 2, 4, 8, … and all the nodes) and orderings,
    with which kernel (auto: MPI where every node has it, else TCP), and
    ``mpi_yield`` for capped or shared CPUs (see reach/launch.py)."""

    operation: str = option("allreduce", help="The collective after every quantum: allreduce (one double) or barrier")
    quantum_us: int = option(mpi_sync.DEFAULT_QUANTUM_US, help="Microseconds of work per iteration on the fastest "
                                                               "node (the same work on every node)")
    iterations: int = option(mpi_sync.DEFAULT_ITERATIONS, help="Timed iterations of every set run")
    counts: tuple[int, ...] | None = option(None, help="Node counts, comma-separated", flag="sizes",
                                            aliases=("counts",), check="counts",
                                            shown_default="2, 4, 8, ... and all the nodes")
    orderings: tuple[str, ...] = (SHUFFLED,)
    seed: int = 0
    kernel: str = option("auto", help="auto (MPI where every node has mpicc and mpirun, else TCP), mpi or tcp")
    port: int = option(mpi_sync.DEFAULT_PORT, help="TCP port of the TCP kernel's ranks")
    mpi_yield: bool = False

    def __post_init__(self) -> None:
        mpi_sync.kernel_args(["a", "b"], self.operation, self.quantum_us, self.iterations)
        for ordering in self.orderings:
            check_ordering(ordering)
        if not self.orderings or len(set(self.orderings)) != len(self.orderings):
            raise ValueError(f"orderings must be distinct names of sorted, shuffled, got {self.orderings}")
        if self.kernel not in KERNEL_CHOICES:
            raise ValueError(f"kernel is one of {', '.join(KERNEL_CHOICES)}, not {self.kernel!r}")
        if isinstance(self.port, bool) or not isinstance(self.port, int) or not 1 <= self.port <= 65535:
            raise ValueError(f"port must be a whole number 1-65535, got {self.port!r}")


def nodes_without_mpi(target: Target) -> dict[str, str]:
    """The nodes that lack mpicc or mpirun (or did not answer), each with why."""
    results = target.transport.run(list(target.nodes), MPI_PROBE, timeout=PROBE_SECONDS)
    lacking = {}
    for node in target.nodes:
        result = results.get(node)
        if result is None:
            lacking[node] = "no answer"
        elif result.status is NodeStatus.OK and result.exit_code != 0:
            lacking[node] = "no mpicc or mpirun on its PATH"
        elif result.status is not NodeStatus.OK:
            lacking[node] = f"{result.status.value}: {result.stderr.strip()[:200] or 'no message'}"
    return lacking


def choose_kernel(target: Target, choice: str = "auto") -> tuple[str, str]:
    """The kernel to run (mpi_sync or tcp_sync) and a note saying why."""
    if choice == "mpi":
        return mpi_sync.KERNEL, "kernel: MPI (asked for)"
    if choice == "tcp":
        return mpi_sync.TCP_KERNEL, "kernel: TCP (asked for)"
    lacking = nodes_without_mpi(target)
    if not lacking:
        return mpi_sync.KERNEL, "kernel: MPI (every node has mpicc and mpirun)"
    reasons = sorted(set(lacking.values()))
    return mpi_sync.TCP_KERNEL, (f"kernel: TCP, as {fold(lacking)} {'has' if len(lacking) == 1 else 'have'} no "
                                 f"MPI to run it ({'; '.join(reasons)})")


@dataclass
class Captured:
    """Every set run's parsed output, in the order the runner read them."""

    outputs: list[tuple[str, ParsedOutput]] = field(default_factory=list)

    def parser(self, parse: Callable[[str, str], ParsedOutput]) -> Callable[[str, str], ParsedOutput]:
        def capture(text: str, source: str) -> ParsedOutput:
            parsed = parse(text, source)
            self.outputs.append((source, parsed))
            return parsed
        return capture


def sync_job(target: Target, options: SyncOptions, kernel: str, captured: Captured,
             rsh_agent: str | None = None) -> SetJob:
    """The sync kernel as a set job (``kernel``: mpi_sync or tcp_sync), every
    parsed output also kept in ``captured``."""
    run = dict(operation=options.operation, quantum_us=options.quantum_us, iterations=options.iterations)
    expected = tuple((sync_benchmark(options.operation), metric, unit, direction) for metric, unit, direction in (
        (TIME, _US, Direction.LOWER), (EFFICIENCY, _PERCENT, Direction.HIGHER), (COMPUTE, _US, Direction.LOWER),
        (WAIT, _US, Direction.LOWER), (EXTRA_WAIT, _US, Direction.LOWER)))
    parse = captured.parser(mpi_sync.parse_sync_run)
    seconds = mpi_sync.run_seconds(options.quantum_us, options.iterations)
    nodes = target.nodes
    if kernel == mpi_sync.TCP_KERNEL:
        def rank_argvs(members: Sequence[str]) -> dict[str, list[str]]:
            return mpi_sync.tcp_sync_argvs(members, port=options.port, **run)

        build = rank_argvs([nodes[0], nodes[-1]])[nodes[0]] if len(nodes) >= 2 else None
        return SetJob(SYNC, lambda members: rank_argvs(members)[members[0]], parse, expected,
                      seconds + mpi_sync.DEFAULT_CONNECT_WAIT + mpi_sync.DEFAULT_IO_TIMEOUT, build, rank_argvs)
    agent = rsh_agent if rsh_agent is not None else mpi_rsh_agent(target)

    def argv(members: Sequence[str]) -> list[str]:
        return mpi_sync.sync_argv(members, rsh_agent=agent, yield_when_idle=options.mpi_yield, **run)

    # Every node builds the kernel: mpirun starts each member's rank from its build.
    return SetJob(SYNC, argv, parse, expected, seconds, argv([nodes[0], nodes[-1]]) if len(nodes) >= 2 else None)


def rank_rows(captured: Captured, operation: str, ordering: str) -> ResultBatch:
    """Every rank of every valid set run, under its node in the per-rank
    series, the set run's number as its repetition (see sync.series)."""
    batch = ResultBatch()
    series = rank_series(operation, ordering)
    for number, (source, parsed) in enumerate(captured.outputs, start=1):
        table = parsed.configuration.get("rank_table") or []
        if not parsed.valid or not table:
            continue
        iterations, ranks = parsed.configuration["iterations"], len(table)
        per_iteration = next(m.value for m in parsed.measurements if m.metric == TIME)
        members = [row["node"] for row in table]
        for row in table:
            wait, compute = row["wait_total_us"], row["compute_total_us"]
            values = (
                (LAST, float(row["last"]), _COUNT, Direction.LOWER),
                (ITERATIONS, float(iterations), _COUNT, Direction.HIGHER),
                (RANKS, float(ranks), _COUNT, Direction.HIGHER),
                (TIME, per_iteration, _US, Direction.LOWER),
                (EXTRA_WAIT, row["extra_wait_us"] / iterations, _US, Direction.LOWER),
                (COMPUTE, row["compute_median_us"], _US, Direction.LOWER),
                (WAIT, row["wait_median_us"], _US, Direction.LOWER),
                (EFFICIENCY, 100.0 * compute / (compute + wait) if compute + wait > 0 else 0.0, _PERCENT,
                 Direction.HIGHER),
            )
            parameters = {"set": fold(members), "members": members, "rank": row["rank"], "host": row["host"],
                          "compute_max_us": row["compute_max_us"], "transport": parsed.configuration["transport"]}
            for metric, value, unit, direction in values:
                batch.add(series, row["node"], value, metric=metric, unit=unit, direction=direction,
                          label_kind=LabelKind.SET, repetition=number, parameters=parameters, raw_ref=source)
    return batch


def run_sync(store: Store, target: Target, options: SyncOptions, ordering: str, repetitions: int, *,
             counts: Sequence[int], kernel: str, rsh_agent: str | None = None, command: str = "oddnode sync",
             on_progress: Callable[[int, int], None] | None = None) -> SetRunSummary:
    """One ordering of a sync run: every node count alone, ``repetitions``
    times, each set run stored as it ends; then every rank's numbers."""
    captured = Captured()
    job = sync_job(target, options, kernel, captured, rsh_agent)
    summary = run_scale(store, target, job, ordering, repetitions, counts=counts, seed=options.seed,
                        command=command, on_progress=on_progress)
    rows = rank_rows(captured, options.operation, ordering)
    with store.transaction():
        store.add_results(summary.run_id, rows)
    return summary


class SyncStep(Step):
    """Synchronisation sensitivity: the sync kernel on sets of 2, 4, …, N nodes, each alone.

    Opt-in (``--with sync``), like the scaling curve it shares its runner
    with: each node count holds the whole cluster for one set at a time,
    log2(N) + 1 counts R times, and serial benchmarks and the set stage
    already run on every check.  It is the check to add when parallel jobs
    run slower than their nodes' single-node results promise (NERSC's
    seaborg), or before accepting nodes for tightly synchronising codes."""

    name = "sync"
    stage = "sets"
    options = SyncOptions
    series = (SYNC, f"{SCALE}.{SYNC}")
    default = False
    min_nodes = 2
    summary = "Bulk-synchronous iterations (work quantum, then Allreduce) on 2, 4, …, N nodes: whom the others wait for"

    def run(self, context: StepContext, options: SyncOptions) -> StepOutcome:
        counts = scale_counts(len(context.target.nodes), options.counts)
        kernel, note = choose_kernel(context.target, options.kernel)
        outcome = run_orderings(context, self.name, options.orderings, lambda ordering, step: run_sync(
            context.store, context.target, options, ordering, context.repetitions, counts=counts, kernel=kernel,
            command=context.step_command(step), on_progress=context.progress(step)))
        outcome.notes.insert(0, note)
        return outcome
