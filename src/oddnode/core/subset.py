"""The part of a dataset about some nodes: what ``analyze -w/-x`` judges.

A node's own results, facts, failures, troubles, processes and details
follow it; a pair or a set of nodes is kept when every one of its members
is, as its result speaks of them all.  The node list keeps the chosen nodes
that it declares, so that one among them that left nothing is still named.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from oddnode.core.model import Dataset, LabelKind, Series, SetRuns
from oddnode.core.nodes import label_members

__all__ = ["restricted", "series_subset"]


def series_subset(series: Series, keep: np.ndarray) -> Series:
    """``series`` with the labels the boolean array ``keep`` marks."""
    return dataclasses.replace(
        series, labels=series.labels[keep], values=series.values[keep], repetitions=series.repetitions[keep],
        spread=None if series.spread is None else series.spread[keep])


def _kept(labels: np.ndarray, kind: LabelKind, keep: Callable[[str], bool]) -> np.ndarray:
    """Which labels name only nodes that ``keep`` accepts."""
    if kind is LabelKind.NODE:
        return np.fromiter((keep(label) for label in labels.tolist()), dtype=bool, count=len(labels))
    return np.fromiter((all(keep(node) for node in label_members(label, kind)) for label in labels.tolist()),
                       dtype=bool, count=len(labels))


def restricted(dataset: Dataset, keep: Callable[[str], bool]) -> Dataset:
    """The part of ``dataset`` about the nodes ``keep`` accepts; series and
    set runs left with no label are dropped."""
    series = []
    for s in dataset.series:
        kept = _kept(s.labels, s.label_kind, keep)
        if kept.any():
            series.append(s if kept.all() else series_subset(s, kept))
    set_runs = []
    for runs in dataset.set_runs:
        kept = _kept(runs.labels, LabelKind.SET, keep)
        if kept.any():
            set_runs.append(SetRuns(runs.benchmark, runs.metric, runs.unit, runs.direction, runs.labels[kept],
                                    runs.repetitions[kept], runs.values[kept]))
    return dataclasses.replace(
        dataset,
        series=series,
        set_runs=set_runs,
        failures=[f for f in dataset.failures if all(keep(node) for node in (f.members or (f.label,)))],
        facts={key: chosen for key, per_node in dataset.facts.items()
               if (chosen := {node: value for node, value in per_node.items() if keep(node)})},
        topology={node: group for node, group in dataset.topology.items() if keep(node)},
        node_trouble={node: trouble for node, trouble in dataset.node_trouble.items() if keep(node)},
        declared_nodes=[node for node in dataset.declared_nodes if keep(node)],
        processes={node: counted for node, counted in dataset.processes.items() if keep(node)},
        details={name: {label: reps for label, reps in per_label.items() if keep(label)}
                 for name, per_label in dataset.details.items()},
    )
