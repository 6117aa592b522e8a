"""Terminal output: the ``anal`` table, findings folded by node set, and the
distribution, correlation and common-node views.  Output grows with distinct
answers, not with nodes."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from oddnode.readings.interconnect_series import PINGPONG
from oddnode.judge.analysis import Analysis
from oddnode.findings.problems import Problem
from oddnode.findings.registry import leads
from oddnode.core.model import DEFAULT_METRIC, Dataset, Finding, LabelKind, Series, Severity
from oddnode.report import WIDE
from oddnode.report.summaries import MIN_CORRELATION_LABELS, STRONG_R, findings_heading, strong_correlations
from oddnode.report.text import literal, literals
from oddnode.stats.correlation import CORRELATION_CAVEAT, Correlation
from oddnode.stats.describe import Description
from oddnode.stats.distribution import ChiSquared, Dip, Normality

if TYPE_CHECKING:
    from oddnode.measure.pair.switchbench import AllToAllRunSummary, ChainRunSummary, StreamRunSummary
    from oddnode.findings.expectations import ExpectationReport

SEVERITY_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}
_POPULATION = {LabelKind.NODE: "node", LabelKind.PAIR: "pair", LabelKind.SET: "set"}


def number(value: float) -> str:
    """Six significant digits, as the benchmark tools print them."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.6g}"


# The HTML report's numbers: three significant digits, what a comparison of
# nodes whose results scatter by a per cent or more can use, written out
# (18400, not 1.84e+04) from 1e-4 up to below 1e15.
REPORT_DIGITS = 3
_WRITTEN_OUT = (1e-4, 1e15)


def report_number(value: float | None, missing: str = "—") -> str:
    """A number as the HTML report shows it (REPORT_DIGITS significant digits)."""
    if value is None or not math.isfinite(value):
        return missing if value is None or math.isnan(value) else f"{value}"
    rounded = float(f"{value:.{REPORT_DIGITS}g}")
    low, high = _WRITTEN_OUT
    if rounded == 0 or not low <= abs(rounded) < high:
        return f"{rounded:.{REPORT_DIGITS}g}"
    decimals = max(0, REPORT_DIGITS - 1 - math.floor(math.log10(abs(rounded))))
    return f"{rounded:.{decimals}f}"


def probability(p: float) -> str:
    if p is None or math.isnan(p):
        return "-"
    return f"{p:.3g}" if p >= 1e-4 else f"{p:.1e}"


# The statistics table's columns after the benchmark, in the order shown,
# and the order in which a narrow terminal leaves them out, least wanted
# first: the median and the variability say most about a population.
STATS_COLUMNS = ("unit", "better", "n", "low", "high", "%var", "mean", "median", "std dev")
LEFT_OUT_FIRST = ("better", "mean", "std dev", "n", "high", "low", "unit")
_NAME = "benchmark"
# A metric's row under its benchmark's line, in the narrow layout.
_INDENT = "  "


def _stats_cells(series: Series, d: Description) -> dict[str, str]:
    return {
        _NAME: series.name, "unit": series.unit or "-", "better": series.direction.value,
        "n": f"{d.n} {_POPULATION[series.label_kind]}{'' if d.n == 1 else 's'}", "low": number(d.low), "high": number(d.high),
        "%var": f"{d.variability_pct:.2f}", "mean": number(d.mean), "median": number(d.median),
        "std dev": number(d.std),
    }


def _by_benchmark(statistics: Sequence[tuple[Series, Description]]) -> list[dict[str, str]]:
    """The rows under one line per benchmark, each metric's row named by its
    metric alone: names as long as pingpong.shuffle:bandwidth.262144 no
    longer set the first column's width.  A benchmark with no metric of its
    own (a plot file's one value) keeps its one row."""
    rows: list[dict[str, str]] = []
    seen: set[str] = set()
    for series, d in statistics:
        cells = _stats_cells(series, d)
        if series.metric != DEFAULT_METRIC:
            if series.benchmark not in seen:
                rows.append({column: "" for column in cells} | {_NAME: series.benchmark})
            cells[_NAME] = _INDENT + series.metric
        seen.add(series.benchmark)
        rows.append(cells)
    return rows


WIDE_NOTE = "--wide shows them all."  # the caption of a table that left something out


def table_width(column_widths: Sequence[int]) -> int:
    """Characters a rich table of these column widths takes with the default
    box: one space of padding on each side of every cell, a rule before every
    column and after the last."""
    return sum(width + 3 for width in column_widths) + 1


def natural_width(column: str, rows: Sequence[Mapping[str, str]], wrap_header: bool) -> int:
    """A column's width with every cell whole; its header whole, or wrapped at its spaces."""
    header = max(len(word) for word in column.split()) if wrap_header else len(column)
    return max([header, *(len(row[column]) for row in rows)])


def fit_columns(columns: Sequence[str], rows: Sequence[Mapping[str, str]], width: int | None,
                left_out_first: Sequence[str] = ()) -> tuple[list[str], dict[str, int], list[str]]:
    """The columns shown, their widths and those left out, for ``width``
    characters (None: everything at full width).  Headers wrap at their
    spaces before any column is left out; then the columns of
    ``left_out_first`` go, in that order, until the table fits; the first
    column (names) folds last, never below its header."""
    shown = list(columns)
    if width is None:
        return shown, {c: natural_width(c, rows, False) for c in shown}, []
    for wrap in (False, True):
        widths = {c: natural_width(c, rows, wrap) for c in shown}
        if table_width(list(widths.values())) <= width:
            return shown, widths, []
    left_out: list[str] = []
    for column in left_out_first:
        if column not in shown:
            continue
        shown.remove(column)
        left_out.append(column)
        if table_width([natural_width(c, rows, True) for c in shown]) <= width:
            break
    widths = {c: natural_width(c, rows, True) for c in shown}
    name = shown[0]
    room = width - table_width([widths[c] for c in shown[1:]]) - 3
    widths[name] = max(min(widths[name], room), len(name))
    return shown, widths, left_out


def fixed_table(title: str, caption: str | None, shown: Sequence[str], widths: Mapping[str, int],
                rows: Sequence[Mapping[str, Any]], left: Collection[str],
                styles: Sequence[str | None] = ()) -> Table:
    """A table of the widths ``fit_columns`` chose: the ``left`` columns
    (names) left-aligned and folded, numbers right, headers wrapped at spaces."""
    table = Table(title=literal(title), title_justify="left", caption=literal(caption), caption_justify="left")
    for column in shown:
        # min_width holds a column whole where the table is wider than the
        # console (--wide); max_width wraps its header at the spaces.
        table.add_column(literal(column), justify="left" if column in left else "right", min_width=widths[column],
                         max_width=widths[column], overflow="fold")
    for index, row in enumerate(rows):
        style = styles[index] if index < len(styles) else None
        table.add_row(*literals(row[column] for column in shown), style=style)
    return table


def print_views(console: Console, views: Sequence[Any], wide: bool = False) -> bool:
    """Print tables one after another, a blank line between (``wide``: at
    full width, however wide the console); whether there was anything."""
    for index, view in enumerate(views):
        if index:
            console.print()
        if wide:
            console.print(view, width=WIDE, crop=False)
        else:
            console.print(view)
    return bool(views)


def stats_table(statistics: Sequence[tuple[Series, Description]], width: int | None = None) -> Table:
    """STAB's anal table, one row per benchmark metric, fitted to ``width``
    characters (None: every column at full width) with every cell whole.
    Where the full table is too wide, metrics go under a line naming their
    benchmark, then the columns there is no room for are left out, least
    wanted first, and the caption names them; a name still too long is
    folded onto a second line of its cell, never cut."""
    rows = [_stats_cells(series, d) for series, d in statistics]

    def natural(column: str) -> int:
        return max([len(column), *(len(row[column]) for row in rows)])

    shown = [_NAME, *STATS_COLUMNS]
    if width is not None and table_width([natural(c) for c in shown]) > width:
        rows = _by_benchmark(statistics)
    left_out: list[str] = []
    for column in LEFT_OUT_FIRST:
        if width is None or table_width([natural(c) for c in shown]) <= width:
            break
        shown.remove(column)
        left_out.append(column)
    name_width = natural(_NAME)
    if width is not None:
        name_width = max(min(name_width, width - table_width([natural(c) for c in shown[1:]]) - 3), len(_NAME))
    caption = None
    if left_out:
        caption = (f"{', '.join(c for c in STATS_COLUMNS if c in left_out)} left out to fit {width} columns; "
                   "--wide shows them all")
    table = Table(title="Benchmark statistics (best result per node or pair)", title_justify="left",
                  caption=caption, caption_justify="left")
    for column in shown:
        if column == _NAME:
            table.add_column(column, overflow="fold", max_width=name_width, min_width=name_width)
        else:
            table.add_column(column, justify="left" if column in ("unit", "better") else "right", no_wrap=True,
                             min_width=natural(column))
    for row in rows:
        heading = not row["median"]
        table.add_row(*literals(row[column] for column in shown), style="bold" if heading else None)
    return table


def print_stats(console: Console, statistics: Sequence[tuple[Series, Description]], wide: bool = False) -> None:
    """The statistics table fitted to the console, or with ``wide`` every
    column at its full width, however wide the lines get."""
    if wide:
        console.print(stats_table(statistics), width=WIDE, crop=False)
    else:
        console.print(stats_table(statistics, console.width))


def findings_by_nodes(findings: Sequence[Finding], minimum: Severity = Severity.WARNING) -> Group:
    """Findings at or above a severity, folded under the node set they name."""
    groups: dict[str, list[Finding]] = defaultdict(list)
    for finding in findings:
        if finding.severity.rank >= minimum.rank:
            groups[finding.nodes or "(no node)"].append(finding)
    lines: list[Text] = []
    def rank(item: tuple[str, list[Finding]]) -> tuple[int, bool, str]:
        """Worst severity first; within it, node sets with a leading finding (never booted)."""
        worst = max(f.severity.rank for f in item[1])
        return -worst, not any(leads(f) and f.severity.rank == worst for f in item[1]), item[0]

    order = sorted(groups.items(), key=rank)
    for nodes, group in order:
        lines.append(Text(nodes, style="bold"))
        remedies: list[str] = []
        for f in group:
            lines.append(_finding_line(f, "  "))
            if f.remedy and f.remedy not in remedies:
                remedies.append(f.remedy)
        for remedy in remedies:
            lines.append(Text(f"  → {remedy}", style="dim"))
    return Group(*lines)


def problems_by_nodes(problems: Sequence[Problem]) -> Group:
    """Problems folded under the node set they name: a cause that explains
    other findings with its symptoms beneath it and the cause's remedy
    only; a finding alone as findings_by_nodes shows it."""
    groups: dict[str, list[Problem]] = defaultdict(list)
    for problem in problems:
        groups[problem.nodes or "(no node)"].append(problem)
    lines: list[Text] = []
    for nodes, group in groups.items():
        lines.append(Text(nodes, style="bold"))
        remedies: list[str] = []
        for problem in group:
            if problem.symptoms:
                line = Text("  ")
                line.append(f"{problem.severity.value:<7} ", style=SEVERITY_STYLE[problem.severity])
                line.append("problem ", style="bold")
                line.append(problem.summary)
                lines.append(line)
            for role, findings in (("cause", problem.cause), ("symptom", problem.symptoms)):
                for f in findings:
                    lines.append(_finding_line(f, f"    {role:<8} " if problem.symptoms else "  "))
            remedies += [f.remedy for f in problem.cause if f.remedy]
        for remedy in dict.fromkeys(remedies):  # each once, in order
            lines.append(Text(f"  → {remedy}", style="dim"))
    return Group(*lines)


def _finding_line(f: Finding, indent: str) -> Text:
    line = Text(indent)
    line.append(f"{f.severity.value:<7} ", style=SEVERITY_STYLE[f.severity])
    line.append(f"{f.kind} ", style="bold")
    line.append(f"[{f.subject}] {f.message}")
    return line


def verdict(analysis: Analysis) -> Text:
    """READY, NOT READY with the count of errors and warnings, or NO DATA
    when the store held nothing to judge."""
    if not analysis.judged:
        return Text("NO DATA: nothing to judge (no result, failed run or fact in the store).", style="bold red")
    if analysis.ready:
        return Text("READY: no warning or error.", style="bold green")
    counts: dict[str, int] = defaultdict(int)
    for f in analysis.findings:
        if f.severity.rank >= Severity.WARNING.rank:
            counts[f.severity.value] += 1
    summary = ", ".join(f"{n} {severity}{'s' if n > 1 else ''}" for severity, n in sorted(counts.items()))
    return Text(f"NOT READY: {summary}.", style="bold red")


def print_analysis(console: Console, analysis: Analysis, wide: bool = False, brief: bool = False) -> None:
    """The analyze summary, the verdict and the problems first: verdict,
    findings by node set, notes, then the statistics table and the
    correlations, and the verdict again where the eye ends.  ``brief``: the
    verdict and the findings only."""
    serious = [f for f in analysis.findings if f.severity.rank >= Severity.WARNING.rank]
    notes = [f for f in analysis.findings if f.severity is Severity.INFO]
    console.print(verdict(analysis))
    console.print()
    if serious:
        problems = analysis.problems
        grouped = sum(1 for p in problems if p.symptoms)
        heading = f"Findings ({findings_heading(analysis.findings)}" + (
            f"; {len(problems)} problems)" if grouped else ")")
        console.print(Text(heading, style="bold underline"))
        console.print(problems_by_nodes(problems))
    else:
        console.print("No finding of warning severity or above.")
    if brief:
        return
    if notes:
        console.print()
        console.print(Text(f"Notes ({len(notes)}, information only)", style="bold underline"))
        for f in notes:
            console.print(Text(f"  {f.kind} [{f.subject}] {f.message}", style="cyan"))
    if analysis.statistics:
        console.print()
        print_stats(console, analysis.statistics, wide)
    from oddnode.report.sets import has_set_results, print_sets

    if has_set_results(analysis.dataset):
        console.print()
        print_sets(console, analysis.dataset, wide)
    strong = strong_correlations(analysis)
    if strong:
        console.print()
        console.print(f"{len(strong)} strong and significant correlations (|r| ≥ {STRONG_R}, over "
                      f"{MIN_CORRELATION_LABELS} or more labels); see `oddnode findc`. {CORRELATION_CAVEAT}")
    if analysis.statistics or strong:
        console.print()
        console.print(verdict(analysis))


# The distribution tests' names as the table shows them (their rows come
# from report.analysis_json.distribution_tests, which `dist --json` prints).
_TEST_NAMES = {"shapiro-wilk": "Shapiro-Wilk W", "dagostino-pearson": "D'Agostino-Pearson K²",
               "anderson-darling": "Anderson-Darling A²", "skewness": "skewness",
               "excess-kurtosis": "excess kurtosis", "dip": "Hartigan's dip"}


def distribution_table(series: Series, chi: ChiSquared, normal: Normality, dip: Dip) -> Table:
    """Goodness of fit to the normal, shape tests and the dip test."""
    from oddnode.report.analysis_json import distribution_tests

    table = Table(title=literal(f"{series.name}: distribution tests"), title_justify="left")
    table.add_column("test")
    table.add_column("statistic", justify="right")
    table.add_column("p", justify="right")
    table.add_column("reading")
    for row in distribution_tests(chi, normal, dip):
        name = (f"chi-squared vs normal ({chi.bins} bins, {chi.dof} dof)" if row["test"] == "chi-squared"
                else _TEST_NAMES[row["test"]])
        table.add_row(name, number(row["statistic"]), "-" if row["p"] is None else probability(row["p"]),
                      row["reading"])
    return table


def findn_table(series: Series, sweep: Sequence[ChiSquared]) -> Table:
    table = Table(title=literal(f"{series.name}: chi-squared against the normal by bin count"), title_justify="left")
    for column in ("X²", "scale", "bins", "dof", "normal probability %"):
        table.add_column(column, justify="right")
    for chi in sweep:
        table.add_row(number(chi.x2), f"{chi.scale:.2f}", str(chi.bins), str(chi.dof),
                      "-" if math.isnan(chi.p) else f"{chi.p * 100:.2f}")
    return table


def correlation_table(correlations: Sequence[Correlation], title: str) -> Table:
    table = Table(title=literal(title), title_justify="left", caption=CORRELATION_CAVEAT)
    for column in ("|r|", "r", "p", "Spearman ρ", "p(ρ)", "n", "x", "y"):
        table.add_column(column, justify="right" if column not in ("x", "y") else "left",
                         overflow="fold" if column in ("x", "y") else "ellipsis")
    for c in correlations:
        table.add_row(f"{abs(c.pearson_r):.2f}", f"{c.pearson_r:.2f}", probability(c.pearson_p),
                      f"{c.spearman_r:.2f}", probability(c.spearman_p), str(c.n), literal(c.x), literal(c.y))
    return table


def common_table(counts: Sequence[tuple[str, int]]) -> Table:
    table = Table(title="Nodes common to failed runs", title_justify="left")
    table.add_column("node", overflow="fold")
    table.add_column("failed runs", justify="right")
    for node, count in counts:
        table.add_row(literal(node), str(count))
    return table


def expectation_table(report: ExpectationReport) -> Table:
    """Pass or fail for every expectation, failures first."""
    table = Table(title="Expectations", title_justify="left")
    table.add_column("fact", overflow="fold")
    table.add_column("result")
    table.add_column("nodes failing", overflow="fold")
    for finding in report.failures:
        table.add_row(literal(finding.subject), Text("FAIL", style="bold red"), literal(finding.nodes))
    for key in report.passed:
        table.add_row(literal(key), Text("pass", style="green"), "")
    return table


def pattern_table(dataset: Dataset) -> Table | None:
    """Per ping-pong pattern, the pairs' bandwidth at its largest message
    size (STAB's ``anal spp <pattern> bw``) and its slowest pair; None
    without pair patterns."""
    from oddnode.report.interconnect import pattern_tables

    tables = [t for t in pattern_tables(dataset) if t.rows]
    if not tables:
        return None
    table = Table(title="Pair patterns: bandwidth at the largest message size (MB/s)", title_justify="left")
    for column in ("pattern", "bytes", "n", "min", "median", "mean", "max", "slowest pair"):
        table.add_column(column, justify="left" if column in ("pattern", "slowest pair") else "right")
    for t in tables:
        row = next((r for r in reversed(t.rows) if r.bandwidth is not None), None)
        if row is None:
            continue
        slowest = f"{t.slowest[0].label} ({t.slowest[0].percent_of_median:.0f}% of median)" if t.slowest else "-"
        table.add_row(literal(t.benchmark.removeprefix(f"{PINGPONG}.")), str(row.size), str(row.n),
                      *(number(v) for v in row.bandwidth), literal(slowest))
    return table


def chain_table(summary: ChainRunSummary) -> Table:
    """Switchbench's daisy chain: per chain length the node that joined, the
    best end-to-end and aggregate throughput, the aggregate's gain in hops
    over the previous length, and where the switch stopped scaling."""
    table = Table(title="Daisy chain: throughput by chain length (MB/s, best repetition)", title_justify="left")
    for column in ("k", "joined", "end to end", "aggregate", "gain (hops)", ""):
        table.add_column(column, justify="right" if column not in ("joined", "") else "left")
    for row in summary.lengths():
        k, aggregate = row["length"], row["aggregate"]
        if k == summary.saturation:
            note = Text("stops scaling", style="bold red")
        elif aggregate is None:
            note = Text(f"failed: {row['problem']}", style="red")
        else:
            note = Text("")
        table.add_row(str(k), literal(row["joined"]), number(row["end_to_end"]) if aggregate is not None else "-",
                      number(aggregate) if aggregate is not None else "-",
                      f"{row['gain_hops']:+.2f}" if row["gain_hops"] is not None else "-", note)
    return table


# Beyond this many pairs the streaming table lists the slowest ones only.
MAX_PAIR_ROWS = 24


def stream_table(summary: StreamRunSummary, limit: int = MAX_PAIR_ROWS) -> Table:
    """Switchbench's pairwise streaming: per pair its best repetition's rate
    each way and both together, slowest first, failed pairs first of all."""
    best, problems = summary.best_directions()
    median = statistics.median(sum(pair) for pair in best.values()) if best else 0.0
    failed = sorted(label for label in problems if label not in best)
    order = failed + sorted(best, key=lambda label: sum(best[label]))
    shown = order[:limit]
    caption = f"{len(order) - len(shown)} faster pairs not listed" if len(order) > len(shown) else None
    table = Table(title=literal(f"Pairwise streaming, {summary.pattern}: both ways at once (MB/s, best repetition)"),
                  title_justify="left", caption=caption)
    for column in ("pair", "client to server", "server to client", "total", "% of median"):
        table.add_column(column, justify="left" if column == "pair" else "right")
    for label in shown:
        if label not in best:
            table.add_row(literal(label), Text("failed", style="red"), "-", "-",
                          Text(problems[label][:60], style="red"))
            continue
        forth, back = best[label]
        percent = (forth + back) / median * 100 if median else math.nan
        table.add_row(literal(label), number(forth), number(back), number(forth + back),
                      "-" if math.isnan(percent) else f"{percent:.0f}")
    return table


def alltoall_table(summary: AllToAllRunSummary) -> Table | None:
    """Switchbench's all-to-all, its best repetition: per phase the lowest
    receive bandwidth over the nodes, the median, and the flow that had the
    lowest; None without a valid repetition."""
    best = summary.best()
    if best is None:
        return None
    table = Table(title=f"All-to-all, repetition {best.repetition}: receive bandwidth per phase (MB/s)",
                  title_justify="left")
    for column in ("phase", "min", "median", "slowest receiver", "from"):
        table.add_column(column, justify="right" if column in ("phase", "min", "median") else "left")
    for phase in best.phases:
        table.add_row(str(phase.phase), number(phase.min_bandwidth), number(phase.median_bandwidth),
                      literal(phase.slowest_receiver), literal(phase.slowest_sender))
    return table
