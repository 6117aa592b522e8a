"""The synchronisation sensitivity command (``oddnode sync``): our
bulk-synchronous kernel on node sets of growing size, whom the others wait
for, and the slowdown against the concurrency."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Optional

import typer

from oddnode.core.connection import Connection
from oddnode.app.cli.common import (
    DEFAULT_DB,
    DbOption,
    ExcludeOption,
    FROM_OPTIONS,
    HostfileOption,
    NodesOption,
    TestbedOption,
    TopologyOption,
    WideOption,
    command_line,
    console,
    detail,
    err_console,
    exit_for_findings,
    inform,
    print_json,
    quiet,
    user_errors,
)
from oddnode.app.cli.interconnect import NETWORK_REPETITIONS, MpiYieldOption, network_run
from oddnode.app.cli.sets import SETS_PANEL, OrderOption, RshAgentOption, SeedOption, _names, _run_orderings
from oddnode.app.cli.step_flags import FROM_FLAGS, OptionValues, with_step_option_values
from oddnode.measure.set.sync import SyncOptions
from oddnode.report import summaries

if TYPE_CHECKING:
    from oddnode.report import documents

SYNC_FINDINGS = ("sync-laggard",)
# The step options the command takes as flags, made from the options' fields
# (their help, default and check), in this order.
SYNC_OPTIONS = ("counts", "quantum_us", "iterations", "operation", "kernel", "port")


def sync_command(
    nodeset: Annotated[Optional[str], typer.Argument(
        metavar="NODESET", help="Nodes, ClusterShell syntax (the same as -w).", show_default=False)] = None,
    option_values: OptionValues = FROM_FLAGS,  # --sizes, --quantum-us, ... (SYNC_OPTIONS)
    extrapolate: Annotated[Optional[int], typer.Option(
        "--extrapolate", metavar="TASKS", help="Extend the line time = a + b·ranks to this many ranks (seaborg: "
                                               "1250).")] = None,
    order: OrderOption = "shuffled",
    repetitions: Annotated[int, typer.Option(
        "-r", "--repetitions", help="Runs of every node count (shuffled: a new shuffle each time).")]
    = NETWORK_REPETITIONS,
    seed: SeedOption = 0,
    mpi_rsh_agent: RshAgentOption = None,
    mpi_yield: MpiYieldOption = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the runs, the node and scaling tables and the "
                                                          "findings as JSON.")] = False,
    wide: WideOption = False,
    topology: TopologyOption = None,
    nodes: NodesOption = None, exclude: ExcludeOption = None, hostfile: HostfileOption = None,
    connection: Connection = FROM_OPTIONS,
    testbed: TestbedOption = False, db: DbOption = DEFAULT_DB,
) -> None:
    """Bulk-synchronous iterations on 2, 4, ..., N nodes: the node the others wait for, the slowdown with the ranks.

    Every iteration each rank computes the same work quantum, then an
    allreduce or a barrier; each rank times its compute and its wait.  Each
    node count runs alone, R times.  Then per node how often it arrived last
    (the others waited for it) against chance and the extra wait it caused;
    per node count the time per iteration and the efficiency, with the line
    time = a + b·ranks and, with --extrapolate, its value at that many
    ranks; and the sync-laggard findings."""
    from oddnode.readings.partition import scale_counts
    from oddnode.measure.set.sync import choose_kernel, run_sync

    if nodeset is not None and nodes is not None:
        raise typer.BadParameter("give the nodes once: as NODESET or with -w", param_hint="NODESET")
    with user_errors():
        if extrapolate is not None and extrapolate < 2:
            raise ValueError(f"--extrapolate wants a number of ranks of at least 2, not {extrapolate}")
        options = SyncOptions(orderings=_names(order) or (), seed=seed,
                              mpi_yield=testbed if mpi_yield is None else mpi_yield, **option_values)
    with network_run(topology, nodeset or nodes, exclude, hostfile, connection, testbed,
                     db) as (target, store):
        with user_errors():
            chosen = scale_counts(len(target.nodes), options.counts)
            kernel_name, note = choose_kernel(target, options.kernel)
            inform(summaries.dim_lines([note])[0], highlight=False, out=err_console if json_out else None)
            runs, _ = _run_orderings(options.orderings, "sync", lambda ordering, progress: run_sync(
                store, target, options, ordering, repetitions, counts=chosen, kernel=kernel_name,
                rsh_agent=mpi_rsh_agent, command=command_line(), on_progress=progress), json_out)
        dataset = store.load_dataset()
    from oddnode.judge.analysis import analyze
    from oddnode.report.sync import print_sync, sync_json
    from oddnode.report.terminal import findings_by_nodes

    findings = [f for f in analyze(dataset, correlations=False).findings if f.kind in SYNC_FINDINGS]
    if json_out:
        document: documents.Sync = {"kernel": kernel_name, "runs": {o: s.to_json() for o, s in runs.items()},
                    "sync": sync_json(dataset, extrapolate), "findings": [f.to_json() for f in findings]}
        print_json(document)
    else:
        if not quiet():
            print_sync(console, dataset, findings, extrapolate, wide)
        console.print(findings_by_nodes(findings) if findings else
                      "No sync laggard: every node was last about as often as chance has it, or cost too little.")
    detail(summaries.stored_line(db, *(s.run_id for s in runs.values())), highlight=False,
           out=err_console if json_out else None)
    exit_for_findings(findings)


def register(app: typer.Typer) -> None:
    app.command("sync", rich_help_panel=SETS_PANEL)(with_step_option_values(sync_command, SyncOptions, SYNC_OPTIONS))
