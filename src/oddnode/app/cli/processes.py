"""``oddnode processes``: which commands every node runs over an interval,
by process accounting, and seaborg's asymmetry-ratio table of the nodes
(or groups of nodes) on which some run far more often than on the rest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

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
    fail,
    inform,
    json_default,
    open_db,
    positive_seconds,
    progress_run,
    quiet,
    seconds_or_zero,
    selected_target,
    testbed_errors,
    user_errors,
)
from oddnode.app.cli.nodes import NODES_PANEL
from oddnode.core.nodes import fold
from oddnode.report import WIDE, summaries

# Defaults, written out so that the help needs no import of the collector;
# a unit test keeps them equal to the library's.
DEFAULT_SECONDS = 60.0
DEFAULT_MARGIN = 60.0
DEFAULT_TOP = 20


def _groups(store, nodes: list[str], fact: str | None, groups_file: Path | None) -> tuple[dict[str, str] | None,
                                                                                          str | None, list[str]]:
    """Node -> group from an inventory fact or a topology file, what made
    them, and the nodes without a group."""
    if fact is not None and groups_file is not None:
        raise fail("--groups and --groups-file both make groups: give one")
    if fact is not None:
        from oddnode.readings.accounting import groups_from_fact

        mapping, missing = groups_from_fact(store.load_facts(), fact, nodes)
        return mapping, fact, missing
    if groups_file is not None:
        from oddnode.core.topology import read_topology

        mapping = read_topology(groups_file)
        return mapping, str(groups_file), [node for node in nodes if node not in mapping]
    return None, None, []


def processes_command(
    seconds: Annotated[float, typer.Option(
        "--seconds", callback=seconds_or_zero,
        help="Seconds to account on every node at once (0 with --pacct: the whole file).")]
    = DEFAULT_SECONDS,
    pacct: Annotated[Optional[str], typer.Option(
        "--pacct", help="An accounting file on the nodes to read instead (e.g. /var/log/account/pacct; a rotated "
                        ".gz with --seconds 0).")] = None,
    method: Annotated[str, typer.Option(
        "--method", help="auto: the site's accounting if on, else our own (acct(2), root), else /proc sampled; "
                         "acct or proc to insist on one.")] = "auto",
    groups: Annotated[Optional[str], typer.Option(
        "--groups", help="Compare groups of nodes made by a stored inventory fact (bios_date: old against new "
                         "nodes).")] = None,
    groups_file: Annotated[Optional[Path], typer.Option(
        "--groups-file", help="Compare the groups of a topology file ('GROUP NODESET' a line).")] = None,
    show_all: Annotated[bool, typer.Option("--all", help="Every command in the table, not only those that stand "
                                                         "out.")] = False,
    top: Annotated[int, typer.Option("--top", help="Rows of each table at most (0: no limit).")] = DEFAULT_TOP,
    alpha: AlphaOption = DEFAULT_ALPHA,
    json_out: Annotated[bool, typer.Option("--json", help="Print the counts, tables and findings as JSON.")] = False,
    wide: WideOption = False,
    timeout: Annotated[float, typer.Option(
        "--timeout", callback=positive_seconds, help="Seconds a node may take beyond --seconds.")] = DEFAULT_MARGIN,
    nodes: NodesOption = None, exclude: ExcludeOption = None, hostfile: HostfileOption = None,
    connection: Connection = FROM_OPTIONS,
    testbed: TestbedOption = False, db: DbOption = DEFAULT_DB,
) -> None:
    """Count every command's executions and CPU time on every node over an interval; the nodes where some run far more often.

    Linux process accounting (the site's, or oddnode's own for the interval,
    per PID namespace), else /proc sampled every 10 ms.  Prints seaborg's
    asymmetry-ratio table: per node (or group), command, executions, the
    rest's per node, and the ratio, highest first; then process-asymmetry
    findings naming each node and its fingerprint."""
    from oddnode.measure.collect.accounting import collect_processes, store_processes
    from oddnode.readings.accounting import asymmetry_table
    from oddnode.findings import Sensitivity
    from oddnode.findings.process_asymmetry import asymmetry_findings
    from oddnode.report.processes import (
        asymmetry_view,
        method_lines,
        note_lines,
        nothing_stands_out,
        undecided_line,
        processes_json,
        unanswered_lines,
    )
    from oddnode.report.terminal import findings_by_nodes

    out = err_console if json_out else None
    with user_errors(), testbed_errors():
        sensitivity = Sensitivity(alpha=alpha)
        if top < 0:
            raise typer.BadParameter(f"--top is a number of rows >= 0, not {top}", param_hint="--top")
        target = selected_target(nodes, exclude, hostfile, connection, testbed)
        with open_db(db, read_only=False, hold=False) as store:
            mapping, grouped_by, ungrouped = _groups(store, target.nodes, groups, groups_file)
            store.release()  # others may read the store while the nodes are accounted
            result = progress_run(f"processes: {seconds:g} s on {escape(target.nodeset)}", lambda progress: collect_processes(
                target.transport, target.nodes, seconds, pacct, method, margin=timeout))
            run_id = store_processes(store, target, result, command_line())
    tables = [asymmetry_table(result.reports)]
    if mapping is not None:
        tables.append(asymmetry_table(result.reports, mapping, grouped_by))
    findings = [f for table in tables for f in asymmetry_findings(table, sensitivity.alpha)]
    if json_out:
        typer.echo(json.dumps(processes_json(result.reports, result.reasons, tables, findings, run_id), indent=2,
                              default=json_default))
    inform(f"processes: {len(result.reports)} of {len(target.nodes)} nodes accounted over {seconds:g} s "
           f"({escape(target.nodeset)})", highlight=False, out=out)
    for line in method_lines(result.reports):
        inform(escape(line), highlight=False, out=out)
    for line in note_lines(result.reports):
        inform(f"[dim]{escape(line)}[/]", highlight=False, out=out)
    for line in unanswered_lines(result.reasons, result.unreachable):
        (err_console if json_out else console).print(line, highlight=False)
    if ungrouped:
        inform(f"[dim]{escape(fold(ungrouped))}: in no group of {escape(grouped_by)}, left out of the group table[/]",
               highlight=False, out=out)
    if not json_out:
        if not quiet():
            for table in tables:
                view = asymmetry_view(table, None if wide else console.width, show_all, top or None)
                if view is None or not view.row_count:
                    console.print(nothing_stands_out(table))
                elif wide:
                    console.print(view, width=WIDE, crop=False)
                else:
                    console.print(view)
        if findings:
            console.print(findings_by_nodes(findings))
        else:
            undecided = [line for table in tables if (line := undecided_line(table, sensitivity.alpha))]
            console.print(escape(undecided[0]) if undecided
                          else "No node or group runs commands far more often than the others.", highlight=False)
    detail(summaries.stored_line(db, run_id), highlight=False, out=out)
    if not result.reports:
        raise could_not_run(f"no node of {target.nodeset} was accounted (see above)")
    exit_for_findings(findings, problems=bool(result.unreachable or result.failed))


def register(app: typer.Typer) -> None:
    app.command("processes", rich_help_panel=NODES_PANEL)(processes_command)
