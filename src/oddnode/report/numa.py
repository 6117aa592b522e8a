"""The report of NUMA matrices (``oddnode numa``): per measure the matrix
(rows: the NUMA node of the threads, or of the ping-pong's first end;
columns: the NUMA node of the memory, or of its second end) of the cluster
(each cell's median over the nodes) and of each node the findings name (or
every node), a per-node table of local, remote and their ratio, the nodes
with one NUMA node, their JSON, and heatmaps for the HTML report.

Read through the pure functions of ``oddnode.findings.numa``; tables fit
the terminal as the set tables do (report/terminal.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from rich.console import Console, RenderableType
from rich.text import Text

from oddnode.findings.numa import RATIO, SLOW, NodeMatrix, measure_words, median_matrix, numa_matrices
from oddnode.readings.numa_series import FAMILY_SHORT, LATENCY, MEASURES, TRIAD
from oddnode.core.model import Dataset, Finding
from oddnode.core.nodes import expand, fold
from oddnode.core.order import natural_key
from oddnode.report.terminal import WIDE_NOTE, fit_columns, fixed_table, print_views, report_number

if TYPE_CHECKING:
    from oddnode.judge.analysis import Analysis

# Beyond this many nodes the node table shows the nodes the findings name
# and folds the rest into one row of medians (--wide: all).
MAX_NODE_ROWS = 16
# Heatmaps in the HTML report at most: the cluster's, then flagged nodes'.
MAX_HEATMAPS = 12
_LEFT = {"node", "NUMA"}
NODE_LEFT_OUT_FIRST = ("mpi bw local", "mpi bw remote", "mpi lat local", "mpi lat remote", "pp bw local",
                       "pp bw remote", "pp lat local", "pp lat remote", "triad remote", "triad local", "NUMA")
# A measure's column prefix: the family's short name, and the metric's when the family has two.
_SHORT = {(family, metric): FAMILY_SHORT[family] if family == TRIAD
          else f"{FAMILY_SHORT[family]} {'lat' if metric == LATENCY else 'bw'}" for family, metric in MEASURES}

# Nodes shown each in its own column of the one-NUMA-node table; more are summarised.
MAX_SINGLE_COLUMNS = 4

READING = (
    "Rows: the NUMA node of the threads (the triad) or of the ping-pong's first end; columns: the NUMA node of the "
    "memory or of the second end. The diagonal is local, the rest remote; remote/local is the median of the remote "
    "cells over the median of the local ones (below 1 for a bandwidth, above 1 for a latency). Each cell is "
    "compared with the same cell on the other nodes: numa-slow names a node whose cells stand out and what they "
    "share, numa-remote-ratio a node whose remote/local ratio does."
)


def _value(value: float | None, latency: bool = False) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:.3g}" if latency else f"{value:,.0f}"


def _ratio(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.2f}"


def flagged_nodes(findings: Sequence[Finding]) -> list[str]:
    """The nodes the NUMA findings name, in natural order."""
    nodes: set[str] = set()
    for finding in findings:
        if finding.kind in (SLOW, RATIO):
            nodes.update(expand(finding.nodes))
    return sorted(nodes, key=natural_key)


def matrix_view(matrix: NodeMatrix, title: str, width: int | None = None, wide: bool = False) -> RenderableType:
    """One matrix as a table: a row per NUMA node i, a column per j; the
    diagonal (local) in bold."""
    latency = matrix.metric == LATENCY
    rows_i, columns_j = matrix.rows, matrix.columns
    first = "cpu \\ mem" if matrix.family == TRIAD else "from \\ to"
    rows = [{first: str(i), **{str(j): _value(matrix.cells.get((i, j)), latency) for j in columns_j}}
            for i in rows_i]
    columns = [first] + [str(j) for j in columns_j]
    shown, widths, left_out = fit_columns(columns, rows, None if wide else width)
    remote = matrix.ratio
    notes = [f"local {_value(matrix.local, latency)}, remote {_value(matrix.remote, latency)} {matrix.unit}, "
             f"remote/local {_ratio(remote)}." if remote is not None else
             "One NUMA node: the 1x1 case, nothing remote to compare."]
    if left_out:
        notes.append(f"NUMA nodes {', '.join(left_out)} left out to fit {width} columns. {WIDE_NOTE}")
    table = fixed_table(title, " ".join(notes), shown, widths, rows, {first})
    return table


def _node_row(node: str, by_measure: Mapping[tuple[str, str], NodeMatrix], report: bool = False) -> dict[str, str]:
    """A node's NUMA columns, its values as the terminal shows them or (`report`) the HTML report."""
    row = {"node": node}
    counts = {len(m.rows) for m in by_measure.values()}
    row["NUMA"] = str(max(counts)) if counts else "-"
    for measure in MEASURES:
        short = _SHORT[measure]
        matrix = by_measure.get(measure)
        latency = measure[1] == LATENCY
        for part, value in (("local", matrix.local if matrix else None), ("remote", matrix.remote if matrix else None)):
            row[f"{short} {part}"] = report_number(value, "-") if report else _value(value, latency)
        row[f"{short} ratio"] = _ratio(matrix.ratio if matrix else None)
    return row


def node_table_view(matrices: Mapping[tuple[str, str], Mapping[str, NodeMatrix]], findings: Sequence[Finding] = (),
                    width: int | None = None, wide: bool = False) -> RenderableType | None:
    """Per node: its NUMA nodes, and per measure the median local and remote
    cell and their ratio; the nodes the findings name first, in bold red."""
    nodes = sorted({node for per_node in matrices.values() for node in per_node}, key=natural_key)
    if not nodes:
        return None
    flagged = set(flagged_nodes(findings))
    ordered = sorted(nodes, key=lambda n: n not in flagged)
    shown_nodes, folded = (ordered, []) if wide or len(nodes) <= MAX_NODE_ROWS else (
        ordered[:MAX_NODE_ROWS - 1], ordered[MAX_NODE_ROWS - 1:])
    rows = [_node_row(node, {m: per_node[node] for m, per_node in matrices.items() if node in per_node})
            for node in shown_nodes]
    if folded:
        medians = {m: median_matrix({n: per_node[n] for n in folded if n in per_node})
                   for m, per_node in matrices.items()}
        rows.append(_node_row(f"{len(folded)} other nodes (median)", {m: v for m, v in medians.items() if v}))
    present = [m for m in MEASURES if m in matrices]
    columns = ["node", "NUMA"] + [f"{_SHORT[m]} {part}" for m in present for part in ("local", "remote", "ratio")]
    rows = [{c: row[c] for c in columns} for row in rows]
    shown, widths, left_out = fit_columns(columns, rows, None if wide else width,
                                          [c for c in NODE_LEFT_OUT_FIRST if c in columns])
    notes = ["local, remote: the median of a node's cells within one NUMA node and across; MB/s, latency us "
             "(pp: the shared-memory ping-pong; mpi: the MPI ping-pong on the same CPUs)."]
    if folded:
        notes.append(f"{len(folded)} nodes folded into the last row.")
    if left_out:
        notes.append(f"{', '.join(left_out)} left out to fit {width} columns.")
    if folded or left_out:
        notes.append(WIDE_NOTE)
    styles = ["bold red" if i < len(shown_nodes) and shown_nodes[i] in flagged else None for i in range(len(rows))]
    return fixed_table("NUMA: local against remote, per node", " ".join(notes), shown, widths, rows, _LEFT, styles)


def one_node_machines(matrices: Mapping[tuple[str, str], Mapping[str, NodeMatrix]]) -> list[str]:
    """The nodes whose matrices are 1x1: one NUMA node."""
    nodes: dict[str, bool] = {}
    for per_node in matrices.values():
        for node, matrix in per_node.items():
            single = len(matrix.rows) <= 1 and len(matrix.columns) <= 1
            nodes[node] = nodes.get(node, True) and single
    return sorted((node for node, single in nodes.items() if single), key=natural_key)


def single_numa_view(matrices: Mapping[tuple[str, str], Mapping[str, NodeMatrix]], width: int | None = None,
                     wide: bool = False) -> RenderableType:
    """Where every node has one NUMA node, each matrix is one cell: one
    table of them, a row per measure (per node when few, else the median
    and the range over the nodes)."""
    nodes = sorted({node for per_node in matrices.values() for node in per_node}, key=natural_key)
    few = len(nodes) <= MAX_SINGLE_COLUMNS
    value_columns = nodes if few else ["median", "lowest", "highest"]
    rows = []
    for measure, per_node in matrices.items():
        latency = measure[1] == LATENCY
        values = {node: matrix.local for node, matrix in per_node.items() if matrix.local is not None}
        unit = next(iter(per_node.values())).unit
        row = {"measure": measure_words(*measure), "unit": unit}
        if few:
            row.update({node: _value(values.get(node), latency) for node in nodes})
        else:
            ordered = sorted(values.values())
            row.update({"median": _value(float(np.median(ordered)) if ordered else None, latency),
                        "lowest": _value(ordered[0] if ordered else None, latency),
                        "highest": _value(ordered[-1] if ordered else None, latency)})
        rows.append(row)
    columns = ["measure", "unit", *value_columns]
    shown, widths, left_out = fit_columns(columns, rows, None if wide else width)
    notes = ["one NUMA node per node: each matrix is its one local cell"]
    if left_out:
        notes.append(f"{', '.join(left_out)} left out to fit {width} columns. {WIDE_NOTE}")
    return fixed_table("NUMA measures", "; ".join(notes) + ".", shown, widths, rows, {"measure", "unit"})


def numa_views(dataset: Dataset, findings: Sequence[Finding] = (), width: int | None = None, wide: bool = False,
               every_node: bool = False) -> list[RenderableType]:
    """The matrices (the cluster's, then each named node's, or every
    node's), the node table and how to read them."""
    matrices = numa_matrices(dataset)
    if not matrices:
        return []
    nodes = sorted({node for per_node in matrices.values() for node in per_node}, key=natural_key)
    views: list[RenderableType] = []
    single = one_node_machines(matrices)
    if single:
        views.append(Text(f"{fold(single)}: one NUMA node, the 1x1 case (nothing remote to compare).",
                          style="bold"))
    if len(single) == len(nodes):
        views.append(single_numa_view(matrices, width, wide))
        return views
    own = nodes if every_node or len(nodes) == 1 else flagged_nodes(findings)
    for measure, per_node in matrices.items():
        words = f"NUMA {measure_words(*measure)}"
        if len(nodes) > 1:
            median = median_matrix(per_node)
            views.append(matrix_view(median, f"{words} ({median.unit}), median of {len(per_node)} nodes", width, wide))
        for node in own:
            if node in per_node:
                views.append(matrix_view(per_node[node], f"{words} ({per_node[node].unit}) on {node}", width, wide))
    if len(nodes) > 1:
        table = node_table_view(matrices, findings, width, wide)
        if table is not None:
            views.append(table)
    views.append(Text(READING, style="dim"))
    return views


def print_numa(console: Console, dataset: Dataset, findings: Sequence[Finding] = (), wide: bool = False,
               every_node: bool = False) -> bool:
    """Print the NUMA views fitted to the console; whether there was anything."""
    return print_views(console, numa_views(dataset, findings, console.width, wide, every_node), wide)


def _matrix_json(matrix: NodeMatrix) -> dict[str, Any]:
    def plain(value: float | None) -> float | None:
        return None if value is None or not math.isfinite(value) else value

    return {"rows": matrix.rows, "columns": matrix.columns,
            "matrix": [[plain(v) for v in row] for row in matrix.grid().tolist()],
            "local": plain(matrix.local), "remote": plain(matrix.remote), "ratio": plain(matrix.ratio)}


def numa_json(dataset: Dataset) -> dict[str, Any]:
    """Per measure (``numa.triad:bandwidth``) its unit and direction, every
    node's matrix with local, remote and ratio, and the cluster's median
    matrix; the nodes with one NUMA node.  NaN is null."""
    matrices = numa_matrices(dataset)
    measures = {}
    for (family, metric), per_node in matrices.items():
        first = next(iter(per_node.values()))
        median = median_matrix(per_node)
        measures[f"{family}:{metric}"] = {
            "unit": first.unit, "direction": first.direction.value,
            "nodes": {node: _matrix_json(m) for node, m in per_node.items()},
            "median": _matrix_json(median) if median is not None else None}
    return {"measures": measures, "one_numa_node": one_node_machines(matrices)}


# --- the HTML report ------------------------------------------------------------------


def heatmap_svg(matrix: NodeMatrix, title: str) -> str:
    """A matrix as a heatmap, each cell annotated with its value; red is
    worse whatever the direction."""
    import matplotlib
    import numpy as np

    from oddnode.report.plots import FIGURE_DPI, Figure, figure_to_svg

    grid = matrix.grid()
    side = min(7.0, 2.4 + 0.45 * max(grid.shape))
    figure = Figure(figsize=(side + 1.0, side), dpi=FIGURE_DPI, layout="constrained")
    axes = figure.add_subplot()
    colours = matplotlib.colormaps["RdYlGn" if matrix.direction.value == "higher" else "RdYlGn_r"]
    image = axes.imshow(np.ma.masked_invalid(grid), cmap=colours.with_extremes(bad="white"), interpolation="nearest")
    figure.colorbar(image, ax=axes, label=matrix.unit or "value", shrink=0.85)
    axes.set_xticks(range(len(matrix.columns)), [str(j) for j in matrix.columns])
    axes.set_yticks(range(len(matrix.rows)), [str(i) for i in matrix.rows])
    axes.set_xlabel("memory on NUMA node" if matrix.family == TRIAD else "second end on NUMA node")
    axes.set_ylabel("threads on NUMA node" if matrix.family == TRIAD else "first end on NUMA node")
    if max(grid.shape) <= 8:
        latency = matrix.metric == LATENCY
        for (r, c), value in np.ndenumerate(grid):
            if math.isfinite(value):
                axes.text(c, r, _value(value, latency), ha="center", va="center", fontsize=7)
    axes.set_title(title, fontsize=9)
    return figure_to_svg(figure)


def numa_section(analysis: Analysis) -> dict[str, Any] | None:
    """The HTML report's NUMA section: how to read it, the node table's rows
    and heatmaps (the cluster's median matrices, then those of the nodes the
    findings name); None when the store holds no NUMA matrices."""
    matrices = numa_matrices(analysis.dataset)
    if not matrices:
        return None
    nodes = sorted({node for per_node in matrices.values() for node in per_node}, key=natural_key)
    named = flagged_nodes(analysis.findings)
    heatmaps = []
    for measure, per_node in matrices.items():
        words = f"NUMA {measure_words(*measure)}"
        if len(nodes) > 1:
            median = median_matrix(per_node)
            heatmaps.append(heatmap_svg(median, f"{words}, median of {len(per_node)} nodes"))
        for node in (nodes if len(nodes) == 1 else named):
            if node in per_node and len(heatmaps) < MAX_HEATMAPS:
                heatmaps.append(heatmap_svg(per_node[node], f"{words} on {node}"))
    rows = [_node_row(node, {m: per_node[node] for m, per_node in matrices.items() if node in per_node}, report=True)
            for node in nodes]
    columns = ["node", "NUMA"] + [f"{_SHORT[m]} {part}" for m in MEASURES if m in matrices
                                  for part in ("local", "remote", "ratio")]
    return {"reading": READING, "columns": columns, "rows": [[row[c] for c in columns] for row in rows],
            "flagged": named, "one_numa_node": one_node_machines(matrices), "heatmaps": heatmaps}
