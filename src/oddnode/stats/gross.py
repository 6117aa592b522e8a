"""Gross outliers: results an order of magnitude away from their peers.

The outlier tests measure a node's distance in units of the others' spread,
and at alpha 1e-4 among 8 nodes they need it some 15 σ away.  Where nodes
share a noisy resource (one disk, CPUs sliced by quotas), a single lucky
repetition widens σ enough to hide a node at a tenth of the others: a disk
reading 66 MB/s among disks reading 630-1,800 MB/s sat 2 σ below them.  No
noise of nodes meant to be identical makes one ten times slower than its
peers, so a ratio decides such a node, whatever the spread:

* it is at least ``FACTOR`` times below the median of the others, and
* at least ``GAP`` times below the nearest of them: it stands apart, not at
  the end of a long tail (two groups an order of magnitude apart are modes,
  each judged on its own).

Several such nodes are found together as a block (the k lowest, k below half
of the nodes), so that two broken nodes do not hide each other.  Ratios need
positive values: zeros, negatives and non-finite values are never gross and
never count as peers.
"""

from __future__ import annotations

import numpy as np

# An order of magnitude: beyond any spread of healthy identical nodes, even on
# a testbed of namespaces sharing two CPUs (its worst healthy spread, a
# shared disk's repetitions, is about 4x between nodes).
FACTOR = 10.0
# The block must stand apart from the nearest other node by this factor, so
# that a wide but continuous spread is left to the statistical tests.
GAP = 3.0
# Fewer values have no "others" to speak of.
MIN_VALUES = 3


def gross_low(values: np.ndarray, factor: float = FACTOR, gap: float = GAP) -> np.ndarray:
    """Indices (ascending) of the values an order of magnitude below their peers."""
    values = np.asarray(values, dtype=np.float64)
    usable = np.flatnonzero(np.isfinite(values) & (values > 0))
    n = len(usable)
    if n < MIN_VALUES:
        return np.empty(0, dtype=np.intp)
    order = usable[np.argsort(values[usable], kind="stable")]
    ordered = values[order]
    found = 0
    # Block sizes k whose peers (the rest) are still more than half the nodes.
    for k in range(1, (n + 1) // 2):
        highest_in_block, nearest_peer = ordered[k - 1], ordered[k]
        if nearest_peer >= gap * highest_in_block and np.median(ordered[k:]) >= factor * highest_in_block:
            found = k
    return np.sort(order[:found])


def gross_high(values: np.ndarray, factor: float = FACTOR, gap: float = GAP) -> np.ndarray:
    """Indices of the values an order of magnitude above their peers."""
    values = np.asarray(values, dtype=np.float64)
    with np.errstate(divide="ignore"):
        reciprocal = np.where(values > 0, 1.0 / values, np.nan)
    return gross_low(reciprocal, factor, gap)


def peer_ratio(values: np.ndarray, index: int) -> float:
    """How many times the median of the other values exceeds ``values[index]``."""
    values = np.asarray(values, dtype=np.float64)
    others = np.delete(values, index)
    others = others[np.isfinite(others) & (others > 0)]
    return float(np.median(others) / values[index]) if len(others) and values[index] > 0 else float("nan")
