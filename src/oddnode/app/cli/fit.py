"""``oddnode fit``: the least-squares line time = a + b·length of a stored
series (latency a, bandwidth 1/b) with its observed-vs-fitted table."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from oddnode.app.cli.analysis import RESULTS_PANEL
from oddnode.app.cli.common import DEFAULT_DB, open_db, print_json, user_errors


def _dataset(db: Path, paths: list[Path] | None):
    """The store's dataset, or that of result directories imported into memory."""
    if not paths:
        with open_db(db) as store:
            return store.load_dataset()
    from oddnode.store.stab import import_stab
    from oddnode.store import open_store

    with open_store(":memory:") as store:
        import_stab(store, paths, command="oddnode fit")
        return store.load_dataset()


def fit_command(
    series: Annotated[str, typer.Argument(
        metavar="SERIES", help="A benchmark with a time or bandwidth per message size (pingpong.sort, imb.pingpong, "
                               "osu.latency, netpipe.tcp); BENCHMARK:QUANTITY picks latency, t_avg or bandwidth.")],
    paths: Annotated[Optional[list[Path]], typer.Argument(
        help="Result directories or plot files to read instead of the store.")] = None,
    db: Annotated[Path, typer.Option("--db", envvar="ODDNODE_DB", help="Results store (DuckDB file).")] = DEFAULT_DB,
    from_size: Annotated[Optional[int], typer.Option(
        "--from", min=0, help="Smallest message size fitted, bytes (default: the smallest).")] = None,
    to_size: Annotated[Optional[int], typer.Option(
        "--to", min=0, help="Largest message size fitted, bytes (default: the largest).")] = None,
    label: Annotated[Optional[str], typer.Option(
        "--label", help="One label's times (a pair, a node); default: the median over labels at each size.")] = None,
    each: Annotated[bool, typer.Option(
        "--each", help="Also every label's own line over the same range, one row each.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print the fit and its table as JSON.")] = False,
) -> None:
    """Least-squares line time = a + b·length: latency a, bandwidth 1/b, r², observed vs fitted.

    Weighted by 1/time², so that every size counts by its relative error;
    the sizes more than 10% off the line are named (a protocol switch)."""
    from oddnode.readings.fit import fit_sized_times, sized_times
    from oddnode.report.fit import each_label, fit_json, fit_text

    benchmark, _, quantity = series.partition(":")
    with user_errors():
        dataset = _dataset(db, paths)
        points = sized_times(dataset.series, benchmark, quantity or None, label)
        fit = fit_sized_times(points, from_size, to_size)
        labels = each_label(dataset.series, points, from_size, to_size) if each and label is None else None
    if json_out:
        print_json(fit_json(points, fit, labels))
        return
    typer.echo(fit_text(points, fit, labels), nl=False)


def register(app: typer.Typer) -> None:
    app.command("fit", rich_help_panel=RESULTS_PANEL)(fit_command)
