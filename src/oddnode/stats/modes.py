"""Two kinds of nodes in a small population: the best two-means split, with
too-small extreme groups trimmed, and the calibrated threshold that its
ratio of between- to within-group sum of squares must exceed.

Hartigan's dip test cannot see two kinds among a few nodes: its null is the
uniform distribution, the least favourable unimodal one, and the dip of two
tight groups is half the smaller group's share, so a group of 3 among 8
(dip 3/16) stays under its critical value at alpha = 1e-4 however far apart
the groups lie.  On 6 to 30 nodes the best split's ratio of between- to
within-group sum of squares (Engelman & Hartigan's test for clusters, 1969)
decides instead.  Its distribution on identical nodes depends on the shape
of their noise, so its threshold is the largest (1 - alpha) quantile over
normal, heavy-tailed (Student t, 3 and 5 degrees of freedom), skewed
(lognormal, CV 30%) and flat (uniform) noise: each of these healthy
populations is named bimodal with probability at most alpha.  The quantiles
come from a seeded Monte Carlo run (``python -m oddnode.stats.calibrate
--table modes``, table ``modes_thresholds.json``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from oddnode.stats.distribution import best_cuts
from oddnode.stats.tables import load_table

# A mode needs at least this share of the nodes, and at least 3 nodes:
# fewer odd nodes are outliers, not a second kind of node (the generalized
# ESD test names two slow nodes among a few even when they mask each other).
MIN_MODE_FRACTION = 0.02
MIN_MODE_SIZE = 3
# Before giving up on two modes, drop a too-small extreme group (an outlier
# or two that attract the best split) and split again, this many times.
MAX_TRIM_ROUNDS = 3

# The calibrated threshold covers populations of MIN_N (two modes of the
# smallest size) to MAX_N nodes; above MAX_N the dip test judges, with
# Ashman's D > 3 (see oddnode.findings.population).
MIN_N = 2 * MIN_MODE_SIZE
MAX_N = 30

_THRESHOLD_TABLE = "modes_thresholds.json"


def smallest_mode(n: int) -> int:
    """The fewest nodes that count as a mode in a population of n."""
    return max(MIN_MODE_SIZE, math.ceil(MIN_MODE_FRACTION * n))


@dataclass(frozen=True)
class TrimmedSplits:
    """Per row: the window of ascending values left after trimming
    ([start, stop)), the size of the low group within it and the split's
    ratio of between- to within-group sum of squares; ``found`` is False
    (and the ratio 0) where no split has two groups of the smallest mode's size."""

    start: np.ndarray
    stop: np.ndarray
    low_size: np.ndarray
    ratio: np.ndarray
    found: np.ndarray


def trimmed_splits(ascending: np.ndarray, least: int) -> TrimmedSplits:
    """The best two-means split of each row of ascending values: while one
    group has fewer than ``least`` values, those values are set aside and
    the rest split again (at most MAX_TRIM_ROUNDS times)."""
    x = np.atleast_2d(np.asarray(ascending, dtype=np.float64))
    rows, n = x.shape
    start = np.zeros(rows, dtype=np.intp)
    stop = np.full(rows, n, dtype=np.intp)
    low_size = np.zeros(rows, dtype=np.intp)
    found = np.zeros(rows, dtype=bool)
    open_ = np.arange(rows)  # rows still being trimmed
    for _ in range(MAX_TRIM_ROUNDS + 1):
        first, last = x[open_, start[open_]], x[open_, stop[open_] - 1]
        open_ = open_[(stop[open_] - start[open_] >= 2 * least) & (first != last)]
        if open_.size == 0:
            break
        low = best_cuts(x[open_], start[open_], stop[open_])
        high = stop[open_] - start[open_] - low
        too_few_low, too_few_high = low < least, high < least
        start[open_] += np.where(too_few_low, low, 0)
        stop[open_] -= np.where(~too_few_low & too_few_high, high, 0)
        done = ~too_few_low & ~too_few_high
        low_size[open_[done]] = low[done]
        found[open_[done]] = True
        open_ = open_[~done]
    return TrimmedSplits(start, stop, low_size, _split_ratio(x, start, start + low_size, stop, found), found)


def _split_ratio(x: np.ndarray, start: np.ndarray, boundary: np.ndarray, stop: np.ndarray,
                 found: np.ndarray) -> np.ndarray:
    """Between- over within-group sum of squares of the groups [start,
    boundary) and [boundary, stop) of each row (Engelman & Hartigan's
    statistic, 1969), 0 where not ``found`` and inf for two groups of equal
    values; the within sum in two passes, exact for tight groups far apart."""
    position = np.arange(x.shape[1])[None, :]
    centred = x - np.median(x, axis=1, keepdims=True)
    within = np.zeros(len(x))
    means, counts = [], []
    for low, high in ((start, boundary), (boundary, stop)):
        group = (position >= low[:, None]) & (position < high[:, None]) & found[:, None]
        count = np.maximum(group.sum(axis=1), 1)
        mean = np.where(group, centred, 0.0).sum(axis=1) / count
        within += np.where(group, (centred - mean[:, None]) ** 2, 0.0).sum(axis=1)
        means.append(mean)
        counts.append(count)
    # Between-SS = k(m-k)/m (mean_low - mean_high)² for groups of k and m - k.
    between = counts[0] * counts[1] / (counts[0] + counts[1]) * (means[1] - means[0]) ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(within > 0, between / within, np.where(between > 0, np.inf, 0.0))
    return np.where(found, ratio, 0.0)


def split_ratio_threshold(n: int, alpha: float) -> float:
    """The split ratio that the trimmed best split of n healthy nodes exceeds
    with probability at most alpha: the calibrated table, interpolated
    linearly in log alpha and log ratio (the ratio's tail is close to a power
    law, a straight line there)."""
    return load_table(_THRESHOLD_TABLE, "thresholds").at(n, alpha, "bimodality")
