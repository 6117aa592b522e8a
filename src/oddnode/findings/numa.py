"""NUMA findings, from the matrices ``oddnode numa`` stores, and the pure
reading of those matrices that the report shares.

Every cell of a node's matrix (``numa.triad.<i>.<j>``, ``numa.pingpong.<i>.<j>``,
``numa.mpi_pingpong.<i>.<j>``) is a series of its own, so the same cell is judged across the nodes by the
population rules every single-node series is judged by (population.py:
an outlier on the worse side, or the smaller mode when it is the worse one).

- ``numa-slow``: a node whose cells are on the worse side, read as which of
  its NUMA nodes they share: every slow triad cell with its memory on NUMA
  node k is node k's memory (a DIMM missing there, a channel down); every
  one with its threads there, its CPUs; every slow cell between two NUMA
  nodes and none within one, the link between the sockets.  Nodes with the
  same reading are named together.
- ``numa-remote-ratio``: a node whose remote/local ratio (the median of its
  cells across NUMA nodes over the median of those within one) is on the
  worse side of the other nodes' ratios: remote memory or a remote CPU much
  further away than on identical nodes, even where each cell alone stays
  within the crowd.

The outlier rule also names the slow cells one by one; these findings say
what they have in common.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from oddnode.findings.population import analyse
from oddnode.findings.registry import Sensitivity, first_few, rule
from oddnode.readings.numa_series import BANDWIDTH, FAMILY_WORDS, MEASURES, TRIAD, split_cell_series
from oddnode.core.model import Dataset, Direction, Finding, LabelKind, Series, Severity
from oddnode.core.nodes import fold
from oddnode.core.order import natural_key

SLOW = "numa-slow"
RATIO = "numa-remote-ratio"
# How many nodes and cells a message spells out; the evidence lists all.
MESSAGE_NODES = 5
MESSAGE_CELLS = 4
# Families with more than one metric name the metric beside each cell.
_METRICS = {family: sum(f == family for f, _ in MEASURES) for family, _ in MEASURES}

Cell = tuple[int, int]


def measure_words(family: str, metric: str) -> str:
    """A measure in words: 'triad bandwidth', 'MPI ping-pong latency'."""
    return f"{FAMILY_WORDS.get(family, family)} {metric}"


def cell_text(cell: Cell) -> str:
    """A cell as the reports write it: threads (or the first end) -> memory (or the second end)."""
    return f"{cell[0]}->{cell[1]}"


# --- the matrices --------------------------------------------------------------


@dataclass(frozen=True)
class NodeMatrix:
    """One node's matrix of one measure: cell (i, j) -> best value."""

    node: str
    family: str
    metric: str
    unit: str
    direction: Direction
    cells: Mapping[Cell, float]

    @property
    def rows(self) -> list[int]:
        return sorted({i for i, _ in self.cells})

    @property
    def columns(self) -> list[int]:
        return sorted({j for _, j in self.cells})

    @property
    def local(self) -> float | None:
        """The median of the cells within one NUMA node (i = j)."""
        values = [v for (i, j), v in self.cells.items() if i == j]
        return float(np.median(values)) if values else None

    @property
    def remote(self) -> float | None:
        """The median of the cells across NUMA nodes (i != j); None on a one-node machine."""
        values = [v for (i, j), v in self.cells.items() if i != j]
        return float(np.median(values)) if values else None

    @property
    def ratio(self) -> float | None:
        """remote / local: below 1 for a bandwidth, above 1 for a latency."""
        local, remote = self.local, self.remote
        return remote / local if local and remote is not None else None

    def grid(self, rows: list[int] | None = None, columns: list[int] | None = None) -> np.ndarray:
        """The matrix as an array (rows: i, columns: j), NaN where not measured."""
        rows = self.rows if rows is None else rows
        columns = self.columns if columns is None else columns
        return np.array([[self.cells.get((i, j), math.nan) for j in columns] for i in rows], dtype=np.float64)


Measure = tuple[str, str]  # (family, metric)


def cell_series_of(dataset: Dataset) -> dict[Measure, dict[Cell, Series]]:
    """The stored cell series, by measure and cell."""
    found: dict[Measure, dict[Cell, Series]] = defaultdict(dict)
    for series in dataset.series:
        if series.label_kind is not LabelKind.NODE:
            continue
        split = split_cell_series(series.benchmark)
        if split is not None and (split[0], series.metric) in MEASURES:
            found[(split[0], series.metric)][(split[1], split[2])] = series
    return dict(found)


def numa_matrices(dataset: Dataset) -> dict[Measure, dict[str, NodeMatrix]]:
    """Every node's matrix of every measure stored, nodes in natural order."""
    matrices: dict[Measure, dict[str, NodeMatrix]] = {}
    for measure, cells in cell_series_of(dataset).items():
        per_node: dict[str, dict[Cell, float]] = defaultdict(dict)
        first = next(iter(cells.values()))
        for cell, series in cells.items():
            for label, value in zip(series.labels.tolist(), series.values.tolist()):
                if math.isfinite(value):
                    per_node[str(label)][cell] = float(value)
        matrices[measure] = {node: NodeMatrix(node, measure[0], measure[1], first.unit, first.direction,
                                              per_node[node]) for node in sorted(per_node, key=natural_key)}
    return {measure: matrices[measure] for measure in MEASURES if measure in matrices}


def median_matrix(matrices: Mapping[str, NodeMatrix]) -> NodeMatrix | None:
    """The cluster's matrix: each cell's median over the nodes that have it."""
    if not matrices:
        return None
    values: dict[Cell, list[float]] = defaultdict(list)
    for matrix in matrices.values():
        for cell, value in matrix.cells.items():
            values[cell].append(value)
    first = next(iter(matrices.values()))
    return NodeMatrix(f"median of {len(matrices)} nodes", first.family, first.metric, first.unit, first.direction,
                      {cell: float(np.median(v)) for cell, v in values.items()})


def ratio_series(matrices: Mapping[str, NodeMatrix]) -> Series | None:
    """Every node's remote/local ratio of one measure as a population to
    judge (nodes with one NUMA node have none); higher is better for a
    bandwidth (remote nearer to local), lower for a latency."""
    ratios = {node: m.ratio for node, m in matrices.items() if m.ratio is not None and math.isfinite(m.ratio)}
    if not ratios:
        return None
    first = next(iter(matrices.values()))
    labels = sorted(ratios)
    return Series(benchmark=f"{first.family}.remote_local", metric=first.metric, unit="", direction=first.direction,
                  label_kind=LabelKind.NODE, labels=np.array(labels, dtype=object),
                  values=np.array([ratios[label] for label in labels], dtype=np.float64),
                  repetitions=np.ones(len(labels), dtype=np.int64))


# --- numa-slow -------------------------------------------------------------------


@dataclass(frozen=True)
class SlowCell:
    """A cell of a node on the worse side of that cell across the nodes."""

    cell: Cell
    metric: str
    value: float
    others: float  # the median of the other nodes at the same cell
    unit: str

    @property
    def deviation_pct(self) -> float:
        return (self.value - self.others) / abs(self.others) * 100.0 if self.others else math.inf

    def to_json(self) -> dict[str, Any]:
        return {"cpu_node": self.cell[0], "mem_node": self.cell[1], "metric": self.metric, "value": self.value,
                "others_median": self.others, "deviation_pct": self.deviation_pct, "unit": self.unit}


def slow_cells(dataset: Dataset, sensitivity: Sensitivity) -> dict[str, dict[str, list[SlowCell]]]:
    """node -> family -> its cells on the worse side of their populations."""
    found: dict[str, dict[str, list[SlowCell]]] = defaultdict(lambda: defaultdict(list))
    for (family, metric), cells in cell_series_of(dataset).items():
        for cell, series in sorted(cells.items()):
            population = analyse(series, sensitivity)
            bad = population.bad_labels()
            if not len(bad):
                continue
            rest = np.ones(len(series), dtype=bool)
            rest[bad] = False
            rest &= np.isfinite(series.values)
            others = float(np.median(series.values[rest])) if rest.any() else math.nan
            for index in bad.tolist():
                found[str(series.labels[index])][family].append(
                    SlowCell(cell, metric, float(series.values[index]), others, series.unit))
    return found


def attribute(family: str, bad: Iterable[Cell], present: Iterable[Cell]) -> tuple[str, list[int]]:
    """What a node's slow cells have in common, in words, and the NUMA nodes
    it names: one NUMA node (for the triad, its memory or its CPUs when
    every slow cell has it on that side), the link between NUMA nodes when
    every slow cell crosses it and none stays within one, else the cells."""
    bad = sorted(set(bad))
    present = set(present)
    remote = {cell for cell in present if cell[0] != cell[1]}
    if len(bad) > 1 and set(bad) == remote:
        return "every path between NUMA nodes (remote)", []
    numa_nodes = sorted({k for cell in present for k in cell})
    # One NUMA node in every slow cell; two (one cell across them) say
    # nothing of which one it is.
    shared = [k for k in numa_nodes if all(k in cell for cell in bad)]
    if len(shared) == 1:
        k = shared[0]
        memory_side = all(j == k for _, j in bad)
        cpu_side = all(i == k for i, _ in bad)
        if family == TRIAD and memory_side and not cpu_side:
            return f"the memory of NUMA node {k}", [k]
        if family == TRIAD and cpu_side and not memory_side:
            return f"the CPUs of NUMA node {k}", [k]
        return f"NUMA node {k}", [k]
    return "cells " + ", ".join(cell_text(cell) for cell in bad), sorted({k for cell in bad for k in cell})


_REMEDIES = {
    "memory": ("Compare the memory of NUMA node {k} on {nodes} with the other nodes': its DIMMs (dmidecode -t 17: "
               "one missing, smaller or slower, a channel down), its speed in the BIOS, and how full it is "
               "(numastat -m); then rerun oddnode numa on {nodes}."),
    "cpus": ("Compare the CPUs of NUMA node {k} on {nodes} with the other nodes': their frequency and throttling "
             "(cpupower frequency-info, turbostat), power limits and C-states in the BIOS, and what else runs "
             "there (oddnode processes); then rerun oddnode numa on {nodes}."),
    "node": ("Compare NUMA node {k} of {nodes} with the other nodes': its DIMMs (dmidecode -t 17), its CPUs' "
             "frequency (cpupower frequency-info), and what else runs there (oddnode processes); then rerun "
             "oddnode numa on {nodes}."),
    "remote": ("Compare the link between the sockets of {nodes} with the other nodes': the UPI / Infinity "
               "Fabric link speed and width and the NUMA mode (SNC, NPS, memory interleaving) in the BIOS; then "
               "rerun oddnode numa on {nodes}."),
    "cells": ("Rerun oddnode numa on {nodes} alone: if the same cells stay slow, compare the memory (dmidecode -t "
              "17) and CPUs (cpupower frequency-info) of their NUMA nodes with the other nodes'."),
}


def _remedy(where: str, k: list[int], nodes: str) -> str:
    key = ("memory" if where.startswith("the memory") else "cpus" if where.startswith("the CPUs")
           else "node" if where.startswith("NUMA node") else "remote" if where.startswith("every path")
           else "cells")
    return _REMEDIES[key].format(k=k[0] if k else "", nodes=nodes)


def _figure(value: float) -> str:
    return f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"


@rule(SLOW)
def numa_slow(dataset: Dataset, sensitivity: Sensitivity) -> list[Finding]:
    """Nodes whose NUMA cells are on the worse side of the same cells on the
    other nodes, with the NUMA node (or the link) they have in common."""
    found = slow_cells(dataset, sensitivity)
    if not found:
        return []
    present: dict[str, dict[str, set[Cell]]] = defaultdict(lambda: defaultdict(set))
    for (family, _), matrices in numa_matrices(dataset).items():
        for node, matrix in matrices.items():
            present[node][family].update(matrix.cells)
    groups: dict[tuple[str, str], list[tuple[str, list[int], list[SlowCell]]]] = defaultdict(list)
    for node in sorted(found, key=natural_key):
        for family, cells in found[node].items():
            where, numa_nodes = attribute(family, [c.cell for c in cells], present[node][family])
            groups[(family, where)].append((node, numa_nodes, cells))
    findings = []
    for (family, where), members in groups.items():
        nodes = fold([node for node, _, _ in members])

        def label(c: SlowCell) -> str:
            # The ping-pongs have two metrics, the triad one.
            return f"{c.metric} {cell_text(c.cell)}" if _METRICS.get(family, 0) > 1 else cell_text(c.cell)

        def detail(node: str, cells: list[SlowCell]) -> str:
            shown = first_few([f"{label(c)} {_figure(c.value)} {c.unit} ({c.deviation_pct:+.0f}%)" for c in cells],
                              MESSAGE_CELLS)
            return shown if len(members) == 1 else f"{node} {shown}"

        details = first_few([detail(node, cells) for node, _, cells in members], MESSAGE_NODES, separator="; ")
        others = first_few(sorted({f"{label(c)} {_figure(c.others)} {c.unit}" for _, _, cells in members
                                   for c in cells}), MESSAGE_CELLS)
        kind_words = FAMILY_WORDS.get(family, family)
        message = (f"{nodes}: NUMA {kind_words} slower than on the other nodes on {where}: {details} "
                   f"(the other nodes' medians: {others})")
        evidence = {"family": family, "where": where,
                    "nodes": {node: {"numa_nodes": numa_nodes, "cells": [c.to_json() for c in cells]}
                              for node, numa_nodes, cells in members}}
        findings.append(Finding(kind=SLOW, severity=Severity.WARNING, subject=family, nodes=nodes, message=message,
                                evidence=evidence, remedy=_remedy(where, members[0][1], nodes)))
    return findings


# --- numa-remote-ratio -------------------------------------------------------------


@rule(RATIO)
def numa_remote_ratio(dataset: Dataset, sensitivity: Sensitivity) -> list[Finding]:
    """Nodes whose remote/local ratio of a measure is on the worse side of
    the other nodes' ratios."""
    findings = []
    for (family, metric), matrices in numa_matrices(dataset).items():
        series = ratio_series(matrices)
        if series is None:
            continue
        population = analyse(series, sensitivity)
        bad = population.bad_labels()
        if not len(bad):
            continue
        rest = np.ones(len(series), dtype=bool)
        rest[bad] = False
        others = float(np.median(series.values[rest])) if rest.any() else math.nan
        labels = [str(series.labels[i]) for i in bad.tolist()]
        nodes = fold(labels)
        words = measure_words(family, metric)
        per_node = {}
        for label in labels:
            m = matrices[label]
            per_node[label] = {"ratio": m.ratio, "local": m.local, "remote": m.remote, "unit": m.unit}
        details = first_few([f"{label + ' ' if len(labels) > 1 else ''}{per_node[label]['ratio']:.2f} (local "
                             f"{_figure(per_node[label]['local'])}, remote {_figure(per_node[label]['remote'])} "
                             f"{per_node[label]['unit']})" for label in labels], MESSAGE_NODES)
        what = "far slower" if metric == BANDWIDTH else "far longer"
        message = (f"{nodes}: remote/local {words} {details}, the other nodes' median {others:.2f}: across NUMA "
                   f"nodes the {words.split()[-1]} is {what} relative to within one than on the other nodes")
        remedy = (f"Compare the link between the sockets of {nodes} with the other nodes' (the UPI / Infinity "
                  "Fabric link speed and width, the NUMA mode: SNC, NPS, memory interleaving, in the BIOS) and "
                  "where its memory is (numastat -m: a node full of page cache sends allocations remote); "
                  f"then rerun oddnode numa on {nodes}.")
        findings.append(Finding(kind=RATIO, severity=Severity.WARNING, subject=f"{family}:{metric}", nodes=nodes,
                                message=message,
                                evidence={"family": family, "metric": metric, "others_median": others,
                                          "population": len(series), "nodes": per_node},
                                remedy=remedy))
    return findings
