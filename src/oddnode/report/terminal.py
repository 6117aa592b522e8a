"""Terminal output: the ``anal`` table, findings folded by node set, and the
distribution, correlation and common-node views.  Output grows with distinct
answers, not with nodes."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from oddnode.analysis import Analysis
from oddnode.model import Finding, LabelKind, Series, Severity
from oddnode.stats.correlation import CORRELATION_CAVEAT, Correlation
from oddnode.stats.describe import Description
from oddnode.stats.distribution import ChiSquared, Dip, Normality

if TYPE_CHECKING:
    from oddnode.inventory.expectations import ExpectationReport

SEVERITY_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}
_POPULATION = {LabelKind.NODE: "nodes", LabelKind.PAIR: "pairs", LabelKind.SET: "sets"}


def number(value: float) -> str:
    """Six significant digits, as the benchmark tools print them."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.6g}"


def probability(p: float) -> str:
    if p is None or math.isnan(p):
        return "-"
    return f"{p:.3g}" if p >= 1e-4 else f"{p:.1e}"


def stats_table(statistics: Sequence[tuple[Series, Description]]) -> Table:
    """STAB's anal table: one row per benchmark."""
    table = Table(title="Benchmark statistics (best result per node or pair)", title_justify="left")
    table.add_column("benchmark", no_wrap=True, min_width=max((len(s.name) for s, _ in statistics), default=9))
    for column in ("unit", "better", "n", "low", "high", "%var", "mean", "median", "std dev"):
        table.add_column(column, justify="left" if column in ("unit", "better") else "right")
    for series, d in statistics:
        table.add_row(
            series.name, series.unit or "-", series.direction.value,
            f"{d.n} {_POPULATION[series.label_kind]}", number(d.low), number(d.high),
            f"{d.variability_pct:.2f}", number(d.mean), number(d.median), number(d.std),
        )
    return table


def findings_by_nodes(findings: Sequence[Finding], minimum: Severity = Severity.WARNING) -> Group:
    """Findings at or above a severity, folded under the node set they name."""
    groups: dict[str, list[Finding]] = defaultdict(list)
    for finding in findings:
        if finding.severity.rank >= minimum.rank:
            groups[finding.nodes or "(no node)"].append(finding)
    lines: list[Text] = []
    order = sorted(groups.items(), key=lambda item: (-max(f.severity.rank for f in item[1]), item[0]))
    for nodes, group in order:
        lines.append(Text(nodes, style="bold"))
        remedies: list[str] = []
        for f in group:
            line = Text("  ")
            line.append(f"{f.severity.value:<7} ", style=SEVERITY_STYLE[f.severity])
            line.append(f"{f.kind} ", style="bold")
            line.append(f"[{f.subject}] {f.message}")
            lines.append(line)
            if f.remedy and f.remedy not in remedies:
                remedies.append(f.remedy)
        for remedy in remedies:
            lines.append(Text(f"  → {remedy}", style="dim"))
    return Group(*lines)


def print_analysis(console: Console, analysis: Analysis) -> None:
    """The analyze summary: statistics, findings by node set, then notes."""
    if analysis.statistics:
        console.print(stats_table(analysis.statistics))
    serious = [f for f in analysis.findings if f.severity.rank >= Severity.WARNING.rank]
    notes = [f for f in analysis.findings if f.severity is Severity.INFO]
    console.print()
    if serious:
        console.print(Text(f"Findings ({len(serious)})", style="bold underline"))
        console.print(findings_by_nodes(serious))
    else:
        console.print("No finding of warning severity or above.")
    if notes:
        console.print()
        console.print(Text(f"Notes ({len(notes)}, information only)", style="bold underline"))
        for f in notes:
            console.print(Text(f"  {f.kind} [{f.subject}] {f.message}", style="cyan"))
    strong = [c for c in analysis.correlations if c.pearson_p < analysis.sensitivity.alpha and abs(c.pearson_r) >= 0.5]
    if strong:
        console.print()
        console.print(f"{len(strong)} strong significant correlations (|r| ≥ 0.5); see `oddnode findc`. {CORRELATION_CAVEAT}")
    console.print()
    if analysis.ready:
        console.print(Text("READY: no warning or error.", style="bold green"))
    else:
        counts = defaultdict(int)
        for f in serious:
            counts[f.severity.value] += 1
        summary = ", ".join(f"{n} {sev}{'s' if n > 1 else ''}" for sev, n in sorted(counts.items()))
        console.print(Text(f"NOT READY: {summary}.", style="bold red"))


def distribution_table(series: Series, chi: ChiSquared, normal: Normality, dip: Dip) -> Table:
    """Goodness of fit to the normal, shape tests and the dip test."""
    table = Table(title=f"{series.name}: distribution tests", title_justify="left")
    table.add_column("test")
    table.add_column("statistic", justify="right")
    table.add_column("p", justify="right")
    table.add_column("reading")
    table.add_row(f"chi-squared vs normal ({chi.bins} bins, {chi.dof} dof)", number(chi.x2), probability(chi.p),
                  "depends on the bins: see findn")
    table.add_row("Shapiro-Wilk W", number(normal.shapiro_w), probability(normal.shapiro_p), "bin-free normality")
    table.add_row("D'Agostino-Pearson K²", number(normal.dagostino_k2), probability(normal.dagostino_p),
                  "bin-free normality")
    table.add_row("Anderson-Darling A²", number(normal.anderson_stat), "-",
                  f"not normal at 5% if > {number(normal.anderson_critical_5pct)}")
    table.add_row("skewness", number(normal.skewness), probability(normal.skew_p),
                  "right tail" if normal.skewness > 0 else "left tail")
    table.add_row("excess kurtosis", number(normal.kurtosis), "-", "")
    table.add_row("Hartigan's dip", number(dip.statistic), probability(dip.p), "small p: more than one mode")
    return table


def findn_table(series: Series, sweep: Sequence[ChiSquared]) -> Table:
    table = Table(title=f"{series.name}: chi-squared against the normal by bin count", title_justify="left")
    for column in ("X²", "scale", "bins", "dof", "normal probability %"):
        table.add_column(column, justify="right")
    for chi in sweep:
        table.add_row(number(chi.x2), f"{chi.scale:.2f}", str(chi.bins), str(chi.dof),
                      "-" if math.isnan(chi.p) else f"{chi.p * 100:.2f}")
    return table


def correlation_table(correlations: Sequence[Correlation], title: str) -> Table:
    table = Table(title=title, title_justify="left", caption=CORRELATION_CAVEAT)
    for column in ("|r|", "r", "p", "Spearman ρ", "p(ρ)", "n", "x", "y"):
        table.add_column(column, justify="right" if column not in ("x", "y") else "left")
    for c in correlations:
        table.add_row(f"{abs(c.pearson_r):.2f}", f"{c.pearson_r:.2f}", probability(c.pearson_p),
                      f"{c.spearman_r:.2f}", probability(c.spearman_p), str(c.n), c.x, c.y)
    return table


def common_table(counts: Sequence[tuple[str, int]]) -> Table:
    table = Table(title="Nodes common to failed runs", title_justify="left")
    table.add_column("node")
    table.add_column("failed runs", justify="right")
    for node, count in counts:
        table.add_row(node, str(count))
    return table


def expectation_table(report: ExpectationReport) -> Table:
    """Pass or fail for every expectation, failures first."""
    table = Table(title="Expectations", title_justify="left")
    table.add_column("fact")
    table.add_column("result")
    table.add_column("nodes failing")
    for finding in report.failures:
        table.add_row(finding.subject, Text("FAIL", style="bold red"), finding.nodes)
    for key in report.passed:
        table.add_row(key, Text("pass", style="green"), "")
    return table
