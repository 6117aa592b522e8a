"""One self-contained HTML report: verdict, findings, statistics, histograms,
the interconnect (pair patterns, bisection, all-pairs heatmaps, Switchbench's
chain, streaming and all-to-all plots), node sets (sorted against shuffled,
weak members, scaling curves), correlations, failed runs and inventory.
Figures are inline SVG, so the file can be mailed or attached to a ticket
as it is."""

from __future__ import annotations

import json
import os
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
import numpy as np

from oddnode import __version__
from oddnode.judge.analysis import Analysis
from oddnode.core.model import Finding, LabelKind, Series, Severity
from oddnode.core.nodes import NodeNameError, expand, fold, label_members
from oddnode.report import interconnect
from oddnode.report.summaries import findings_heading, strong_correlations
from oddnode.report import switchbench as _switchbench  # noqa: F401  (registers the Switchbench figures)
from oddnode.report import fit as _fit  # noqa: F401  (registers the latency and bandwidth fits)
from oddnode.report.plots import figure_to_svg, heatmap_figure, histogram_figure, scatter_figure
from oddnode.report.numa import numa_section
from oddnode.report.sync import sync_section
from oddnode.report.noise import noise_section
from oddnode.report.sweep import sweeps_section
from oddnode.report.profile import profiles_section
from oddnode.report.processes import processes_section
from oddnode.report.affinity import affinity_section
from oddnode.report.placement import placement_section
from oddnode.report.sets import sets_section
from oddnode.report.terminal import probability, report_number
from oddnode.readings.disk import DIRECTORY_TABLE_TITLE, PASSES, directory_table
from oddnode.readings.sets_series import SCALE, split_set_series
from oddnode.stats.common import common_nodes
from oddnode.stats.correlation import CORRELATION_CAVEAT, Correlation

if TYPE_CHECKING:
    from oddnode.app.check import CheckResult

DIAGNOSTICS = "diagnostics"  # the check's first stage: facts, no benchmark series

# Beyond this many benchmarks only those named by a finding get a histogram:
# a report with hundreds of figures is neither read nor quick to open.
MAX_HISTOGRAMS = 40
MAX_CORRELATIONS = 25
MAX_SCATTERS = 4
_POPULATION = {LabelKind.NODE: "nodes", LabelKind.PAIR: "pairs", LabelKind.SET: "sets"}
MATRIX_TITLE = "every ordered pair, N/2 pairs at once"

_environment = jinja2.Environment(
    loader=jinja2.PackageLoader("oddnode", "report/templates"),
    autoescape=jinja2.select_autoescape(["html", "j2"]),
    undefined=jinja2.StrictUndefined,
)


def _flagged_labels(analysis: Analysis) -> dict[str, dict[str, str]]:
    """Series name -> label -> finding kind, for marking nodes on histograms."""
    flagged: dict[str, dict[str, str]] = defaultdict(dict)
    for finding in analysis.findings:
        if finding.severity is Severity.INFO or not finding.nodes:
            continue
        try:
            nodes = expand(finding.nodes)
        except NodeNameError:
            continue
        for name in (part.strip() for part in finding.subject.split(",")):
            for node in nodes:
                flagged[name][node] = finding.kind
    return flagged


def _highlight(series: Series, flagged: dict[str, dict[str, str]]) -> dict[str, str] | None:
    """The labels of a series to mark: those a finding names, and for pairs
    and node sets the labels that contain a named node."""
    named = {**flagged.get(series.benchmark, {}), **flagged.get(series.name, {})}
    if not named:
        return None
    if series.label_kind is LabelKind.NODE:
        present = set(series.labels)
        return {label: kind for label, kind in named.items() if label in present}
    marks = {}
    for label in series.labels:
        hit = next((named[m] for m in label_members(label, series.label_kind) if m in named), None)
        if hit:
            marks[label] = hit
    return marks


def _histogram_worthy(series) -> bool:
    """Whether a series' values are one population of like things: not a
    scaling curve's, whose sets differ by their node count (its own plot
    draws it against the count)."""
    parts = split_set_series(series.benchmark)
    return parts is None or parts[0] != SCALE


def _histograms(analysis: Analysis) -> tuple[list[dict[str, str]], str]:
    flagged = _flagged_labels(analysis)
    series = [s for s, _ in analysis.statistics if _histogram_worthy(s)]
    note = ""
    if len(series) > MAX_HISTOGRAMS:
        series = [s for s in series if s.name in flagged or s.benchmark in flagged]
        note = f"Only the {len(series)} benchmarks named by a finding are drawn, of {len(analysis.statistics)}."
    figures = []
    for s in series:
        figures.append({"name": s.name, "svg": figure_to_svg(histogram_figure(s, highlight=_highlight(s, flagged))),
                        "flagged": s.name in flagged or s.benchmark in flagged})
    return figures, note


def _correlations(analysis: Analysis, significant: list[Correlation]) -> tuple[list[dict[str, str]], list[str]]:
    """The table rows and scatter plots of the correlations shown (the strongest first)."""
    rows = [
        {"x": c.x, "y": c.y, "n": c.n, "r": f"{c.pearson_r:.2f}", "p": probability(c.pearson_p),
         "rho": f"{c.spearman_r:.2f}", "p_rho": probability(c.spearman_p)}
        for c in significant[:MAX_CORRELATIONS]
    ]
    by_name = {s.name: s for s in analysis.dataset.series}
    scatters = [figure_to_svg(scatter_figure(by_name[c.x], by_name[c.y], c)) for c in significant[:MAX_SCATTERS]]
    return rows, scatters


def _inventory(analysis: Analysis) -> list[tuple[str, list[tuple[str, str]]]]:
    """Every fact key with its values, most common first, nodes folded."""
    table = []
    for key, per_node in sorted(analysis.dataset.facts.items()):
        by_value: dict[str, list[str]] = defaultdict(list)
        for node, value in per_node.items():
            by_value[value].append(node)
        ordered = sorted(by_value.items(), key=lambda item: (-len(item[1]), item[0]))
        table.append((key, [(value, fold(nodes)) for value, nodes in ordered]))
    return table


def _finding_key(finding: Finding) -> tuple[str, str, str, str]:
    """What tells one finding from another in a report (a stage's copy of a
    finding may carry other evidence once related findings are linked)."""
    return finding.kind, finding.subject, finding.nodes, finding.severity.value


def _finding_rows(findings: list[Finding]) -> list[dict[str, Any]]:
    return [{"severity": f.severity, "kind": f.kind, "subject": f.subject, "nodes": f.nodes,
             "message": f.message, "remedy": f.remedy,
             "evidence_json": json.dumps(f.evidence, indent=2, sort_keys=True, default=str)}
            for f in findings]


def _best_table(series: list[Series], flagged: dict[str, dict[str, str]]) -> dict[str, Any]:
    """Nodes down, the stage's benchmarks across: every node's best value,
    marked where a finding names it."""
    nodes = sorted({label for s in series for label in s.labels})
    rows = []
    for node in nodes:
        cells = []
        for s in series:
            where = np.flatnonzero(s.labels == node)
            value = report_number(float(s.values[where[0]])) if where.size else "—"
            marked = node in flagged.get(s.name, {}) or node in flagged.get(s.benchmark, {})
            cells.append({"value": value, "flagged": marked})
        rows.append({"node": node, "cells": cells})
    return {"columns": [f"{s.name} ({s.unit})" if s.unit else s.name for s in series], "rows": rows}


def _stages(analysis: Analysis, check: CheckResult) -> list[dict[str, Any]]:
    """A section per stage of a check: verdict, runs, findings, best values, histograms."""

    flagged = _flagged_labels(analysis)
    sections = []
    for stage in check.stages:
        series = [s for s, _ in analysis.statistics
                  if stage.name != DIAGNOSTICS and stage.owns(s.benchmark) and _histogram_worthy(s)]
        if stage.between_pairs:
            # Pairs, not nodes: the interconnect section tabulates every size;
            # here the fitted latency and bandwidth and what a finding names.
            series = [s for s in series if s.metric.startswith("fit.") or s.name in flagged]
            best = None
        else:
            best = _best_table(series, flagged) if series else None
        directories = _directories([s for s, _ in analysis.statistics if stage.owns(s.benchmark)])
        runs = []
        for benchmark, summary in stage.runs.items():
            if summary is None:
                runs.append(f"{benchmark}: finished by an earlier, interrupted invocation")
                continue
            ok = sum(counts["ok"] > 0 for counts in summary.per_node.values())
            runs.append(f"{benchmark}: {summary.repetitions} repetitions, {ok} of {len(summary.per_node)} "
                        "nodes gave valid results")
        sections.append({
            "name": stage.name,
            "ready": not stage.blocking,
            "findings": _finding_rows(stage.findings),
            "runs": runs,
            # The disk directories' table is drawn as a table: not again as its note.
            "notes": [n for n in stage.notes if not (directories and n.startswith(DIRECTORY_TABLE_TITLE))],
            "directories": directories,
            "best": best,
            "histograms": [figure_to_svg(histogram_figure(s, highlight=_highlight(s, flagged)))
                           for s in series if _highlight(s, flagged)],
            "healthy_histograms": [figure_to_svg(histogram_figure(s)) for s in series if not _highlight(s, flagged)],
        })
    for name in check.not_run:
        sections.append({"name": name, "ready": None, "findings": [], "runs": [], "notes": [
            f"not run: the check stopped after {check.stopped_after} (--continue runs it anyway)"],
            "best": None, "histograms": [], "healthy_histograms": [], "directories": None})
    return sections


def _directories(series: list[Series]) -> dict[str, Any] | None:
    """Several disk directories side by side: directory down, the passes
    across, the median over nodes; None when one directory was measured."""

    rows = directory_table(series)
    if not rows:
        return None
    return {"columns": list(PASSES), "rows": [
        {"directory": row.directory,
         "cells": [f"{report_number(row.medians[step])} ({row.nodes[step]})" if row.medians[step] is not None
                   else f"— ({row.nodes[step]})" for step in PASSES]} for row in rows]}


def _quad(values: tuple[float, float, float, float] | None) -> list[str]:
    return [report_number(v) for v in values] if values is not None else ["—"] * 4


def _slow_rows(pairs: list[interconnect.SlowPair]) -> list[dict[str, str]]:
    return [{"pair": p.label, "value": report_number(p.value), "percent": f"{p.percent_of_median:.1f}"}
            for p in pairs]


def _interconnect(analysis: Analysis) -> dict[str, Any] | None:
    """The interconnect section: pattern tables, slowest pairs, sorted against
    shuffled, bisection, matrix heatmaps and registered figures; None when
    the store holds none of them."""
    dataset, sensitivity = analysis.dataset, analysis.sensitivity
    patterns = [{
        "benchmark": t.benchmark,
        "rows": [{"size": r.size, "n": r.n, "bandwidth": _quad(r.bandwidth), "latency": _quad(r.latency)}
                 for r in t.rows],
        "fit": (f"fit over the larger sizes: median latency {report_number(t.fit_latency_median)} us, "
                f"median bandwidth {report_number(t.fit_bandwidth_median)} MB/s"
                if t.fit_latency_median is not None or t.fit_bandwidth_median is not None else ""),
        "slowest_metric": t.slowest_metric, "slowest_unit": t.slowest_unit, "slowest": _slow_rows(t.slowest),
    } for t in interconnect.pattern_tables(dataset)]
    comparisons = [{**c, "ratio": f"{c['ratio']:.2f}", "p": probability(c["p"]),
                    "sorted_median": report_number(c["sorted_median"]),
                    "shuffled_median": report_number(c["shuffled_median"])}
                   for c in interconnect.comparison_rows(dataset, sensitivity)]
    cut = interconnect.bisection(dataset)
    bisection = None if cut is None else {
        "nodes": cut.nodes, "pairs": cut.pairs if cut.pairs is not None else "—",
        "demonstrated": report_number(cut.demonstrated),
        "single_pair": report_number(cut.single_pair),
        "full": report_number(cut.full),
        "fraction": f"{cut.fraction * 100:.1f}%" if cut.fraction is not None else "—",
        "slowest": _slow_rows(cut.slowest),
    }
    grid = interconnect.matrix(dataset, sensitivity)
    matrix = None
    if grid is not None:
        marked = interconnect.marked_cells(grid)
        heatmaps = [figure_to_svg(heatmap_figure(grid.bandwidth, grid.nodes,
                                                 f"{MATRIX_TITLE}: {grid.bandwidth_metric}", grid.bandwidth_unit,
                                                 True, marked))]
        if grid.latency is not None:
            heatmaps.append(figure_to_svg(heatmap_figure(grid.latency, grid.nodes,
                                                         f"{MATRIX_TITLE}: {grid.latency_metric}",
                                                         grid.latency_unit, False, marked)))
        matrix = {"nodes": fold(grid.nodes), "heatmaps": heatmaps,
                  "slow": sorted(grid.slow.items())}
    figures = [{"anchor": section.anchor, "heading": section.heading,
                "figures": [{"title": f.title, "caption": f.caption, "svg": f.svg} for f in shown]}
               for section, shown in interconnect.figure_sources(dataset)]
    if not (patterns or bisection or matrix or figures):
        return None
    return {"patterns": patterns, "comparisons": comparisons, "bisection": bisection, "matrix": matrix,
            "figures": figures}


# A cluster name longer than this (nodes of many prefixes) is given as its node count.
MAX_CLUSTER_NAME = 60


def cluster_name(analysis: Analysis) -> str:
    """The judged nodes folded (``node[001-484]``), or their count when
    that is too long to be a title."""
    dataset = analysis.dataset
    nodes = set(dataset.declared_nodes) | {str(label) for s in dataset.series if s.label_kind is LabelKind.NODE
                                           for label in s.labels}
    folded = fold(sorted(nodes))
    return folded if len(folded) <= MAX_CLUSTER_NAME else f"{len(nodes)} nodes"


def render_report(analysis: Analysis, check: CheckResult | None = None, source: str | None = None) -> str:
    """The report as one HTML document; ``source`` names where the data
    came from (the store, or the directories imported), shown with the
    cluster's nodes in the title."""
    # A check draws each histogram in its stage's section instead.
    histograms, note = ([], "") if check is not None else _histograms(analysis)
    shown = strong_correlations(analysis)
    correlations, scatters = _correlations(analysis, shown)
    # A check's findings are shown in their stages' sections; the Findings
    # section holds the others (a finding of the whole check), not them again.
    staged = {_finding_key(f) for stage in check.stages for f in stage.findings} if check is not None else set()
    unstaged = [f for f in analysis.findings if _finding_key(f) not in staged]
    findings = _finding_rows(unstaged)
    # One reason per problem: a cause with the findings it explains is one.
    reasons = [f"{p.severity.value}: {p.nodes or '(no node)'}: {p.summary}" for p in analysis.problems]
    if check is not None and check.stopped_after:
        reasons.append(f"the check stopped after {check.stopped_after}; not run: {', '.join(check.not_run)}")
    statistics = [
        {"name": s.name, "unit": s.unit or "-", "direction": s.direction.value, "n": d.n,
         "population": _POPULATION[s.label_kind], "low": report_number(d.low), "high": report_number(d.high),
         "variability": f"{d.variability_pct:.2f}", "mean": report_number(d.mean),
         "median": report_number(d.median),
         "std": report_number(d.std)}
        for s, d in analysis.statistics
    ]
    return _environment.get_template("report.html.j2").render(
        cluster=cluster_name(analysis),
        source=source,
        generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        version=__version__,
        alpha=analysis.sensitivity.alpha,
        min_effect_pct=f"{analysis.sensitivity.min_effect * 100:g}",
        ready=analysis.ready,
        verdict=("NO DATA: nothing to judge" if not analysis.judged
                 else "READY for production" if analysis.ready else "NOT READY for production"),
        reasons=reasons,
        stages=_stages(analysis, check) if check is not None else [],
        findings=findings,
        findings_heading=findings_heading(unstaged),
        staged_findings=len(analysis.findings) - len(findings),
        correlations_count=len(shown),
        problems=[{"nodes": p.nodes, "severity": p.severity.value, "summary": p.summary,
                   "cause": _finding_rows(list(p.cause)), "symptoms": _finding_rows(list(p.symptoms))}
                  for p in analysis.problems if p.symptoms],
        statistics=statistics,
        histograms=histograms,
        histograms_note=note,
        caveat=CORRELATION_CAVEAT,
        correlations=correlations,
        scatters=scatters,
        common=common_nodes(analysis.dataset.failures),
        inventory=_inventory(analysis),
        interconnect=_interconnect(analysis),
        node_sets=sets_section(analysis),
        numa=numa_section(analysis),
        sync=sync_section(analysis),
        processes=processes_section(analysis),
        affinity=affinity_section(analysis),
        noise=noise_section(analysis),
        sweeps=sweeps_section(analysis),
        profiles=profiles_section(analysis),
        models=placement_section(analysis),
    )


def write_report(analysis: Analysis, path: os.PathLike[str] | str, check: CheckResult | None = None,
                 source: str | None = None) -> Path:
    """The report of an analysis; of a staged check, with a section per
    stage; written as io.atomic writes every output (its directory never made)."""
    from oddnode.core.atomic import write_atomically

    path = Path(path)
    write_atomically(path, render_report(analysis, check, source).encode("utf-8"))
    return path
