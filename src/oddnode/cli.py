"""The ``oddnode`` command line: thin wrappers over the library."""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Annotated, Iterator, Optional

import typer
from rich.console import Console

from oddnode import __version__
from oddnode.model import Direction, Severity

app = typer.Typer(
    name="oddnode",
    help="Is the cluster ready for production? If not, which node, link or setting is the odd one out.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
import_app = typer.Typer(help="Import results that already exist.", no_args_is_help=True)
app.add_typer(import_app, name="import")

console = Console()
err_console = Console(stderr=True)

DbOption = Annotated[Path, typer.Option("--db", envvar="ODDNODE_DB", help="Results store (DuckDB file).")]
DEFAULT_DB = Path("oddnode.duckdb")


class FailOn(str, Enum):
    never = "never"
    warning = "warning"
    error = "error"


class ExportFormat(str, Enum):
    plot = "plot"
    csv = "csv"
    parquet = "parquet"
    json = "json"


def _fail(message: str) -> typer.Exit:
    err_console.print(f"[bold red]error:[/] {message}", highlight=False)
    return typer.Exit(code=2)


@contextmanager
def _user_errors() -> Iterator[None]:
    """Turn the library's input and store errors into one clear line."""
    from oddnode.io.export import ExportError
    from oddnode.io.stab import InputError
    from oddnode.nodes import NodeNameError
    from oddnode.store import StoreError
    from oddnode.synth import SynthError

    try:
        yield
    except (InputError, StoreError, ExportError, NodeNameError, SynthError, KeyError, ValueError) as err:
        message = err.args[0] if isinstance(err, KeyError) and err.args else str(err)
        raise _fail(message) from None


def _open(db: Path, read_only: bool = True):
    from oddnode.store import open_store

    return open_store(db, read_only=read_only)


def _series(db: Path, benchmark: str):
    with _open(db) as store:
        return store.load_dataset().by_name(benchmark)


@app.callback(invoke_without_command=True)
def _root(version: Annotated[bool, typer.Option("--version", help="Print the version.")] = False) -> None:
    if version:
        console.print(f"oddnode {__version__}")
        raise typer.Exit()


@import_app.command("stab")
def import_stab_command(
    paths: Annotated[list[Path], typer.Argument(help="Result directories or plot files.")],
    db: DbOption = DEFAULT_DB,
    benchmark: Annotated[Optional[str], typer.Option(help="Benchmark name for a single plot file.")] = None,
    unit: Annotated[Optional[str], typer.Option(help="Unit where units.csv does not give one.")] = None,
    direction: Annotated[Optional[Direction], typer.Option(help="Which way is better, where units.csv does not say.")] = None,
    repetitions: Annotated[bool, typer.Option("--repetitions", help="Repeated labels are repetitions.")] = False,
) -> None:
    """Import STAB-style plot files or a results directory (plot.*, units.csv,
    inventory.csv, topology.csv, failed)."""
    from oddnode.io.stab import import_stab

    with _user_errors(), _open(db, read_only=False) as store:
        summary = import_stab(store, paths, benchmark=benchmark, unit=unit, direction=direction,
                              repetitions=repetitions, command=" ".join(["oddnode", *sys.argv[1:]]))
    console.print(f"run {summary.run_id}: {summary.benchmarks} benchmarks, {summary.results} results, "
                  f"{summary.failures} failed runs, {summary.facts} facts, {summary.topology_nodes} nodes "
                  f"in the topology -> {db}")
    for ignored in summary.ignored:
        console.print(f"[dim]ignored {ignored} (not a plot.* file, units.csv, inventory.csv, topology.csv or failed)[/]")


@app.command("export")
def export_command(
    fmt: Annotated[ExportFormat, typer.Argument(metavar="FORMAT", help="plot, csv, parquet or json.")],
    out: Annotated[Path, typer.Argument(help="Output directory.")],
    db: DbOption = DEFAULT_DB,
    benchmark: Annotated[Optional[list[str]], typer.Option(help="Only these benchmarks (plot format).")] = None,
) -> None:
    """Export benchmarks back to plot files, or every table to CSV, Parquet or JSON."""
    from oddnode.io.export import export_plot_files, export_tables

    with _user_errors(), _open(db) as store:
        if fmt is ExportFormat.plot:
            written = export_plot_files(store, out, benchmark)
        else:
            written = export_tables(store, out, fmt.value)
    console.print(f"wrote {len(written)} files to {out}")


@app.command("stats")
def stats_command(
    benchmarks: Annotated[Optional[list[str]], typer.Argument(help="Benchmarks (default: all).")] = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Descriptive statistics per benchmark (STAB's anal): n, low, high, %variability, mean, median, std dev."""
    from oddnode.report.terminal import stats_table
    from oddnode.stats.describe import describe

    with _user_errors(), _open(db) as store:
        dataset = store.load_dataset()
        chosen = [dataset.by_name(b) for b in benchmarks] if benchmarks else dataset.series
    console.print(stats_table([(s, describe(s)) for s in chosen]))


def _bins(value: str) -> str | int:
    if value in ("auto", "a"):
        return "auto"
    if value in ("whole", "w"):
        return "whole"
    try:
        return int(value)
    except ValueError:
        raise typer.BadParameter(f"{value!r}: use auto, whole or a number of bins") from None


@app.command("dist")
def dist_command(
    benchmark: Annotated[str, typer.Argument(help="Benchmark to look at.")],
    bins: Annotated[str, typer.Option(help="auto (√n bins), whole (one bin per integer) or a number.")] = "auto",
    plot: Annotated[Optional[Path], typer.Option(help="Write the histogram to a .png or .svg file.")] = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Distribution of one benchmark (STAB's dplot): text histogram, chi-squared
    fit to the normal, normality, skew and dip tests."""
    from oddnode.report.terminal import distribution_table
    from oddnode.report.text_histogram import text_histogram
    from oddnode.stats.distribution import chi_squared_normal, dip_test, normality

    with _user_errors():
        series = _series(db, benchmark)
        chosen = _bins(bins)
        console.print(text_histogram(series.values, bins=chosen), highlight=False)
        console.print(distribution_table(series, chi_squared_normal(series.values, chosen),
                                         normality(series.values), dip_test(series.values)))
        if plot:
            from oddnode.report.plots import histogram_figure, save_figure

            save_figure(histogram_figure(series, bins=chosen), plot)
            console.print(f"histogram written to {plot}")


@app.command("findn")
def findn_command(benchmark: Annotated[str, typer.Argument()], db: DbOption = DEFAULT_DB) -> None:
    """Chi-squared fit to the normal over many bin counts, to see how bin choice sways it."""
    from oddnode.report.terminal import findn_table
    from oddnode.stats.distribution import findn

    with _user_errors():
        series = _series(db, benchmark)
        console.print(findn_table(series, findn(series.values)))


@app.command("correlate")
def correlate_command(
    x: Annotated[str, typer.Argument(help="First benchmark.")],
    y: Annotated[str, typer.Argument(help="Second benchmark.")],
    plot: Annotated[Optional[Path], typer.Option(help="Write the scatter plot to a .png or .svg file.")] = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Correlate two benchmarks joined by node (STAB's cplot): Pearson and Spearman with p-values."""
    from oddnode.report.terminal import correlation_table
    from oddnode.stats.correlation import correlate

    with _user_errors():
        with _open(db) as store:
            dataset = store.load_dataset()
        a, b = dataset.by_name(x), dataset.by_name(y)
        result = correlate(a, b)
        console.print(correlation_table([result], f"{a.name} vs {b.name}"))
        if plot:
            from oddnode.report.plots import save_figure, scatter_figure

            save_figure(scatter_figure(a, b, result), plot)
            console.print(f"scatter plot written to {plot}")


@app.command("findc")
def findc_command(
    grep: Annotated[Optional[str], typer.Option(help="Only pairs that involve this benchmark.")] = None,
    limit: Annotated[int, typer.Option(help="Rows to print (0: all).")] = 40,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Correlate every pair of benchmarks (STAB's findc), strongest first."""
    from oddnode.report.terminal import correlation_table
    from oddnode.stats.correlation import correlate_all

    with _user_errors(), _open(db) as store:
        dataset = store.load_dataset()
    rows = correlate_all(dataset.series)
    if grep:
        rows = [c for c in rows if grep in (c.x, c.y)]
    console.print(correlation_table(rows[:limit] if limit else rows, "Correlations between benchmarks"))


@app.command("common")
def common_command(
    failed: Annotated[Optional[list[Path]], typer.Argument(help="failed files (default: failed runs in the store).")] = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Nodes common to failed runs, most frequent first (STAB's xcommon)."""
    from oddnode.io.stab import read_failed
    from oddnode.model import Failure
    from oddnode.nodes import label_kind, label_members
    from oddnode.report.terminal import common_table
    from oddnode.stats.common import common_nodes

    with _user_errors():
        if failed:
            failures = []
            for path in failed:
                for run in read_failed(path):
                    kind = label_kind(run.label)
                    failures.append(Failure(run.benchmark, run.label, kind, run.run, label_members(run.label, kind)))
        else:
            with _open(db) as store:
                failures = store.load_failures()
    console.print(common_table(common_nodes(failures)))


@app.command("analyze")
def analyze_command(
    paths: Annotated[Optional[list[Path]], typer.Argument(help="Result directories or plot files to import first.")] = None,
    db: Annotated[Optional[Path], typer.Option("--db", envvar="ODDNODE_DB",
                                               help="Results store (default oddnode.duckdb; in memory when paths are given).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print findings and statistics as JSON.")] = False,
    html: Annotated[Optional[Path], typer.Option(help="Write a self-contained HTML report.")] = None,
    alpha: Annotated[float, typer.Option(help="False-warning probability per rule and benchmark on a healthy cluster.")] = 1e-4,
    min_effect: Annotated[float, typer.Option(help="Smallest deviation from the median worth a warning (fraction).")] = 0.01,
    fail_on: Annotated[FailOn, typer.Option(help="Exit 1 when a finding reaches this severity.")] = FailOn.never,
    truth: Annotated[Optional[Path], typer.Option(help="Compare with a synthetic dataset's truth.json; exit 1 on a mismatch.")] = None,
) -> None:
    """Judge the results: statistics, findings with evidence and remedies, correlations."""
    from oddnode.analysis import analyze
    from oddnode.findings import Sensitivity
    from oddnode.io.stab import import_stab
    from oddnode.store import FINDINGS_SOURCE, StoreError, open_store

    with _user_errors():
        sensitivity = Sensitivity(alpha=alpha, min_effect=min_effect)
        location = db or (Path(":memory:") if paths else DEFAULT_DB)
        if not paths and not location.exists():
            raise StoreError(f"no results store at {location}: import results first or give result directories")
        with open_store(location) as store:
            if paths:
                import_stab(store, paths, command="oddnode analyze")
            result = analyze(store.load_dataset(), sensitivity)
            with store.transaction():
                store.add_findings(store.new_run("oddnode analyze", source=FINDINGS_SOURCE), result.findings)
    if json_out:
        typer.echo(json.dumps(result.to_json(), indent=2, default=_plain))
    else:
        from oddnode.report.terminal import print_analysis

        print_analysis(console, result)
    if html:
        from oddnode.report.html import write_report

        write_report(result, html)
        (err_console if json_out else console).print(f"report written to {html}")
    if truth:
        from oddnode.synth import check_findings, read_truth

        with _user_errors():
            check = check_findings(read_truth(truth), result.findings)
        (err_console if json_out else console).print(check.summary(), highlight=False)
        if not check.ok:
            raise typer.Exit(code=1)
    threshold = {FailOn.warning: Severity.WARNING, FailOn.error: Severity.ERROR}.get(fail_on)
    if threshold and any(f.severity.rank >= threshold.rank for f in result.findings):
        raise typer.Exit(code=1)


@app.command("synth")
def synth_command(
    out: Annotated[Path, typer.Argument(help="Directory to write the dataset into.")],
    nodes: Annotated[int, typer.Option(help="Number of nodes (≥ 32).")] = 484,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 2005,
    healthy: Annotated[bool, typer.Option("--healthy", help="No planted fault: a control dataset.")] = False,
) -> None:
    """Write a synthetic cluster dataset with planted faults and its ground truth (truth.json)."""
    from oddnode.synth import generate

    with _user_errors():
        truth = generate(out, nodes=nodes, seed=seed, faults=not healthy)
    console.print(f"wrote {out}: {nodes} nodes, {len(truth.findings)} planted faults (ground truth in {out / 'truth.json'})")


def _plain(value):
    import numpy as np

    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def main() -> None:
    app()
