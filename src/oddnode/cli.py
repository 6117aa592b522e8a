"""The ``oddnode`` command line: thin wrappers over the library."""

from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Iterator, Optional

import typer
from rich.console import Console

from oddnode import __version__
from oddnode.model import Direction, Severity
from oddnode.report import WIDE

app = typer.Typer(
    name="oddnode",
    help="Is the cluster ready for production? If not, which node, link or setting is the odd one out.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
import_app = typer.Typer(help="Import results that already exist.", no_args_is_help=True)
app.add_typer(import_app, name="import", rich_help_panel='Results and statistics')



def _console(stderr: bool = False) -> Console:
    """A console fitted to the terminal; written to a file or a pipe, with
    no COLUMNS to say a width, lines are never wrapped, so that grep finds a
    whole finding on one line and tables keep every column."""
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty() or "COLUMNS" in os.environ:
        return Console(stderr=stderr)
    return Console(stderr=stderr, width=WIDE, soft_wrap=True)


console = _console()
err_console = _console(stderr=True)

DbOption = Annotated[Path, typer.Option("--db", envvar="ODDNODE_DB", help="Results store (DuckDB file).")]
WideOption = Annotated[bool, typer.Option(
    "--wide", help="Every column of the statistics table, however wide the lines get (default: fit the terminal).")]
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
    from oddnode.transport import TransportError

    try:
        yield
    except (InputError, StoreError, ExportError, NodeNameError, SynthError, TransportError, KeyError,
            ValueError) as err:
        message = err.args[0] if isinstance(err, KeyError) and err.args else str(err)
        raise _fail(message) from None


def _command_line() -> str:
    """This oddnode command as typed, stored with the runs it makes."""
    return " ".join(["oddnode", *sys.argv[1:]])


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
    """Import STAB-style plot files or a results directory (plot.*, units.csv, inventory.csv, topology.csv, failed)."""
    from oddnode.io.stab import import_stab

    with _user_errors(), _open(db, read_only=False) as store:
        summary = import_stab(store, paths, benchmark=benchmark, unit=unit, direction=direction,
                              repetitions=repetitions, command=_command_line())
    console.print(f"run {summary.run_id}: {summary.benchmarks} benchmarks, {summary.results} results, "
                  f"{summary.failures} failed runs, {summary.facts} facts, {summary.topology_nodes} nodes "
                  f"in the topology -> {db}")
    for ignored in summary.ignored:
        console.print(f"[dim]ignored {ignored} (not a plot.* file, units.csv, inventory.csv, topology.csv or failed)[/]")


def _tool_import_command(tool: str):
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

        with _user_errors(), _open(db, read_only=False) as store:
            summary = import_tool_outputs(store, tool, files, label=label, label_from=label_from,
                                          command=_command_line())
        console.print(f"run {summary.run_id}: {summary.files} files, {summary.labels} labels, "
                      f"{summary.measurements} measurements -> {db}")
        for path in summary.invalid_runs:
            console.print(f"[yellow]failed its accuracy check:[/] {path}")

    command.__doc__ = f"Import {tool} outputs you already have, one file per run."
    return command


def _register_tool_imports() -> None:
    from oddnode.parsers import parsers

    for tool in parsers():
        import_app.command(tool)(_tool_import_command(tool))


_register_tool_imports()


@app.command("export", rich_help_panel='Results and statistics')
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


@app.command("stats", rich_help_panel='Results and statistics')
def stats_command(
    benchmarks: Annotated[Optional[list[str]], typer.Argument(
        help="Benchmarks, benchmark:metric, or benchmark:prefix (pingpong.cut:bandwidth); default all.")] = None,
    db: DbOption = DEFAULT_DB,
    json_out: Annotated[bool, typer.Option("--json", help="Print the rows as JSON.")] = False,
    wide: WideOption = False,
) -> None:
    """Descriptive statistics per benchmark metric (STAB's anal): n, low, high,
    %variability, mean, median, std dev; a benchmark with several metrics (a
    pair pattern's message sizes) gets a row for each."""
    from oddnode.report.terminal import print_stats
    from oddnode.stats.describe import describe

    with _user_errors(), _open(db) as store:
        dataset = store.load_dataset()
        names = benchmarks or dict.fromkeys(s.benchmark for s in dataset.series)
        chosen = [s for name in names for s in dataset.select(name)]
    rows = [(s, describe(s)) for s in chosen]
    if json_out:
        typer.echo(json.dumps([{"benchmark": s.benchmark, "metric": s.metric, "unit": s.unit,
                                "direction": s.direction.value, "population": s.label_kind.value, **d.to_json()}
                               for s, d in rows], indent=2, default=_plain))
        return
    print_stats(console, rows, wide)


def _bins(value: str) -> str | int:
    if value in ("auto", "a"):
        return "auto"
    if value in ("whole", "w"):
        return "whole"
    try:
        return int(value)
    except ValueError:
        raise typer.BadParameter(f"{value!r}: use auto, whole or a number of bins") from None


@app.command("dist", rich_help_panel='Results and statistics')
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


@app.command("findn", rich_help_panel='Results and statistics')
def findn_command(benchmark: Annotated[str, typer.Argument()], db: DbOption = DEFAULT_DB) -> None:
    """Chi-squared fit to the normal over many bin counts, to see how bin choice sways it."""
    from oddnode.report.terminal import findn_table
    from oddnode.stats.distribution import findn

    with _user_errors():
        series = _series(db, benchmark)
        console.print(findn_table(series, findn(series.values)))


@app.command("correlate", rich_help_panel='Results and statistics')
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


@app.command("findc", rich_help_panel='Results and statistics')
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


@app.command("common", rich_help_panel='Results and statistics')
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


TopologyOption = Annotated[Optional[Path], typer.Option(
    "--topology", help="Topology file, 'GROUP NODESET' a line (leaf switch, chassis): findings can name a group. "
                       "With --testbed, the testbed's own by default.")]
# The findings the interconnect commands print after their runs.
PAIR_FINDINGS = ("weak-pair-member", "weak-group", "oversubscription", "slow-link", "link-contention")
# The options the interconnect commands share (each gives its own default).
PatternRepetitionsOption = Annotated[int, typer.Option(
    "-r", "--repetitions", help="Runs of each pattern (shuffle reshuffles each time).")]
SerialOption = Annotated[bool, typer.Option(
    "--serial", help="One pair at a time (isolates), instead of all at once (loads the switch).")]
PatternSeedOption = Annotated[int, typer.Option("--seed", help="Seed of the shuffle and random patterns.")]
PairsFileOption = Annotated[Optional[Path], typer.Option(
    "--pairs-file", help="Pairs to run, one 'nodeA nodeB' per line (pattern 'file').")]
SecondsPerSizeOption = Annotated[float, typer.Option("--seconds-per-size", help="Seconds each message size is timed.")]
StreamMessageSizeOption = Annotated[int, typer.Option("--message-size", help="Bytes per write of each stream.")]
ServerPortOption = Annotated[int, typer.Option("--port", help="TCP port the servers listen on.")]


@contextmanager
def _network_run(topology, nodes, exclude, hostfile, transport, ssh_config, fanout, testbed,
                 db) -> Iterator[tuple[Any, Any]]:
    """An interconnect command's target and writable store, the topology
    saved first; user and testbed errors said in one line."""
    with _user_errors(), _testbed_errors():
        target = _target(nodes, exclude, hostfile, transport, ssh_config, fanout, testbed)
        groups = _topology(topology, testbed)
        with _open(db, read_only=False) as store:
            _save_topology(store, groups)
            yield target, store


def _progress_run(label: str, run):
    """Run ``run(on_progress)`` under a transient progress bar named ``label``."""
    from rich.progress import Progress

    with Progress(console=console, transient=True) as progress:
        task = progress.add_task(label, total=None)
        return run(lambda done, total: progress.update(task, completed=done, total=total))


def _troubled_pairs(per_pair: dict[str, dict[str, int]]) -> list[str]:
    """The pair labels with a failed or invalid repetition."""
    return [label for label, counts in per_pair.items() if counts["failed"] or counts["invalid"]]


def _print_pattern_run(pattern: str, summary, repetitions: int) -> None:
    """A pattern run's pairs, repetitions, run id and troubled pairs, then who sat out."""
    failed = _troubled_pairs(summary.per_pair)
    console.print(f"{pattern}: {len(summary.per_pair)} pairs, {repetitions} repetitions, run {summary.run_id}"
                  + (f"; [red]{len(failed)} pairs with failed or invalid runs[/]" if failed else ""))
    for note in dict.fromkeys(summary.notes):
        console.print(f"[dim]{note}[/]", highlight=False)


def _print_slow_pair_findings(dataset, kinds: tuple[str, ...]) -> None:
    """The findings of ``kinds``: who the slow pairs have in common."""
    from oddnode.analysis import analyze
    from oddnode.report.terminal import findings_by_nodes

    findings = [f for f in analyze(dataset).findings if f.kind in kinds]
    console.print(findings_by_nodes(findings) if findings else "No node or group is common to the slow pairs.")


def _topology(path: Optional[Path], testbed: bool = False) -> tuple[dict[str, str], str] | None:
    """Node -> group from a topology file (the testbed's when none is given), and the file."""
    from oddnode.topology import read_topology

    if path is None and testbed:
        from oddnode.testbed import Testbed

        path = Testbed.load(_state(None)).topology
    return None if path is None else (read_topology(path), str(path))


def _save_topology(store, topology: tuple[dict[str, str], str] | None) -> None:
    """Record a topology in the store, so that the weak-group rule reads it;
    its nodes, in the file's order, are declared nodes of the cluster."""
    if topology:
        groups, source = topology
        with store.transaction():
            store.set_topology(store.new_run(_command_line(), source=f"topology:{source}", nodes=list(groups)), groups)


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(word) for word in text.split(","))
    except ValueError:
        raise typer.BadParameter(f"message sizes are whole numbers of bytes separated by commas, not {text!r}") from None
    if not sizes or min(sizes) < 0:
        raise typer.BadParameter(f"message sizes must be bytes >= 0, not {text!r}")
    return sizes


@app.command("pairs", rich_help_panel='Interconnect')
def pairs_command(
    patterns: Annotated[str, typer.Option("--patterns", help="Pair patterns, comma-separated: sort, cut, fold, "
                                                             "shuffle, random, file (with --pairs-file).")] = "sort,cut,fold,shuffle",
    repetitions: PatternRepetitionsOption = 3,
    serial: SerialOption = False,
    sizes: Annotated[Optional[str], typer.Option("--sizes", help="Message sizes in bytes, comma-separated (default 0, 1 B to 4 MiB by powers of two).")] = None,
    seconds_per_size: SecondsPerSizeOption = 0.2,
    port: ServerPortOption = 29170,
    seed: PatternSeedOption = 0,
    pairs_file: PairsFileOption = None,
    kernel: Annotated[str, typer.Option("--kernel", help="tcp: our TCP ping-pong (a server on the second node); "
                                                         "mpi: our MPI ping-pong, two ranks started by mpirun on "
                                                         "the first node (Open MPI and mpicc on every node).")] = "tcp",
    mpi_rsh_agent: Annotated[Optional[str], typer.Option(
        "--mpi-rsh-agent", help="With --kernel mpi: the command mpirun reaches the second node with (default ssh; "
                                "with --testbed, ssh with the testbed's configuration).")] = None,
    topology: TopologyOption = None,
    nodes: NodesOption = None, exclude: ExcludeOption = None, hostfile: HostfileOption = None,
    transport: TransportOption = None, ssh_config: SshConfigOption = None, fanout: FanoutOption = None,
    testbed: TestbedOption = False, db: DbOption = DEFAULT_DB,
) -> None:
    """Ping-pong between pairs of nodes in STAB's patterns; store every pair's
    latency and bandwidth per message size, then name the node or group
    common to the slow pairs, and oversubscribed uplinks (sorted against
    shuffled)."""
    from oddnode.interconnect.pairs import PAIR_KERNELS, PingPongOptions, run_pairs

    if kernel not in PAIR_KERNELS:
        raise typer.BadParameter(f"{kernel!r}: choose {' or '.join(PAIR_KERNELS)}", param_hint="--kernel")
    chosen = [name.strip() for name in patterns.split(",") if name.strip()]
    options = PingPongOptions(**({"sizes": _sizes(sizes)} if sizes else {}), seconds_per_size=seconds_per_size, port=port)
    with _network_run(topology, nodes, exclude, hostfile, transport, ssh_config, fanout, testbed, db) as (target, store):
        if kernel == "mpi" and mpi_rsh_agent is None and testbed:
            mpi_rsh_agent = f"ssh -F {target.transport.ssh_config}"
        for pattern in chosen:
            summary = _progress_run(f"pairs {pattern}", lambda progress: run_pairs(
                store, target, pattern, repetitions, options=options, seed=seed, serial=serial,
                pairs_file=pairs_file, on_progress=progress, command=_command_line(), kernel=kernel,
                rsh_agent=mpi_rsh_agent))
            _print_pattern_run(pattern, summary, repetitions)
        dataset = store.load_dataset()
        _print_patterns(dataset)
        _print_slow_pair_findings(dataset, PAIR_FINDINGS)


def _print_patterns(dataset) -> None:
    from oddnode.report.terminal import pattern_table

    table = pattern_table(dataset)
    if table is not None:
        console.print(table)


@app.command("bisection", rich_help_panel='Interconnect')
def bisection_command(
    repetitions: Annotated[int, typer.Option("-r", "--repetitions", help="Runs of the cut pairs at once, and of each alone.")] = 3,
    message_size: StreamMessageSizeOption = 1 << 20,
    seconds: Annotated[float, typer.Option("--seconds", help="Seconds each stream lasts.")] = 2.0,
    both: Annotated[bool, typer.Option("--both", help="Stream both ways at once (a pair's bandwidth is their sum).")] = False,
    port: ServerPortOption = 29170,
    topology: TopologyOption = None,
    nodes: NodesOption = None, exclude: ExcludeOption = None, hostfile: HostfileOption = None,
    transport: TransportOption = None, ssh_config: SshConfigOption = None, fanout: FanoutOption = None,
    testbed: TestbedOption = False, db: DbOption = DEFAULT_DB,
) -> None:
    """Bisection bandwidth: the cut pairs (node i with node i+N/2) stream all at
    once, then each alone; demonstrated = the sum of the pairs' bandwidths,
    next to N/2 × the median pair alone (full bisection)."""
    from oddnode.interconnect.bisection import run_bisection
    from oddnode.interconnect.pairs import StreamOptions

    options = StreamOptions(message_size=message_size, seconds=seconds, both=both, port=port)
    with _network_run(topology, nodes, exclude, hostfile, transport, ssh_config, fanout, testbed, db) as (target, store):
        summary = _progress_run("bisection", lambda progress: run_bisection(
            store, target, repetitions, options=options, on_progress=progress, command=_command_line()))
    for note in summary.notes:
        console.print(f"[dim]{note}[/]", highlight=False)
    figures = summary.figures
    failed = _troubled_pairs(summary.per_pair)
    if failed:
        console.print(f"[red]{len(failed)} pairs with failed or invalid runs[/]: {', '.join(failed)}")
    if figures.demonstrated is None:
        console.print(f"run {summary.run_id}: [red]no repetition in which every cut pair streamed[/]: "
                      "no demonstrated bisection")
        return
    full = (f"; full bisection {figures.full:.6g} MB/s ({figures.pairs} × {figures.single_pair:.6g} MB/s, the "
            f"median pair alone): {figures.fraction * 100:.1f}% of it" if figures.full else "")
    console.print(f"bisection of {summary.nodes}, {figures.pairs} cut pairs at {options.message_size} B "
                  f"(run {summary.run_id}): demonstrated {figures.demonstrated:.6g} MB/s{full}", highlight=False)


@app.command("matrix", rich_help_panel='Interconnect')
def matrix_command(
    sizes: Annotated[Optional[str], typer.Option("--sizes", help="Message sizes in bytes, comma-separated (default 0,1024,65536,1048576: latency at the first, bandwidth at the last).")] = None,
    seconds_per_size: SecondsPerSizeOption = 0.2,
    port: ServerPortOption = 29170,
    retest: Annotated[bool, typer.Option("--retest/--no-retest", help="Retest slow pairs with fewer pairs at once, down to alone.")] = True,
    topology: TopologyOption = None,
    nodes: NodesOption = None, exclude: ExcludeOption = None, hostfile: HostfileOption = None,
    transport: TransportOption = None, ssh_config: SshConfigOption = None, fanout: FanoutOption = None,
    testbed: TestbedOption = False, db: DbOption = DEFAULT_DB,
) -> None:
    """Every ordered pair, in rounds of disjoint pairs: bandwidth and latency per
    pair (heatmaps in the HTML report); slow pairs are retested with half as
    many pairs at once, then half again, to tell contention from a bad link."""
    from oddnode.analysis import analyze
    from oddnode.interconnect.matrix import MATRIX_SIZES, run_matrix
    from oddnode.interconnect.pairs import PingPongOptions
    from oddnode.report.terminal import findings_by_nodes

    options = PingPongOptions(sizes=_sizes(sizes) if sizes else MATRIX_SIZES, seconds_per_size=seconds_per_size,
                              port=port)
    with _network_run(topology, nodes, exclude, hostfile, transport, ssh_config, fanout, testbed, db) as (target, store):
        summary = _progress_run("matrix", lambda progress: run_matrix(
            store, target, options=options, retest=retest, on_progress=progress, command=_command_line()))
        dataset = store.load_dataset()
        for note in dict.fromkeys(summary.notes):
            console.print(f"[dim]{note}[/]", highlight=False)
        limit = f", slow below {summary.limit:.6g} MB/s" if summary.limit is not None else ""
        console.print(f"matrix of {target.nodeset}: {len(summary.values)} ordered pairs in {len(summary.plans)} rounds "
                      f"(run {summary.run_id}){limit}; {len(summary.suspects)} slow, {len(summary.retests)} retest rounds",
                      highlight=False)
        findings = [f for f in analyze(dataset).findings if f.kind in PAIR_FINDINGS]
        console.print(findings_by_nodes(findings, Severity.INFO) if findings else "No slow pair.")


switchbench_app = typer.Typer(help="Switchbench's three switch benchmarks: daisy chain, pairwise streaming, "
                                     "all-to-all.", no_args_is_help=True)
app.add_typer(switchbench_app, name="switchbench", rich_help_panel='Interconnect')
# Switchbench's servers, relays and ranks listen here by default, beside the pair runner's 29170.
SWITCHBENCH_PORT = 29171
# The findings the streaming command prints: who the slow pairs have in common.
STREAM_FINDINGS = ("weak-pair-member", "weak-group")


def _lengths(text: Optional[str]) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        return tuple(int(word) for word in text.split(","))
    except ValueError:
        raise typer.BadParameter(f"chain lengths are whole numbers separated by commas, not {text!r}") from None


@switchbench_app.command("chain")
def switchbench_chain_command(
    repetitions: Annotated[int, typer.Option("-r", "--repetitions", help="Runs of every chain length.")] = 3,
    lengths: Annotated[Optional[str], typer.Option("--lengths", help="Chain lengths k, comma-separated (default 2 to N).")] = None,
    message_size: Annotated[int, typer.Option("--message-size", help="Bytes per write of the stream.")] = 1 << 20,
    seconds: Annotated[float, typer.Option("--seconds", help="Seconds each chain streams.")] = 2.0,
    port: Annotated[int, typer.Option("--port", help="TCP port every relay and the last node listen on.")] = SWITCHBENCH_PORT,
    topology: TopologyOption = None,
    nodes: NodesOption = None, exclude: ExcludeOption = None, hostfile: HostfileOption = None,
    transport: TransportOption = None, ssh_config: SshConfigOption = None, fanout: FanoutOption = None,
    testbed: TestbedOption = False, db: DbOption = DEFAULT_DB,
) -> None:
    """Daisy chain: one TCP stream forwarded through the first k nodes, k = 2 to
    N; aggregate throughput ((k-1) hops at once) against k, and the length
    where the switch stops scaling."""
    from oddnode.interconnect.switchbench import ChainOptions, run_chain
    from oddnode.report.terminal import chain_table

    options = ChainOptions(message_size=message_size, seconds=seconds, port=port, lengths=_lengths(lengths))
    with _network_run(topology, nodes, exclude, hostfile, transport, ssh_config, fanout, testbed, db) as (target, store):
        summary = _progress_run("chain", lambda progress: run_chain(
            store, target, repetitions, options=options, on_progress=progress, command=_command_line()))
    console.print(chain_table(summary))
    best = summary.best_aggregate()
    where = f"chain of {target.nodeset}, {options.message_size} B writes (run {summary.run_id})"
    if not best:
        console.print(f"{where}: [red]no chain streamed[/]", highlight=False)
    elif summary.saturation is not None:
        joined = next(p.nodes[-1] for p in summary.points if p.length == summary.saturation)
        console.print(f"{where}: the switch stops scaling at k = {summary.saturation}, where {joined} joined: "
                      f"aggregate {best[summary.saturation]:.6g} MB/s", highlight=False)
    else:
        top = max(best)
        console.print(f"{where}: the aggregate grew with every node added, {best[top]:.6g} MB/s at k = {top}",
                      highlight=False)


@switchbench_app.command("stream")
def switchbench_stream_command(
    patterns: Annotated[str, typer.Option("--patterns", "--pattern", help="Pair patterns, comma-separated: sort, cut, "
                                                                        "fold, shuffle, random, file (with --pairs-file).")] = "sort,cut,fold,shuffle",
    repetitions: PatternRepetitionsOption = 3,
    serial: SerialOption = False,
    message_size: StreamMessageSizeOption = 1 << 20,
    seconds: Annotated[float, typer.Option("--seconds", help="Seconds each pair streams.")] = 2.0,
    port: ServerPortOption = SWITCHBENCH_PORT,
    seed: PatternSeedOption = 0,
    pairs_file: PairsFileOption = None,
    topology: TopologyOption = None,
    nodes: NodesOption = None, exclude: ExcludeOption = None, hostfile: HostfileOption = None,
    transport: TransportOption = None, ssh_config: SshConfigOption = None, fanout: FanoutOption = None,
    testbed: TestbedOption = False, db: DbOption = DEFAULT_DB,
) -> None:
    """Pairwise streaming: sustained streams both ways at once between the pairs
    of each pattern; per-pair throughput, then the node or group common to
    the slow pairs."""
    from oddnode.interconnect.switchbench import StreamOptions, run_streams
    from oddnode.report.terminal import stream_table

    chosen = [name.strip() for name in patterns.split(",") if name.strip()]
    options = StreamOptions(message_size=message_size, seconds=seconds, port=port)
    with _network_run(topology, nodes, exclude, hostfile, transport, ssh_config, fanout, testbed, db) as (target, store):
        for pattern in chosen:
            summary = _progress_run(f"stream {pattern}", lambda progress: run_streams(
                store, target, pattern, repetitions, options=options, seed=seed, serial=serial,
                pairs_file=pairs_file, on_progress=progress, command=_command_line()))
            _print_pattern_run(pattern, summary, repetitions)
            console.print(stream_table(summary))
        _print_slow_pair_findings(store.load_dataset(), STREAM_FINDINGS)


@switchbench_app.command("alltoall")
def switchbench_alltoall_command(
    repetitions: Annotated[int, typer.Option("-r", "--repetitions", help="Runs of the whole all-to-all.")] = 3,
    message_size: Annotated[int, typer.Option("--message-size", help="Bytes each node sends per phase.")] = 1 << 20,
    warmup_passes: Annotated[int, typer.Option("--warmup-passes", help="Untimed passes through every phase first.")] = 1,
    port: Annotated[int, typer.Option("--port", help="TCP port every node listens on.")] = SWITCHBENCH_PORT,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the data each repetition sends and checks.")] = 0,
    topology: TopologyOption = None,
    nodes: NodesOption = None, exclude: ExcludeOption = None, hostfile: HostfileOption = None,
    transport: TransportOption = None, ssh_config: SshConfigOption = None, fanout: FanoutOption = None,
    testbed: TestbedOption = False, db: DbOption = DEFAULT_DB,
) -> None:
    """Congestion-controlled all-to-all: in phase i = 1 to N-1 every node sends
    to node (self+i) mod N and receives from (self-i) mod N, a barrier between
    phases; total time, aggregate throughput, minimum bandwidth per phase."""
    from collections import Counter

    from oddnode.interconnect.switchbench import ALLTOALL_BENCHMARK, AllToAllOptions, run_alltoall
    from oddnode.model import LabelKind
    from oddnode.nodes import fold
    from oddnode.report.terminal import alltoall_table

    options = AllToAllOptions(message_size=message_size, warmup_passes=warmup_passes, port=port)
    with _network_run(topology, nodes, exclude, hostfile, transport, ssh_config, fanout, testbed, db) as (target, store):
        summary = _progress_run("alltoall", lambda progress: run_alltoall(
            store, target, repetitions, options=options, seed=seed, on_progress=progress, command=_command_line()))
        # The nodes charged with a failed or invalid repetition, not the
        # ranks that stopped because of them.
        charged = {f.label for f in store.load_failures()
                   if f.benchmark == ALLTOALL_BENCHMARK and f.label_kind is LabelKind.NODE}
    if charged:
        console.print(f"[red]failed or invalid on[/] {fold(charged)}", highlight=False)
    where = f"all-to-all of {fold(summary.nodes)}, {summary.message_size} B per phase (run {summary.run_id})"
    best = summary.best()
    if best is None or best.total_seconds is None or best.aggregate_bandwidth is None:
        problems = dict.fromkeys(problem for r in summary.repetitions for problem in r.problems)
        console.print(f"{where}: [red]no repetition in which every node ran and checked its data[/]", highlight=False)
        for problem in list(problems)[:5]:
            console.print(f"[dim]{problem}[/]", highlight=False)
        return
    console.print(alltoall_table(summary))
    receivers = Counter(phase.slowest_receiver for phase in best.phases)
    slowest, count = receivers.most_common(1)[0]
    console.print(f"{where}: total {best.total_seconds:.6g} s, aggregate {best.aggregate_bandwidth:.6g} MB/s; "
                  f"slowest receiver {slowest} (lowest in {count} of {len(best.phases)} phases)", highlight=False)


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
    topology: TopologyOption = None,
    wide: WideOption = False,
) -> None:
    """Judge the results: statistics, findings with evidence and remedies, correlations."""
    from oddnode.analysis import analyze
    from oddnode.findings import Sensitivity
    from oddnode.io.stab import import_stab
    from oddnode.store import StoreError, open_store

    with _user_errors():
        sensitivity = Sensitivity(alpha=alpha, min_effect=min_effect)
        location = db or (Path(":memory:") if paths else DEFAULT_DB)
        if not paths and not location.exists():
            raise StoreError(f"no results store at {location}: import results first or give result directories")
        groups = _topology(topology)
        not_recorded = None
        if paths or groups:  # an import or a topology is written first
            with open_store(location) as store:
                if paths:
                    import_stab(store, paths, command="oddnode analyze")
                _save_topology(store, groups)
                result = analyze(store.load_dataset(), sensitivity)
                store.record_findings("oddnode analyze", result.findings)
        else:
            # Read-only while judging: a store one may read but not write is
            # judged all the same, and only the findings' record is lost.
            with open_store(location, read_only=True) as store:
                result = analyze(store.load_dataset(), sensitivity)
            try:
                with open_store(location) as store:
                    store.record_findings("oddnode analyze", result.findings)
            except StoreError as err:
                not_recorded = f"findings not recorded in the store: {err}"
    if not_recorded:
        err_console.print(f"[yellow]{not_recorded}[/]", highlight=False)
    if json_out:
        typer.echo(json.dumps(result.to_json(), indent=2, default=_plain))
    else:
        from oddnode.report.terminal import print_analysis

        print_analysis(console, result, wide)
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


@app.command("synth", rich_help_panel='Results and statistics')
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


# -- reaching nodes ---------------------------------------------------------

NodesOption = Annotated[Optional[str], typer.Option("-w", "--nodes", help="Nodes, ClusterShell syntax: node[001-484].")]
ExcludeOption = Annotated[Optional[str], typer.Option("-x", "--exclude", help="Nodes to leave out.")]
HostfileOption = Annotated[Optional[Path], typer.Option("--hostfile", help="File of node names, one a line.")]
TransportOption = Annotated[Optional[str], typer.Option(
    "--transport", help="local, ssh or slurm (default: local without nodes, ssh with).")]
SshConfigOption = Annotated[Optional[Path], typer.Option("--ssh-config", help="ssh client configuration file (-F).")]
FanoutOption = Annotated[Optional[int], typer.Option("--fanout", help="ssh connections at once (default 64).")]
TimeoutOption = Annotated[float, typer.Option("--timeout", help="Seconds a node may take for a probe.")]
TestbedOption = Annotated[bool, typer.Option("--testbed", help="Run on the nodes of the running testbed.")]


def _target(nodes, exclude, hostfile, transport, ssh_config, fanout, testbed):
    """The nodes and transport a command runs on, from its options."""
    from oddnode.check import make_target, select_nodes

    chosen = select_nodes(nodes, exclude, hostfile)
    if testbed:
        from oddnode.testbed import Testbed

        bed = Testbed.load(_state(None))
        chosen = chosen or select_nodes(bed.nodeset, exclude)
        ssh_config = ssh_config or bed.ssh_config
        transport = transport or "ssh"
    return make_target(chosen, transport, ssh_config, fanout)


def _print_unanswered(result) -> None:
    """Nodes that gave no inventory, then what the probe skipped (and where), folded."""
    from collections import defaultdict

    from oddnode.nodes import fold

    for label, nodes in (("unreachable", result.unreachable), ("failed", result.failed)):
        if nodes:
            console.print(f"[red]{label}:[/] {fold(nodes)}")
    skipped: dict[str, list[str]] = defaultdict(list)
    for node, report in result.reports.items():
        for note in report.notes:
            skipped[note].append(node)
    for note, nodes in sorted(skipped.items()):
        console.print(f"[dim]{fold(nodes)}: {note}[/]", highlight=False)


@app.command("inventory", rich_help_panel='Nodes')
def inventory_command(
    nodes: NodesOption = None, exclude: ExcludeOption = None, hostfile: HostfileOption = None,
    transport: TransportOption = None, ssh_config: SshConfigOption = None, fanout: FanoutOption = None,
    timeout: TimeoutOption = 60.0, testbed: TestbedOption = False, db: DbOption = DEFAULT_DB,
    snapshot: Annotated[Optional[Path], typer.Option(help="Write an expectations file from the majority values.")] = None,
) -> None:
    """Collect every node's facts (CPU, memory, BIOS, kernel, NICs, GPUs, disks,
    libraries, processes) and print every fact whose value differs between nodes."""
    from oddnode.check import collect_inventory
    from oddnode.findings import find_all
    from oddnode.report.terminal import findings_by_nodes

    with _user_errors(), _testbed_errors():
        target = _target(nodes, exclude, hostfile, transport, ssh_config, fanout, testbed)
        with _open(db, read_only=False) as store:
            result = collect_inventory(store, target, timeout, _command_line())
            dataset = store.load_dataset()
        console.print(f"{len(result.reports)} of {len(target.nodes)} nodes answered "
                      f"({target.transport.name}: {target.nodeset}); facts stored in {db}")
        _print_unanswered(result)
        findings = find_all(dataset, rules=["inconsistent-fact"])
        if findings:
            console.print(findings_by_nodes(findings))
        else:
            console.print("Every fact has the same value on every node that answered.")
        if snapshot:
            from oddnode.inventory.expectations import snapshot as write_snapshot

            snapshot.write_text(write_snapshot(dataset.facts, sorted(result.reports)), encoding="utf-8")
            console.print(f"expectations written to {snapshot}: edit it, then run oddnode diagnose --expect {snapshot}")


@app.command("diagnose", rich_help_panel='Nodes')
def diagnose_command(
    expect: Annotated[Path, typer.Option("--expect", help="Expectations file (YAML).")],
    db: DbOption = DEFAULT_DB,
) -> None:
    """Check the stored facts against an expectations file; exit 1 on any failure."""
    from oddnode.inventory.expectations import check_expectations, load_expectations
    from oddnode.report.terminal import expectation_table

    with _user_errors(), _open(db, read_only=False) as store:
        facts = store.load_facts()
        nodes = sorted({node for per_node in facts.values() for node in per_node})
        report = check_expectations(load_expectations(expect), facts, nodes)
        store.record_findings(_command_line(), report.failures)
    console.print(expectation_table(report))
    if report.failures:
        from oddnode.report.terminal import findings_by_nodes

        console.print(findings_by_nodes(report.failures))
    if report.failures:
        raise typer.Exit(code=1)


class _CheckProgress:
    """A progress bar per benchmark, one line per judged stage."""

    def __init__(self, out: Console):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.out = out
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("repetitions"), TimeElapsedColumn(), console=out, transient=False)
        self.tasks: dict[str, int] = {}

    def __enter__(self):
        self.progress.start()
        return self

    def __exit__(self, *exc):
        self.progress.stop()

    def stage_started(self, stage: str) -> None:
        if stage == "diagnostics":
            self.progress.console.print("[bold]diagnostics[/]: inventory of every node")

    def benchmark_started(self, benchmark: str, done: int, total: int) -> None:
        self.tasks[benchmark] = self.progress.add_task(benchmark, total=total, completed=done)

    def repetition_done(self, benchmark: str, done: int, total: int) -> None:
        self.progress.update(self.tasks[benchmark], completed=done)

    def stage_judged(self, result) -> None:
        blocking = result.blocking
        verdict = (f"[red]{len(blocking)} finding{'s' if len(blocking) > 1 else ''} of warning severity or above[/]"
                   if blocking else "[green]consistent[/]")
        self.progress.console.print(f"[bold]{result.name}[/]: {verdict}")
        for note in result.notes:
            self.progress.console.print(f"  [dim]{note}[/]", highlight=False)


def _names(text: str | None) -> tuple[str, ...]:
    """A comma-separated option ('' and 'none': nothing)."""
    if text is None or text.strip() in ("", "none"):
        return ()
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _check_plan(stages: str, skip: str | None, repetitions: int, benchmark_timeout: float, probe_timeout: float,
                expect: Optional[Path], parameters: dict):
    from oddnode.check import CheckPlan

    try:
        plan = CheckPlan(stages=_names(stages), skip=_names(skip), repetitions=repetitions,
                         benchmark_timeout=benchmark_timeout,
                         probe_timeout=probe_timeout, expectations=str(expect) if expect else None,
                         parameters={name: {k: v for k, v in values.items() if v is not None}
                                     for name, values in parameters.items()})
        plan.validate()
        return plan
    except (ValueError, KeyError) as err:
        raise typer.BadParameter(str(err)) from None


@app.command("check")
def check_command(
    nodes: NodesOption = None, exclude: ExcludeOption = None, hostfile: HostfileOption = None,
    transport: TransportOption = None, ssh_config: SshConfigOption = None, fanout: FanoutOption = None,
    timeout: TimeoutOption = 60.0, testbed: TestbedOption = False, db: DbOption = DEFAULT_DB,
    expect: Annotated[Optional[Path], typer.Option("--expect", help="Expectations file (YAML).")] = None,
    stages: Annotated[str, typer.Option(
        help="Stages after diagnostics, in this order: memory,compute,disk,interconnect; 'none' for diagnostics only."
    )] = "memory,compute,disk,interconnect",
    skip: Annotated[Optional[str], typer.Option(
        help="Benchmarks to leave out of their stage: memory, dgemm, hpl, disk, pairs, bisection (comma-separated).")] = None,
    repetitions: Annotated[int, typer.Option("--repetitions", "-r", help="Runs of each benchmark per node.")] = 5,
    keep_going: Annotated[bool, typer.Option(
        "--continue", help="Run the next stage even when one has warnings.")] = False,
    resume: Annotated[bool, typer.Option(
        help="Go on with the newest unfinished check in --db (its nodes and plan).")] = False,
    benchmark_timeout: Annotated[float, typer.Option(help="Seconds one repetition may take on a node.")] = 600.0,
    memory_elements: Annotated[Optional[int], typer.Option(
        help="Doubles per array of the memory kernel (default: 4x this machine's last-level cache).")] = None,
    memory_ntimes: Annotated[int, typer.Option(help="Timed iterations of the memory kernel (first discarded).")] = 10,
    memory_min_seconds: Annotated[float, typer.Option(
        help="Repeat each timed memory loop until it lasts about this long (default 0: one pass).")] = 0.0,
    threads: Annotated[Optional[int], typer.Option(help="OpenMP threads of the kernels (default: the node's).")] = None,
    dgemm_n: Annotated[Optional[int], typer.Option(help="Matrix order of DGEMM (default 6000).")] = None,
    hpl_n: Annotated[Optional[int], typer.Option(help="Problem size N of HPL through hpcc (default 10000).")] = None,
    disk_dir: Annotated[Optional[str], typer.Option(
        help="Directory on the nodes the disk benchmark writes in (default /var/tmp).")] = None,
    disk_size: Annotated[Optional[int], typer.Option(help="Bytes the disk benchmark writes (default 4 GiB).")] = None,
    disk_engine: Annotated[Optional[str], typer.Option(
        help="auto (fio where installed, else oddnode's kernel), fio or oddnode.")] = None,
    html: Annotated[Optional[Path], typer.Option(help="HTML report (default: oddnode-report.html).")] = Path("oddnode-report.html"),
    patterns: Annotated[Optional[str], typer.Option(
        help="Pair patterns of the interconnect stage (default sort,cut,fold,shuffle).")] = None,
    sizes: Annotated[Optional[str], typer.Option(
        help="Ping-pong message sizes in bytes, comma-separated (default 0 B to 4 MiB).")] = None,
    seconds_per_size: Annotated[Optional[float], typer.Option(help="Seconds each ping-pong size is timed.")] = None,
    bisection_seconds: Annotated[Optional[float], typer.Option(help="Seconds each bisection stream lasts.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print findings as JSON.")] = False,
    wide: WideOption = False,
    topology: TopologyOption = None,
) -> None:
    """The production-readiness check: diagnostics (inventory, consistency,
    expectations), then memory, compute and disk benchmarks, R runs per node,
    then the interconnect (ping-pong pair patterns, bisection), each stage
    judged across nodes before the next; a stage with warnings
    stops the check unless --continue. Exit 1 when not ready, 130 when
    interrupted (everything finished is kept: --resume goes on)."""
    from oddnode.check import ResumeError, make_target, resumable_check, run_check
    from oddnode.report.html import write_report
    from oddnode.report.terminal import expectation_table, print_analysis

    command = _command_line()
    out = err_console if json_out else console
    with _user_errors(), _testbed_errors(), _open(db, read_only=False) as store:
        _save_topology(store, _topology(topology, testbed))
        resume_id = None
        if resume:
            if nodes or hostfile or exclude or testbed:
                raise typer.BadParameter("--resume goes on with the nodes of the interrupted check: name none")
            try:
                resume_id, described, plan = resumable_check(store)
            except ResumeError as err:
                raise typer.BadParameter(str(err)) from None
            target = make_target(described["nodes"], described["transport"],
                                 Path(described["ssh_config"]) if described.get("ssh_config") else None,
                                 described.get("fanout"))
            options = {}
            out.print(f"resuming check {resume_id} on {target.nodeset}")
        else:
            target = _target(nodes, exclude, hostfile, transport, ssh_config, fanout, testbed)
            plan = _check_plan(stages, skip, repetitions, benchmark_timeout, timeout, expect, {
                "memory": {"elements": memory_elements, "ntimes": memory_ntimes, "threads": threads,
                           "min_loop_seconds": memory_min_seconds},
                "dgemm": {"n": dgemm_n, "threads": threads},
                "hpl": {"n": hpl_n, "threads": threads},
                "disk": {"directory": disk_dir, "size": disk_size, "engine": disk_engine},
                "pairs": {"patterns": list(_names(patterns)) or None, "seconds_per_size": seconds_per_size,
                          "sizes": list(_sizes(sizes)) if sizes else None},
                "bisection": {"seconds": bisection_seconds},
            })
            options = {"ssh_config": str(target.transport.ssh_config.absolute())
                       if getattr(target.transport, "ssh_config", None)
                       else None, "fanout": fanout}
        try:
            with _CheckProgress(out) as progress:
                result = run_check(store, target, plan, keep_going=keep_going, command=command,
                                   target_options=options, resume=resume_id, observer=progress)
        except KeyboardInterrupt:
            err_console.print(f"interrupted: every finished repetition is kept in {db}; "
                              f"`oddnode check --resume --db {db}` goes on from there")
            raise typer.Exit(code=130) from None
    if json_out:
        typer.echo(json.dumps(result.analysis.to_json(), indent=2, default=_plain))
    else:
        if result.inventory is not None:
            console.print(f"Diagnostics on {target.nodeset} ({target.transport.name}): "
                          f"{len(result.inventory.reports)} of {len(target.nodes)} nodes answered")
            _print_unanswered(result.inventory)
        if result.expectations is not None:
            console.print(expectation_table(result.expectations))
        print_analysis(console, result.analysis, wide)
    if result.stopped_after:
        out.print(f"[red]stopped after {result.stopped_after}[/]: its findings make later benchmarks "
                  f"inconsistent; not run: {', '.join(result.not_run)}. "
                  f"`oddnode check --resume --continue --db {db}` runs them anyway.")
    if html:
        write_report(result.analysis, html, result)
        out.print(f"report written to {html}")
    if not result.analysis.ready:
        raise typer.Exit(code=1)


# -- the testbed -------------------------------------------------------------

testbed_app = typer.Typer(help="A virtual cluster on this machine (root): network namespaces with sshd.",
                          no_args_is_help=True)
fault_app = typer.Typer(help="Inject a fault into one testbed node.", no_args_is_help=True)
testbed_app.add_typer(fault_app, name="fault")
app.add_typer(testbed_app, name="testbed", rich_help_panel='Virtual cluster')
StateDirOption = Annotated[Optional[Path], typer.Option(
    "--state-dir", help="Where the testbed keeps its state (default $ODDNODE_TESTBED_DIR or /run/oddnode/testbed).")]


@contextmanager
def _testbed_errors() -> Iterator[None]:
    from oddnode.testbed import TestbedError

    try:
        yield
    except TestbedError as err:
        raise _fail(str(err)) from None


def _state(state_dir: Optional[Path]) -> Path:
    """--state-dir, else $ODDNODE_TESTBED_DIR, else /run/oddnode/testbed."""
    from oddnode.testbed import DEFAULT_STATE_DIR

    return state_dir or Path(os.environ.get("ODDNODE_TESTBED_DIR") or DEFAULT_STATE_DIR)


def _rate(text: Optional[str], option: str) -> Optional[int]:
    from oddnode.testbed import parse_rate

    try:
        return None if text is None else parse_rate(text)
    except ValueError as err:
        raise _fail(f"{option}: {err}") from None


@testbed_app.command("up")
def testbed_up(nodes: Annotated[int, typer.Option("--nodes", help="Number of nodes.")] = 8,
               leaves: Annotated[int, typer.Option(
                   "--leaves", help="Leaf switches the nodes hang from, under one core switch.")] = 1,
               link_rate: Annotated[Optional[str], typer.Option(
                   "--link-rate", help="Shape every node's link, e.g. 100mbit (default: unshaped).")] = None,
               state_dir: StateDirOption = None) -> None:
    """Bring up N nodes, each with its own address, hostname, mounts, processes and sshd."""
    from oddnode.nodes import fold
    from oddnode.testbed import format_rate, up

    rate = _rate(link_rate, "--link-rate")
    with _testbed_errors():
        bed = up(nodes=nodes, state_dir=_state(state_dir), leaves=leaves, link_rate=rate)
    console.print(f"testbed up: {bed.nodeset} ({len(bed.nodes)} nodes); ssh -F {bed.ssh_config} {bed.nodes[0]}")
    if bed.leaves:
        console.print(f"leaves: {', '.join(f'{leaf} {fold(nodes)}' for leaf, nodes in bed.leaves.items())}; "
                      f"topology file {bed.topology}", highlight=False)
    if bed.link_rate:
        console.print(f"every node's link shaped to {format_rate(bed.link_rate)}")


@testbed_app.command("status")
def testbed_status(state_dir: StateDirOption = None) -> None:
    """Nodes, addresses, sshd state and injected faults."""
    from oddnode.testbed import status

    with _testbed_errors():
        console.print(status(_state(state_dir)).summary(), highlight=False)


@testbed_app.command("down")
def testbed_down(state_dir: StateDirOption = None) -> None:
    """Remove every namespace, link, mount and process the testbed created."""
    from oddnode.testbed import down

    with _testbed_errors():
        down(_state(state_dir))
    console.print("testbed down")


def _fault_file(state_dir: Optional[Path], node: str, path: str, content: str) -> None:
    from oddnode.testbed import fault_file

    with _testbed_errors():
        fault_file(_state(state_dir), node, path, content)
    console.print(f"{node}: {path} replaced")


@fault_app.command("bios-date")
def fault_bios_date(node: str, date: Annotated[str, typer.Argument(help="e.g. 09/02/2004")],
                    state_dir: StateDirOption = None) -> None:
    """Give one node another BIOS date (/sys/class/dmi/id/bios_date)."""
    _fault_file(state_dir, node, "/sys/class/dmi/id/bios_date", date + "\n")


@fault_app.command("memory")
def fault_memory(node: str,
                 percent: Annotated[Optional[float], typer.Option(help="MemTotal as a percentage of the real one.")] = None,
                 kib: Annotated[Optional[int], typer.Option(help="MemTotal in KiB.")] = None,
                 state_dir: StateDirOption = None) -> None:
    """Show one node less (or more) memory in /proc/meminfo."""
    from oddnode.testbed import meminfo_with_total, real_memory_total_kib

    if (percent is None) == (kib is None):
        raise _fail("give either --percent or --kib")
    total = kib if kib is not None else int(real_memory_total_kib() * percent / 100)
    _fault_file(state_dir, node, "/proc/meminfo", meminfo_with_total(total))


@fault_app.command("smt")
def fault_smt(node: str, value: Annotated[str, typer.Argument(help="on, off, forceoff or notsupported")],
              state_dir: StateDirOption = None) -> None:
    """Give one node another SMT setting (/sys/devices/system/cpu/smt/control)."""
    _fault_file(state_dir, node, "/sys/devices/system/cpu/smt/control", value + "\n")


@fault_app.command("file")
def fault_any_file(node: str, path: str, content: str, state_dir: StateDirOption = None) -> None:
    """Replace any existing file, as that node alone sees it."""
    _fault_file(state_dir, node, path, content)


@fault_app.command("hang")
def fault_hang_file(node: str, path: str, state_dir: StateDirOption = None) -> None:
    """Make reading a file hang on one node, as on a stuck file system."""
    from oddnode.testbed import fault_hang

    with _testbed_errors():
        fault_hang(_state(state_dir), node, path)
    console.print(f"{node}: reading {path} now hangs")


@fault_app.command("hog")
def fault_hog(node: str, seconds: Annotated[int, typer.Option(help="How long it runs.")] = 600,
              workers: Annotated[int, typer.Option(help="Processes; 0: one per CPU of the node.")] = 0,
              state_dir: StateDirOption = None) -> None:
    """Start a competing process (a memory-bandwidth hog) inside one node, bounded in time."""
    from oddnode.testbed import fault_process, hog_argv

    with _testbed_errors():
        pid = fault_process(_state(state_dir), node, hog_argv(seconds, workers=workers), seconds)
    console.print(f"{node}: competing process {pid} for {seconds} s")


RateOption = Annotated[Optional[str], typer.Option("--rate", help="The shaped rate, e.g. 10mbit.")]
SlowerOption = Annotated[Optional[float], typer.Option(
    "--slower", help="Divide the link's rate by this (10: a tenth of the others).")]


def _shaping(rate: Optional[str], slower: Optional[float]) -> tuple[Optional[int], Optional[float]]:
    if (rate is None) == (slower is None):
        raise _fail("give either --rate or --slower")
    return _rate(rate, "--rate"), slower


@fault_app.command("link")
def fault_link_rate(node: str, rate: RateOption = None, slower: SlowerOption = None,
                    state_dir: StateDirOption = None) -> None:
    """Shape one node's link, both ways, to a lower rate (tc tbf)."""
    from oddnode.testbed import fault_link, format_rate

    bits, divisor = _shaping(rate, slower)
    with _testbed_errors():
        shaped = fault_link(_state(state_dir), node, bits, divisor=divisor)
    console.print(f"{node}: link shaped to {format_rate(shaped)}")


@fault_app.command("uplink")
def fault_uplink_rate(leaf: Annotated[str, typer.Argument(help="A leaf switch: leaf1, leaf2...")],
                      rate: RateOption = None, slower: SlowerOption = None,
                      state_dir: StateDirOption = None) -> None:
    """Shape one leaf switch's uplink to the core, both ways (--slower divides its non-blocking rate)."""
    from oddnode.testbed import fault_uplink, format_rate

    bits, divisor = _shaping(rate, slower)
    with _testbed_errors():
        shaped = fault_uplink(_state(state_dir), leaf, bits, divisor=divisor)
    console.print(f"{leaf}: uplink shaped to {format_rate(shaped)}")


@fault_app.command("delay")
def fault_link_delay(node: str, ms: Annotated[float, typer.Option("--ms", help="Milliseconds each way.")],
                     state_dir: StateDirOption = None) -> None:
    """Delay every packet on one node's link (tc netem; the kernel needs sch_netem)."""
    from oddnode.testbed import fault_delay

    with _testbed_errors():
        fault_delay(_state(state_dir), node, ms)
    console.print(f"{node}: link delayed {ms:g} ms each way")


@fault_app.command("stop-sshd")
def fault_stop_sshd(node: str, state_dir: StateDirOption = None) -> None:
    """Make one node unreachable by stopping its sshd."""
    from oddnode.testbed import stop_sshd

    with _testbed_errors():
        stop_sshd(_state(state_dir), node)
    console.print(f"{node}: sshd stopped")


@fault_app.command("clear")
def fault_clear(state_dir: StateDirOption = None) -> None:
    """Undo every injected fault."""
    from oddnode.testbed import clear_faults

    with _testbed_errors():
        clear_faults(_state(state_dir))
    console.print("faults cleared")


def _plain(value):
    import numpy as np

    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def main() -> None:
    app()
