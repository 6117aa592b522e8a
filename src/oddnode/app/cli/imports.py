"""``oddnode import``: results that already exist, STAB's files or the
outputs of the tools oddnode has a parser for."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from oddnode.app.cli.common import (
    DEFAULT_DB,
    DbOption,
    command_line,
    console,
    inform,
    open_db,
    positive_number,
    user_errors,
)
from oddnode.core.model import Direction
from oddnode.report import summaries

if TYPE_CHECKING:
    from oddnode.store import Store

import_app = typer.Typer(help="Import results that already exist.", no_args_is_help=True)


@contextmanager
def store_to_import_into(db: Path) -> Iterator[Store]:
    """The store opened for writing.  The importers write in one
    transaction, so a failed import leaves an existing store as it was; a
    store this import created is removed again, so that no empty store is
    left to be judged later as if it held results."""
    created = [db, db.with_name(db.name + ".wal")]  # DuckDB's file and its write-ahead log
    existed = os.path.lexists(db)
    try:
        with open_db(db, read_only=False) as store:
            yield store
    except BaseException:
        if not existed:
            for path in created:
                path.unlink(missing_ok=True)
        raise


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
    from oddnode.store.stab import import_stab

    with user_errors(), store_to_import_into(db) as store:
        summary = import_stab(store, paths, benchmark=benchmark, unit=unit, direction=direction,
                              repetitions=repetitions, command=command_line())
    inform(summaries.stab_import_line(summary, db))
    for line in summaries.ignored_import_lines(summary):
        inform(line)


# The options of the profile imports, as `oddnode profile` has them.
ProfileJsonOption = Annotated[bool, typer.Option("--json", help="Print the profile as JSON.")]
ProfilePlotOption = Annotated[Optional[Path], typer.Option(
    "--plot", help="Also draw time by message size and compute vs MPI per rank (PNG or SVG).")]
ProfileWideOption = Annotated[bool, typer.Option("--wide", help="Every column and rank, however wide the lines get.")]


@import_app.command("mpip")
def import_mpip_command(
    file: Annotated[Path, typer.Argument(help="An mpiP report (the .mpiP file mpiP writes at MPI_Finalize).")],
    json_out: ProfileJsonOption = False,
    plot: ProfilePlotOption = None,
    wide: ProfileWideOption = False,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Import an mpiP report as an MPI profile: time per call, site, rank and message size; report it."""
    from oddnode.app.cli.profile import store_and_show
    from oddnode.parsers.mpip import read_mpip

    with user_errors():
        profile = read_mpip(file)
    store_and_show(profile, db, json_out, plot, wide)


@import_app.command("itc")
def import_itc_command(
    file: Annotated[Path, typer.Argument(help="An Intel Trace Collector ASCII dump (xstftool FILE.stf --dump).")],
    ticks_per_second: Annotated[float, typer.Option(
        "--ticks-per-second", callback=positive_number, help="The trace's clock resolution: timestamps and durations are in these ticks.")],
    hosts: Annotated[Optional[str], typer.Option(
        "--hosts", help="The host of each rank, comma-separated in rank order (the dump names none).")] = None,
    json_out: ProfileJsonOption = False,
    plot: ProfilePlotOption = None,
    wide: ProfileWideOption = False,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Import an Intel Trace Collector ASCII dump as an MPI profile (GLOBALOP and EXCHEXT records); report it."""
    from oddnode.app.cli.profile import store_and_show
    from oddnode.parsers.itc import read_itc

    rank_hosts = None if hosts is None else {rank: host.strip() for rank, host in enumerate(hosts.split(","))}
    with user_errors():
        profile = read_itc(file, ticks_per_second=ticks_per_second, hosts=rank_hosts)
    store_and_show(profile, db, json_out, plot, wide)


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
        from oddnode.store.tool_import import import_tool_outputs

        with user_errors(), store_to_import_into(db) as store:
            summary = import_tool_outputs(store, tool, files, label=label, label_from=label_from,
                                          command=command_line())
        inform(summaries.tool_import_line(summary, db))
        for line in summaries.invalid_import_lines(summary):
            console.print(line)

    command.__doc__ = f"Import {tool} outputs you already have, one file per run."
    return command


def register_tool_imports() -> None:
    from oddnode.store.tool_import import importable_tools

    for tool in importable_tools():
        import_app.command(tool)(tool_import_command(tool))


register_tool_imports()


def register(app: typer.Typer) -> None:
    from oddnode.app.cli.analysis import RESULTS_PANEL

    app.add_typer(import_app, name="import", rich_help_panel=RESULTS_PANEL)
