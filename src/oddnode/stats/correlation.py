"""Correlation between benchmarks across the nodes they share (STAB's
``cplot``/``findc``).

A correlation is a question, not a cause.  Over a winter, sales of skis and of
snowboards rise and fall together, yet neither sells the other: the snow drives
both.  Likewise nodes slow in memory bandwidth and slow in an application may
share a third cause (a BIOS setting, a DIMM population, a hot rack), and two
benchmarks may line up by chance when many pairs are tried.  A strong, significant
correlation tells the administrator where to look next, not what to fix.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations_with_replacement

import numpy as np
from scipy import special

from oddnode.core.model import Series

CORRELATION_CAVEAT = (
    "A correlation says two benchmarks vary together across nodes, not that one causes the other: "
    "look for a shared cause before acting on it."
)

# Pearson and Spearman p-values need at least 3 shared labels (n - 2 > 0 dof).
MIN_SHARED_LABELS = 3


@dataclass(frozen=True)
class Correlation:
    """How two benchmarks vary together over their shared labels."""

    x: str  # Series.name of the first benchmark
    y: str
    n: int  # labels both benchmarks have
    pearson_r: float
    pearson_p: float
    spearman_r: float
    spearman_p: float
    slope: float  # least-squares fit y = intercept + slope * x
    intercept: float


def _same_labels(a: np.ndarray, b: np.ndarray) -> bool:
    return a is b or (len(a) == len(b) and bool(np.array_equal(a, b)))


def join_by_label(a: Series, b: Series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Labels present in both series and the values of each on them."""
    if _same_labels(a.labels, b.labels):
        return a.labels, a.values, b.values
    # Labels are unique and sorted in each series.
    labels, in_a, in_b = np.intersect1d(a.labels, b.labels, assume_unique=True, return_indices=True)
    return labels, a.values[in_a], b.values[in_b]


def _is_constant(values: np.ndarray) -> bool:
    return len(values) == 0 or values.min() == values.max()


def _least_squares(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    x_centred = x - x.mean()
    slope = float(np.dot(x_centred, y - y.mean()) / np.dot(x_centred, x_centred))
    return slope, float(y.mean() - slope * x.mean())


def correlate(a: Series, b: Series) -> Correlation:
    """Pearson and Spearman correlation of two benchmarks over their shared
    labels, with the least-squares line; NaN where either is constant."""
    _, x, y = join_by_label(a, b)
    n = len(x)
    if n < MIN_SHARED_LABELS:
        raise ValueError(
            f"cannot correlate {a.name} with {b.name}: they share {n} labels, "
            f"at least {MIN_SHARED_LABELS} are needed"
        )
    nan = float("nan")
    if _is_constant(x) or _is_constant(y):
        return Correlation(a.name, b.name, n, nan, nan, nan, nan, nan, nan)
    # Correlation is shift-invariant; centring on the median keeps scipy's
    # near-constant check quiet for large values that differ in few digits.
    x_centred = x - np.median(x)
    y_centred = y - np.median(y)
    from scipy import stats  # a second to import: the matrix of many series does without it

    pearson = stats.pearsonr(x_centred, y_centred)
    spearman = stats.spearmanr(x_centred, y_centred)
    slope, intercept = _least_squares(x, y)
    return Correlation(
        x=a.name,
        y=b.name,
        n=n,
        pearson_r=float(pearson.statistic),
        pearson_p=float(pearson.pvalue),
        spearman_r=float(spearman.statistic),
        spearman_p=float(spearman.pvalue),
        slope=slope,
        intercept=intercept,
    )


def _average_ranks(rows: np.ndarray) -> np.ndarray:
    """Ranks 1..L of each row, ties sharing their average rank (what
    ``scipy.stats.rankdata(rows, axis=1)`` gives, with less overhead)."""
    count, length = rows.shape
    order = np.argsort(rows, axis=1)
    ordered = np.take_along_axis(rows, order, axis=1)
    positions = np.broadcast_to(np.arange(length), (count, length))
    starts_run = np.ones((count, length), dtype=bool)
    starts_run[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    if starts_run.all():
        average = positions + 1.0
    else:
        ends_run = np.ones((count, length), dtype=bool)
        ends_run[:, :-1] = starts_run[:, 1:]
        # First and last sorted position of the run of equal values each value
        # belongs to; a tie's rank is the mean of the two, plus one.
        run_start = np.maximum.accumulate(np.where(starts_run, positions, 0), axis=1)
        reversed_ends = np.where(ends_run, positions, length - 1)[:, ::-1]
        run_end = np.minimum.accumulate(reversed_ends, axis=1)[:, ::-1]
        average = (run_start + run_end) / 2.0 + 1.0
    ranks = np.empty((count, length), dtype=np.float64)
    np.put_along_axis(ranks, order, average, axis=1)
    return ranks


@dataclass(frozen=True)
class _RowStats:
    """Per-row quantities over one set of columns: means, centred norms, and
    rows scaled to unit length (NaN rows for constant series)."""

    means: np.ndarray
    norms: np.ndarray
    unit_rows: np.ndarray


def _row_stats(rows: np.ndarray) -> _RowStats:
    means = rows.mean(axis=1, keepdims=True)
    centred = rows - means
    norms = np.sqrt(np.einsum("ij,ij->i", centred, centred))
    constant = rows.max(axis=1) == rows.min(axis=1)
    safe_norms = np.where(constant, 1.0, norms)
    unit_rows = centred / safe_norms[:, None]
    unit_rows[constant] = np.nan
    return _RowStats(means=means[:, 0], norms=norms, unit_rows=unit_rows)


def _inner_products(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    # einsum's own loop rather than BLAS: a threaded BLAS on a loaded 2-core
    # node can be 50x slower than one thread, and this product is small.
    return np.clip(np.einsum("ik,jk->ij", left, right), -1.0, 1.0)


def _pearson_p(r: np.ndarray, n: int) -> np.ndarray:
    # Under independence r follows a beta(n/2 - 1, n/2 - 1) on [-1, 1], the
    # same test as t = r sqrt((n-2)/(1-r²)) with n-2 dof; the beta form is the
    # one scipy's pearsonr evaluates, so the p-values agree to the last digits.
    shape = n / 2.0 - 1.0
    return 2.0 * special.betaincc(shape, shape, (np.abs(r) + 1.0) / 2.0)


def _spearman_p(rho: np.ndarray, n: int) -> np.ndarray:
    # t = rho sqrt((n-2) / ((1+rho)(1-rho))) with n-2 dof, two-sided, as in
    # scipy's spearmanr (clip guards rounding just past |rho| = 1).
    dof = n - 2
    with np.errstate(divide="ignore", invalid="ignore"):
        t = rho * np.sqrt((dof / ((rho + 1.0) * (1.0 - rho))).clip(0))
    return 2.0 * special.stdtr(dof, -np.abs(t))


@dataclass(frozen=True)
class _Block:
    """Correlations of every row pair between two groups, over their shared
    columns, flattened to one entry per pair."""

    x_rows: np.ndarray  # series index of x (the earlier series in the input)
    y_rows: np.ndarray
    n: int
    pearson_r: np.ndarray
    spearman_r: np.ndarray
    slope: np.ndarray
    intercept: np.ndarray


def _correlate_block(
    rows_a: np.ndarray,
    values_a: np.ndarray,
    ranks_a: np.ndarray,
    rows_b: np.ndarray,
    values_b: np.ndarray,
    ranks_b: np.ndarray,
    same_group: bool,
) -> _Block:
    n = values_a.shape[1]
    stats_a, rank_stats_a = _row_stats(values_a), _row_stats(ranks_a)
    if same_group:
        stats_b, rank_stats_b = stats_a, rank_stats_a
    else:
        stats_b, rank_stats_b = _row_stats(values_b), _row_stats(ranks_b)
    with np.errstate(invalid="ignore"):
        pearson = _inner_products(stats_a.unit_rows, stats_b.unit_rows)
        spearman = _inner_products(rank_stats_a.unit_rows, rank_stats_b.unit_rows)

    if same_group:
        i, j = np.triu_indices(len(rows_a), k=1)
    else:
        i, j = (m.ravel() for m in np.meshgrid(np.arange(len(rows_a)), np.arange(len(rows_b)), indexing="ij"))
    r = pearson[i, j]
    rho = spearman[i, j]
    # x is whichever of the two series comes first in the caller's list.
    a_first = rows_a[i] < rows_b[j]
    x_index = np.where(a_first, rows_a[i], rows_b[j])
    y_index = np.where(a_first, rows_b[j], rows_a[i])
    x_mean = np.where(a_first, stats_a.means[i], stats_b.means[j])
    y_mean = np.where(a_first, stats_b.means[j], stats_a.means[i])
    x_norm = np.where(a_first, stats_a.norms[i], stats_b.norms[j])
    y_norm = np.where(a_first, stats_b.norms[j], stats_a.norms[i])
    with np.errstate(invalid="ignore", divide="ignore"):
        # Least squares: slope = cov(x, y)/var(x) = r |y - ȳ| / |x - x̄|.
        slope = r * y_norm / x_norm
    intercept = y_mean - slope * x_mean
    return _Block(x_index, y_index, n, r, rho, slope, intercept)


def _group_by_labels(series: list[Series]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Series with identical label arrays, as (labels, series indices)."""
    members_by_key: dict[tuple, list[int]] = {}
    labels_by_key: dict[tuple, np.ndarray] = {}
    previous_labels, previous_key = None, None
    for index, s in enumerate(series):
        # Series loaded together usually share one label array object.
        if s.labels is previous_labels:
            key = previous_key
        else:
            key = tuple(s.labels.tolist())
            labels_by_key.setdefault(key, s.labels)
            previous_labels, previous_key = s.labels, key
        members_by_key.setdefault(key, []).append(index)
    return [(labels_by_key[key], np.array(members, dtype=np.intp)) for key, members in members_by_key.items()]


@dataclass(frozen=True)
class _LabelGroup:
    """Series measured on one label set: their values and ranks as matrices."""

    labels: np.ndarray  # str dtype, for fast intersections
    members: np.ndarray  # indices into the caller's list
    values: np.ndarray  # members x labels
    ranks: np.ndarray


def _ranks_on_columns(group: _LabelGroup, kept: np.ndarray) -> np.ndarray:
    """Average ranks of each row restricted to the kept columns: ranks change
    when labels are dropped, so a partial overlap ranks again."""
    if len(kept) == group.values.shape[1]:
        return group.ranks
    return _average_ranks(group.values[:, kept])


def correlate_all(series: list[Series], min_n: int = MIN_SHARED_LABELS) -> list[Correlation]:
    """Every unordered pair of series correlated over its shared labels,
    strongest |Pearson r| first (STAB's ``findc``).  Pairs sharing fewer
    than ``min_n`` labels, and constant series, are left out."""
    if min_n < MIN_SHARED_LABELS:
        raise ValueError(f"min_n must be at least {MIN_SHARED_LABELS} for the p-values to exist, got {min_n}")
    # Series measured on the same labels (the usual case: one value per node)
    # form one matrix and are correlated all at once; pairs of series from
    # different label sets are correlated block by block on their shared labels.
    groups = []
    for labels, members in _group_by_labels(series):
        values = np.vstack([np.asarray(series[k].values, dtype=np.float64) for k in members])
        groups.append(_LabelGroup(labels.astype(str), members, values, _average_ranks(values)))

    blocks: list[_Block] = []
    for g, h in combinations_with_replacement(range(len(groups)), 2):
        first, second = groups[g], groups[h]
        if g == h:
            if len(first.members) >= 2 and len(first.labels) >= min_n:
                whole = (first.members, first.values, first.ranks)
                blocks.append(_correlate_block(*whole, *whole, same_group=True))
            continue
        _, kept_first, kept_second = np.intersect1d(
            first.labels, second.labels, assume_unique=True, return_indices=True
        )
        if len(kept_first) < min_n:
            continue
        shared_first = (first.members, first.values[:, kept_first], _ranks_on_columns(first, kept_first))
        shared_second = (second.members, second.values[:, kept_second], _ranks_on_columns(second, kept_second))
        blocks.append(_correlate_block(*shared_first, *shared_second, same_group=False))
    return _collect(series, blocks)


def _collect(series: list[Series], blocks: list[_Block]) -> list[Correlation]:
    if not blocks:
        return []
    x_index = np.concatenate([b.x_rows for b in blocks])
    y_index = np.concatenate([b.y_rows for b in blocks])
    counts = np.concatenate([np.full(len(b.x_rows), b.n) for b in blocks])
    pearson_r = np.concatenate([b.pearson_r for b in blocks])
    spearman_r = np.concatenate([b.spearman_r for b in blocks])
    slope = np.concatenate([b.slope for b in blocks])
    intercept = np.concatenate([b.intercept for b in blocks])
    pearson_p = np.concatenate([_pearson_p(b.pearson_r, b.n) for b in blocks])
    spearman_p = np.concatenate([_spearman_p(b.spearman_r, b.n) for b in blocks])

    # Constant series (NaN r) are left out; ties in |r| keep input order.
    kept = np.flatnonzero(np.isfinite(pearson_r))
    order = kept[np.lexsort((y_index[kept], x_index[kept], -np.abs(pearson_r[kept])))]
    names = [s.name for s in series]
    return [
        Correlation(
            x=names[x_index[k]],
            y=names[y_index[k]],
            n=int(counts[k]),
            pearson_r=float(pearson_r[k]),
            pearson_p=float(pearson_p[k]),
            spearman_r=float(spearman_r[k]),
            spearman_p=float(spearman_p[k]),
            slope=float(slope[k]),
            intercept=float(intercept[k]),
        )
        for k in order
    ]
