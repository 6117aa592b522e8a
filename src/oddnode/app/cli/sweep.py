"""``oddnode sweep``: one benchmark step over a grid of environment variables
and step options, every setting R times interleaved, and the best setting
per message size with its significance against the default."""

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
    TopologyOption,
    WideOption,
    command_line,
    console,
    detail,
    err_console,
    fail,
    inform,
    open_db,
    positive_seconds,
    print_json,
    progress_run,
    user_errors,
)
from oddnode.app.cli.interconnect import network_run
from oddnode.app.cli.nodes import NODES_PANEL
from oddnode.app.cli.step_flags import FROM_FLAGS, OptionValues, with_step_option_values
from oddnode.measure.set.runner import SetBenchmarkOptions
from oddnode.report.text import literal

# Rounds of a sweep unless told: the turns are the repetitions (the nodes
# of a turn share its time), and six turns against six reach p = 2/924 =
# 0.002, so that a setting can beat the default at alpha 0.05 even when
# Holm corrects over a score of sizes and settings.
SWEEP_REPETITIONS = 6
SWEEP_ALPHA = 0.05
SWEEP_MIN_EFFECT = 0.01
# Seconds one repetition of the step may take on a node (as a check's).
SWEEP_TIMEOUT = 600.0
# The set steps' options that --command and --parser fix for the step swept
# (sets or scale, whose options share them), their flags made from the fields.
SWEEP_OPTIONS = ("command", "parser")


def _stored(text: str) -> int | None:
    if text == "latest":
        return None
    try:
        return int(text)
    except ValueError:
        raise typer.BadParameter(f"a sweep id (oddnode sweep --list) or 'latest', not {text!r}",
                                 param_hint="--stored") from None


def _print_list(db: Path, json_out: bool) -> None:
    from oddnode.report.sweep import sweep_list_rows
    from oddnode.report.terminal import fit_columns, fixed_table

    with user_errors(), open_db(db) as store:
        rows = sweep_list_rows(store.sweeps())
    if json_out:
        print_json(rows)
        return
    if not rows:
        console.print(f"No sweep in {literal(db)}.")
        return
    shown, widths, _ = fit_columns(list(rows[0]), rows, console.width)
    console.print(fixed_table("Sweeps", None, shown, widths, rows, ("step", "command")))


def sweep_command(
    step: Annotated[Optional[str], typer.Argument(
        help="The step to sweep: pairs, memory, sets, ... (oddnode check --show-plan lists them); with --command, "
             "sets (the default) or scale.")] = None,
    env: Annotated[Optional[list[str]], typer.Option(
        "--env", help="NAME=V1,V2,...: an environment variable's values, given to every process of the benchmark "
                      "(MPI ranks too); repeatable. Separate the values with | instead when one holds a comma.")]
    = None,
    settings: Annotated[Optional[list[str]], typer.Option(
        "--set", help="STEP.OPTION=V1|V2|...: a step option's values, separated by | (a list value keeps its "
                      "commas: pairs.sizes=0,1024|0,65536); one value fixes the option; repeatable.")] = None,
    default: Annotated[Optional[list[str]], typer.Option(
        "--default", help="NAME=VALUE: the default of a parameter, against which the others are tested "
                          "(default its first value); repeatable.")] = None,
    repetitions: Annotated[int, typer.Option(
        "-r", "--repetitions", help="Rounds: each runs every setting once, in an order shuffled every round.")]
    = SWEEP_REPETITIONS,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the rounds' orders.")]
    = 0,
    option_values: OptionValues = FROM_FLAGS,  # --command, --parser of the step swept (SWEEP_OPTIONS)
    mpi_export: Annotated[bool, typer.Option(
        "--mpi-export/--no-mpi-export", help="Pass the --env variables to the ranks an Open MPI launcher (mpirun, "
                                             "mpiexec) starts, with -x NAME; off for another MPI's launcher.")]
    = True,
    timeout: Annotated[float, typer.Option(
        "--timeout", callback=positive_seconds,
            help="Seconds one repetition of the step may take on a node.")] = SWEEP_TIMEOUT,
    alpha: Annotated[float, typer.Option(
        help="False-alarm probability of each series (Holm-corrected over its sizes and settings).")]
    = SWEEP_ALPHA,
    min_effect: Annotated[float, typer.Option(
        help="Smallest change from the default worth naming a setting better (fraction).")] = SWEEP_MIN_EFFECT,
    plot: Annotated[Optional[Path], typer.Option(
        "--plot", help="Write a figure per series into this directory: the metric against the setting, a line "
                       "per message size.")] = None,
    stored: Annotated[Optional[str], typer.Option(
        "--stored", help="Judge a stored sweep (its id, or 'latest') instead of running one.")] = None,
    list_sweeps: Annotated[bool, typer.Option("--list", help="List the stored sweeps and exit.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print the sweep and its analysis as JSON.")] = False,
    wide: WideOption = False,
    topology: TopologyOption = None,
    nodes: NodesOption = None, exclude: ExcludeOption = None, hostfile: HostfileOption = None,
    connection: Connection = FROM_OPTIONS,
    testbed: TestbedOption = False, db: DbOption = DEFAULT_DB,
) -> None:
    """Sweep environment variables and step options over one benchmark; the best setting per message size.

    Every setting of the grid (every combination of the --env and --set
    values) runs the step once per round, R rounds, in an order shuffled
    every round so that drift favours no setting; each run is stored with
    its setting.  Then per series and message size (or metric): every
    setting's median, the best setting, and its Mann-Whitney p against the
    default over the turns, Holm-corrected over the series' sizes and
    settings."""
    from oddnode.judge.sweep import analyze_sweep, read_sweep

    command, parser = option_values.get("command"), option_values.get("parser")
    if list_sweeps:
        _print_list(db, json_out)
        return
    summary = None
    if stored is not None:
        given = [name for name, value in (("STEP", step), ("--env", env), ("--set", settings), ("--command", command))
                 if value]
        if given:
            raise fail(f"--stored judges a stored sweep: {', '.join(given)} would run a new one")
        with user_errors(), open_db(db) as store:
            data = read_sweep(store, _stored(stored))
    else:
        summary, data = _run(step, env or [], settings or [], default or [], repetitions, seed, command, parser,
                             mpi_export, timeout, json_out, topology, nodes, exclude, hostfile, connection, testbed, db)
    with user_errors():
        analysis = analyze_sweep(data, alpha, min_effect)
    from oddnode.report.sweep import sweep_document, sweep_view

    out = err_console if json_out else console
    if json_out:
        print_json(sweep_document(analysis, summary))
    else:
        console.print(sweep_view(analysis, None if wide else console.width), width=10_000 if wide else None,
                      crop=not wide)
    if plot is not None:
        from oddnode.report.sweep import write_sweep_plots

        with user_errors():
            written = write_sweep_plots(analysis, plot)
        inform(f"{len(written)} figure{'s' if len(written) != 1 else ''} written to {literal(plot)}", out=out)


def _run(step, env, settings, default, repetitions, seed, command, parser, mpi_export, timeout, json_out,
         topology, nodes, exclude, hostfile, connection, testbed, db):
    """Make the grid, run it on the nodes, and read it back from the store."""
    from oddnode.report.summaries import dim_lines
    from oddnode.report.sweep import run_line
    from oddnode.judge.sweep import read_sweep
    from oddnode.readings.sweep_grid import make_grid
    from oddnode.measure.sweep import check_grid, run_sweep

    if command is not None or parser is not None:
        if command is None or parser is None:
            raise fail("--command needs --parser (the parser of its output), and --parser a --command")
        step = step or "sets"
        if step not in ("sets", "scale"):
            raise fail(f"--command runs on sets of nodes: sweep sets or scale with it, not {step}")
    if step is None:
        raise fail("name the step to sweep (pairs, memory, sets, …), or give --command")
    fixed = {f"{step}.command": command, f"{step}.parser": parser} if command is not None else None
    with user_errors():
        grid = make_grid(step, env, settings, default, fixed)
        check_grid(grid)
        if repetitions < 1:
            raise ValueError(f"repetitions must be >= 1, got {repetitions}")
    out = err_console if json_out else None
    with network_run(topology, nodes, exclude, hostfile, connection, testbed, db) as (target, store):
        with user_errors():
            summary = progress_run(f"sweep {step}", lambda progress: run_sweep(
                store, target, grid, repetitions, seed=seed, timeout=timeout, command=command_line(),
                mpi_export=mpi_export, on_progress=progress))
            data = read_sweep(store, summary.sweep_id)
    inform(run_line(summary), highlight=False, out=out)
    for line in dim_lines(summary.notes):
        detail(line, highlight=False, out=out)
    return summary, data


def register(app: typer.Typer) -> None:
    # With the commands on what a node is set to: a sweep finds the setting.
    app.command("sweep", rich_help_panel=NODES_PANEL)(
        with_step_option_values(sweep_command, SetBenchmarkOptions, SWEEP_OPTIONS))
