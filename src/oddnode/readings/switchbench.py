"""Pure readings of Switchbench results, shared by the runner, the findings
and the report: where a daisy chain stops scaling.  Light on purpose: the
report and the rules read stored series without loading the runners."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from oddnode.readings.interconnect_series import CHAIN as CHAIN_BENCHMARK
from oddnode.core.model import Dataset, LabelKind, Series
from oddnode.core.nodes import NodeNameError, fold, label_members

__all__ = [
    "CHAIN_BENCHMARK",
    "CHAIN_METRIC",
    "MIN_HOP_GAIN",
    "ChainScaling",
    "chain_saturation",
    "chain_scaling",
    "finite_items",
    "hop_rate",
    "set_members",
]

# The series the daisy-chain runner stores (oddnode.measure.pair.switchbench):
# one label per chain (its nodes), the aggregate throughput it reached.
CHAIN_METRIC = "bandwidth.aggregate"

# A chain stops scaling at the first length whose aggregate gained less than
# this share of the hops it added, a hop being worth the shortest chain's
# per-hop rate: half a hop lost per node added is a switch out of capacity,
# not noise.
MIN_HOP_GAIN = 0.5


def hop_rate(aggregate_by_length: Mapping[int, float]) -> float:
    """What one hop is worth: the shortest measured chain's aggregate over its hops."""
    shortest = min(length for length, value in aggregate_by_length.items() if length >= 2 and value > 0)
    return aggregate_by_length[shortest] / (shortest - 1)


def chain_saturation(aggregate_by_length: Mapping[int, float], min_gain: float = MIN_HOP_GAIN) -> int | None:
    """The first chain length whose aggregate throughput grew by less than
    ``min_gain`` of the hops it added over the previous length: where the
    switch stops scaling.  A hop is worth the shortest chain's aggregate over
    its hops.  None when every length scaled, or fewer than two were measured."""
    lengths = sorted(length for length, value in aggregate_by_length.items() if length >= 2 and value > 0)
    if len(lengths) < 2:
        return None
    hop = hop_rate(aggregate_by_length)
    for shorter, longer in zip(lengths, lengths[1:]):
        gain = aggregate_by_length[longer] - aggregate_by_length[shorter]
        if gain < min_gain * hop * (longer - shorter):
            return longer
    return None


def set_members(label: str) -> tuple[str, ...] | None:
    """The nodes a node-set label names; None when it names none."""
    try:
        return label_members(label, LabelKind.SET)
    except NodeNameError:
        return None


def finite_items(series: Series) -> list[tuple[str, float]]:
    """(label, value) of every measured label of a series."""
    return [(str(label), float(value)) for label, value in zip(series.labels.tolist(), series.values.tolist())
            if np.isfinite(value)]


@dataclass
class ChainScaling:
    """The daisy chain: best aggregate throughput per chain length (MB/s),
    each length's nodes, and where the switch stopped scaling."""

    nodes: str  # the longest chain, folded
    aggregate: dict[int, float]
    members: dict[int, tuple[str, ...]]
    unit: str
    saturation: int | None

    @property
    def joined_at_saturation(self) -> tuple[str, ...]:
        """The nodes the chain gained at the length where it stopped scaling."""
        if self.saturation is None:
            return ()
        shorter = max((k for k in self.members if k < self.saturation), default=None)
        before = set(self.members[shorter]) if shorter is not None else set()
        return tuple(node for node in self.members[self.saturation] if node not in before)


def chain_scaling(dataset: Dataset) -> ChainScaling | None:
    """Aggregate throughput per chain length (a chain's length is its node
    count), or None when no chain was stored."""
    series = next((s for s in dataset.series if s.benchmark == CHAIN_BENCHMARK and s.metric == CHAIN_METRIC
                   and s.label_kind is LabelKind.SET), None)
    if series is None:
        return None
    aggregate: dict[int, float] = {}
    members_by_length: dict[int, tuple[str, ...]] = {}
    for label, value in finite_items(series):
        members = set_members(label)
        if members is None or len(members) < 2:
            continue
        if value > aggregate.get(len(members), -np.inf):
            aggregate[len(members)], members_by_length[len(members)] = value, members
    if not aggregate:
        return None
    longest = max(aggregate)
    return ChainScaling(fold(members_by_length[longest]), dict(sorted(aggregate.items())),
                        dict(sorted(members_by_length.items())), series.unit, chain_saturation(aggregate))
