"""The commands that read the results store: STAB's statistics (stats,
dist, findn, correlate, findc, common), the judgement (analyze), the
synthetic dataset and the export."""

from __future__ import annotations

import time
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from oddnode.app.cli.common import (
    DEFAULT_DB,
    DbOption,
    JunitOption,
    AlphaOption,
    DEFAULT_ALPHA,
    DEFAULT_MIN_EFFECT,
    MinEffectOption,
    StoredTopologyOption,
    WideOption,
    console,
    detail,
    err_console,
    inform,
    analysis_document,
    print_json,
    open_db,
    quiet,
    say_waiting,
    read_topology,
    save_topology,
    user_errors,
)
from oddnode.core.model import Severity
from oddnode.report.text import literal
from oddnode.core.nodes import node_sets
from oddnode.app.synth import CASE_STUDY_NODES, DEFAULT_SEED

RESULTS_PANEL = "Results and statistics"
# Rows of findc printed by default.
FINDC_ROWS = 40


# -w/-x of the commands that judge the store: a part of what it holds.
JudgedNodesOption = Annotated[Optional[list[str]], typer.Option(
    "-w", "--nodes", metavar="NODES", help="Judge only these nodes (ClusterShell syntax, @groups too; repeated, "
                                           "they add up); a pair or set only when all its members are among them.")]
JudgedExcludeOption = Annotated[Optional[list[str]], typer.Option(
    "-x", "--exclude", metavar="NODES", help="Judge without these nodes; repeated, they add up.")]
# --run/--since: an earlier view of the store, or its recent runs alone.
RunOption = Annotated[Optional[int], typer.Option(
    "--run", min=1, help="Judge the store as it was after this run (its id: oddnode history, export runs).")]
SinceOption = Annotated[Optional[datetime], typer.Option(
    "--since", formats=["%Y-%m-%d", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M:%S",
                        "%Y-%m-%dT%H:%M:%S.%f"],
    help="Judge only the runs started at this UTC date or time or later.")]


def judged_part(dataset, nodes: str | list[str] | None, exclude: str | list[str] | None):
    """The part of ``dataset`` about ``-w`` minus ``-x`` (all of it when
    neither is given); an error when it holds nothing about them."""
    nodes, exclude = node_sets(nodes), node_sets(exclude)
    if not nodes and not exclude:
        return dataset
    from oddnode.app.check import select_nodes
    from oddnode.core.nodes import expand_command_line
    from oddnode.core.subset import restricted
    from oddnode.store import StoreError

    if nodes:
        chosen = set(select_nodes(nodes, exclude))
        part = restricted(dataset, chosen.__contains__)
    else:
        excluded = set(expand_command_line(exclude))
        part = restricted(dataset, lambda node: node not in excluded)
    if not (part.series or part.facts or part.failures or part.node_trouble or part.declared_nodes):
        said = " ".join(f"{option} {value}" for option, value in (("-w", nodes), ("-x", exclude)) if value)
        raise StoreError(f"the store holds no result, fact or failed run of the nodes {said} leaves")
    return part


class FailOn(str, Enum):
    never = "never"
    warning = "warning"
    error = "error"


class ExportFormat(str, Enum):
    plot = "plot"
    csv = "csv"
    parquet = "parquet"
    json = "json"
    prometheus = "prometheus"


def load_judged(db: Path, nodes: str | None = None, exclude: str | None = None, run: int | None = None,
                since: datetime | None = None):
    """The store's dataset as of ``--run``/``--since``, or its part about
    ``-w`` minus ``-x``."""
    with open_db(db) as store:
        dataset = load_as_of(store, run, since)
    return judged_part(dataset, nodes, exclude)


def load_as_of(store, run: int | None, since: datetime | None):
    """The store's dataset, of the runs ``--run`` and ``--since`` leave."""
    with store.as_of(run, since):
        return store.load_dataset()


def load_series(db: Path, benchmark: str, nodes: str | None = None, exclude: str | None = None,
                run: int | None = None, since: datetime | None = None):
    """A series of the store, or a numeric fact as one (``fact:KEY``)."""
    from oddnode.findings.facts import series_or_fact

    return series_or_fact(load_judged(db, nodes, exclude, run, since), benchmark)


def export_command(
    fmt: Annotated[ExportFormat, typer.Argument(metavar="FORMAT", help="plot, csv, parquet, json or prometheus.")],
    out: Annotated[Path, typer.Argument(help="Output directory (prometheus: a file, - for stdout).")],
    db: DbOption = DEFAULT_DB,
    benchmark: Annotated[Optional[list[str]], typer.Option(help="Only these benchmarks (plot format).")] = None,
) -> None:
    """Export benchmarks to plot files, tables to CSV, Parquet or JSON, the verdict per node to Prometheus.

    Benchmarks go back to STAB plot files, every table to CSV, Parquet or
    JSON, or the verdict per node to a Prometheus textfile."""
    from oddnode.judge.analysis import analyze
    from oddnode.store.exports import export_plot_files, export_tables
    from oddnode.report.prometheus import prometheus_text, write_textfile

    with user_errors(), open_db(db) as store:
        if fmt is ExportFormat.prometheus:
            # The verdict of an analysis made now (with the findings last
            # recorded): a store imported but never analysed is not green.
            analysed = time.time()
            analysis = analyze(store.load_dataset(), correlations=False, require_data=True)
            write_textfile(prometheus_text(store, analysis, analysed=analysed), out)
            if str(out) != "-":
                inform(f"wrote {literal(out)}")
            return
        if fmt is ExportFormat.plot:
            written = export_plot_files(store, out, benchmark)
        else:
            written = export_tables(store, out, fmt.value)
    inform(f"wrote {len(written)} files to {literal(out)}")


def stats_command(
    benchmarks: Annotated[Optional[list[str]], typer.Argument(
        help="Benchmarks, benchmark:metric, or benchmark:prefix (pingpong.cut:bandwidth); default all.")] = None,
    db: DbOption = DEFAULT_DB,
    json_out: Annotated[bool, typer.Option("--json", help="Print the rows as JSON.")] = False,
    wide: WideOption = False,
    nodes: JudgedNodesOption = None,
    exclude: JudgedExcludeOption = None,
    run: RunOption = None,
    since: SinceOption = None,
) -> None:
    """Descriptive statistics per benchmark metric (STAB's anal).

    n, low, high, %variability, mean, median, std dev; a benchmark with
    several metrics (a pair pattern's message sizes) gets a row for each."""
    from oddnode.report.terminal import print_stats
    from oddnode.stats.describe import describe

    with user_errors():
        dataset = load_judged(db, nodes, exclude, run, since)
        names = benchmarks or dict.fromkeys(s.benchmark for s in dataset.series)
        chosen = [s for name in names for s in dataset.select(name)]
    rows = [(s, describe(s)) for s in chosen]
    if json_out:
        print_json([{"benchmark": s.benchmark, "metric": s.metric, "unit": s.unit,
                                "direction": s.direction.value, "population": s.label_kind.value, **d.to_json()}
                               for s, d in rows])
        return
    print_stats(console, rows, wide)


def histogram_bins(value: str) -> str | int:
    """--bins: auto, whole or a number."""
    if value in ("auto", "a"):
        return "auto"
    if value in ("whole", "w"):
        return "whole"
    try:
        return int(value)
    except ValueError:
        raise typer.BadParameter(f"{value!r}: use auto, whole or a number of bins") from None


def dist_command(
    benchmark: Annotated[str, typer.Argument(help="Benchmark to look at.")],
    bins: Annotated[str, typer.Option(help="auto (√n bins), whole (one bin per integer) or a number.")] = "auto",
    plot: Annotated[Optional[Path], typer.Option(help="Write the histogram to a .png or .svg file.")] = None,
    db: DbOption = DEFAULT_DB,
    json_out: Annotated[bool, typer.Option("--json", help="Print the histogram and the tests as JSON.")] = False,
    nodes: JudgedNodesOption = None,
    exclude: JudgedExcludeOption = None,
    run: RunOption = None,
    since: SinceOption = None,
) -> None:
    """Distribution of one benchmark (STAB's dplot).

    A text histogram, the chi-squared fit to the normal, normality, skew
    and dip tests."""
    from oddnode.report.analysis_json import dist_json
    from oddnode.report.terminal import distribution_table
    from oddnode.report.text_histogram import text_histogram
    from oddnode.stats.distribution import chi_squared_normal, dip_test, normality

    with user_errors():
        series = load_series(db, benchmark, nodes, exclude, run, since)
        chosen = histogram_bins(bins)
        tests = chi_squared_normal(series.values, chosen), normality(series.values), dip_test(series.values)
        if json_out:
            print_json(dist_json(series, chosen, *tests))
        else:
            console.print(text_histogram(series.values, bins=chosen), highlight=False)
            console.print(distribution_table(series, *tests))
        if plot:
            from oddnode.report.plots import histogram_figure, save_figure

            save_figure(histogram_figure(series, bins=chosen), plot)
            inform(f"histogram written to {literal(plot)}", out=err_console if json_out else None)


def findn_command(
    benchmark: Annotated[str, typer.Argument()],
    db: DbOption = DEFAULT_DB,
    json_out: Annotated[bool, typer.Option("--json", help="Print the fits as JSON.")] = False,
    nodes: JudgedNodesOption = None,
    exclude: JudgedExcludeOption = None,
    run: RunOption = None,
    since: SinceOption = None,
) -> None:
    """Chi-squared fit to the normal over many bin counts, to see how bin choice sways it."""
    from oddnode.report.analysis_json import findn_json
    from oddnode.report.terminal import findn_table
    from oddnode.stats.distribution import findn

    with user_errors():
        series = load_series(db, benchmark, nodes, exclude, run, since)
        sweep = findn(series.values)
    if json_out:
        print_json(findn_json(series, sweep))
    else:
        console.print(findn_table(series, sweep))


def correlate_command(
    x: Annotated[str, typer.Argument(help="First benchmark, or fact:KEY (a numeric fact: a temperature).")],
    y: Annotated[str, typer.Argument(help="Second benchmark, or fact:KEY.")],
    plot: Annotated[Optional[Path], typer.Option(help="Write the scatter plot to a .png or .svg file.")] = None,
    db: DbOption = DEFAULT_DB,
    json_out: Annotated[bool, typer.Option(
        "--json", help="Print both series, the correlation and each label's pair of values as JSON.")] = False,
    nodes: JudgedNodesOption = None,
    exclude: JudgedExcludeOption = None,
    run: RunOption = None,
    since: SinceOption = None,
) -> None:
    """Correlate two benchmarks joined by node (STAB's cplot): Pearson and Spearman with p-values.

    Either may be a numeric fact, fact:KEY (a temperature, a fan speed, a
    throttling count), to see whether it goes with a benchmark."""
    from oddnode.findings.facts import series_or_fact
    from oddnode.report.analysis_json import correlate_json
    from oddnode.report.terminal import correlation_table
    from oddnode.stats.correlation import correlate

    with user_errors():
        dataset = load_judged(db, nodes, exclude, run, since)
        a, b = series_or_fact(dataset, x), series_or_fact(dataset, y)
        result = correlate(a, b)
        if json_out:
            print_json(correlate_json(a, b, result))
        else:
            console.print(correlation_table([result], f"{a.name} vs {b.name}"))
        if plot:
            from oddnode.report.plots import save_figure, scatter_figure

            save_figure(scatter_figure(a, b, result), plot)
            inform(f"scatter plot written to {literal(plot)}", out=err_console if json_out else None)


def findc_command(
    grep: Annotated[Optional[str], typer.Option(help="Only pairs that involve this benchmark.")] = None,
    limit: Annotated[int, typer.Option(help="Rows to print (0: all).")] = FINDC_ROWS,
    db: DbOption = DEFAULT_DB,
    json_out: Annotated[bool, typer.Option("--json", help="Print the rows as JSON.")] = False,
    nodes: JudgedNodesOption = None,
    exclude: JudgedExcludeOption = None,
    run: RunOption = None,
    since: SinceOption = None,
) -> None:
    """Correlate every pair of benchmarks (STAB's findc), strongest first."""
    from oddnode.report.analysis_json import findc_json
    from oddnode.report.terminal import correlation_table
    from oddnode.stats.correlation import correlate_all

    with user_errors():
        dataset = load_judged(db, nodes, exclude, run, since)
    rows = correlate_all(dataset.series)
    if grep:
        rows = [c for c in rows if grep in (c.x, c.y)]
    shown = rows[:limit] if limit else rows
    if json_out:
        print_json(findc_json(rows, shown, grep, limit))
        return
    console.print(correlation_table(shown, "Correlations between benchmarks"))


def failures_in_files(paths: list[Path]):
    """The failed runs listed in STAB ``failed`` files."""
    from oddnode.store.stab import read_failed
    from oddnode.core.model import Failure
    from oddnode.core.nodes import label_kind, label_members

    failures = []
    for path in paths:
        for run in read_failed(path):
            kind = label_kind(run.label)
            failures.append(Failure(run.benchmark, run.label, kind, run.run, label_members(run.label, kind)))
    return failures


def common_command(
    failed: Annotated[Optional[list[Path]], typer.Argument(
        help="failed files (default: failed runs in the store).")] = None,
    db: DbOption = DEFAULT_DB,
    json_out: Annotated[bool, typer.Option("--json", help="Print the nodes and their counts as JSON.")] = False,
) -> None:
    """Nodes common to failed runs, most frequent first (STAB's xcommon)."""
    from oddnode.report.terminal import common_table
    from oddnode.stats.common import common_nodes

    with user_errors():
        if failed:
            failures = failures_in_files(failed)
        else:
            with open_db(db) as store:
                failures = store.load_failures()
    if json_out:
        from oddnode.report.nodes_json import common_json

        source = [str(path) for path in failed] if failed else str(db)
        print_json(common_json(common_nodes(failures), failures, source))
        return
    console.print(common_table(common_nodes(failures)))


def history_command(
    node: Annotated[str, typer.Argument(help="The node, by its name.")],
    db: DbOption = DEFAULT_DB,
    json_out: Annotated[bool, typer.Option("--json", help="Print the node's history as JSON.")] = False,
) -> None:
    """A node's results, facts and findings run by run: before and after its repair.

    Each node series' value in every run that measured the node, against
    the cluster's median now (of every node's newest result); the facts
    that changed between its inventories; every recorded analysis with the
    findings that named it."""
    from oddnode.core.nodes import validate_node_name
    from oddnode.report.history import history_json, history_tables
    from oddnode.store import StoreError

    with user_errors():
        validate_node_name(node)
        with open_db(db) as store:
            history = store.node_history(node)
        if history.empty:
            raise StoreError(f"the store holds no result, fact or finding of {node}")
    if json_out:
        print_json(history_json(history))
        return
    for table in history_tables(history):
        console.print(table)


def analysis_command(nodes: str | list[str] | None, exclude: str | list[str] | None, run: int | None = None,
                     since: datetime | None = None) -> str:
    """How a recorded analysis names itself: with the part and the view it judged."""
    nodes, exclude = node_sets(nodes), node_sets(exclude)
    given = (("-w", nodes), ("-x", exclude), ("--run", run), ("--since", since and since.isoformat(sep=" ")))
    return " ".join(["oddnode analyze", *(f"{option} {value}" for option, value in given if value)])


def judge(paths: list[Path] | None, location: Path, groups, sensitivity, nodes: str | None = None,
          exclude: str | None = None, run: int | None = None, since: datetime | None = None,
          expect: Path | None = None, sections: bool = False):
    """Import ``paths`` and save the topology first when given, analyze
    (the part about ``-w`` minus ``-x``, against the benchmark targets of
    ``expect`` too), and record the findings; returns the analysis and,
    when the store could not take the findings, why.  With ``sections``
    (for the JSON and the HTML report, which show them) the store's sweeps
    are judged and its profiles read too."""
    from oddnode.findings.registry import sort_findings
    from oddnode.judge.analysis import analyze as analyze_dataset
    from oddnode.store.stab import import_stab
    from oddnode.store import StoreError, open_store

    # The targets (with yaml) and the sweeps' judgement are imported only
    # where asked for: each costs every plain analyze tens of milliseconds.
    targets = []
    if expect is not None:
        from oddnode.findings.targets import load_targets

        targets = load_targets(expect)  # a bad file refused before the work

    def analyze(store):
        dataset = judged_part(load_as_of(store, run, since), nodes, exclude)
        result = analyze_dataset(dataset, sensitivity, require_data=True)
        if targets and dataset.series:  # no results at all is the no-data finding's, not a bad file
            from oddnode.findings.targets import check_targets

            result.findings = sort_findings(result.findings + check_targets(targets, dataset.series))
        if not sections:
            return result
        from oddnode.judge.sweep import judge_stored_sweeps

        # Each sweep judged whole and at its own alpha, as `oddnode sweep --stored` judges it: it compares
        # a few settings, not hundreds of nodes, and its settings are no nodes to subset.
        with store.as_of(run, since):
            result.sweeps, unread = judge_stored_sweeps(store)
            result.profiles = [(stored.profile_id, store.profile(stored.profile_id)) for stored in store.profiles()]
        for reason in unread:
            err_console.print(f"[yellow]{literal(reason)}[/]", highlight=False)
        return result

    if paths or groups:  # an import or a topology is written first
        with open_store(location, on_wait=say_waiting) as store:
            if paths:
                import_stab(store, paths, command="oddnode analyze")
            save_topology(store, groups)
            result = analyze(store)
            store.record_findings(analysis_command(nodes, exclude, run, since), result.findings)
        return result, None
    # Read-only while judging: a store one may read but not write is
    # judged all the same, and only the findings' record is lost.
    with open_store(location, read_only=True, on_wait=say_waiting) as store:
        result = analyze(store)
    try:
        with open_store(location, on_wait=say_waiting) as store:
            store.record_findings(analysis_command(nodes, exclude, run, since), result.findings)
    except StoreError as err:
        return result, f"findings not recorded in the store: {err}"
    return result, None


def compare_with_truth(truth: Path, findings, out) -> None:
    """Say how the findings match a synthetic dataset's truth; exit 1 on a mismatch."""
    from oddnode.app.synth import check_findings, read_truth

    with user_errors():
        check = check_findings(read_truth(truth), findings)
    out.print(literal(check.summary()), highlight=False)
    if not check.ok:
        raise typer.Exit(code=1)


def analyze_command(
    paths: Annotated[Optional[list[Path]], typer.Argument(
        help="Result directories or plot files to import first.")] = None,
    db: Annotated[Optional[Path], typer.Option(
        "--db", envvar="ODDNODE_DB",
        help="Results store (default oddnode.duckdb; in memory when paths are given).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print findings and statistics as JSON.")] = False,
    junit: JunitOption = None,
    html: Annotated[Optional[Path], typer.Option(help="Write a self-contained HTML report.")] = None,
    alpha: AlphaOption = DEFAULT_ALPHA,
    min_effect: MinEffectOption = DEFAULT_MIN_EFFECT,
    fail_on: Annotated[FailOn, typer.Option(
        help="Exit 1 when a finding reaches this severity (never: exit 0 whatever is found).")] = FailOn.warning,
    truth: Annotated[Optional[Path], typer.Option(
        help="Compare with a synthetic dataset's truth.json; exit 1 on a mismatch.")] = None,
    topology: StoredTopologyOption = None,
    expect: Annotated[Optional[Path], typer.Option(
        "--expect", help="Expectations file whose benchmarks: targets every node must reach.")] = None,
    wide: WideOption = False,
    nodes: JudgedNodesOption = None,
    exclude: JudgedExcludeOption = None,
    run: RunOption = None,
    since: SinceOption = None,
) -> None:
    """Judge the results: statistics, findings with evidence and remedies, correlations.

    Exit 1 when a finding reaches a warning (--fail-on), 0 when the
    cluster is ready."""
    from oddnode.findings import Sensitivity
    from oddnode.core.atomic import check_target
    from oddnode.store import StoreError

    from oddnode.report.junit import STDOUT, analysis_suite, refuse_both_on_stdout, write_junit

    try:
        refuse_both_on_stdout(junit, json_out)
    except ValueError as err:
        raise typer.BadParameter(str(err)) from None
    with user_errors():  # the outputs refused before the work, not after
        for output in (junit if junit != STDOUT else None, html):
            if output is not None:
                check_target(output)
    with user_errors():
        sensitivity = Sensitivity(alpha=alpha, min_effect=min_effect)
        location = db or (Path(":memory:") if paths else DEFAULT_DB)
        if not paths and not location.exists():
            raise StoreError(f"no results store at {location}: import results first or give result directories")
        result, not_recorded = judge(paths, location, read_topology(topology), sensitivity, nodes, exclude, run,
                                     since, expect, sections=json_out or html is not None)
    out = err_console if json_out or junit == STDOUT else console
    if not_recorded:
        err_console.print(f"[yellow]{literal(not_recorded)}[/]", highlight=False)
    if junit:
        with user_errors():
            write_junit(analysis_suite(result), junit)
    if json_out:
        print_json(analysis_document(result))
    else:
        from oddnode.report.terminal import print_analysis

        print_analysis(out, result, wide, brief=quiet())
    if html:
        from oddnode.report.html import write_report

        with user_errors():
            write_report(result, html, source=", ".join(map(str, paths)) if paths else str(location))
        inform(f"report written to {literal(html)}", out=out)
    if not not_recorded and str(location) != ":memory:":
        detail(f"[dim]findings recorded in {literal(location)}[/]", out=out, highlight=False)
    if truth:
        compare_with_truth(truth, result.findings, out)
    threshold = {FailOn.warning: Severity.WARNING, FailOn.error: Severity.ERROR}.get(fail_on)
    # Nothing to judge is never a pass, whatever --fail-on says.
    if not result.judged or threshold and any(f.severity.rank >= threshold.rank for f in result.findings):
        raise typer.Exit(code=1)


def synth_command(
    out: Annotated[Path, typer.Argument(help="Directory to write the dataset into.")],
    nodes: Annotated[int, typer.Option(help="Number of nodes (≥ 32).")] = CASE_STUDY_NODES,
    seed: Annotated[int, typer.Option(help="Random seed.")] = DEFAULT_SEED,
    healthy: Annotated[bool, typer.Option("--healthy", help="No planted fault: a control dataset.")] = False,
) -> None:
    """Write a synthetic cluster dataset with planted faults and its ground truth (truth.json)."""
    from oddnode.app.synth import generate

    with user_errors():
        truth = generate(out, nodes=nodes, seed=seed, faults=not healthy)
    inform(f"wrote {literal(out)}: {nodes} nodes, {len(truth.findings)} planted faults (ground truth in "
           f"{literal(out / 'truth.json')})")


STAB_ALIASES = {"anal": stats_command, "dplot": dist_command, "cplot": correlate_command, "xcommon": common_command}


def register(app: typer.Typer) -> None:
    """The statistics commands in their panel; analyze among the first commands."""
    for name, command in (("export", export_command), ("stats", stats_command), ("dist", dist_command),
                          ("findn", findn_command), ("correlate", correlate_command), ("findc", findc_command),
                          ("common", common_command), ("history", history_command)):
        app.command(name, rich_help_panel=RESULTS_PANEL)(command)
    app.command("analyze")(analyze_command)
    app.command("synth", rich_help_panel=RESULTS_PANEL)(synth_command)
    # STAB's own names, for its users' fingers: hidden from the help.
    for name, command in STAB_ALIASES.items():
        app.command(name, hidden=True)(command)
