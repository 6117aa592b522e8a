"""The judgement of one series that several rules share: its modes (two
kinds of nodes) and its outliers, on the side that is worse and the side that
is better.  Pure functions of a series and a sensitivity, memoised per series
so that the rules of one ``find_all`` call compute them once."""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, field

import numpy as np

from oddnode.findings.registry import Sensitivity
from oddnode.model import Series
from oddnode.stats import esd
from oddnode.stats.distribution import MIN_N_DIP, Dip, Split, best_two_group_split, dip_test
from oddnode.stats.robust import (
    MIN_OUTLIER_SAMPLE,
    RobustScale,
    best_of_widening,
    outlier_threshold,
    robust_scale,
)

LOW, HIGH = "low", "high"

# Ashman's D of the best two-means split must exceed 3 before a population is
# called bimodal.  Splitting pure normal data at its mean gives two
# half-normals with means ±0.80σ and standard deviations 0.60σ, hence
# D = sqrt(2)·1.60 / sqrt(2·0.60²) ≈ 2.65 whatever n is: a bell cut in two
# already scores D > 2 (the textbook "clean separation" bound), so 3 keeps
# bells whole while two peaks a few σ apart pass easily.
MIN_ASHMAN_D = 3.0
# A mode needs at least this share of the nodes (and at least 2 nodes);
# fewer odd nodes are outliers, not a second kind of node.
MIN_MODE_FRACTION = 0.02
MIN_MODE_SIZE = 2
# Before giving up on two modes, drop a too-small extreme group (an outlier
# or two that attract the best split) and split again, this many times.
MAX_TRIM_ROUNDS = 3


def bad_side(series: Series) -> str:
    """The side of the distribution that is worse: low when higher is better."""
    return LOW if series.higher_is_better else HIGH


@dataclass(frozen=True)
class Modes:
    """Two kinds of nodes: the best two-means split that passed the dip test."""

    low: np.ndarray  # indices into the series of the low group
    high: np.ndarray  # indices of the high group
    split: Split
    dip: Dip
    gap_pct: float  # gap between the group means relative to the larger group's mean

    @property
    def minority(self) -> str:
        """The side of the smaller group (the odd kind of node)."""
        return LOW if len(self.low) < len(self.high) else HIGH

    def indices(self, side: str) -> np.ndarray:
        return self.low if side == LOW else self.high


@dataclass(frozen=True)
class JudgedGroup:
    """The outlier test of one group of labels: the whole population or one mode.

    Both sides are judged by the modified z-score, except the worse side of
    a small group (esd.MIN_N to esd.MAX_N labels), which the generalized ESD
    test judges instead: ``esd_steps`` maps the series index of each value
    it set aside to that step's statistic and critical value (empty when the
    test did not run)."""

    mode: str | None  # None: the whole population; LOW/HIGH: that mode
    size: int
    scale: RobustScale
    threshold: float  # |modified z| on the worse side (unused when esd judges it)
    better_threshold: float  # wider when values are the best of several runs
    low: np.ndarray  # indices into the series of low outliers
    high: np.ndarray  # indices of high outliers
    esd_steps: dict[int, tuple[float, float]] = field(default_factory=dict)

    def outliers(self, side: str) -> np.ndarray:
        return self.low if side == LOW else self.high

    def threshold_on(self, side: str, worse_side: str) -> float:
        return self.threshold if side == worse_side else self.better_threshold


@dataclass(frozen=True)
class Population:
    """Modes and outliers of one series (indices refer to the series' labels)."""

    size: int
    bad_side: str
    modes: Modes | None
    groups: tuple[JudgedGroup, ...]

    def outliers(self, side: str) -> np.ndarray:
        parts = [group.outliers(side) for group in self.groups]
        return np.sort(np.concatenate(parts)) if parts else np.empty(0, dtype=np.intp)

    def bad_labels(self) -> np.ndarray:
        """Labels on the worse side: its outliers, and the smaller mode when
        that mode is the worse one (a slow chassis can form its own mode)."""
        bad = self.outliers(self.bad_side)
        if self.modes is not None and self.modes.minority == self.bad_side:
            bad = np.union1d(bad, self.modes.indices(self.bad_side))
        return bad


def smallest_mode(n: int) -> int:
    return max(MIN_MODE_SIZE, math.ceil(MIN_MODE_FRACTION * n))


def find_modes(values: np.ndarray, sensitivity: Sensitivity) -> Modes | None:
    """Two modes when the dip test rejects unimodality at alpha, the best split
    is well separated (Ashman's D > 3), the smaller group holds at least
    max(2, 2% of n) values and the group means differ by at least min_effect."""
    n = len(values)
    least = smallest_mode(n)
    if n < max(MIN_N_DIP, 2 * least):
        return None
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    start, stop = 0, n
    for _ in range(MAX_TRIM_ROUNDS + 1):
        kept = ordered[start:stop]
        if len(kept) < 2 * least or kept[0] == kept[-1]:
            return None
        split = best_two_group_split(kept)
        low_size, high_size = split.index, len(kept) - split.index
        if low_size < least:
            start += low_size
        elif high_size < least:
            stop -= high_size
        else:
            break
    else:
        return None
    if not split.ashman_d > MIN_ASHMAN_D:
        return None
    reference = split.low_mean if low_size >= high_size else split.high_mean
    gap = (split.high_mean - split.low_mean) / abs(reference) if reference else math.inf
    if gap < sensitivity.min_effect:
        return None
    dip = dip_test(kept)
    if not dip.p < sensitivity.alpha:
        return None
    # Values trimmed before the split belong to the mode at their end; the
    # outlier test within that mode judges them.
    boundary = start + low_size
    return Modes(
        low=np.sort(order[:boundary]),
        high=np.sort(order[boundary:]),
        split=split,
        dip=dip,
        gap_pct=gap * 100.0,
    )


def judge_outliers(
    series: Series, indices: np.ndarray, sensitivity: Sensitivity, mode: str | None = None
) -> JudgedGroup:
    """Outliers among the series' values[indices]: |modified z| above the
    threshold for that many nodes at alpha, and at least min_effect away from
    the median.  On the better side the threshold widens for values that are
    the best of several runs (see best_of_widening).  On the worse side of a
    small group the generalized ESD test decides instead, at alpha / 2 (the
    modified z threshold's two sides each take about half of alpha), on the
    values less the better side's outliers."""
    x = series.values[indices]
    n = len(x)
    empty = np.empty(0, dtype=np.intp)
    scale = robust_scale(x)
    threshold = outlier_threshold(n, sensitivity.alpha)
    repetitions = int(np.median(series.repetitions[indices])) if n else 1
    better_threshold = threshold * best_of_widening(repetitions, n, sensitivity.alpha)
    if n < MIN_OUTLIER_SAMPLE or not math.isfinite(threshold):
        return JudgedGroup(mode, n, scale, threshold, better_threshold, empty, empty)
    worse = bad_side(series)
    deviation = x - scale.median
    low_limit = threshold if worse == LOW else better_threshold
    high_limit = threshold if worse == HIGH else better_threshold
    if scale.sigma > 0:
        flagged = np.where(deviation < 0, -deviation > low_limit * scale.sigma, deviation > high_limit * scale.sigma)
    else:  # all values equal but a few: those few are infinitely far
        flagged = deviation != 0
    # Only deviations of at least min_effect of the median count.
    large = np.abs(deviation) >= sensitivity.min_effect * abs(scale.median) if scale.median != 0 else np.full(n, True)
    flagged &= large
    steps = {}
    on_worse_side = deviation < 0 if worse == LOW else deviation > 0
    # The better side's outliers are left out of the worse side's test: one
    # fast node would widen the others' standard deviation and hide a slow one.
    tested = np.flatnonzero(~(flagged & ~on_worse_side))
    if esd.MIN_N <= n <= esd.MAX_N and len(tested) >= esd.MIN_N:
        test = esd.low_outliers(x[tested] if worse == LOW else -x[tested], sensitivity.alpha / 2)
        flagged &= ~on_worse_side
        found = tested[test.outliers]
        flagged[found[large[found]]] = True
        steps = {int(indices[tested[i]]): (float(d), float(c))
                 for i, d, c in zip(test.order, test.statistics, test.critical)}
    low = np.sort(indices[flagged & (deviation < 0)])
    high = np.sort(indices[flagged & (deviation > 0)])
    return JudgedGroup(mode, n, scale, threshold, better_threshold, low, high, steps)


def _analyse(series: Series, sensitivity: Sensitivity) -> Population:
    values = np.asarray(series.values, dtype=np.float64)
    usable = np.flatnonzero(np.isfinite(values))
    side = bad_side(series)
    if len(usable) == 0:
        return Population(0, side, None, ())
    finite = values[usable]
    modes = find_modes(finite, sensitivity)
    if modes is None:
        groups = (judge_outliers(series, usable, sensitivity),)
    else:
        # The two kinds of nodes are each judged on their own, so that the
        # second mode is not reported as a crowd of outliers.
        modes = Modes(
            low=usable[modes.low],
            high=usable[modes.high],
            split=modes.split,
            dip=modes.dip,
            gap_pct=modes.gap_pct,
        )
        groups = (
            judge_outliers(series, modes.low, sensitivity, LOW),
            judge_outliers(series, modes.high, sensitivity, HIGH),
        )
    return Population(len(usable), side, modes, groups)


# id(series) -> (weak reference to it, sensitivity, population).  A weak
# reference with a callback drops the entry when the series goes away, so the
# memo never keeps data alive and never answers for a recycled id.
_MEMO: dict[int, tuple[weakref.ref, Sensitivity, Population]] = {}


def analyse(series: Series, sensitivity: Sensitivity) -> Population:
    """Modes and outliers of a series, computed once per (series, sensitivity)."""
    key = id(series)
    hit = _MEMO.get(key)
    if hit is not None and hit[0]() is series and hit[1] == sensitivity:
        return hit[2]
    population = _analyse(series, sensitivity)
    reference = weakref.ref(series, lambda _ref, key=key: _MEMO.pop(key, None))
    _MEMO[key] = (reference, sensitivity, population)
    return population
