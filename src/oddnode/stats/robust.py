"""Robust location, scale and outlier thresholds.

A node population is judged from its median and MAD (median absolute
deviation), which one or two broken nodes cannot drag, rather than from the
mean and standard deviation, which they can.  (The worse side of a population
of 30 nodes or fewer, where the MAD is too noisy, is judged by the
generalized ESD test of oddnode.stats.esd instead.)
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from importlib import resources

import numpy as np

from oddnode.stats.tails import normal_isf, normal_log_cdf, normal_ppf, t_isf

# 1.4826 = 1 / Φ⁻¹(3/4) ≈ 1 / 0.6745: for normal data the MAD is 0.6745 σ
# (half of the values lie within 0.6745 σ of the median), so 1.4826 · MAD
# estimates σ and the modified z-score reads like an ordinary z-score.
MAD_TO_SIGMA = 1.4826
# 1.2533 = sqrt(π/2): for normal data the mean absolute deviation is
# σ · sqrt(2/π), so 1.2533 · mean |x - median| estimates σ.  Iglewicz and
# Hoaglin's fallback when more than half of the values are identical (MAD 0).
MEAN_AD_TO_SIGMA = 1.2533

# The outlier test needs at least this many values: with fewer the MAD says
# nothing about the spread.
MIN_OUTLIER_SAMPLE = 5
# MAD efficiency relative to the standard deviation under normality (≈0.37):
# a MAD from n values is as precise as a standard deviation from 0.37·(n-1)
# degrees of freedom, which studentises the Bonferroni bound for large n.
MAD_EFFICIENCY = 0.37
ALPHA_RANGE = (1e-5, 1e-2)

_THRESHOLD_TABLE = "outlier_thresholds.json"


@dataclass(frozen=True)
class RobustScale:
    """Median and spread of a population; ``sigma`` estimates the standard deviation."""

    median: float
    mad: float
    sigma: float  # 1.4826·MAD, or 1.2533·mean absolute deviation when the MAD is 0


def median(values: np.ndarray) -> float:
    """The median of a 1-D array, as ``np.median`` gives it (NaN if any
    value is NaN), from one partition: several times faster than np.median
    on arrays of thousands, which asks for two order statistics at once."""
    x = np.asarray(values, dtype=np.float64)
    n = x.size
    if n == 0 or np.isnan(x).any():
        return float("nan")
    half = n // 2
    part = np.partition(x, half)
    if n % 2:
        return float(part[half])
    return float((part[:half].max() + part[half]) / 2)


def robust_scale(values: np.ndarray) -> RobustScale:
    """Median, MAD and the σ estimate that modified z-scores divide by."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        nan = float("nan")
        return RobustScale(nan, nan, nan)
    centre = median(x)
    deviation = np.abs(x - centre)
    mad = median(deviation)
    sigma = MAD_TO_SIGMA * mad if mad > 0 else MEAN_AD_TO_SIGMA * float(deviation.mean())
    return RobustScale(centre, mad, sigma)


def modified_z(values: np.ndarray) -> np.ndarray:
    """Iglewicz–Hoaglin modified z-score: 0.6745·(x − median)/MAD.

    When the MAD is 0 the scale falls back to 1.2533 · mean absolute
    deviation; when that is 0 too (all values equal), values equal to the
    median score 0 and any other ±inf.
    """
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return np.empty(0, dtype=np.float64)
    scale = robust_scale(x)
    deviation = x - scale.median
    if scale.sigma > 0:
        return deviation / scale.sigma
    return np.where(deviation == 0, 0.0, np.copysign(np.inf, deviation))


@functools.cache
def _threshold_table() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(log sizes, log alphas, log quantiles) of the committed calibration table."""
    text = resources.files("oddnode.stats").joinpath(_THRESHOLD_TABLE).read_text()
    table = json.loads(text)
    sizes = np.asarray(table["sizes"], dtype=np.float64)
    alphas = np.asarray(table["alphas"], dtype=np.float64)
    quantiles = np.asarray(table["quantiles"], dtype=np.float64)
    if quantiles.shape != (len(sizes), len(alphas)):
        raise ValueError(f"{_THRESHOLD_TABLE}: quantiles are not sizes × alphas")
    order = np.argsort(alphas)  # ascending alpha for interpolation
    return np.log(sizes), np.log(alphas[order]), np.log(quantiles[:, order])


def _interpolate(grid: np.ndarray, point: float) -> tuple[int, float]:
    """Lower grid index and weight of the upper neighbour for linear interpolation."""
    upper = int(np.searchsorted(grid, point, side="left"))
    if upper == 0:
        return 0, 0.0
    if upper >= len(grid):
        return len(grid) - 2, 1.0
    lower = upper - 1
    return lower, (point - grid[lower]) / (grid[upper] - grid[lower])


@functools.cache  # a pure function of its numbers, asked once per population
def studentized_bonferroni(n: int, alpha: float) -> float:
    """|z| that n normal values exceed with probability ≤ alpha when σ comes from a MAD.

    The t quantile at 1 − alpha/(2n) with 0.37·(n − 1) degrees of freedom:
    Bonferroni over n two-sided tests, widened for the MAD's own noise.
    Slightly conservative (5.40 against the exact 5.27 for n=484, alpha=1e-4).
    """
    return float(t_isf(alpha / (2 * n), MAD_EFFICIENCY * (n - 1)))


@functools.cache  # a pure function of its numbers, asked once per population
def outlier_threshold(n: int, alpha: float) -> float:
    """The |modified z| above which a value of an n-node population is an outlier.

    Chosen so that on n identical nodes with normal noise the probability of
    flagging ANY node is at most alpha.  Up to 200 nodes it comes from the
    Monte Carlo table made by ``python -m oddnode.stats.calibrate``,
    interpolated in log n and log alpha; above, from the studentised
    Bonferroni bound.  With fewer than 5 nodes there is no test (inf).
    """
    low, high = ALPHA_RANGE
    if not (low * (1 - 1e-9) <= alpha <= high * (1 + 1e-9)):
        raise ValueError(
            f"alpha {alpha:g} is outside the calibrated range [{low:g}, {high:g}]: "
            "choose a false-alarm probability between 1e-5 and 1e-2"
        )
    if n < MIN_OUTLIER_SAMPLE:
        return math.inf
    log_sizes, log_alphas, log_quantiles = _threshold_table()
    if math.log(n) > log_sizes[-1] + 1e-9:
        return studentized_bonferroni(n, alpha)
    log_alpha = min(max(math.log(alpha), log_alphas[0]), log_alphas[-1])
    i, wi = _interpolate(log_sizes, math.log(n))
    j, wj = _interpolate(log_alphas, log_alpha)
    q = log_quantiles
    log_threshold = (
        (1 - wi) * (1 - wj) * q[i, j]
        + (1 - wi) * wj * q[i, j + 1]
        + wi * (1 - wj) * q[i + 1, j]
        + wi * wj * q[i + 1, j + 1]
    )
    return float(math.exp(log_threshold))


@functools.cache  # a pure function of its numbers, asked once per population
def best_of_widening(repetitions: int, n: int, alpha: float) -> float:
    """How much wider the threshold must be on the *better* side when every
    value is the best of ``repetitions`` runs.

    The best of R normal runs is not normal: its better tail, measured in its
    own (smaller) MAD, is much longer — the maximum of R normals has the CDF
    Φ(x)^R.  The Bonferroni threshold t_R under that law (n·P(Z > t) = alpha/2
    with Z in median/MAD units of the maximum) is divided by the normal one
    (Φ⁻¹(1 − alpha/(2n))); the ratio scales the calibrated normal threshold.
    1 for a single run; about 1.4 for the best of 10.  The worse side of a
    best-of-R population has a shorter tail than the normal, so the normal
    threshold stays valid (and conservative) there.
    """
    if repetitions <= 1 or n < MIN_OUTLIER_SAMPLE:
        return 1.0
    from scipy import optimize  # about half a second to import, for these two roots

    r = repetitions

    def cdf(x: float) -> float:
        return float(np.exp(r * normal_log_cdf(x)))

    median = float(normal_ppf(0.5 ** (1.0 / r)))
    mad = optimize.brentq(lambda d: cdf(median + d) - cdf(median - d) - 0.5, 1e-9, 10.0)
    sigma = MAD_TO_SIGMA * mad

    def excess_tail(t: float) -> float:
        return n * -np.expm1(r * normal_log_cdf(median + t * sigma)) - alpha / 2

    best_of_threshold = optimize.brentq(excess_tail, 1e-3, 1e3)
    return best_of_threshold / float(normal_isf(alpha / (2 * n)))
