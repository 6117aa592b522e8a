"""Pure readings of Switchbench results, shared by the runner and the
report: where a daisy chain stops scaling."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["MIN_HOP_GAIN", "chain_saturation"]

# A chain stops scaling at the first length whose aggregate gained less than
# this share of the hops it added, a hop being worth the shortest chain's
# per-hop rate: half a hop lost per node added is a switch out of capacity,
# not noise.
MIN_HOP_GAIN = 0.5


def chain_saturation(aggregate_by_length: Mapping[int, float], min_gain: float = MIN_HOP_GAIN) -> int | None:
    """The first chain length whose aggregate throughput grew by less than
    ``min_gain`` of the hops it added over the previous length: where the
    switch stops scaling.  A hop is worth the shortest chain's aggregate over
    its hops.  None when every length scaled, or fewer than two were measured."""
    lengths = sorted(length for length, value in aggregate_by_length.items() if length >= 2 and value > 0)
    if len(lengths) < 2:
        return None
    hop = aggregate_by_length[lengths[0]] / (lengths[0] - 1)
    for shorter, longer in zip(lengths, lengths[1:]):
        gain = aggregate_by_length[longer] - aggregate_by_length[shorter]
        if gain < min_gain * hop * (longer - shorter):
            return longer
    return None
