"""``oddnode affinity``: every node's sockets, NUMA nodes, cores and CPUs,
and for the processes asked for, where they may run, where they ran and
where their memory lives; the findings of oversubscribed cores, unpinned
ranks, remote memory and NUMA nodes short of memory or CPUs."""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.markup import escape

from oddnode.core.connection import Connection
from oddnode.app.cli.common import (
    DEFAULT_DB,
    DbOption,
    ExcludeOption,
    FROM_OPTIONS,
    HostfileOption,
    NodesOption,
    TestbedOption,
    WideOption,
    console,
    command_line,
    could_not_run,
    detail,
    err_console,
    exit_for_findings,
    fail,
    inform,
    open_db,
    positive_seconds,
    print_json,
    progress_run,
    quiet,
    selected_target,
    testbed_errors,
    user_errors,
)
from oddnode.report import summaries
from oddnode.app.cli.nodes import NODES_PANEL

# Defaults, written out so that the help needs no import of the sampler;
# a unit test keeps them equal to the library's.
DEFAULT_SECONDS = 2.0
DEFAULT_MARGIN = 30.0
DEFAULT_TOP = 40


def _pids(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        pids = [int(word) for word in text.split(",") if word.strip()]
    except ValueError:
        raise typer.BadParameter(f"PIDs are whole numbers separated by commas, not {text!r}",
                                 param_hint="--pid") from None
    if not pids or min(pids) <= 0:
        raise typer.BadParameter(f"PIDs are whole numbers > 0, not {text!r}", param_hint="--pid")
    return pids


def affinity_command(
    nodeset: Annotated[Optional[str], typer.Argument(
        metavar="NODES", help="Nodes, ClusterShell syntax (the same as -w).", show_default=False)] = None,
    pid: Annotated[Optional[str], typer.Option("--pid", help="Processes by PID, comma-separated (1234,1240).")]
    = None,
    command: Annotated[Optional[str], typer.Option(
        "--command", help="Every process of this command name on each node (its comm: a.out, lmp, python3).")]
    = None,
    slurm_job: Annotated[Optional[str], typer.Option(
        "--slurm-job", help="A Slurm job's processes on each node (scontrol listpids JOBID).")] = None,
    seconds: Annotated[float, typer.Option(
        "--seconds", callback=positive_seconds, help="Seconds to sample where each thread runs.")] = DEFAULT_SECONDS,
    show_all: Annotated[bool, typer.Option("--all", help="Every thread in the table, not only the busy ones.")]
    = False,
    top: Annotated[int, typer.Option("--top", help="Thread rows at most (0: no limit).")] = DEFAULT_TOP,
    json_out: Annotated[bool, typer.Option("--json", help="Print the topologies, samples and findings as JSON.")]
    = False,
    wide: WideOption = False,
    timeout: Annotated[float, typer.Option(
        "--timeout", callback=positive_seconds, help="Seconds a node may take beyond --seconds.")] = DEFAULT_MARGIN,
    nodes: NodesOption = None, exclude: ExcludeOption = None, hostfile: HostfileOption = None,
    connection: Connection = FROM_OPTIONS,
    testbed: TestbedOption = False, db: DbOption = DEFAULT_DB,
) -> None:
    """Sockets, NUMA nodes, cores and memory of every node; where a job's processes may run, ran and keep their memory.

    The topology comes from sysfs (cross-checked with hwloc's lstopo where
    installed).  With --pid, --command or --slurm-job, each process's and
    thread's cpuset, Cpus_allowed_list and Mems_allowed_list, the CPU each
    thread runs on sampled over --seconds, and its memory per NUMA node
    (numa_maps).  Findings: oversubscribed-core, unpinned, remote-memory,
    numa-imbalance, and NUMA facts that differ between nodes.  Every
    node's report is stored as a run (--db), for `oddnode analyze`."""
    from oddnode.measure.collect.affinity import collect_affinity, store_affinity
    from oddnode.findings import find_all
    from oddnode.findings.affinity import AFFINITY_DETAILS, AFFINITY_KINDS
    from oddnode.core.model import Dataset
    from oddnode.report.affinity import affinity_json, note_lines, topology_lines
    from oddnode.report.processes import unanswered_lines

    out = err_console if json_out else None
    with user_errors(), testbed_errors():
        if nodeset is not None and nodes is not None:
            raise fail("NODES and -w both name the nodes: give one")
        pids = _pids(pid)
        if top < 0:
            raise typer.BadParameter(f"--top is a number of rows >= 0, not {top}", param_hint="--top")
        target = selected_target(nodeset or nodes, exclude, hostfile, connection, testbed)
        with open_db(db, read_only=False, hold=False) as store:
            store.release()  # others may read the store while the nodes are sampled
            result = progress_run(f"affinity: {seconds:g} s on {escape(target.nodeset)}",
                                  lambda progress: collect_affinity(target.transport, target.nodes, pids, command,
                                                                    slurm_job, seconds, margin=timeout))
            run_id = store_affinity(store, target, result, command_line())
        facts: dict[str, dict[str, str]] = {}
        for node, report in result.reports.items():
            for key, value in report.topology.facts().items():
                facts.setdefault(key, {})[node] = value
        dataset = Dataset(facts=facts, details={AFFINITY_DETAILS: {node: [report.to_json()]
                                                                   for node, report in result.reports.items()}})
        findings = find_all(dataset, rules=[*AFFINITY_KINDS, "inconsistent-fact"])
    reports = result.reports
    if json_out:
        print_json(affinity_json(reports, result.reasons, findings))
    inform(f"affinity: {len(reports)} of {len(target.nodes)} nodes answered ({escape(target.nodeset)})", highlight=False,
           out=out)
    for line in topology_lines(reports):
        inform(escape(line), highlight=False, out=out)
    for line in note_lines(reports):
        inform(f"[dim]{escape(line)}[/]", highlight=False, out=out)
    for line in unanswered_lines(result.reasons, result.unreachable):
        (err_console if json_out else console).print(line, highlight=False)
    if not json_out:
        _print_views(reports, findings, wide, show_all, top)
    detail(summaries.stored_line(db, run_id), highlight=False, out=out)
    if not reports:
        raise could_not_run(f"no node of {target.nodeset} answered (see above)")
    exit_for_findings(findings, problems=bool(result.unreachable or result.failed))


def _print_views(reports, findings, wide: bool, show_all: bool, top: int) -> None:
    """The tables (unless -q) and the findings, INFO ones too, or what is fine."""
    from oddnode.core.model import Severity
    from oddnode.report.affinity import numa_view, process_view, thread_view
    from oddnode.report.terminal import findings_by_nodes, print_views

    width = None if wide else console.width
    if not quiet():
        views = [numa_view(reports, width), process_view(reports, width),
                 thread_view(reports, width, show_all, top or None)]
        print_views(console, [view for view in views if view is not None], wide)
    if findings:
        console.print(findings_by_nodes(findings, Severity.INFO))
    elif any(report.processes for report in reports.values()):
        console.print("No busy thread shares a CPU or moves, no busy process keeps its memory on another NUMA "
                      "node, and no NUMA node is short of memory or CPUs.")
    else:
        console.print("No NUMA node is short of memory or CPUs.")


def register(app: typer.Typer) -> None:
    app.command("affinity", rich_help_panel=NODES_PANEL)(affinity_command)
