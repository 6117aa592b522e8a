"""``oddnode numa``: inside every node, the memory bandwidth with the
threads on NUMA node i and the memory on NUMA node j, and the shared-memory
ping-pong (and, where Open MPI is installed, the MPI one on the same CPUs)
between a CPU of NUMA node i and one of j: the matrices, local against
remote, and the nodes whose NUMA nodes are slower than the others'."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.markup import escape

from oddnode.core.connection import Connection
from oddnode.app.cli.common import (
    AlphaOption,
    DEFAULT_ALPHA,
    DEFAULT_DB,
    DbOption,
    ExcludeOption,
    FROM_OPTIONS,
    HostfileOption,
    NodesOption,
    TestbedOption,
    WideOption,
    command_line,
    console,
    could_not_run,
    detail,
    err_console,
    exit_for_findings,
    inform,
    open_db,
    print_json,
    progress_run,
    quiet,
    selected_target,
    testbed_errors,
    user_errors,
)
from oddnode.app.cli.nodes import NODES_PANEL
from oddnode.app.cli.step_flags import FROM_FLAGS, OptionValues, with_step_option_values
# The library's defaults: -r's, and the others under the names this module
# had for them (its option flags take theirs from NumaOptions' fields).
from oddnode.measure.node.numa import (  # noqa: F401
    DEFAULT_BANDWIDTH_BYTES,
    DEFAULT_LATENCY_BYTES,
    DEFAULT_NTIMES,
    DEFAULT_REPETITIONS,
    DEFAULT_SECONDS_PER_SIZE,
    NumaOptions,
)
from oddnode.report import summaries

if TYPE_CHECKING:
    from oddnode.report import documents

NUMA_FINDINGS = ("numa-slow", "numa-remote-ratio")
# The options the command takes as flags, made from the options' fields
# (their help, default and check), in this order.
NUMA_OPTIONS = ("memory", "pingpong", "mpi", "elements", "ntimes", "threads", "latency_bytes", "bandwidth_bytes",
                "seconds_per_size")


def numa_command(
    nodeset: Annotated[Optional[str], typer.Argument(
        metavar="NODES", help="Nodes, ClusterShell syntax (the same as -w).", show_default=False)] = None,
    repetitions: Annotated[int, typer.Option(
        "-r", "--repetitions", help="Runs of every cell; the best counts.")] = DEFAULT_REPETITIONS,
    option_values: OptionValues = FROM_FLAGS,  # --memory, --pingpong, ... (NUMA_OPTIONS)
    every_node: Annotated[bool, typer.Option(
        "--all", help="Every node's matrices (default: the cluster's median and the nodes the findings name).")]
    = False,
    alpha: AlphaOption = DEFAULT_ALPHA,
    json_out: Annotated[bool, typer.Option("--json", help="Print the layouts, the matrices and the findings as "
                                                          "JSON.")] = False,
    wide: WideOption = False,
    nodes: NodesOption = None, exclude: ExcludeOption = None, hostfile: HostfileOption = None,
    connection: Connection = FROM_OPTIONS,
    testbed: TestbedOption = False, db: DbOption = DEFAULT_DB,
) -> None:
    """The NUMA matrices of every node: bandwidth with threads on NUMA node i and memory on j, ping-pong between them.

    Our memory kernel pins its threads to the CPUs of NUMA node i and binds
    its arrays to the memory of node j (sched_setaffinity, mbind; no numactl
    needed), and checks that it got them; our shared-memory ping-pong runs
    between a CPU of node i and one of node j (latency at --latency-bytes,
    bandwidth at --bandwidth-bytes), and where a node has mpicc and mpirun
    our MPI ping-pong on the same two CPUs (two ranks started by mpirun on
    the node, each pinning itself).  Every cell runs on every node at once,
    R times, and is compared with the same cell on the other nodes: the
    numa-slow and numa-remote-ratio findings.  A machine with one NUMA node
    runs the 1x1 case."""
    from oddnode.measure.node.numa import run_numa

    if nodeset is not None and nodes is not None:
        raise typer.BadParameter("give the nodes once: as NODES or with -w", param_hint="NODES")
    out = err_console if json_out else None
    with user_errors(), testbed_errors():
        from oddnode.findings import Sensitivity

        sensitivity = Sensitivity(alpha=alpha)
        if repetitions < 1:
            raise typer.BadParameter(f"--repetitions is a number >= 1, not {repetitions}", param_hint="-r")
        options = NumaOptions(**option_values)
        target = selected_target(nodeset or nodes, exclude, hostfile, connection, testbed)
        with open_db(db, read_only=False, hold=False) as store:
            run = progress_run(f"numa: {escape(target.nodeset)}", lambda progress: run_numa(
                store, target, options, repetitions, command=command_line(), on_progress=progress))
            dataset = store.load_dataset()
    from oddnode.judge.analysis import analyze
    from oddnode.report.numa import numa_json, print_numa
    from oddnode.report.terminal import findings_by_nodes

    findings = [f for f in analyze(dataset, sensitivity=sensitivity, correlations=False).findings
                if f.kind in NUMA_FINDINGS]
    cells = len(run.cells)
    inform(f"numa: {len(run.layouts)} of {len(target.nodes)} nodes, {cells} cells, {repetitions} repetitions each "
           f"({escape(target.nodeset)})", highlight=False, out=out)
    for node, reason in run.unanswered.items():
        (err_console if json_out else console).print(f"{escape(node)}: no NUMA layout: {escape(reason)}",
                                                     highlight=False)
    for skipped, reason in run.mpi_skipped.items():
        inform(f"numa: MPI ping-pong not run on {escape(skipped)}: {escape(reason)}", highlight=False, out=out)
    for cell, summary in run.cells:
        trouble = {node: counts for node, counts in summary.per_node.items() if counts["ok"] < summary.repetitions}
        for node, counts in trouble.items():
            said = ", ".join(f"{count} {outcome}" for outcome, count in counts.items() if count)
            inform(f"[dim]{escape(cell.name)} on {escape(node)}: {escape(said)} (oddnode failures shows why)[/]",
                   highlight=False, out=out)
    if json_out:
        document: documents.Numa = {"run": run.to_json(), "numa": numa_json(dataset),
                                    "findings": [f.to_json() for f in findings]}
        print_json(document)
    else:
        if not quiet():
            print_numa(console, dataset, findings, wide, every_node)
        console.print(findings_by_nodes(findings) if findings else
                      "No NUMA node stands out: every cell and every remote/local ratio is within the other "
                      "nodes' spread (or there are too few nodes to judge).")
    detail(summaries.stored_line(db, run.run_id), highlight=False, out=out)
    if not run.layouts:
        raise could_not_run(f"no node of {target.nodeset} gave its NUMA layout (see above)")
    exit_for_findings(findings, problems=bool(run.unanswered))


def register(app: typer.Typer) -> None:
    app.command("numa", rich_help_panel=NODES_PANEL)(with_step_option_values(numa_command, NumaOptions, NUMA_OPTIONS))
