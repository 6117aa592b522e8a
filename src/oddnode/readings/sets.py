"""Pure readings of set results (``oddnode sets`` and ``oddnode scale``):
STAB's ``anal`` table of sorted next to shuffled sets (and packed next to
striped), the groups each packed or striped set spans, the nodes common to
failed set runs (``xcommon``), the correlation of a set's result with its
members' single-node results, and SCAB's scaling curves.

Functions of a Dataset only; the report, the findings and the command line
read them.  Nothing here imports a runner.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np

from oddnode.core.model import Dataset, Direction, Failure, LabelKind, Series, SetRuns
from oddnode.core.nodes import NodeNameError, expand
from oddnode.core.order import natural_key
from oddnode.readings.partition import spanned_groups
from oddnode.readings.sets_series import (
    ORDERINGS,
    PACKED,
    SCALE,
    SETS,
    SHUFFLED,
    SORTED,
    STRIPED,
    TOPOLOGY_ORDERINGS,
    split_set_series,
)
from oddnode.stats.common import common_nodes
from oddnode.stats.correlation import MIN_SHARED_LABELS, Correlation, correlate
from oddnode.stats.describe import Description, describe_values

# A node series joins member_correlations by default when its values cover
# every member of at least this share of a set series' sets: the worst member
# of a set is unknown while one member has no result.
MIN_MEMBER_COVERAGE = 0.5


@functools.lru_cache(maxsize=65536)
def set_members(label: str) -> tuple[str, ...]:
    """The nodes of a set label (a folded node set); () when the label is
    not one.  Cached: the same sets recur in every metric of a series."""
    try:
        return tuple(expand(label))
    except NodeNameError:
        return ()


def set_series_name(name: str) -> tuple[str, str, str] | None:
    """(family, benchmark, ordering) of a set series' benchmark name, None
    when it is not one or its ordering is none of ORDERINGS."""
    parts = split_set_series(name)
    return parts if parts is not None and parts[2] in ORDERINGS else None


# (family, benchmark, metric) -> ordering -> its runs
RunsByOrdering = dict[tuple[str, str, str], dict[str, SetRuns]]


def runs_by_ordering(dataset: Dataset, family: str | None = None) -> RunsByOrdering:
    """Every set series' repetitions, grouped per family, benchmark and
    metric, ordering -> runs; metrics in natural order (sizes as numbers)."""
    grouped: RunsByOrdering = defaultdict(dict)
    for runs in dataset.set_runs:
        parts = set_series_name(runs.benchmark)
        if parts is None or (family is not None and parts[0] != family):
            continue
        grouped[(parts[0], parts[1], runs.metric)][parts[2]] = runs
    return {key: grouped[key] for key in sorted(grouped, key=lambda k: (k[0], k[1], natural_key(k[2])))}


# --- STAB's anal, sorted next to shuffled ------------------------------------------


@dataclass(frozen=True)
class OrderingRow:
    """One benchmark metric: the describe row of every repetition of every
    set of each ordering (None where not measured)."""

    family: str
    benchmark: str
    metric: str
    unit: str
    direction: Direction
    sorted: Description | None
    shuffled: Description | None
    packed: Description | None = None
    striped: Description | None = None

    def of(self, ordering: str) -> Description | None:
        """The row of one ordering's runs (None where not measured or unknown)."""
        return getattr(self, ordering) if ordering in ORDERINGS else None

    def to_json(self) -> dict[str, Any]:
        # packed and striped only where measured: a store without a topology
        # gives the same JSON as before they existed.
        by_topology = {o: self.of(o).to_json() for o in TOPOLOGY_ORDERINGS if self.of(o) is not None}
        return {"family": self.family, "benchmark": self.benchmark, "metric": self.metric, "unit": self.unit,
                "direction": self.direction.value,
                SORTED: self.sorted.to_json() if self.sorted else None,
                SHUFFLED: self.shuffled.to_json() if self.shuffled else None, **by_topology}


@dataclass(frozen=True)
class OrderingTable:
    """STAB's ``anal`` of set runs: a row per family, benchmark and metric."""

    rows: tuple[OrderingRow, ...]

    def to_json(self) -> list[dict[str, Any]]:
        return [row.to_json() for row in self.rows]


def ordering_table(dataset: Dataset) -> OrderingTable:
    """n, low, high, %variability, mean, median and std dev of each
    ordering's sets' repetitions: sets are what vary, so all repetitions
    of all sets of an ordering form its population."""
    rows = []
    for (family, benchmark, metric), orderings in runs_by_ordering(dataset).items():
        first = next(iter(orderings.values()))
        described = {o: describe_values(r.values) for o, r in orderings.items()}
        rows.append(OrderingRow(family, benchmark, metric, first.unit, first.direction,
                                described.get(SORTED), described.get(SHUFFLED),
                                described.get(PACKED), described.get(STRIPED)))
    return OrderingTable(tuple(rows))


# --- where packed and striped sets land ---------------------------------------------------


@dataclass(frozen=True)
class PlacedSet:
    """One set of a packed or striped series, the topology groups its members
    hang from, and its runs of one metric."""

    benchmark: str
    metric: str
    unit: str
    direction: Direction
    ordering: str
    label: str  # the folded node set
    # in the order of their first member; (ungrouped) for nodes not in the
    # topology; () when the store holds no topology
    groups: tuple[str, ...]
    values: tuple[float, ...]

    @property
    def median(self) -> float:
        return float(np.median(self.values)) if self.values else float("nan")

    def to_json(self) -> dict[str, Any]:
        return {"benchmark": self.benchmark, "metric": self.metric, "unit": self.unit,
                "direction": self.direction.value, "ordering": self.ordering, "set": self.label,
                "groups": list(self.groups), "runs": len(self.values), "median": self.median,
                "min": min(self.values, default=None), "max": max(self.values, default=None)}


def placed_sets(dataset: Dataset) -> list[PlacedSet]:
    """Every set of the ``sets`` family's packed and striped series, with the
    groups of the stored topology it spans (none without a stored topology):
    per benchmark and metric, packed before striped, sets in the
    order of their first run."""
    found = []
    for (family, benchmark, metric), orderings in runs_by_ordering(dataset, SETS).items():
        for ordering in TOPOLOGY_ORDERINGS:
            runs = orderings.get(ordering)
            if runs is None:
                continue
            values: dict[str, list[float]] = defaultdict(list)
            for label, value in zip(runs.labels.tolist(), runs.values.tolist()):
                if np.isfinite(value):
                    values[label].append(value)
            found += [PlacedSet(benchmark, metric, runs.unit, runs.direction, ordering, label,
                                spanned_groups(set_members(label), dataset.topology) if dataset.topology else (),
                                tuple(v))
                      for label, v in values.items()]
    return found


# --- STAB's xcommon over failed set runs -----------------------------------------------


@dataclass(frozen=True)
class FailedSetMembers:
    """The nodes of one benchmark's failed and invalid set runs, by how many
    of them each node is in, most first (STAB's ``xcommon``)."""

    family: str
    benchmark: str
    runs: int  # failed set runs, each counted once whatever its metrics
    counts: tuple[tuple[str, int], ...]

    def to_json(self) -> dict[str, Any]:
        return {"family": self.family, "benchmark": self.benchmark, "runs": self.runs,
                "counts": dict(self.counts)}


def failed_set_runs(dataset: Dataset) -> dict[tuple[str, str], list[Failure]]:
    """(family, benchmark) -> its failed set runs, one per series, set and
    repetition: the store keeps a failed run once per metric it would have
    given, and a run is one trial of its set however many metrics it has."""
    seen: set[tuple[str, str, int | None]] = set()
    failed: dict[tuple[str, str], list[Failure]] = defaultdict(list)
    for failure in dataset.failures:
        parts = set_series_name(failure.benchmark)
        key = (failure.benchmark, failure.label, failure.repetition)
        if failure.label_kind is not LabelKind.SET or parts is None or key in seen:
            continue
        seen.add(key)
        failed[(parts[0], parts[1])].append(failure)
    return dict(failed)


def failed_set_members(dataset: Dataset) -> list[FailedSetMembers]:
    """Per family and benchmark, the nodes common to its failed set runs, by occurrence."""
    return [FailedSetMembers(family, benchmark, len(runs), tuple(common_nodes(runs)))
            for (family, benchmark), runs in sorted(failed_set_runs(dataset).items())]


# --- a set's result against its members' single-node results ----------------------


@dataclass(frozen=True)
class MemberCorrelation:
    """A set series correlated with the worst of each set's members in a node
    series (the lowest when higher is better, the highest when lower is)."""

    set_series: str
    node_series: str
    correlation: Correlation  # x: the worst member's value, y: the set's

    @property
    def strength(self) -> float:
        r = self.correlation.spearman_r
        return abs(r) if np.isfinite(r) else -1.0

    def to_json(self) -> dict[str, Any]:
        return {"set_series": self.set_series, "node_series": self.node_series, **self.correlation.__dict__}


def worst_member_series(sets: Series, nodes: Series) -> tuple[Series, int]:
    """The node series' worst member value of each set all of whose members
    have a value, as a series on those set labels; and how many sets that is."""
    value_of = dict(zip(nodes.labels.tolist(), nodes.values.tolist()))
    worst = min if nodes.higher_is_better else max
    labels, values = [], []
    for label in sets.labels.tolist():
        members = set_members(label)
        found = [value_of.get(node) for node in members]
        if members and all(v is not None and np.isfinite(v) for v in found):
            labels.append(label)
            values.append(worst(found))
    derived = Series(nodes.benchmark, nodes.metric, nodes.unit, nodes.direction, LabelKind.SET,
                     np.array(labels, dtype=object), np.array(values, dtype=np.float64),
                     np.ones(len(labels), dtype=np.int64))
    return derived, len(labels)


def _node_series(dataset: Dataset, names: list[str] | None) -> list[Series]:
    if names is None:
        return [s for s in dataset.series if s.label_kind is LabelKind.NODE]
    chosen = [s for name in names for s in dataset.select(name)]
    return [s for s in chosen if s.label_kind is LabelKind.NODE]


def member_correlations(dataset: Dataset, node_benchmarks: list[str] | None = None) -> list[MemberCorrelation]:
    """Each ``sets`` series' best value per set correlated (Pearson and
    Spearman) with its worst member's value in each node series: does the
    set that runs slowly hold the node with the poorest memory?

    By default every node series that covers at least MIN_MEMBER_COVERAGE
    of a set series' sets; ``node_benchmarks`` names them instead (as
    Dataset.select takes names).  Pairs sharing fewer than the correlation's
    MIN_SHARED_LABELS sets, or constant, are left out.  Strongest |Spearman
    rho| first.  Scale series are not judged: their node count sets the value.
    """
    node_series = _node_series(dataset, node_benchmarks)
    found = []
    for sets in dataset.series:
        parts = set_series_name(sets.benchmark)
        if sets.label_kind is not LabelKind.SET or parts is None or parts[0] != SETS:
            continue
        for nodes in node_series:
            derived, covered = worst_member_series(sets, nodes)
            if covered < MIN_SHARED_LABELS:
                continue
            if node_benchmarks is None and covered < MIN_MEMBER_COVERAGE * len(sets):
                continue
            correlation = correlate(derived, sets)
            if np.isfinite(correlation.spearman_r) or np.isfinite(correlation.pearson_r):
                found.append(MemberCorrelation(sets.name, nodes.name, correlation))
    return sorted(found, key=lambda c: (-c.strength, c.set_series, c.node_series))


# --- SCAB's scaling curves ----------------------------------------------------------


@dataclass(frozen=True)
class CurvePoint:
    """The repetitions at one node count."""

    nodes: int
    median: float
    low: float
    high: float
    n: int
    values: tuple[float, ...] = ()  # the repetitions themselves, in stored order

    def to_json(self) -> dict[str, Any]:
        return {"nodes": self.nodes, "median": self.median, "min": self.low, "max": self.high, "n": self.n}


@dataclass(frozen=True)
class ScalingCurve:
    """One scale benchmark metric in one ordering: node count -> its repetitions."""

    benchmark: str
    metric: str
    unit: str
    direction: Direction
    ordering: str
    points: tuple[CurvePoint, ...]  # by node count

    @property
    def higher_is_better(self) -> bool:
        return self.direction is Direction.HIGHER

    @property
    def counts(self) -> list[int]:
        return [p.nodes for p in self.points]

    def at(self, count: int) -> CurvePoint | None:
        return next((p for p in self.points if p.nodes == count), None)

    def to_json(self) -> dict[str, Any]:
        return {"benchmark": self.benchmark, "metric": self.metric, "unit": self.unit,
                "direction": self.direction.value, "ordering": self.ordering,
                "points": [p.to_json() for p in self.points]}


def curve_of(runs: SetRuns, ordering: str, benchmark: str) -> ScalingCurve:
    """The repetitions of a scale series grouped by node count (a label's members)."""
    by_count: dict[int, list[float]] = defaultdict(list)
    for label, value in zip(runs.labels.tolist(), runs.values.tolist()):
        count = len(set_members(label))
        if count and np.isfinite(value):
            by_count[count].append(value)
    points = tuple(
        CurvePoint(count, float(np.median(v)), float(min(v)), float(max(v)), len(v), tuple(v))
        for count, v in sorted(by_count.items()))
    return ScalingCurve(benchmark, runs.metric, runs.unit, runs.direction, ordering, points)


def scaling_curves(dataset: Dataset) -> list[ScalingCurve]:
    """Per scale benchmark and metric, the sorted and the shuffled curve
    (where measured): median, min, max and n of its repetitions per node count."""
    return [curve_of(runs, ordering, benchmark)
            for (_, benchmark, _), orderings in runs_by_ordering(dataset, SCALE).items()
            for ordering, runs in sorted(orderings.items(), key=lambda item: ORDERINGS.index(item[0]))]
