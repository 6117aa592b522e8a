"""The report of sync runs (``oddnode sync``): per node, how often the other
ranks waited for it and how long; per node count, the time per iteration
against the least-squares line time = a + b·ranks (observed against
fitted), with the line's extrapolation to a larger concurrency; their JSON.

Read through the pure functions of ``oddnode.readings.sync``; the tables
fit the terminal as the set tables do (report/sets.py).  Each view is None
when the store holds no sync runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from rich.console import Console, RenderableType
from rich.text import Text

from oddnode.core.nodes import expand
from oddnode.core.order import natural_key
from oddnode.findings.sync import KIND as LAGGARD
from oddnode.findings.sync import excess_floor_us
from oddnode.core.model import Dataset, Finding
from oddnode.report.sets import _plain
from oddnode.report.terminal import WIDE_NOTE, fit_columns, fixed_table, print_views, probability, report_number
from oddnode.readings.sync import NodeSync, SyncNodes, SyncScaling, sync_nodes, sync_scaling

if TYPE_CHECKING:
    from oddnode.judge.analysis import Analysis
    from oddnode.report import documents

# Beyond this many nodes a node table shows the laggards and the nodes the
# others waited for longest, and folds the rest into one row (--wide: all).
MAX_NODE_ROWS = 16
# Columns a narrow terminal loses first, least wanted first.
NODE_LEFT_OUT_FIRST = ("p", "chance %", "runs", "efficiency %", "extra wait us")
SCALING_LEFT_OUT_FIRST = ("extra wait us", "wait us", "error", "runs")
_LEFT = {"node"}  # names; the rest are numbers

READING = (
    "In every iteration the rank that waited least arrived last and the others waited for it. On healthy nodes that "
    "is anyone's turn, 1 in K iterations in a set of K; a node last far more often, by enough to matter, is a "
    "laggard (sync-laggard). Seaborg's notes extrapolated the time per iteration linearly with the concurrency: "
    "frequent short interruptions on each node compound as more ranks wait for each other."
)


def _pct(value: float) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.3g}"


def _us(value: float) -> str:
    """Microseconds to four significant digits: a wait's noise is larger."""
    return "-" if value is None or not math.isfinite(value) else f"{value:.4g}"


def _p(value: float) -> str:
    # A tail below the smallest double comes back as 0.
    return "<1e-300" if value == 0 else probability(value)


def _node_row(node: NodeSync) -> dict[str, str]:
    return {"node": node.node, "runs": str(node.set_runs), "last %": _pct(node.share_pct),
            "chance %": _pct(node.chance_pct), "extra wait us": _us(node.extra_wait_us),
            "excess wait us": _us(node.excess_wait_us), "efficiency %": _pct(node.efficiency_pct),
            "p": _p(node.p)}


def _folded_row(nodes: Sequence[NodeSync]) -> dict[str, str]:
    """The nodes not shown, as one row of medians."""
    def med(values: list[float]) -> float:
        return float(np.median(values)) if values else math.nan

    return {"node": f"{len(nodes)} other nodes (median)", "runs": _pct(med([n.set_runs for n in nodes])),
            "last %": _pct(med([n.share_pct for n in nodes])), "chance %": _pct(med([n.chance_pct for n in nodes])),
            "extra wait us": _us(med([n.extra_wait_us for n in nodes])),
            "excess wait us": _us(med([n.excess_wait_us for n in nodes])),
            "efficiency %": _pct(med([n.efficiency_pct for n in nodes])), "p": "-"}


def node_table_view(reading: SyncNodes, findings: Sequence[Finding] = (), width: int | None = None,
                    wide: bool = False) -> RenderableType:
    """One operation and ordering: per node its set runs, the share of its
    iterations in which it was last against chance, the extra wait per
    iteration it cost the others, its efficiency and the binomial p of
    being last that often; laggards (the findings') in bold red first."""
    flagged = {f.nodes for f in findings if f.kind == "sync-laggard" and f.subject == reading.series}
    nodes = list(reading.nodes)
    ordered = sorted(nodes, key=lambda n: (n.node not in flagged, -n.excess_wait_us))
    # Laggards first, then the nodes in order; folded, the longest excess waits.
    shown_nodes, folded = (sorted(nodes, key=lambda n: n.node not in flagged), []) \
        if wide or len(nodes) <= MAX_NODE_ROWS else (ordered[:MAX_NODE_ROWS - 1], ordered[MAX_NODE_ROWS - 1:])
    rows = [_node_row(n) for n in shown_nodes] + ([_folded_row(folded)] if folded else [])
    styles = ["bold red" if i < len(shown_nodes) and shown_nodes[i].node in flagged else None
              for i in range(len(rows))]
    columns = list(rows[0])
    shown, widths, left_out = fit_columns(columns, rows, None if wide else width, NODE_LEFT_OUT_FIRST)
    notes = [f"excess wait: the extra wait beyond the median set-mate's, run by run; dispersion of the last counts "
             f"{reading.dispersion:.2g} (1: binomial)."]
    if folded:
        notes.append(f"{len(folded)} nodes folded into the last row.")
    if left_out:
        notes.append(f"{', '.join(left_out)} left out to fit {width} columns.")
    if folded or left_out:
        notes.append(WIDE_NOTE)
    title = (f"{reading.series}: how often the others waited for each node ({reading.operation}, "
             f"{reading.ordering} sets)")
    return fixed_table(title, " ".join(notes), shown, widths, rows, _LEFT, styles)


def scaling_table_view(scaling: SyncScaling, extrapolate: int | None = None, width: int | None = None,
                       wide: bool = False) -> RenderableType:
    """Per node count, the median time per iteration of its set runs against
    the line's, the efficiency, wait and extra wait; the line, and its value
    at ``extrapolate`` ranks."""
    rows = [{"ranks": str(p.ranks), "runs": str(p.runs), "time us": _us(p.time_us), "fitted us": _us(p.fitted_us),
             "error": f"{p.error:+.1%}" if math.isfinite(p.error) else "-", "efficiency %": _pct(p.efficiency_pct),
             "wait us": _us(p.wait_us), "extra wait us": _us(p.extra_wait_us)} for p in scaling.points]
    reached = scaling.extrapolate(extrapolate) if extrapolate else None
    if reached is not None:
        rows.append({"ranks": str(reached.ranks), "runs": "-", "time us": "-", "fitted us": _us(reached.time_us),
                     "error": "-", "efficiency %": _pct(reached.efficiency_pct), "wait us": "-",
                     "extra wait us": "-"})
    shown, widths, left_out = fit_columns(list(rows[0]), rows, None if wide else width, SCALING_LEFT_OUT_FIRST)
    fit = scaling.fit
    if fit is None:
        lines = ["One node count: no line to fit (give two or more with --sizes)."]
    else:
        lines = [f"time = a + b·ranks: a = {_us(fit.a_us)} us, b = {_us(fit.b_us)} us per rank (least squares "
                 f"over {fit.runs} set runs; error = (fitted - observed) / observed)."]
    if reached is not None:
        lines.append(f"At {reached.ranks} ranks the line gives {_us(reached.time_us)} us per iteration for "
                     f"{_us(reached.compute_us)} us of work: {_pct(reached.efficiency_pct)}% efficiency, "
                     f"{reached.slowdown:.3g}x the time at {scaling.points[0].ranks} ranks (last row).")
    if left_out:
        lines.append(f"{', '.join(left_out)} left out to fit {width} columns. {WIDE_NOTE}")
    title = (f"scale.sync.{scaling.operation}.{scaling.ordering}: time per iteration against the ranks "
             f"({_us(scaling.compute_us)} us of work per iteration)")
    styles = [None] * len(scaling.points) + (["bold"] if reached is not None else [])
    return fixed_table(title, " ".join(lines), shown, widths, rows, _LEFT, styles)


def sync_views(dataset: Dataset, findings: Sequence[Finding] = (), extrapolate: int | None = None,
               width: int | None = None, wide: bool = False) -> list[RenderableType]:
    """The node tables and the scaling tables of every sync run in the store."""
    views: list[RenderableType] = [node_table_view(reading, findings, width, wide)
                                   for reading in sync_nodes(dataset) if reading.nodes]
    views += [scaling_table_view(scaling, extrapolate, width, wide) for scaling in sync_scaling(dataset)]
    if views:
        views.append(Text(READING, style="dim"))
    return views


def print_sync(console: Console, dataset: Dataset, findings: Sequence[Finding] = (), extrapolate: int | None = None,
               wide: bool = False) -> bool:
    """Print the sync views fitted to the console; whether there was anything."""
    return print_views(console, sync_views(dataset, findings, extrapolate, console.width, wide), wide)


def sync_json(dataset: Dataset, extrapolate: int | None = None) -> documents.SyncResult:
    """The sync readings as data: per operation and ordering every node's
    account (with the extra wait that would matter for it), and the scaling
    points with the line and, if asked, its extrapolation.  NaN is null."""
    nodes = []
    for reading in sync_nodes(dataset):
        document = reading.to_json()
        for entry, node in zip(document["nodes"], reading.nodes):
            entry["excess_floor_us"] = excess_floor_us(node)
        nodes.append(document)
    return _plain({"nodes": nodes, "scaling": [s.to_json(extrapolate) for s in sync_scaling(dataset)]})


# --- the HTML report ------------------------------------------------------------------

# How to read the section's tables.
SYNC_READING = ("Bulk-synchronous iterations (work, then the collective): per node, how often it was the last "
                "to arrive against chance, what it made the others wait per iteration, and its efficiency; a "
                "node last far more often than chance (p below the sensitivity) is a sync laggard.")
SYNC_COLUMNS = ("node", "iterations", "last %", "chance %", "ratio", "extra wait (us)", "time (us)",
                "efficiency %", "p")


def _sync_row(node: NodeSync) -> list[str]:
    return [node.node, str(node.iterations),
            *map(report_number, (node.share_pct, node.chance_pct, node.ratio, node.extra_wait_us, node.time_us,
                                 node.efficiency_pct)),
            probability(node.p)]


def sync_section(analysis: Analysis) -> dict[str, Any] | None:
    """The HTML report's sync section: how to read it, and per operation
    and ordering every node's row, the laggards the findings name marked;
    None when the store holds no sync runs."""
    readings = sync_nodes(analysis.dataset)
    if not readings:
        return None
    flagged = sorted({node for finding in analysis.findings if finding.kind == LAGGARD
                      for node in expand(finding.nodes)}, key=natural_key)
    return {"reading": SYNC_READING, "columns": list(SYNC_COLUMNS), "flagged": flagged,
            "tables": [{"title": f"{reading.operation}, {reading.ordering} sets",
                        "rows": [_sync_row(node) for node in reading.nodes]} for reading in readings]}
