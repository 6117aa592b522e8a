"""``oddnode compare``: two runs of the store, before against after, or
groups of nodes within one run; exit status 1 when anything regressed."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from oddnode.app.cli.analysis import RESULTS_PANEL
from oddnode.app.cli.common import (
    DEFAULT_DB,
    DEFAULT_MIN_EFFECT,
    DbOption,
    WideOption,
    console,
    err_console,
    fail,
    inform,
    print_json,
    open_db,
    quiet,
    user_errors,
)
from oddnode.report.text import literal, literals

# The comparison's family-wise false-alarm probability (compare.DEFAULT_ALPHA,
# written out so that the command line starts without scipy; a unit test
# keeps them equal).
COMPARE_ALPHA = 0.05

RunsArgument = Annotated[Optional[list[str]], typer.Argument(
    metavar="A B",
    help="Runs to compare, A the baseline: a run id (12; 12,13 or 12-13 for several; a check's id for all its "
         "steps), a date (2025-11-25, 2025-11-25T14: UTC), or a label (an imported directory's name, text of the "
         "command). With --groups, one run (default: the newest of every series).")]


def _group_definitions(texts: list[str]) -> list[tuple[str, list[str]]]:
    """--group NAME=NODESET, each expanded; typed by the user, as -w is,
    so the node set may name the site's ClusterShell groups."""
    from oddnode.core.nodes import expand_command_line

    definitions = []
    for text in texts:
        name, sep, nodeset = text.partition("=")
        if not sep or not name.strip() or not nodeset.strip():
            raise typer.BadParameter(f"a group is NAME=NODESET (old=node[001-084]), not {text!r}",
                                     param_hint="--group")
        definitions.append((name.strip(), expand_command_line(nodeset.strip())))
    return definitions


def _sides(runs: list[str], baseline: str | None) -> tuple[str, str]:
    """(baseline, other) from the arguments and --baseline."""
    if len(runs) == 2:
        if baseline is None or baseline == runs[0]:
            return runs[0], runs[1]
        if baseline == runs[1]:
            return runs[1], runs[0]
        raise fail(f"--baseline {baseline!r} is neither of the runs compared ({runs[0]!r}, {runs[1]!r})")
    if len(runs) == 1 and baseline is not None:
        return baseline, runs[0]
    if len(runs) == 1:
        raise fail(f"one run given ({runs[0]!r}): compare it with another (oddnode compare A B, or --baseline A), "
                   "or compare node groups within it (--groups FACT)")
    if not runs:
        raise fail("give the two runs to compare (oddnode compare A B; oddnode compare --list shows the runs), "
                   "or --groups FACT to compare groups of nodes")
    raise fail(f"{len(runs)} runs given: compare two (A B), or groups within one (--groups)")


def _print_runs(db: Path, json_out: bool) -> None:
    from rich.table import Table

    from oddnode.judge.compare import run_table

    with user_errors(), open_db(db) as store:
        rows = run_table(store)
    if json_out:
        print_json(rows)
        return
    table = Table(title="Runs with results", title_justify="left")
    for column in ("id", "started (UTC)", "check", "series", "results", "command", "source"):
        table.add_column(column, justify="right" if column in ("id", "check", "series", "results") else "left",
                         overflow="fold")
    for row in rows:
        table.add_row(*literals((row["id"], row["started"].replace("T", " "), row["check_id"] or "",
                                 row["series"], row["results"], row["command"], row["source"] or "")))
    console.print(table)


def compare_command(
    runs: RunsArgument = None,
    baseline: Annotated[Optional[str], typer.Option(
        "--baseline", help="The baseline: one of A and B, or with one run given, the run it is compared with; "
                           "with --groups, the baseline group (default: the largest; with --group, the first).")]
    = None,
    benchmark: Annotated[Optional[list[str]], typer.Option(
        "--benchmark", help="Only the series matching this shell pattern (name or benchmark: memory.*, "
                            "'sets.*:time.*'); repeatable.")] = None,
    alpha: Annotated[float, typer.Option(
        help="False-alarm probability of the whole comparison (Holm-corrected over every test).")] = COMPARE_ALPHA,
    min_effect: Annotated[float, typer.Option(
        help="Smallest change of the median worth a verdict (fraction).")] = DEFAULT_MIN_EFFECT,
    groups: Annotated[Optional[str], typer.Option(
        "--groups", help="Compare groups of nodes within one run: by an inventory fact (bios_date, "
                         "bios_version, kernel), or 'topology' for the stored topology's groups.")] = None,
    group: Annotated[Optional[list[str]], typer.Option(
        "--group", help="A group NAME=NODESET (old=node[001-084]); repeatable; instead of --groups.")] = None,
    topology: Annotated[Optional[Path], typer.Option(
        "--topology", help="Compare the groups of this topology file within one run.")] = None,
    every: Annotated[bool, typer.Option(
        "--all", help="Every subject in the table, not only those that changed.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON.")] = False,
    plot: Annotated[Optional[Path], typer.Option(
        "--plot", help="Write a figure per series into this directory: before against after.")] = None,
    list_runs: Annotated[bool, typer.Option("--list", help="List the runs with results and exit.")] = False,
    wide: WideOption = False,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Before against after: the change of every benchmark, node, pair and set between two runs.

    For every series and subject measured in both runs: the change of the
    median, Mann-Whitney's p over the repetitions (the series as a whole by
    the stratified test over its subjects, which judges even where each
    subject has too few repetitions), Holm-corrected over every test, and a
    verdict: improved, regressed, unchanged, or too few repetitions.  With
    --groups, groups of nodes within one run the same way (old nodes against
    new).  Exit status 1 when anything regressed (a maintenance window's
    gate), 0 when nothing did, 2 on a usage error."""
    from oddnode.judge.compare import Settings, choose_groups, compare_groups, compare_runs

    if list_runs:
        _print_runs(db, json_out)
        return
    runs = runs or []
    grouped = [name for name, given in (("--groups", groups), ("--group", group), ("--topology", topology)) if given]
    if len(grouped) > 1:
        raise fail(f"{' and '.join(grouped)} both define groups: give one")
    if grouped and len(runs) > 1:
        raise fail(f"groups are compared within one run; {len(runs)} given")
    sides = None if grouped else _sides(runs, baseline)
    with user_errors():
        settings = Settings(alpha=alpha, min_effect=min_effect)
        with open_db(db) as store:
            if grouped:
                selector = runs[0] if runs else None
                chosen = choose_groups(store, selector, fact=groups, topology=topology,
                                       definitions=_group_definitions(group or []), baseline=baseline)
                comparison = compare_groups(store, chosen, selector, settings, benchmark or ())
            else:
                comparison = compare_runs(store, *sides, settings, benchmark or ())
    out = err_console if json_out else console
    if json_out:
        print_json(comparison.to_json())
    else:
        from oddnode.report.compare import comparison_view

        console.print(comparison_view(comparison, None if wide else console.width, every_subject=every,
                                      brief=quiet()), width=10_000 if wide else None, crop=not wide)
    if plot is not None:
        from oddnode.report.compare import write_plots

        with user_errors():
            written = write_plots(comparison, plot)
        inform(f"{len(written)} figure{'s' if len(written) != 1 else ''} written to {literal(plot)}", out=out)
    raise typer.Exit(code=comparison.exit_status)


def register(app: typer.Typer) -> None:
    app.command("compare", rich_help_panel=RESULTS_PANEL)(compare_command)
