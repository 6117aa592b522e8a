"""``oddnode import``: results that already exist, STAB's files or the
outputs of the tools oddnode has a parser for."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from oddnode.cli.common import DEFAULT_DB, DbOption, command_line, console, inform, open_db, user_errors
from oddnode.model import Direction
from oddnode.report import summaries

import_app = typer.Typer(help="Import results that already exist.", no_args_is_help=True)


@import_app.command("stab")
def import_stab_command(
    paths: Annotated[list[Path], typer.Argument(help="Result directories or plot files.")],
    db: DbOption = DEFAULT_DB,
    benchmark: Annotated[Optional[str], typer.Option(help="Benchmark name for a single plot file.")] = None,
    unit: Annotated[Optional[str], typer.Option(help="Unit where units.csv does not give one.")] = None,
    direction: Annotated[Optional[Direction], typer.Option(help="Which way is better, where units.csv does not say.")] = None,
    repetitions: Annotated[bool, typer.Option("--repetitions", help="Repeated labels are repetitions.")] = False,
) -> None:
    """Import STAB-style plot files or a results directory (plot.*, units.csv, inventory.csv, topology.csv, nodes,
    failed)."""
    from oddnode.io.stab import import_stab

    with user_errors(), open_db(db, read_only=False) as store:
        summary = import_stab(store, paths, benchmark=benchmark, unit=unit, direction=direction,
                              repetitions=repetitions, command=command_line())
    inform(summaries.stab_import_line(summary, db))
    for line in summaries.ignored_import_lines(summary):
        inform(line)


def tool_import_command(tool: str):
    """``oddnode import <tool> FILES…``: one command per registered parser."""

    def command(
        files: Annotated[list[Path], typer.Argument(help="Output files of the tool, one run each.")],
        label: Annotated[Optional[str], typer.Option(
            "--label", "--node", help="The node (or nodeA-nodeB pair, or node set) the files ran on.")] = None,
        label_from: Annotated[Optional[str], typer.Option(
            help="Regular expression with a group (?P<label>...) that finds the label in each file's path.")] = None,
        db: DbOption = DEFAULT_DB,
    ) -> None:
        from oddnode.io.tool_import import import_tool_outputs

        with user_errors(), open_db(db, read_only=False) as store:
            summary = import_tool_outputs(store, tool, files, label=label, label_from=label_from,
                                          command=command_line())
        inform(summaries.tool_import_line(summary, db))
        for line in summaries.invalid_import_lines(summary):
            console.print(line)

    command.__doc__ = f"Import {tool} outputs you already have, one file per run."
    return command


def register_tool_imports() -> None:
    from oddnode.io.tool_import import importable_tools

    for tool in importable_tools():
        import_app.command(tool)(tool_import_command(tool))


register_tool_imports()
