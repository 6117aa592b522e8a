"""The shape of one population: histogram bins, chi-squared fit to a normal
(STAB's ``dplot``/``findn``), normality tests, the dip test for bimodality and
the best split into two groups of nodes."""

from __future__ import annotations

import math
from dataclasses import dataclass

import diptest
import numpy as np
from scipy import special

from oddnode.stats.robust import median
from oddnode.stats.tails import chi2_sf, normal_cdf, normal_ppf, normal_sf

# A "whole" histogram has one bin per integer; past this many bins the data are
# counts over a range too wide to draw one bar per value.
MAX_WHOLE_BINS = 100_000

# Chi-squared is an approximation that needs enough expected counts per bin;
# the usual rule of thumb (Cochran) is at least 5.
MIN_EXPECTED_PER_BIN = 5.0

# Parameters of the normal fitted to the data (mean and standard deviation):
# each costs the chi-squared test one degree of freedom, on top of the one lost
# because the counts must total n.
FITTED_PARAMETERS = 2

# Sample-size limits of the scipy tests: skewtest needs 8 values, the kurtosis
# half of normaltest (D'Agostino-Pearson K²) is only valid from 20, Shapiro-Wilk
# is defined from 3 and its p-value is not accurate above 5000.
MIN_N_SKEWTEST = 8
MIN_N_NORMALTEST = 20
MIN_N_SHAPIRO = 3
MAX_N_SHAPIRO = 5000

# The dip test's p-value table starts at n = 4.
MIN_N_DIP = 4

# Anderson-Darling critical value at 5% for a normal with estimated mean and
# std (Stephens 1974, D'Agostino & Stephens 1986, Table 4.7), scaled for
# sample size by 1 + 0.75/n + 2.25/n², rounded to 3 decimals as scipy does.
ANDERSON_NORMAL_CRITICAL_5PCT = 0.752


def _as_finite_array(values) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64).ravel()
    if not np.all(np.isfinite(array)):
        raise ValueError("values contain NaN or infinity; drop failed runs before describing the distribution")
    return array


def bin_edges(values, bins: str | int) -> np.ndarray:
    """Histogram edges: ``"auto"`` (ceil(sqrt(n)) equal bins), ``"whole"`` (one
    bin per integer value) or an int N (N equal bins over [min, max])."""
    array = _as_finite_array(values)
    if len(array) == 0:
        raise ValueError("cannot bin an empty set of values")
    is_count = isinstance(bins, (int, np.integer)) and not isinstance(bins, bool)
    if is_count:
        if bins < 1:
            raise ValueError(f"the number of bins must be at least 1, got {bins}")
        count = int(bins)
    elif bins == "auto":
        count = math.ceil(math.sqrt(len(array)))
    elif bins == "whole":
        if not np.all(array == np.round(array)):
            raise ValueError(
                'bins="whole" needs whole numbers (counts, integers); these values have fractions: '
                'use bins="auto" or a number of bins'
            )
        low, high = int(array.min()), int(array.max())
        if high - low + 1 > MAX_WHOLE_BINS:
            raise ValueError(
                f'bins="whole" would draw {high - low + 1} bins (values {low}..{high}); '
                f'use bins="auto" or a number of bins'
            )
        # Edges half-way between integers, so each bin is centred on one value.
        return np.arange(low, high + 2, dtype=np.float64) - 0.5
    else:
        raise ValueError(f'bins must be "auto", "whole" or a positive integer, got {bins!r}')

    low, high = float(array.min()), float(array.max())
    if low == high:
        # Every value equal: one bin of width 1 centred on it.
        return np.array([low - 0.5, high + 0.5])
    return np.linspace(low, high, count + 1)


@dataclass(frozen=True)
class ChiSquared:
    """Goodness of fit of the histogram to the fitted normal (one ``findn`` row)."""

    x2: float
    dof: int
    p: float
    bins: int  # bins actually used, after merging sparse ones
    scale: float  # bin width / sample std, as STAB's findn prints it
    requested_bins: int = 0  # equal-width bins asked for, before merging


def _merge_sparse_bins(observed: np.ndarray, expected: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge runs of adjacent bins, left to right, until each holds at least
    MIN_EXPECTED_PER_BIN expected values; a sparse remainder joins the last group."""
    merged_observed: list[float] = []
    merged_expected: list[float] = []
    run_observed = run_expected = 0.0
    for obs, exp in zip(observed, expected):
        run_observed += obs
        run_expected += exp
        if run_expected >= MIN_EXPECTED_PER_BIN:
            merged_observed.append(run_observed)
            merged_expected.append(run_expected)
            run_observed = run_expected = 0.0
    if run_expected > 0 or run_observed > 0:
        if merged_expected:
            merged_observed[-1] += run_observed
            merged_expected[-1] += run_expected
        else:
            merged_observed.append(run_observed)
            merged_expected.append(run_expected)
    return np.array(merged_observed), np.array(merged_expected)


def chi_squared_normal(values, bins: str | int = "auto") -> ChiSquared:
    """Chi-squared test of the histogram against the normal with the sample's
    mean and standard deviation."""
    array = _as_finite_array(values)
    edges = bin_edges(array, bins)
    requested = len(edges) - 1
    n = len(array)
    std = float(array.std(ddof=1)) if n > 1 else 0.0
    if std == 0.0:
        nan = float("nan")
        return ChiSquared(x2=nan, dof=0, p=nan, bins=requested, scale=nan, requested_bins=requested)

    observed, _ = np.histogram(array, edges)
    # Expected count per bin from the normal CDF; the first and last bins are
    # open-ended (-inf, e1] and [e_k-1, +inf) so the expected counts total n.
    inner_cdf = normal_cdf(edges[1:-1], array.mean(), std)
    expected = n * np.diff(np.concatenate(([0.0], inner_cdf, [1.0])))
    # Sparse bins: adjacent bins are merged until each expects at least 5
    # values, before the statistic is computed; ``bins`` reports how many
    # merged bins the test actually used and the degrees of freedom follow it.
    observed, expected = _merge_sparse_bins(observed.astype(np.float64), expected)
    used = len(expected)
    x2 = float(np.sum((observed - expected) ** 2 / expected))
    dof = used - 1 - FITTED_PARAMETERS
    p = float(chi2_sf(x2, dof)) if dof >= 1 else float("nan")
    scale = float(edges[1] - edges[0]) / std
    return ChiSquared(x2=x2, dof=dof, p=p, bins=used, scale=scale, requested_bins=requested)


def findn(values, bin_counts=None) -> list[ChiSquared]:
    """Chi-squared fits over a sweep of bin counts, least normal-looking first
    (STAB's ``findn``): shows how much the verdict depends on the binning."""
    array = _as_finite_array(values)
    if bin_counts is None:
        highest = max(4, 2 * math.ceil(math.sqrt(len(array))))
        bin_counts = range(4, highest + 1)
    results = [chi_squared_normal(array, int(count)) for count in bin_counts]
    # Sort by p ascending; fits without a p-value (too few bins) go last.
    return sorted(results, key=lambda r: (math.isnan(r.p), r.p))


@dataclass(frozen=True)
class Normality:
    """Moments and normality tests of one population; NaN where a test does
    not apply to this sample size."""

    n: int
    skewness: float  # adjusted Fisher-Pearson (bias=False)
    skew_z: float
    skew_p: float
    kurtosis: float  # excess kurtosis (normal = 0), bias=False
    dagostino_k2: float
    dagostino_p: float
    shapiro_w: float
    shapiro_p: float  # NaN above 5000 values, where Royston's p is unreliable
    anderson_stat: float
    anderson_critical_5pct: float


def _anderson_statistic(array: np.ndarray) -> float:
    """Anderson-Darling A² against the normal with the sample's mean and std,
    the statistic of ``scipy.stats.anderson(x, "norm")`` without its
    distribution-object overhead."""
    n = len(array)
    standardised = (np.sort(array) - array.mean()) / array.std(ddof=1)
    # A² = -n - Σ (2i-1)/n [ln F(w_i) + ln(1 - F(w_(n+1-i)))], with
    # ln(1 - F(w)) = ln F(-w) for the normal: log_ndtr keeps both tails exact.
    log_cdf = special.log_ndtr(standardised)
    log_sf = special.log_ndtr(-standardised)
    weights = (2.0 * np.arange(1, n + 1) - 1.0) / n
    return float(-n - np.sum(weights * (log_cdf + log_sf[::-1])))


# Royston's approximations behind Shapiro-Wilk (Royston 1992, "Approximating
# the Shapiro-Wilk W-test for non-normality", Statistics and Computing 2;
# algorithm AS R94, 1995, the one scipy.stats.shapiro runs), each a
# polynomial's coefficients from the constant term up.  The two largest
# coefficients a_n and a_(n-1) are m_i/sqrt(m'm) corrected by a polynomial in
# u = 1/sqrt(n) (_SW_LARGEST, _SW_SECOND); the p-value reads W as normal after
# a transformation: for 4 <= n <= 11, -log(gamma - log(1 - W)) with gamma a
# line in n (_SW_SMALL_GAMMA) and mean and log standard deviation cubics in
# n (_SW_SMALL_MEAN, _SW_SMALL_LOG_SD); from 12, log(1 - W) with mean and log
# standard deviation polynomials in log n (_SW_MEAN, _SW_LOG_SD).
_SW_LARGEST = (0.0, 0.221157, -0.147981, -2.071190, 4.434685, -2.706056)
_SW_SECOND = (0.0, 0.042981, -0.293762, -1.752461, 5.682633, -3.582633)
_SW_SMALL_GAMMA = (-2.273, 0.459)
_SW_SMALL_MEAN = (0.5440, -0.39978, 0.025054, -6.714e-4)
_SW_SMALL_LOG_SD = (1.3822, -0.77857, 0.062767, -0.0020322)
_SW_MEAN = (-1.5861, -0.31082, -0.083751, 0.0038915)
_SW_LOG_SD = (-0.4803, -0.082676, 0.0030302)
# Where log(1 - W) reaches gamma (n <= 11) the transformation is undefined
# and W is far below anything a normal sample gives: AS R94's p-value there.
_SW_FLOOR_P = 1e-99


def _polynomial(coefficients: tuple[float, ...], x: float) -> float:
    """c0 + c1·x + c2·x² + …, by Horner's rule."""
    total = 0.0
    for coefficient in reversed(coefficients):
        total = total * x + coefficient
    return total


def _shapiro_coefficients(n: int) -> np.ndarray:
    """The weights a_n, a_(n-1), … of the n//2 largest gaps x_(n+1-i) - x_(i)
    in W, Royston's approximation: from Blom's expected normal order
    statistics m_i = Φ⁻¹((i - 3/8)/(n + 1/4)), the largest one (two from 6
    values) corrected, the others scaled so that the squares sum to 1/2."""
    if n == 3:
        return np.array([math.sqrt(0.5)])
    half = n // 2
    m = normal_ppf((np.arange(1, half + 1) - 0.375) / (n + 0.25))  # negative: the lower half
    sum_m2 = 2.0 * float(np.dot(m, m))
    u = 1.0 / math.sqrt(n)
    corrected = [_polynomial(_SW_LARGEST, u) - m[0] / math.sqrt(sum_m2)]
    if n > 5:
        corrected.append(_polynomial(_SW_SECOND, u) - m[1] / math.sqrt(sum_m2))
    k = len(corrected)
    scale = math.sqrt((sum_m2 - 2.0 * float(np.dot(m[:k], m[:k])))
                      / (1.0 - 2.0 * sum(a * a for a in corrected)))
    weights = -m / scale
    weights[:k] = corrected
    return weights


def shapiro_wilk(values) -> tuple[float, float]:
    """Shapiro-Wilk's W and its p-value for 3 to 5,000 values, by Royston's
    algorithm AS R94, the one ``scipy.stats.shapiro`` runs (equal to it
    within 1e-8 in W), without importing scipy.stats (a second at every
    analysis of a cluster this size)."""
    x = np.sort(np.asarray(values, dtype=np.float64))
    n = len(x)
    if not MIN_N_SHAPIRO <= n <= MAX_N_SHAPIRO:
        raise ValueError(f"Shapiro-Wilk takes {MIN_N_SHAPIRO} to {MAX_N_SHAPIRO} values, got {n}")
    centred = x - x.mean()
    squares = float(np.dot(centred, centred))
    if squares == 0.0:
        raise ValueError("Shapiro-Wilk needs values that are not all equal")
    half = n // 2
    # W = (Σ a_i (x_(n+1-i) - x_(i)))² / Σ (x - mean)², at most 1 by construction
    w = min(1.0, float(np.dot(_shapiro_coefficients(n), x[::-1][:half] - x[:half])) ** 2 / squares)
    if n == 3:
        # W's exact law for 3 values: p = 6/π (asin √W - π/3), W from 3/4 to 1
        return w, max(0.0, 6.0 / math.pi * (math.asin(math.sqrt(w)) - math.pi / 3.0))
    if w == 1.0:
        return w, 1.0
    log_gap = math.log(1.0 - w)
    if n <= 11:
        gamma = _polynomial(_SW_SMALL_GAMMA, n)
        if log_gap >= gamma:
            return w, _SW_FLOOR_P
        z = -math.log(gamma - log_gap)
        mean, sd = _polynomial(_SW_SMALL_MEAN, n), math.exp(_polynomial(_SW_SMALL_LOG_SD, n))
    else:
        z = log_gap
        mean, sd = _polynomial(_SW_MEAN, math.log(n)), math.exp(_polynomial(_SW_LOG_SD, math.log(n)))
    return w, float(normal_sf((z - mean) / sd))


@dataclass(frozen=True)
class _Moments:
    """The central moments m2, m3, m4 of n values (divided by n)."""

    n: int
    m2: float
    m3: float
    m4: float

    @classmethod
    def of(cls, centred: np.ndarray) -> _Moments:
        deviations = centred - centred.mean()
        squared = deviations * deviations
        return cls(len(centred), float(squared.mean()), float((squared * deviations).mean()),
                   float((squared * squared).mean()))

    def skewness(self) -> float:
        """Adjusted G1 = sqrt(n(n-1))/(n-2) · m3/m2^1.5 (scipy's ``skew``,
        ``bias=False``; Joanes & Gill 1998), defined from 3 values."""
        n = self.n
        return math.sqrt(n * (n - 1)) / (n - 2) * self.m3 / self.m2**1.5 if n >= 3 else math.nan

    def kurtosis(self) -> float:
        """Adjusted excess G2 = (n-1)/((n-2)(n-3)) · ((n+1) m4/m2² - 3(n-1)),
        defined from 4 values."""
        n = self.n
        if n < 4:
            return math.nan
        return (n - 1) / ((n - 2) * (n - 3)) * ((n + 1) * self.m4 / self.m2**2 - 3 * (n - 1))

    def skew_z(self) -> float:
        """D'Agostino's normal approximation of the sample skewness
        sqrt(b1) = m3/m2^1.5 (D'Agostino, Belanger & D'Agostino 1990): the
        statistic of scipy's ``skewtest``, without its per-call overhead."""
        n = self.n
        y = self.m3 / self.m2**1.5 * math.sqrt((n + 1) * (n + 3) / (6.0 * (n - 2)))
        beta2 = 3.0 * (n * n + 27 * n - 70) * (n + 1) * (n + 3) / ((n - 2.0) * (n + 5) * (n + 7) * (n + 9))
        w2 = -1.0 + math.sqrt(2.0 * (beta2 - 1.0))
        delta = 1.0 / math.sqrt(0.5 * math.log(w2))
        alpha = math.sqrt(2.0 / (w2 - 1.0))
        y = y or 1.0  # as scipy: a skewness of exactly 0 is taken as 1
        return delta * math.log(y / alpha + math.sqrt((y / alpha) ** 2 + 1.0))

    def kurtosis_z(self) -> float:
        """Anscombe & Glynn's normal approximation of the sample kurtosis
        b2 = m4/m2² (1983): the statistic of scipy's ``kurtosistest``."""
        n = self.n
        expected = 3.0 * (n - 1) / (n + 1)
        variance = 24.0 * n * (n - 2) * (n - 3) / ((n + 1) * (n + 1.0) * (n + 3) * (n + 5))
        x = (self.m4 / self.m2**2 - expected) / math.sqrt(variance)
        # The standardised third moment of b2, and the A that matches it.
        root_beta1 = (6.0 * (n * n - 5 * n + 2) / ((n + 7) * (n + 9))
                      * math.sqrt(6.0 * (n + 3) * (n + 5) / (n * (n - 2) * (n - 3))))
        a = 6.0 + 8.0 / root_beta1 * (2.0 / root_beta1 + math.sqrt(1.0 + 4.0 / root_beta1**2))
        denominator = 1.0 + x * math.sqrt(2.0 / (a - 4.0))
        if denominator == 0.0:
            return math.nan
        term = math.copysign(((1.0 - 2.0 / a) / abs(denominator)) ** (1.0 / 3.0), denominator)
        return (1.0 - 2.0 / (9.0 * a) - term) / math.sqrt(2.0 / (9.0 * a))


def normality(values) -> Normality:
    """Skewness, kurtosis, D'Agostino-Pearson, Shapiro-Wilk and
    Anderson-Darling for one population."""
    array = _as_finite_array(values)
    n = len(array)
    nan = float("nan")
    if n == 0 or array.min() == array.max():
        return Normality(n, nan, nan, nan, nan, nan, nan, nan, nan, nan, nan)
    # Every statistic here is shift-invariant; centring on the median first
    # keeps scipy's moments clear of cancellation when the values are large
    # (e.g. 1e5 MB/s that differ in the last digits).
    centred = array - median(array)

    moments = _Moments.of(centred)
    skewness, kurtosis = moments.skewness(), moments.kurtosis()
    skew_z = skew_p = nan
    if n >= MIN_N_SKEWTEST:
        skew_z = moments.skew_z()
        skew_p = float(2.0 * special.ndtr(-abs(skew_z)))  # two-sided
    k2 = k2_p = nan
    if n >= MIN_N_NORMALTEST:
        # D'Agostino-Pearson K² = z_skew² + z_kurtosis², chi-squared with 2
        # dof (scipy's normaltest), whose survival function is exp(-K²/2).
        k2 = skew_z**2 + moments.kurtosis_z() ** 2
        k2_p = math.exp(-k2 / 2.0)
    shapiro_w = shapiro_p = nan
    if MIN_N_SHAPIRO <= n <= MAX_N_SHAPIRO:
        shapiro_w, shapiro_p = shapiro_wilk(centred)
    anderson_stat = anderson_critical = nan
    if n >= 3:
        anderson_stat = _anderson_statistic(centred)
        anderson_critical = round(ANDERSON_NORMAL_CRITICAL_5PCT / (1.0 + 0.75 / n + 2.25 / n**2), 3)
    return Normality(
        n=n,
        skewness=skewness,
        skew_z=skew_z,
        skew_p=skew_p,
        kurtosis=kurtosis,
        dagostino_k2=k2,
        dagostino_p=k2_p,
        shapiro_w=shapiro_w,
        shapiro_p=shapiro_p,
        anderson_stat=anderson_stat,
        anderson_critical_5pct=anderson_critical,
    )


@dataclass(frozen=True)
class Dip:
    """Hartigan's dip test of unimodality: a small p means two (or more)
    kinds of nodes."""

    statistic: float
    p: float


def dip_test(values) -> Dip:
    """Hartigan & Hartigan dip test, p-value interpolated from the tabulated
    critical values (no bootstrap)."""
    array = _as_finite_array(values)
    if len(array) < MIN_N_DIP:
        return Dip(statistic=float("nan"), p=float("nan"))
    # diptest sorts its input itself (sort_x=True); boot_pval=False selects the
    # interpolation in Hartigan's table of critical values.
    statistic, p = diptest.diptest(array, sort_x=True, boot_pval=False)
    return Dip(statistic=float(statistic), p=float(p))


@dataclass(frozen=True)
class Split:
    """The best cut of sorted values into a low and a high group."""

    index: int  # number of values in the low group
    low_mean: float
    high_mean: float
    low_std: float  # population std (ddof=0) of each group
    high_std: float
    ashman_d: float


def best_cuts(ascending: np.ndarray, start: np.ndarray, stop: np.ndarray) -> np.ndarray:
    """For each row of ascending values, the size of the low group of the
    optimal 1-D two-means split of its values [start, stop) (the cut that
    maximises the between-group sum of squares), all rows at once in O(n)
    each; every window needs at least 2 values."""
    rows, n = ascending.shape
    row = np.arange(rows)
    # Centred on each row's median, so that large values with a small
    # spread keep their precision in the prefix sums.
    centred = ascending - np.median(ascending, axis=1, keepdims=True)
    prefix = np.zeros((rows, n + 1))
    np.cumsum(centred, axis=1, out=prefix[:, 1:])
    # A cut at j puts values [start, j) in the low group: k = j - start of
    # the window's m values.  Between-SS = k(m-k)/m (mean_low - mean_high)²
    # = (S_k - k·S/m)² · m / (k (m - k)), S_k the low group's sum, S the window's.
    k = np.arange(1, n)[None, :] - start[:, None]
    m = (stop - start)[:, None]
    low_sums = prefix[:, 1:n] - prefix[row, start][:, None]
    window_sums = (prefix[row, stop] - prefix[row, start])[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        between = (low_sums - k * window_sums / m) ** 2 * m / (k * (m - k))
    between = np.where((k >= 1) & (k < m), between, -np.inf)
    return np.argmax(between, axis=1) + 1 - start


def best_two_group_split(sorted_values) -> Split:
    """Optimal 1-D two-means split of ascending values: the cut that
    maximises the between-group sum of squares, found in O(n)."""
    array = _as_finite_array(sorted_values)
    n = len(array)
    if n < 2:
        raise ValueError(f"a two-group split needs at least 2 values, got {n}")
    if np.any(np.diff(array) < 0):
        raise ValueError("best_two_group_split needs values sorted ascending")
    index = int(best_cuts(array[None, :], np.zeros(1, dtype=np.intp), np.full(1, n))[0])
    return split_at(array, index)


def split_at(sorted_values: np.ndarray, index: int) -> Split:
    """The two groups of ascending values below and from ``index``."""
    low, high = sorted_values[:index], sorted_values[index:]
    low_mean, high_mean = float(low.mean()), float(high.mean())
    low_std, high_std = float(low.std()), float(high.std())
    return Split(
        index=index,
        low_mean=low_mean,
        high_mean=high_mean,
        low_std=low_std,
        high_std=high_std,
        ashman_d=ashman_d(low_mean, high_mean, low_std, high_std),
    )


def ashman_d(mean1: float, mean2: float, std1: float, std2: float) -> float:
    """Ashman's D, the separation of two groups in units of their spread."""
    # D = sqrt(2) |mu1 - mu2| / sqrt(sigma1^2 + sigma2^2) (Ashman, Bird & Zepf
    # 1994). A mixture of two normals only separates cleanly into two peaks
    # when D > 2; below that the "two groups" may be one skewed population.
    gap = abs(mean1 - mean2)
    spread = math.sqrt(std1**2 + std2**2)
    if spread == 0.0:
        return float("inf") if gap > 0 else 0.0
    return math.sqrt(2.0) * gap / spread
