"""Rosner's generalized ESD test: up to r outliers on one side of a small population.

With few nodes the MAD is a poor yardstick: seven values give it so little
precision that, at 8 nodes and alpha = 1e-4, a node must lie 27 modified z
away to be an outlier (see oddnode.stats.robust), and a node at half the
others' bandwidth goes unnamed as soon as they scatter by 2.5%.  The mean
and standard deviation of the others use the same values about three times
as efficiently (the MAD's efficiency is 0.37), so on the worse side of a
small population this test replaces the modified z-score.

The generalized extreme Studentized deviate test (Rosner 1983; the
NIST/SEMATECH e-Handbook of Statistical Methods, 1.3.5.17.3) takes the most
extreme value, measures how many standard deviations of the others it lies
from their mean, sets it aside and repeats, r times.  The number of outliers
is the largest step i whose statistic exceeds its critical value: a step may
fail while a later one succeeds, which is how two bad nodes that hide each
other (masking) are both found.

The critical value of step i, on the m = n − i + 1 values left, is the
Bonferroni bound over them of the others' prediction interval: the lowest
value x, if it were an ordinary one, would make (mean of the others − x) /
(their standard deviation · sqrt(m / (m − 1))) a Student t with m − 2 degrees
of freedom.  Rosner's level for these bounds holds from about 25 values; at
8 they raise a false alarm 1.6 times too often, so the level each bound is
taken at comes from a Monte Carlo calibration (``python -m
oddnode.stats.calibrate``, table ``esd_levels.json``) that makes the
probability of naming any node of n identical ones exactly alpha.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from oddnode.stats.robust import median
from oddnode.stats.tables import load_table
from oddnode.stats.tails import t_isf, t_sf

# The test runs on populations of MIN_N to MAX_N values; above MAX_N the
# MAD's own noise costs little (its calibrated threshold is within 1.7 times
# the normal one) and the modified z-score keeps its robustness to many
# outliers.
MIN_N = 5
MAX_N = 30

_LEVEL_TABLE = "esd_levels.json"


def max_outliers(n: int) -> int:
    """r, the most outliers the test looks for: fewer than half of the nodes,
    so that the values left always outnumber those set aside."""
    return max(1, n // 2 - 1)


def step_statistics(ascending: np.ndarray, steps: int) -> np.ndarray:
    """D_i for i = 1…steps along the last axis of ascending values: how many
    standard deviations of the values above it the i-th lowest value lies
    below their mean (0 when they are all equal to it, inf when they are all
    equal and above it)."""
    out = np.empty(ascending.shape[:-1] + (steps,), dtype=np.float64)
    for i in range(steps):
        lowest = ascending[..., i]
        others = ascending[..., i + 1 :]
        mean = others.mean(axis=-1)
        spread = others.std(axis=-1, ddof=1)
        below = mean - lowest
        with np.errstate(divide="ignore", invalid="ignore"):
            out[..., i] = np.where(spread > 0, below / spread, np.where(below > 0, np.inf, 0.0))
    return out


def _left(n: int, steps: int) -> np.ndarray:
    """m, the values left at each step (the tested one and the others)."""
    return n - np.arange(steps)


def critical_values(n: int, level: float, steps: int) -> np.ndarray:
    """The D_i a step must exceed at the nominal level (one-sided)."""
    m = _left(n, steps)
    return t_isf(level / m, m - 2) * np.sqrt(m / (m - 1))


def step_levels(statistics: np.ndarray, n: int) -> np.ndarray:
    """The nominal level at which each D_i is exactly critical (the inverse of
    critical_values): a step names its value at every level above this one."""
    m = _left(n, statistics.shape[-1])
    return np.minimum(1.0, m * t_sf(statistics * np.sqrt((m - 1) / m), m - 2))


def nominal_level(n: int, alpha: float) -> float:
    """The level to compute the critical values at so that n identical normal
    nodes give a false alarm with probability alpha: the calibrated table,
    interpolated in log alpha."""
    return load_table(_LEVEL_TABLE, "levels").at(n, alpha, "the ESD test")


@dataclass(frozen=True)
class EsdResult:
    """The steps of one test: ``order[i]`` is the value tested at step i + 1."""

    order: np.ndarray  # indices into the values, lowest first, one per step
    statistics: np.ndarray  # D_i
    critical: np.ndarray  # its critical value
    count: int  # outliers: the first `count` of `order`

    @property
    def outliers(self) -> np.ndarray:
        return np.sort(self.order[: self.count])


def low_outliers(values: np.ndarray, alpha: float) -> EsdResult:
    """The generalized ESD test for low outliers among MIN_N…MAX_N finite
    values, with probability alpha of naming any of n identical normal ones
    (negate the values to test the high side)."""
    x = np.asarray(values, dtype=np.float64)
    n = x.size
    if not MIN_N <= n <= MAX_N:
        raise ValueError(f"the ESD test takes {MIN_N} to {MAX_N} values, not {n}")
    steps = max_outliers(n)
    order = np.argsort(x, kind="stable")
    # Centred on the median, so that large values with a small spread keep
    # their precision in the means and standard deviations.
    ascending = x[order] - median(x)
    statistics = step_statistics(ascending, steps)
    critical = critical_values(n, nominal_level(n, alpha), steps)
    exceeded = np.flatnonzero(statistics > critical)
    count = int(exceeded[-1]) + 1 if exceeded.size else 0
    return EsdResult(order[:steps], statistics, critical, count)
