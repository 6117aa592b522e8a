"""The commands on sets of nodes: STAB's parallel runs on every set of K
nodes, sorted and shuffled, with a topology also packed and striped
(``sets``), and SCAB's scaling curve (``scale``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from oddnode.core.connection import Connection
from oddnode.app.cli.common import (
    DEFAULT_DB,
    DbOption,
    ExcludeOption,
    FROM_OPTIONS,
    HostfileOption,
    MaxMinutesOption,
    NodesOption,
    TestbedOption,
    TopologyOption,
    WideOption,
    budget_stop,
    command_line,
    console,
    detail,
    err_console,
    exit_for_findings,
    inform,
    print_json,
    progress_run,
    quiet,
    run_budget,
    user_errors,
)
from oddnode.app.cli.interconnect import NETWORK_REPETITIONS, MpiYieldOption, network_run
from oddnode.app.cli.step_flags import FROM_FLAGS, OptionValues, with_step_option_values
from oddnode.measure.estimate import Budget, BudgetSpent, Estimate
from oddnode.measure.set.runner import ScaleOptions, SetBenchmarkOptions, SetsOptions
from oddnode.readings.partition import DEFAULT_SET_SIZE
from oddnode.report import summaries
from oddnode.readings.sets_series import TOPOLOGY_ORDERINGS

if TYPE_CHECKING:
    from oddnode.report import documents

SETS_PANEL = "Node sets"
# The findings each command prints after its runs.
SETS_FINDINGS = ("weak-set-member", "weak-set-member-undecided", "set-contention")
SCALE_FINDINGS = ("scaling-loss",)

# The options both commands share.
OrderOption = Annotated[str, typer.Option(
    "--order", help="Orderings, comma-separated: sorted (adjacent in the node list), shuffled (reshuffled every "
                    "repetition).")]
SetsOrderOption = Annotated[str, typer.Option(
    "--order", help="Orderings, comma-separated: sorted (adjacent in the node list), shuffled (reshuffled every "
                    "repetition); with --topology also packed (a group, e.g. a leaf switch, filled before the "
                    "next) and striped (round-robin across the groups).")]
SeedOption = Annotated[int, typer.Option("--seed", help="Seed of the shuffles.")]
RshAgentOption = Annotated[Optional[str], typer.Option(
    "--mpi-rsh-agent", help="The command mpirun reaches the other members with (default ssh; with --testbed or "
                            "--ssh-config, ssh with that configuration).")]
LauncherOption = Annotated[str, typer.Option(
    "--launcher", help="What starts our MPI kernel's ranks: mpirun (Open MPI's, over ssh or inside the "
                       "allocation), srun (Slurm's own job step, with the MPI plugin, PMIx or PMI2, that srun and "
                       "Open MPI share; --transport slurm), or auto: srun under --transport slurm where they "
                       "share one, else mpirun.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the runs, the set tables and findings as JSON.")]


def _names(text: str | None) -> tuple[str, ...] | None:
    return None if text is None else tuple(part.strip() for part in text.split(",") if part.strip())


def _job_settings(order: str, seed: int, launcher: str, option_values: OptionValues) -> dict[str, Any]:
    """The step options the shared flags set: the orderings, the seed, the
    launcher, and the options whose flags were given (SET_OPTIONS)."""
    return {"orderings": _names(order), "seed": seed, "launcher": launcher, **option_values}


def _run_orderings(orderings: Sequence[str], label: str, run: Callable[..., Any], json_out: bool,
                   budget: Budget | None = None) -> tuple[dict[str, Any], str | None]:
    """Each ordering's run under its progress bar, its summary line after it
    (on stderr when stdout carries JSON), until the budget (if any) is
    spent; the summaries, and what the budget stopped (None: nothing)."""
    budget = budget or Budget()
    out = err_console if json_out else None
    summaries_by_ordering = {}
    for ordering in orderings:
        try:
            summary = progress_run(f"{label} {ordering}", lambda progress: run(ordering, budget.watching(progress)))
        except BudgetSpent as spent:
            budget.stopped = f"{label} {ordering}: {spent}"
            return summaries_by_ordering, budget.stopped
        summaries_by_ordering[ordering] = summary
        inform(summaries.set_run_line(label, summary), highlight=False, out=out)
        for line in summaries.dim_lines(dict.fromkeys(summary.notes)):
            inform(line, highlight=False, out=out)
        for line in summaries.dim_lines(summary.problems):
            detail(line, highlight=False, out=out)
    return summaries_by_ordering, None


def _estimates(options: SetBenchmarkOptions, step: str, counts: Sequence[int], repetitions: int,
               store) -> list[Estimate]:
    """The estimate of the runs on sets of these member counts (none for a
    command's, whose time is its own)."""
    from oddnode.measure.estimate import slowest_pair_rate

    estimate = options.run_estimate(step, counts, repetitions, slowest_pair_rate(store.pair_rates()))
    return [estimate] if estimate is not None else []


def _print(dataset, runs: dict[str, Any], kinds: Sequence[str], show: Callable[[Any, bool], Any], json_out: bool,
           wide: bool, budget: Budget) -> list:
    """The tables and findings of a set command, or all of it as JSON (with
    the run's estimate and budget); the findings."""
    from oddnode.judge.analysis import analyze
    from oddnode.report.sets import sets_json
    from oddnode.report.terminal import findings_by_nodes

    findings = [f for f in analyze(dataset, correlations=False).findings if f.kind in kinds]
    if json_out:
        document: documents.Sets | documents.Scale = {  # the same keys
            "runs": {o: s.to_json() for o, s in runs.items()}, "sets": sets_json(dataset),
            "findings": [f.to_json() for f in findings], "estimate": budget.to_json()}
        print_json(document)
    else:
        if not quiet():
            show(dataset, wide)
        console.print(findings_by_nodes(findings) if findings else summaries.no_set_findings(kinds))
    return findings


def sets_command(
    size: Annotated[int, typer.Option("-k", "--size", help="Nodes per set; the last N mod K nodes of each "
                                                           "(shuffled) list sit out and are named.")]
    = DEFAULT_SET_SIZE,
    order: SetsOrderOption = "sorted,shuffled",
    repetitions: Annotated[int, typer.Option(
        "-r", "--repetitions", help="Runs of every set of an ordering (shuffled reshuffles each time).")]
    = NETWORK_REPETITIONS,
    seed: SeedOption = 0,
    option_values: OptionValues = FROM_FLAGS,  # --benchmarks, --sizes, ... (SET_OPTIONS)
    mpi_rsh_agent: RshAgentOption = None,
    mpi_yield: MpiYieldOption = None,
    launcher: LauncherOption = "mpirun",
    json_out: JsonOption = False,
    wide: WideOption = False,
    max_minutes: MaxMinutesOption = None,
    topology: TopologyOption = None,
    nodes: NodesOption = None, exclude: ExcludeOption = None, hostfile: HostfileOption = None,
    connection: Connection = FROM_OPTIONS,
    testbed: TestbedOption = False, db: DbOption = DEFAULT_DB,
) -> None:
    """A parallel benchmark on every set of K nodes at once, sorted and shuffled; the node common to slow sets.

    Every set of one ordering runs at once, R times (shuffled sets are drawn
    again each time); each set's result is stored under its node set.  Then
    STAB's table of sorted next to shuffled sets, the nodes common to failed
    sets, and the findings: a weak set member, contention between switches.
    With --topology, packed sets (one group filled before the next: the usual
    job on one leaf) and striped sets (round-robin across the groups) show
    how job shapes land on the switches, each set with the groups it spans."""
    from oddnode.readings.partition import check_topology
    from oddnode.measure.set.runner import run_sets

    with user_errors():
        options = SetsOptions(size=size, mpi_yield=testbed if mpi_yield is None else mpi_yield,
                              **_job_settings(order, seed, launcher, option_values))
    if options.needs_topology and topology is None and not testbed:
        wanted = ",".join(o for o in options.orderings if o in TOPOLOGY_ORDERINGS)
        raise typer.BadParameter(f"{wanted} needs --topology FILE: which group (leaf switch, line card) each node "
                                 "hangs from, one 'GROUP NODESET' a line", param_hint="'--order'")
    with network_run(topology, nodes, exclude, hostfile, connection, testbed, db) as (target, store):
        with user_errors():
            groups = store.load_topology() if options.needs_topology else None
            if options.needs_topology:
                check_topology(target.nodes, groups, next(o for o in options.orderings if o in TOPOLOGY_ORDERINGS))
            job = options.job(target, size, rsh_agent=mpi_rsh_agent)
            budget = run_budget(max_minutes, _estimates(options, "sets", [size], repetitions, store))
            runs, stopped = _run_orderings(options.orderings, "sets", lambda ordering, progress: run_sets(
                store, target, job, ordering, repetitions, size=size, seed=seed, command=command_line(),
                groups=groups, on_progress=progress), json_out, budget)
        dataset = store.load_dataset()
    from oddnode.report.sets import print_sets

    findings = _print(dataset, runs, SETS_FINDINGS, lambda data, wide: print_sets(console, data, wide), json_out,
                      wide, budget)
    detail(summaries.stored_line(db, *(s.run_id for s in runs.values())), highlight=False,
           out=err_console if json_out else None)
    if stopped is not None:
        raise budget_stop(stopped, db)
    exit_for_findings(findings)


def scale_command(
    order: OrderOption = "sorted,shuffled",
    repetitions: Annotated[int, typer.Option(
        "-r", "--repetitions", help="Runs of every node count (shuffled: a new shuffle each time).")]
    = NETWORK_REPETITIONS,
    seed: SeedOption = 0,
    option_values: OptionValues = FROM_FLAGS,  # --counts, --benchmarks, --sizes, ... (SCALE_OPTIONS)
    mpi_rsh_agent: RshAgentOption = None,
    mpi_yield: MpiYieldOption = None,
    launcher: LauncherOption = "mpirun",
    json_out: JsonOption = False,
    wide: WideOption = False,
    max_minutes: MaxMinutesOption = None,
    topology: TopologyOption = None,
    nodes: NodesOption = None, exclude: ExcludeOption = None, hostfile: HostfileOption = None,
    connection: Connection = FROM_OPTIONS,
    testbed: TestbedOption = False, db: DbOption = DEFAULT_DB,
) -> None:
    """SCAB: one benchmark over growing node counts, each count alone, sorted and shuffled; oversubscribed uplinks.

    Each node count runs alone on the cluster, from the sorted list and from a
    list shuffled again every repetition.  A shuffled curve that falls with the
    count while the sorted one holds says the links between switches do not
    carry the traffic that crosses them (with --topology: whose uplink)."""
    from oddnode.readings.partition import scale_counts
    from oddnode.measure.set.runner import run_scale

    with user_errors():
        options = ScaleOptions(mpi_yield=testbed if mpi_yield is None else mpi_yield,
                               **_job_settings(order, seed, launcher, option_values))
    with network_run(topology, nodes, exclude, hostfile, connection, testbed, db) as (target, store):
        with user_errors():
            chosen = scale_counts(len(target.nodes), options.counts)
            job = options.job(target, max(chosen), rsh_agent=mpi_rsh_agent)
            budget = run_budget(max_minutes, _estimates(options, "scale", chosen, repetitions, store))
            runs, stopped = _run_orderings(options.orderings, "scale", lambda ordering, progress: run_scale(
                store, target, job, ordering, repetitions, counts=chosen, seed=seed, command=command_line(),
                on_progress=progress), json_out, budget)
        dataset = store.load_dataset()
    from oddnode.report.sets import scaling_view

    findings = _print(dataset, runs, SCALE_FINDINGS, lambda data, wide: console.print(
        scaling_view(data, None if wide else console.width) or ""), json_out, wide, budget)
    detail(summaries.stored_line(db, *(s.run_id for s in runs.values())), highlight=False,
           out=err_console if json_out else None)
    if stopped is not None:
        raise budget_stop(stopped, db)
    exit_for_findings(findings)


# The step options both commands take as flags, made from the options' fields
# (their help, default and check), in this order; scale's node counts first.
SET_OPTIONS = ("benchmarks", "sizes", "seconds_per_size", "command", "parser", "command_timeout", "files", "output")
SCALE_OPTIONS = ("counts", *SET_OPTIONS)


def register(app: typer.Typer) -> None:
    app.command("sets", rich_help_panel=SETS_PANEL)(with_step_option_values(sets_command, SetsOptions, SET_OPTIONS))
    app.command("scale", rich_help_panel=SETS_PANEL)(
        with_step_option_values(scale_command, ScaleOptions, SCALE_OPTIONS))
