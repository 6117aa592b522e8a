"""The commands that look at the nodes themselves: their inventory of facts
and the check of those facts against what is expected."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

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
    TimeoutOption,
    command_line,
    console,
    could_not_run,
    detail,
    err_console,
    exit_for_findings,
    inform,
    open_db,
    print_json,
    selected_target,
    testbed_errors,
    user_errors,
)
from oddnode.measure.plan import PROBE_TIMEOUT
from oddnode.report import summaries
from oddnode.report.text import literal

NODES_PANEL = "Nodes"
JsonOption = Annotated[bool, typer.Option(
    "--json", help="Print the result as one JSON document (notes go to stderr).")]


def print_unanswered(result, out=None) -> None:
    """Nodes that gave no inventory, then what the probe skipped (and where), folded."""
    for line in summaries.unanswered_lines(result):
        (out or console).print(line)
    for line in summaries.skipped_probe_lines(result):
        inform(line, out=out, highlight=False)


def inventory_command(
    nodes: NodesOption = None, exclude: ExcludeOption = None, hostfile: HostfileOption = None,
    connection: Connection = FROM_OPTIONS,
    timeout: TimeoutOption = PROBE_TIMEOUT, testbed: TestbedOption = False, db: DbOption = DEFAULT_DB,
    snapshot: Annotated[Optional[Path], typer.Option(help="Write an expectations file from the majority values.")] = None,
    json_out: JsonOption = False,
) -> None:
    """Collect every node's facts and print those that differ between nodes.

    The facts: CPU, memory, BIOS, kernel, NICs, GPUs, disks, libraries,
    processes.  Exit 1 when a fact differs or a node gave no inventory, 3
    when none did."""
    from oddnode.app.check import collect_inventory
    from oddnode.findings import find_all
    from oddnode.report.terminal import findings_by_nodes

    with user_errors(), testbed_errors():
        target = selected_target(nodes, exclude, hostfile, connection, testbed)
        with open_db(db, read_only=False, hold=False) as store:
            result = collect_inventory(store, target, timeout, command_line())
            dataset = store.load_dataset()
        out = err_console if json_out else None
        inform(summaries.inventory_line(result, target, db), out=out)
        print_unanswered(result, out)
        findings = find_all(dataset, rules=["inconsistent-fact"])
        if json_out:
            from oddnode.report.nodes_json import inventory_json

            print_json(inventory_json(result, result.run_id, target, findings, dataset.inventory_nodes()))
        elif findings:
            console.print(findings_by_nodes(findings))
        else:
            console.print("Every fact has the same value on every node that answered.")
        if snapshot:
            from oddnode.findings.expectations import snapshot as write_snapshot

            from oddnode.core.atomic import write_atomically

            write_atomically(snapshot, write_snapshot(dataset.facts, sorted(result.reports)).encode("utf-8"))
            inform(f"expectations written to {literal(snapshot)}: edit it, then run oddnode diagnose --expect "
                   f"{literal(snapshot)}", out=out)
    if not result.reports:
        raise could_not_run(f"no node gave an inventory ({len(result.unreachable)} unreachable, "
                            f"{len(result.failed)} failed: see above)")
    exit_for_findings(findings, problems=bool(result.unreachable or result.failed))


def diagnose_command(
    expect: Annotated[Path, typer.Option("--expect", help="Expectations file (YAML).")],
    db: DbOption = DEFAULT_DB,
    json_out: JsonOption = False,
) -> None:
    """Check the stored facts against an expectations file; exit 1 on any failure."""
    from oddnode.findings.expectations import check_expectations, load_expectations
    from oddnode.report.terminal import expectation_table

    with user_errors(), open_db(db, read_only=False) as store:
        facts = store.load_facts()
        nodes = sorted({node for per_node in facts.values() for node in per_node})
        expectations = load_expectations(expect)
        report = check_expectations(expectations, facts, nodes)
        store.record_findings(command_line(), report.failures)
    if json_out:
        from oddnode.report.nodes_json import diagnose_json

        print_json(diagnose_json(expectations, facts, nodes, report, str(expect)))
    else:
        inform(expectation_table(report))
        if report.failures:
            from oddnode.report.terminal import findings_by_nodes

            console.print(findings_by_nodes(report.failures))
    detail(f"[dim]findings recorded in {literal(db)}[/]", out=err_console if json_out else None, highlight=False)
    exit_for_findings(report.failures, problems=bool(report.failures))


def register(app: typer.Typer) -> None:
    app.command("inventory", rich_help_panel=NODES_PANEL)(inventory_command)
    app.command("diagnose", rich_help_panel=NODES_PANEL)(diagnose_command)
