"""``oddnode profile``: run an MPI application under our PMPI profiler, or
show and list stored profiles; and the report that ``oddnode import mpip``
and ``oddnode import itc`` print for the profiles they store."""

from __future__ import annotations

import shlex
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
    command_line,
    console,
    err_console,
    fail,
    inform,
    open_db,
    positive_seconds,
    print_json,
    user_errors,
)
from oddnode.report.text import literal

# With the set commands: a profile says which job shapes and message sizes a placement must serve.
PROFILE_PANEL = "MPI applications"

ProfileJsonOption = Annotated[bool, typer.Option(
    "--json", help="Print the profile as JSON (its calls per rank and size, the derived numbers, its id).")]
PlotOption = Annotated[Optional[Path], typer.Option(
    "--plot", help="Also draw time by message size (stacked by call) and compute vs MPI per rank, as PNG or SVG.")]


def show_profile(profile, profile_id: int | None, json_out: bool, plot: Path | None, wide: bool) -> None:
    """The report of one profile on the terminal, or its JSON; its plot."""
    from oddnode.report.profile import print_profile, profile_json, write_plot

    if plot is not None:
        with user_errors():
            write_plot(profile, plot)
    if json_out:
        print_json(profile_json(profile, profile_id))
    else:
        print_profile(console, profile, profile_id, wide)
    if plot is not None:
        inform(f"plot written to {literal(plot)}", highlight=False, out=err_console if json_out else None)


def store_and_show(profile, db: Path, json_out: bool, plot: Path | None, wide: bool) -> int:
    """Store a profile (with the oddnode command line as its run), then report it."""
    with user_errors(), open_db(db, read_only=False) as store:
        profile_id = store.add_profile(profile, command=command_line())
    show_profile(profile, profile_id, json_out, plot, wide)
    inform(f"stored as profile {profile_id} in {literal(db)}", highlight=False, out=err_console if json_out else None)
    return profile_id


def _stored_id(text: str, store) -> int:
    from oddnode.store import StoreError

    if text == "latest":
        latest = store.latest_profile_id()
        if latest is None:
            raise StoreError(f"no profile in {store.path}: run oddnode profile -- COMMAND or oddnode import mpip first")
        return latest
    try:
        return int(text)
    except ValueError:
        raise typer.BadParameter(f"a profile id or 'latest', not {text!r}", param_hint="--show") from None


def _exit_status(returncode: int) -> int:
    """The application's status as ours: a signal (negative) as the shell writes it, 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


def profile_command(
    command: Annotated[Optional[list[str]], typer.Argument(
        help="The MPI launch to profile, after '--': mpirun -np 4 ./app ARGS (or srun ...).",
        metavar="COMMAND", show_default=False)] = None,
    show: Annotated[Optional[str], typer.Option(
        "--show", metavar="ID|latest", help="Report a stored profile instead of running one.")] = None,
    list_: Annotated[bool, typer.Option("--list", help="List the stored profiles.")] = False,
    timeout: Annotated[Optional[float], typer.Option(
        "--timeout", callback=positive_seconds, help="Seconds the application may run before it is stopped (default: no limit).")] = None,
    work_dir: Annotated[Optional[Path], typer.Option(
        "--work-dir", help="Directory rank 0 writes the gathered profile file to, kept there (default: the current one).")] = None,
    json_out: ProfileJsonOption = False,
    plot: PlotOption = None,
    wide: Annotated[bool, typer.Option(
        "--wide", help="Every column, size bucket and rank, however wide the lines get (default: fit the terminal).")]
    = False,
    nodes: NodesOption = None, exclude: ExcludeOption = None, hostfile: HostfileOption = None,
    connection: Connection = FROM_OPTIONS,
    testbed: TestbedOption = False, db: DbOption = DEFAULT_DB,
) -> None:
    """Profile an MPI application: every MPI call per rank and message size; time in MPI, imbalance, CPU.

    Runs the launch command given after '--' with our PMPI library
    preloaded (built with mpicc at first use, on --nodes when given; the
    application is not changed), stores the profile and prints time by
    call, the call x message-size histogram, the ranks and what share of the
    wall time is communication.  The application's output passes through;
    oddnode exits with the application's status when it failed.  --show
    and --list read the store instead."""
    if (show is not None) + list_ + bool(command) != 1:
        raise typer.BadParameter("give a command after '--', or --show ID|latest, or --list (one of them)")
    if list_ or show is not None:
        if plot is not None and list_:
            raise typer.BadParameter("--plot draws one profile: use it with --show or a command")
        with user_errors(), open_db(db) as store:
            if list_:
                profiles = store.profiles()
            else:
                profile_id = _stored_id(show, store)
                profile = store.profile(profile_id)
        if list_:
            from oddnode.report.profile import list_json, list_view

            if json_out:
                print_json(list_json(profiles))
            else:
                console.print(list_view(profiles, None if wide else console.width))
            return
        show_profile(profile, profile_id, json_out, plot, wide)
        return
    run_and_store(command, timeout, work_dir, json_out, plot, wide,
                  (nodes, exclude, hostfile, connection, testbed), db)


def run_and_store(command: list[str], timeout: float | None, work_dir: Path | None, json_out: bool,
                  plot: Path | None, wide: bool, target_options: tuple, db: Path) -> None:
    """Run the command profiled, store and report the profile, exit as the application did."""
    from oddnode.app.cli.common import selected_target
    from oddnode.measure.profile.profiler import ProfilerError, run_profiled

    nodes, exclude, hostfile, connection, testbed = target_options
    target = None
    if nodes or hostfile or testbed:
        with user_errors():
            target = selected_target(nodes, exclude, hostfile, connection, testbed)
    try:
        run = run_profiled(list(command), target=target, timeout=timeout, work_dir=work_dir)
    except ProfilerError as err:
        raise fail(str(err)) from None
    profile = run.profile
    if profile.command is None:
        profile.command = shlex.join(command)
    store_and_show(profile, db, json_out, plot, wide)
    out = err_console if json_out else console
    if run.returncode != 0:
        out.print(f"[bold red]the application failed[/]: {literal(shlex.join(command))} exited with status "
                  f"{run.returncode} after {run.seconds:.1f} s (the profile holds what its ranks wrote)",
                  highlight=False)
        raise typer.Exit(code=_exit_status(run.returncode) or 1)
    inform(f"the application exited with status 0 after {run.seconds:.1f} s", highlight=False,
           out=err_console if json_out else None)


def register(app: typer.Typer) -> None:
    # Everything after '--' (and any option oddnode does not know) is the command.
    app.command("profile", rich_help_panel=PROFILE_PANEL,
                context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(profile_command)
