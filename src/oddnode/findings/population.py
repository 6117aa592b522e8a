"""The judgement of one series that several rules share: its modes (two
kinds of nodes) and its outliers, on the side that is worse and the side that
is better.  Pure functions of a series and a sensitivity, memoised per series
so that the rules of one ``find_all`` call compute them once."""

from __future__ import annotations

import dataclasses
import math
import weakref
from dataclasses import dataclass, field

import numpy as np

from oddnode.findings.registry import Sensitivity
from oddnode.core.model import Series
from oddnode.stats import esd, modes
from oddnode.stats.distribution import Dip, Split, dip_test, split_at
from oddnode.stats.robust import (
    MIN_OUTLIER_SAMPLE,
    RobustScale,
    best_of_widening,
    median,
    outlier_threshold,
    robust_scale,
)

LOW, HIGH = "low", "high"

# Above modes.MAX_N nodes, Ashman's D of the best two-means split must
# exceed 3 before the dip test is asked.  Splitting pure normal data at its
# mean gives two half-normals with means ±0.80σ and standard deviations
# 0.60σ, hence D = sqrt(2)·1.60 / sqrt(2·0.60²) ≈ 2.65 whatever n is: a bell
# cut in two already scores D > 2 (the textbook "clean separation" bound),
# so 3 keeps bells whole while two peaks a few σ apart pass easily.
MIN_ASHMAN_D = 3.0


def bad_side(series: Series) -> str:
    """The side of the distribution that is worse: low when higher is better."""
    return LOW if series.higher_is_better else HIGH


@dataclass(frozen=True)
class Modes:
    """Two kinds of nodes: the best two-means split that passed the test for
    its population size (the calibrated split ratio up to modes.MAX_N nodes,
    the dip test above)."""

    low: np.ndarray  # indices into the series of the low group
    high: np.ndarray  # indices of the high group
    split: Split
    dip: Dip
    gap_pct: float  # gap between the group means relative to the larger group's mean
    test: str  # "split ratio" or "dip"
    split_ratio: float  # between- over within-group sum of squares of the split
    critical_ratio: float  # the calibrated threshold it exceeded; NaN under the dip test

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
class RepetitionNoise:
    """Two candidate modes that luck in each node's repetitions could make:
    the nodes of the better mode vary from one repetition to the next by at
    least half the gap between the modes."""

    candidate: Modes  # the modes that are not named
    better: str  # the side of the better mode, where a lucky best run puts a node
    median_spread_pct: float  # median over its nodes of (max - min) / max(|max|, |min|) of their repetitions
    separation_pct: float  # gap between the mode means relative to the larger of them
    nodes_with_spread: int  # nodes of the better mode with two or more valid repetitions


@dataclass(frozen=True)
class Population:
    """Modes and outliers of one series (indices refer to the series' labels);
    ``noise`` holds the candidate modes left unnamed because the nodes'
    repetitions vary as much as the nodes do."""

    size: int
    bad_side: str
    modes: Modes | None
    groups: tuple[JudgedGroup, ...]
    noise: RepetitionNoise | None = None

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


def find_modes(values: np.ndarray, sensitivity: Sensitivity) -> Modes | None:
    """Two modes when the trimmed best two-means split has two groups of at
    least max(3, 2% of n) values whose means differ by at least min_effect,
    and is unlikely on healthy nodes: on 6 to 30 nodes its split ratio
    exceeds the calibrated threshold at alpha; on more, its Ashman's D
    exceeds 3 and the dip test rejects unimodality at alpha."""
    n = len(values)
    least = modes.smallest_mode(n)
    if n < max(modes.MIN_N, 2 * least):
        return None
    ordered = np.sort(values)
    found = modes.trimmed_splits(ordered, least)
    if not found.found[0]:
        return None
    start, stop, low_size = int(found.start[0]), int(found.stop[0]), int(found.low_size[0])
    ratio = float(found.ratio[0])
    kept = ordered[start:stop]
    split = split_at(kept, low_size)
    reference = split.low_mean if low_size >= len(kept) - low_size else split.high_mean
    gap = (split.high_mean - split.low_mean) / abs(reference) if reference else math.inf
    if gap < sensitivity.min_effect:
        return None
    # The dip test, the dearest step, runs last: a bell's split stops at
    # Ashman's D.  Under the split ratio its result is evidence only.
    if n <= modes.MAX_N:
        test, critical = "split ratio", modes.split_ratio_threshold(n, sensitivity.alpha)
        if not ratio > critical:
            return None
        dip = dip_test(kept)
    else:
        test, critical = "dip", math.nan
        if not split.ashman_d > MIN_ASHMAN_D:
            return None
        dip = dip_test(kept)
        if not dip.p < sensitivity.alpha:
            return None
    # Only two modes need the indices behind the sorted values (most
    # populations stop above, and a sort is half the cost of an argsort).
    order = np.argsort(values, kind="stable")
    # Values trimmed before the split belong to the mode at their end; the
    # outlier test within that mode judges them.
    boundary = start + low_size
    return Modes(
        low=np.sort(order[:boundary]),
        high=np.sort(order[boundary:]),
        split=split,
        dip=dip,
        gap_pct=gap * 100.0,
        test=test,
        split_ratio=ratio,
        critical_ratio=critical,
    )


def repetition_noise(series: Series, candidate: Modes) -> RepetitionNoise | None:
    """The candidate modes are noise when the median node of the better mode
    varies between its repetitions by at least half the gap between the
    modes: its best run may then be luck, not its kind (as when nodes share
    CPUs and a run that had one to itself is several times faster).  None
    without spreads (one value per node) or when fewer than half of the
    better mode's nodes have one."""
    if series.spread is None:
        return None
    better = HIGH if series.higher_is_better else LOW
    indices = candidate.indices(better)
    spreads = series.spread[indices]
    spreads = spreads[np.isfinite(spreads)]
    if len(spreads) == 0 or len(spreads) < len(indices) / 2:
        return None
    low, high = candidate.split.low_mean, candidate.split.high_mean
    larger = max(abs(low), abs(high))
    separation = (high - low) / larger if larger else 0.0
    noise = RepetitionNoise(candidate, better, float(np.median(spreads)) * 100.0, separation * 100.0, len(spreads))
    # A node whose runs fall in both modes spans the gap, relative to its
    # larger run as the separation is to the larger mean: its spread is
    # about the separation, less the spread within the modes.
    # Half of that leaves room for the latter, while quiet runs (a spread of
    # a few % against modes tens of % apart) stay far below.
    return noise if noise.median_spread_pct >= noise.separation_pct / 2 else None


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
    repetitions = int(median(series.repetitions[indices])) if n else 1
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
    found = find_modes(values[usable], sensitivity)
    if found is not None:
        found = dataclasses.replace(found, low=usable[found.low], high=usable[found.high])
    noise = repetition_noise(series, found) if found is not None else None
    if found is None or noise is not None:
        # One kind of node, or candidate modes that the repetitions' noise
        # explains: one population, where a node far from all the others is
        # still an outlier.
        return Population(len(usable), side, None, (judge_outliers(series, usable, sensitivity),), noise)
    # The two kinds of nodes are each judged on their own, so that the
    # second mode is not reported as a crowd of outliers.
    groups = (
        judge_outliers(series, found.low, sensitivity, LOW),
        judge_outliers(series, found.high, sensitivity, HIGH),
    )
    return Population(len(usable), side, found, groups)


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
