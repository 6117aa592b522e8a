"""The tests of a comparison: pure functions of arrays.

- ``mann_whitney``: two-sided Mann–Whitney U of one subject's repetitions
  before against after (exact where scipy can enumerate it).
- ``stratified_test``: van Elteren's stratified Mann–Whitney over many
  subjects at once, each subject's repetitions ranked only among its own,
  its p from the permutation distribution (each subject's before/after
  labels shuffled within it).  It judges a benchmark as a whole where every
  subject alone has too few repetitions: three runs before and three after
  can never give one node a p below 0.1, but eight such nodes that all
  moved the same way do.
- ``testable``: which tests can reach significance at all once corrected
  for the others (Tarone's rule), decided by the sample sizes alone.
- ``holm``: Holm's step-down adjusted p-values.
- ``spread_test``: Fligner–Killeen on relative deviations: is one side more
  consistent than the other.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from oddnode.stats.tails import normal_sf

# Mann–Whitney's exact distribution: scipy computes it without ties for
# samples up to this size (milliseconds at 100 against 100); with ties,
# the distribution of the sum of midranks is computed for samples of up to
# EXACT_TIED values in all (dynamic programming: milliseconds there);
# beyond both, the normal approximation with the tie correction, which is
# close at those sizes.
EXACT_SIZE = 100
EXACT_TIED = 60
# The stratified test's p: exact (every stratum's distribution convolved)
# while the product of their distinct values stays under this; else Monte
# Carlo draws from the strata's exact distributions; with at least
# NORMAL_STRATA informative strata, the normal approximation of the sum (a
# sum of that many independent bounded terms is close to normal).
EXACT_PRODUCT = 200_000
NORMAL_STRATA = 30
# Monte Carlo draws: enough that p can fall well below the smallest Holm
# threshold (alpha / tests), bounded for time.
MIN_DRAWS = 20_000
MAX_DRAWS = 400_000
# A stratum of more values than this is approximated as normal in the
# Monte Carlo (its exact rank-sum distribution is costly and close to normal).
EXACT_STRATUM = 60


@dataclass(frozen=True)
class TestResult:
    """A two-sided p and how it was got (the test's name)."""

    p: float
    method: str
    statistic: float = 0.0  # signed where the test has a direction: after above before > 0


def smallest_p(n: int, m: int) -> float:
    """The smallest two-sided p Mann–Whitney can give samples of n and m
    values: both extreme splits of the C(n+m, n) equally likely ones."""
    if n < 1 or m < 1:
        return 1.0
    return min(1.0, 2.0 / math.comb(n + m, n))


def values_to_reach(alpha: float, limit: int = 1000) -> int | None:
    """The least n with which n values before and n after can give a
    Mann–Whitney p of ``alpha`` or less (smallest_p(n, n) <= alpha); None
    past ``limit``."""
    for n in range(1, limit + 1):
        if smallest_p(n, n) <= alpha:
            return n
    return None


def smallest_stratified_p(sizes: Sequence[tuple[int, int]], draws: int | None = None) -> float:
    """The smallest two-sided p of the stratified test over strata of
    (before, after) sizes: the extreme split in every stratum at once (and
    never below a Monte Carlo estimate's floor 1/(draws+1))."""
    log_splits = sum(math.lgamma(n + m + 1) - math.lgamma(n + 1) - math.lgamma(m + 1)
                     for n, m in sizes if n >= 1 and m >= 1)
    p = min(1.0, 2.0 * math.exp(-log_splits))
    return max(p, 1.0 / (draws + 1)) if draws else p


def mann_whitney(before: np.ndarray, after: np.ndarray) -> TestResult:
    """Two-sided Mann–Whitney U of after against before."""
    from scipy import stats  # a second to import: only where a test needs it (see stats.tails)

    before = np.asarray(before, dtype=np.float64)
    after = np.asarray(after, dtype=np.float64)
    if len(before) < 1 or len(after) < 1:
        return TestResult(1.0, "none")
    pooled = np.concatenate([before, after])
    if np.all(pooled == pooled[0]):
        return TestResult(1.0, "mann-whitney (all values equal)")
    ties = len(np.unique(pooled)) < len(pooled)
    if not ties and max(len(before), len(after)) <= EXACT_SIZE:
        p = stats.mannwhitneyu(after, before, alternative="two-sided", method="exact").pvalue
        return TestResult(float(p), "mann-whitney exact")
    if ties and len(pooled) <= EXACT_TIED:
        doubled = np.rint(2 * stats.rankdata(pooled)).astype(np.int64)
        sums, probabilities = _rank_sum_distribution(doubled, len(after))
        observed = float(doubled[len(before):].sum()) / 2.0
        # Twice the smaller tail, as scipy's permutation test (the
        # distribution with ties need not be symmetric); sums are multiples
        # of 1/2, so a quarter's tolerance separates them.
        tails = probabilities[sums >= observed - 0.25].sum(), probabilities[sums <= observed + 0.25].sum()
        return TestResult(float(min(1.0, 2.0 * min(tails))), "mann-whitney exact (ties)")
    p = stats.mannwhitneyu(after, before, alternative="two-sided", method="asymptotic").pvalue
    return TestResult(float(p), "mann-whitney normal approximation")


def mann_whitney_rows(before: np.ndarray, after: np.ndarray) -> list[TestResult]:
    """``mann_whitney`` of every row of ``before`` (k x n) against the same
    row of ``after`` (k x m) at once: scipy's exact distribution is computed
    once for all rows without ties; rows with ties are tested one by one."""
    from scipy import stats  # a second to import: only where a test needs it (see stats.tails)

    before = np.asarray(before, dtype=np.float64)
    after = np.asarray(after, dtype=np.float64)
    n, m = before.shape[1], after.shape[1]
    pooled = np.sort(np.concatenate([before, after], axis=1), axis=1)
    tied = np.any(pooled[:, 1:] == pooled[:, :-1], axis=1)
    results: list[TestResult | None] = [None] * len(before)
    clean = np.flatnonzero(~tied)
    if clean.size:
        exact = max(n, m) <= EXACT_SIZE
        p = stats.mannwhitneyu(after[clean], before[clean], alternative="two-sided", axis=1,
                               method="exact" if exact else "asymptotic").pvalue
        method = "mann-whitney exact" if exact else "mann-whitney normal approximation"
        for row, value in zip(clean, np.atleast_1d(p)):
            results[row] = TestResult(float(value), method)
    for row in np.flatnonzero(tied):
        results[row] = mann_whitney(before[row], after[row])
    return results  # type: ignore[return-value]


# -- van Elteren's stratified test ----------------------------------------------------------


@dataclass(frozen=True)
class _Stratum:
    """One subject's contribution: its centred, weighted rank sum of the
    after values, and the rank-sum's null distribution pieces."""

    statistic: float  # (W - E[W]) / (N + 1)
    variance: float  # Var[W] / (N + 1)^2
    doubled_ranks: np.ndarray  # 2 x midranks of all N values (integers)
    after_count: int
    size: int


def _strata(pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> list[_Stratum]:
    """Every informative subject's stratum (one whose values are not all
    equal), computed for all subjects of the same sizes at once."""
    from scipy import stats  # a second to import: only where a test needs it (see stats.tails)

    by_size: dict[tuple[int, int], list[int]] = {}
    for index, (b, a) in enumerate(pairs):
        if len(b) >= 1 and len(a) >= 1:
            by_size.setdefault((len(b), len(a)), []).append(index)
    strata: list[_Stratum] = []
    for (n, m), indices in by_size.items():
        pooled = np.vstack([np.concatenate([np.asarray(pairs[i][0], float), np.asarray(pairs[i][1], float)])
                            for i in indices])
        size = n + m
        ranks = stats.rankdata(pooled, axis=1)  # midranks for ties
        w = ranks[:, n:].sum(axis=1)
        expected = m * (size + 1) / 2.0
        # Var[W] with ties: n m / 12 (N + 1 - sum(t^3 - t) / (N (N - 1))),
        # t the sizes of the groups of tied values.
        tie_terms = np.zeros(len(indices))
        ordered = np.sort(pooled, axis=1)
        for row in np.flatnonzero(np.any(ordered[:, 1:] == ordered[:, :-1], axis=1)):
            _, counts = np.unique(ordered[row], return_counts=True)
            tie_terms[row] = float(np.sum(counts ** 3 - counts)) / (size * (size - 1))
        variances = n * m / 12.0 * (size + 1 - tie_terms)
        doubled = np.rint(2 * ranks).astype(np.int64)
        for row in range(len(indices)):
            if variances[row] <= 0:
                continue  # all values equal: no information either way
            # van Elteren's weight 1/(N+1) makes every subject count alike
            # whatever its number of repetitions (the locally best weight).
            strata.append(_Stratum(float(w[row] - expected) / (size + 1), float(variances[row]) / (size + 1) ** 2,
                                   doubled[row], m, size))
    return strata


def _rank_sum_distribution(doubled_ranks: np.ndarray, chosen: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact null distribution of the sum of ``chosen`` of these doubled
    midranks drawn without replacement: (sums, probabilities).  Dynamic
    programming over (how many taken, their sum)."""
    total = int(doubled_ranks.sum())
    ways = np.zeros((chosen + 1, total + 1), dtype=np.float64)
    ways[0, 0] = 1.0
    for rank in doubled_ranks:
        # Taking this value: from j-1 taken to j, sum shifted by its rank.
        ways[1:, rank:] += ways[:-1, : total + 1 - rank].copy()
    counts = ways[chosen]
    sums = np.nonzero(counts)[0]
    probabilities = counts[sums] / counts[sums].sum()
    return sums.astype(np.float64) / 2.0, probabilities


def stratified_test(pairs: Sequence[tuple[np.ndarray, np.ndarray]], *, draws: int = MIN_DRAWS,
                    seed: int = 0) -> TestResult:
    """van Elteren's stratified Mann–Whitney of after against before, each
    pair one stratum (subject); two-sided p of its permutation distribution."""
    strata = _strata(pairs)
    if not strata:
        return TestResult(1.0, "stratified mann-whitney (no variation)")
    observed = sum(s.statistic for s in strata)
    variance = sum(s.variance for s in strata)
    if len(strata) >= NORMAL_STRATA:
        # Continuity correction: half the statistic's smallest step, 1/(N+1)
        # for a stratum's rank sum (half that with midranks of ties); where
        # strata of different sizes make the sum's steps finer, it errs on
        # the safe side (a larger p).
        step = min((1.0 if not np.any(s.doubled_ranks % 2) else 0.5) / (s.size + 1) for s in strata)
        z = max(0.0, abs(observed) - step / 2) / math.sqrt(variance)
        return TestResult(float(min(1.0, 2.0 * normal_sf(z))), "stratified mann-whitney normal approximation",
                          observed)
    # Each stratum's centred, weighted statistic takes finitely many values;
    # the sum's distribution is their convolution.
    pieces = []
    for s in strata:
        if s.size > EXACT_STRATUM:
            pieces.append(None)
            continue
        sums, probabilities = _rank_sum_distribution(s.doubled_ranks, s.after_count)
        centre = s.after_count * (s.size + 1) / 2.0
        pieces.append(((sums - centre) / (s.size + 1), probabilities))
    # A tolerance for comparing sums of floats: far below any gap between
    # distinct values of the statistic (multiples of 1/(2(N+1)^2) apart at least).
    tolerance = 1e-9 * max(1.0, sum(abs(s.statistic) for s in strata) + 1.0)
    if all(p is not None for p in pieces) and math.prod(len(p[0]) for p in pieces) <= EXACT_PRODUCT:
        values, probabilities = np.zeros(1), np.ones(1)
        for stratum_values, stratum_probabilities in pieces:
            values = (values[:, None] + stratum_values[None, :]).ravel()
            probabilities = (probabilities[:, None] * stratum_probabilities[None, :]).ravel()
        p = float(probabilities[np.abs(values) >= abs(observed) - tolerance].sum())
        return TestResult(min(1.0, p), "stratified mann-whitney exact", observed)
    rng = np.random.default_rng(seed)
    total = np.zeros(draws)
    for stratum, piece in zip(strata, pieces):
        if piece is None:
            total += rng.standard_normal(draws) * math.sqrt(stratum.variance)
        else:
            total += rng.choice(piece[0], size=draws, p=piece[1])
    extreme = int(np.count_nonzero(np.abs(total) >= abs(observed) - tolerance))
    # (k + 1) / (B + 1): a Monte Carlo p that is never below the true one
    # in expectation (Phipson & Smyth 2010).
    return TestResult((extreme + 1) / (draws + 1), f"stratified mann-whitney permutation ({draws} draws)",
                      observed)


def draws_for(tests: int, alpha: float) -> int:
    """Monte Carlo draws that let a p reach a tenth of Holm's smallest
    threshold alpha / tests (within the bounds)."""
    return int(min(MAX_DRAWS, max(MIN_DRAWS, math.ceil(10 * max(tests, 1) / alpha))))


# -- multiple comparisons ----------------------------------------------------------------------


def testable(smallest: Sequence[float], alpha: float) -> np.ndarray:
    """Which tests to correct together (Tarone 1990): the least K with at
    most K tests whose smallest attainable p is ≤ alpha / K; those tests.
    A test that could not reach significance even alone among them is left
    out instead of diluting the others' correction.  Decided from the sample
    sizes only, before any p is seen, so Holm over the kept family still
    holds the family-wise error rate at alpha."""
    smallest = np.asarray(smallest, dtype=np.float64)
    for k in range(1, len(smallest) + 1):
        kept = smallest <= alpha / k
        if np.count_nonzero(kept) <= k:
            return kept
    return np.zeros(len(smallest), dtype=bool)


def holm(p: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values, in the given order: the i-th
    smallest p times (m - i + 1), never below the one before, at most 1.
    A hypothesis is rejected at alpha when its adjusted p is ≤ alpha."""
    p = np.asarray(p, dtype=np.float64)
    m = len(p)
    if m == 0:
        return p
    order = np.argsort(p, kind="stable")
    scaled = np.minimum(1.0, p[order] * (m - np.arange(m)))
    adjusted = np.empty(m)
    adjusted[order] = np.maximum.accumulate(scaled)
    return adjusted


# -- consistency -----------------------------------------------------------------------------


def relative_iqr(values: np.ndarray) -> float:
    """Interquartile range over the median's magnitude; NaN with fewer than
    two values or a zero median."""
    values = np.asarray(values, dtype=np.float64)
    if len(values) < 2:
        return math.nan
    return float(relative_iqrs(values[None, :])[0])


def relative_iqrs(rows: np.ndarray) -> np.ndarray:
    """``relative_iqr`` of every row of a matrix at once."""
    rows = np.asarray(rows, dtype=np.float64)
    if rows.shape[1] < 2:
        return np.full(len(rows), math.nan)
    q1, median, q3 = np.percentile(rows, [25, 50, 75], axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(median != 0, (q3 - q1) / np.abs(median), math.nan)


def relative_deviations(values: np.ndarray) -> np.ndarray:
    """Each value's deviation from its sample's median, as a fraction of
    that median: samples of different scales pool."""
    return relative_deviation_rows(np.asarray(values, dtype=np.float64)[None, :])[0]


def relative_deviation_rows(rows: np.ndarray) -> np.ndarray:
    """``relative_deviations`` of every row of a matrix at once (a row of
    median 0: its plain deviations)."""
    rows = np.asarray(rows, dtype=np.float64)
    median = np.median(rows, axis=1, keepdims=True)
    scale = np.where(median != 0, np.abs(median), 1.0)
    return (rows - median) / scale


def spread_test(before: np.ndarray, after: np.ndarray) -> TestResult | None:
    """Fligner–Killeen of relative deviations (``relative_deviations`` of
    each subject's values, pooled over subjects) before against after: did
    the repetitions scatter more on one side?  None with fewer than three
    deviations on a side."""
    from scipy import stats  # a second to import: only where a test needs it (see stats.tails)

    before = np.asarray(before, dtype=np.float64)
    after = np.asarray(after, dtype=np.float64)
    if len(before) < 3 or len(after) < 3:
        return None
    if np.all(before == before[0]) and np.all(after == after[0]):
        return TestResult(1.0, "fligner-killeen (no spread)")
    p = float(stats.fligner(before, after, center="median").pvalue)
    return TestResult(1.0 if math.isnan(p) else p, "fligner-killeen")
