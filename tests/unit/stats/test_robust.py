"""Modified z-scores and the calibrated outlier threshold."""

from __future__ import annotations

import json
import math
from importlib import resources

import numpy as np
import pytest

from oddnode.stats.robust import (
    MAD_TO_SIGMA,
    best_of_widening,
    modified_z,
    outlier_threshold,
    robust_scale,
    studentized_bonferroni,
)

ALPHAS = (1e-2, 1e-3, 1e-4, 1e-5)


def test_modified_z_matches_the_direct_formula():
    rng = np.random.default_rng(1)
    x = rng.normal(100.0, 3.0, size=101)
    median = np.median(x)
    mad = np.median(np.abs(x - median))
    expected = 0.6745 * (x - median) / mad
    # 0.6745 and 1/1.4826 agree to 4 digits
    np.testing.assert_allclose(modified_z(x), expected, rtol=1e-4)
    np.testing.assert_allclose(modified_z(x), (x - median) / (MAD_TO_SIGMA * mad), rtol=1e-12)


def test_modified_z_falls_back_to_the_mean_absolute_deviation_when_mad_is_zero():
    x = np.array([5.0, 5.0, 5.0, 5.0, 5.0, 6.0, 9.0])
    mean_ad = np.mean(np.abs(x - 5.0))
    np.testing.assert_allclose(modified_z(x), (x - 5.0) / (1.2533 * mean_ad))
    assert robust_scale(x).mad == 0.0


def test_modified_z_of_identical_values_is_zero_or_infinite():
    # (the mean absolute deviation is 0 only when every value is the median)
    assert modified_z(np.full(6, 3.0)).tolist() == [0.0] * 6
    assert len(modified_z(np.array([]))) == 0


def test_threshold_reproduces_the_monte_carlo_values():
    # Max |modified z| quantiles at alpha = 1e-4 (from the brief's Monte Carlo).
    for n, expected in [(8, 25.7), (12, 15.4), (20, 9.8), (50, 6.7), (100, 5.7)]:
        assert outlier_threshold(n, 1e-4) == pytest.approx(expected, rel=0.08)
    assert outlier_threshold(484, 1e-4) == pytest.approx(5.40, abs=0.01)


def test_threshold_is_monotone_in_alpha():
    for n in [5, 7, 8, 11, 12, 30, 33, 64, 100, 199, 200, 201, 484, 10_000]:
        values = [outlier_threshold(n, a) for a in (1e-2, 3e-3, 1e-3, 3e-4, 1e-4, 3e-5, 1e-5)]
        assert all(a < b for a, b in zip(values, values[1:])), (n, values)


def test_threshold_falls_with_n_while_the_mad_grows_precise():
    # The true threshold is not monotone everywhere: odd n (whose median is
    # one of the values, so one deviation is 0) need more than even n below
    # about 30, and past a few hundred nodes the maximum of more normals
    # grows again.  Between those it falls.
    for alpha in ALPHAS:
        values = [outlier_threshold(n, alpha) for n in (6, 8, 10, 14, 20, 30, 50, 100)]
        assert all(a > b for a, b in zip(values, values[1:])), (alpha, values)
    for alpha in ALPHAS:
        values = [outlier_threshold(n, alpha) for n in (30, 35, 40, 45, 50, 60, 70, 85, 100)]
        assert all(a >= b for a, b in zip(values, values[1:])), (alpha, values)


def test_threshold_is_continuous_where_the_table_ends():
    for alpha in ALPHAS:
        table, formula = outlier_threshold(200, alpha), outlier_threshold(201, alpha)
        # the two agree within the table's own Monte Carlo error
        assert formula == pytest.approx(table, rel=0.02)


def test_threshold_limits():
    assert outlier_threshold(4, 1e-4) == math.inf
    assert outlier_threshold(1, 1e-2) == math.inf
    with pytest.raises(ValueError, match="alpha"):
        outlier_threshold(50, 0.05)
    with pytest.raises(ValueError, match="alpha"):
        outlier_threshold(50, 1e-6)
    assert outlier_threshold(10_000, 1e-4) == pytest.approx(studentized_bonferroni(10_000, 1e-4))


def test_table_grid_is_the_committed_one():
    table = json.loads(resources.files("oddnode.stats").joinpath("outlier_thresholds.json").read_text())
    for n in (5, 6, 7, 8, 9, 10, 12, 14, 16, 20, 25, 30, 40, 50, 70, 100, 150, 200):
        assert n in table["sizes"]
    assert sorted(table["alphas"]) == sorted(ALPHAS)
    assert table["replicates_per_size"] * min(table["alphas"]) >= 20


def _false_alarm_rate(n: int, alpha: float, replicates: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((replicates, n))
    median = np.median(x, axis=1, keepdims=True)
    deviation = np.abs(x - median)
    mad = np.median(deviation, axis=1)
    largest = deviation.max(axis=1) / (MAD_TO_SIGMA * mad)
    return float(np.mean(largest > outlier_threshold(n, alpha)))


@pytest.mark.slow
@pytest.mark.parametrize("n", [6, 11, 23, 64, 300])
def test_false_alarm_rate_is_at_most_alpha(n):
    # 20,000 healthy populations at alpha = 1e-2: about 200 false alarms are
    # allowed, with a sampling sd of 14; 1.5 × alpha leaves room for that.
    replicates = 20_000
    rate = _false_alarm_rate(n, 1e-2, replicates, seed=1000 + n)
    assert rate <= 1.5e-2, rate
    # and the threshold is not wastefully high either (except the
    # conservative formula above the table)
    if n <= 200:
        assert rate >= 0.5e-2, rate


def test_best_of_widening_is_one_for_single_runs_and_grows_with_runs():
    assert best_of_widening(1, 484, 1e-4) == 1.0
    widths = [best_of_widening(r, 484, 1e-4) for r in (2, 5, 10, 20)]
    assert widths == sorted(widths) and 1.1 < widths[0] and 1.3 < widths[2] < 1.5


def test_best_of_widening_matches_simulated_tail():
    """At the widened threshold the better tail of best-of-10 values is as
    rare as the normal tail at the normal one (checked at a loose alpha)."""
    rng = np.random.default_rng(11)
    n, alpha, r = 50, 1e-2, 10
    normal = outlier_threshold(n, alpha)
    widened = normal * best_of_widening(r, n, alpha)
    exceed_widened = exceed_normal = 0
    replicates = 20_000
    for _ in range(replicates // 2_000):
        best = rng.normal(size=(2_000, n, r)).max(axis=2)
        median = np.median(best, axis=1, keepdims=True)
        mad = np.median(np.abs(best - median), axis=1, keepdims=True) * MAD_TO_SIGMA
        top = ((best - median) / mad).max(axis=1)
        exceed_widened += int(np.count_nonzero(top > widened))
        exceed_normal += int(np.count_nonzero(top > normal))
    assert exceed_widened / replicates <= 1.5 * alpha / 2
    assert exceed_normal / replicates > 3 * alpha / 2  # the normal threshold alone would cry wolf


def test_median_is_numpy_s_to_the_last_bit():
    from oddnode.stats.robust import median

    rng = np.random.default_rng(11)
    for n in (1, 2, 3, 10, 11, 1000, 1001):
        x = rng.lognormal(3, 1, n)
        assert median(x) == float(np.median(x)), n
    assert median(np.array([3, 1, 2, 2])) == 2.0 and median(np.array([7])) == 7.0
    assert np.isnan(median(np.array([]))) and np.isnan(median(np.array([1.0, np.nan, 2.0])))
