"""Distribution shape: bins, chi-squared fit, normality tests, dip test and
the two-group split, checked against scipy and planted truth."""

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from oddnode.stats.distribution import (
    ChiSquared,
    Dip,
    Normality,
    Split,
    ashman_d,
    best_two_group_split,
    bin_edges,
    chi_squared_normal,
    dip_test,
    findn,
    normality,
    shapiro_wilk,
)


@pytest.fixture
def rng():
    return np.random.default_rng(20240611)


# bin_edges ---------------------------------------------------------------


def test_auto_bins_are_ceil_sqrt_n_equal_bins_over_the_range(rng):
    values = rng.normal(100, 5, size=50)
    edges = bin_edges(values, "auto")
    assert len(edges) == math.ceil(math.sqrt(50)) + 1 == 9
    assert edges[0] == values.min() and edges[-1] == values.max()
    assert np.allclose(np.diff(edges), (values.max() - values.min()) / 8)


def test_whole_bins_are_centred_on_each_integer():
    edges = bin_edges(np.array([3.0, 5.0, 5.0, 7.0]), "whole")
    assert edges.tolist() == [2.5, 3.5, 4.5, 5.5, 6.5, 7.5]


def test_whole_bins_refuse_fractions_with_a_clear_message():
    with pytest.raises(ValueError, match="whole numbers"):
        bin_edges(np.array([1.0, 2.5, 3.0]), "whole")


def test_integer_bins_give_that_many_equal_bins(rng):
    values = rng.uniform(0, 10, size=100)
    edges = bin_edges(values, 7)
    assert len(edges) == 8
    assert np.allclose(np.diff(edges), np.diff(edges)[0])
    assert edges[0] == values.min() and edges[-1] == values.max()


def test_equal_values_give_one_bin_of_width_one_centred_on_the_value():
    assert bin_edges(np.full(10, 42.0), "auto").tolist() == [41.5, 42.5]
    assert bin_edges(np.full(10, 42.0), 5).tolist() == [41.5, 42.5]
    assert bin_edges(np.full(10, 42.0), "whole").tolist() == [41.5, 42.5]


@pytest.mark.parametrize("bins", [0, -3, "sturges", True, 2.5])
def test_invalid_bin_specifications_are_rejected(bins):
    with pytest.raises(ValueError):
        bin_edges(np.arange(10.0), bins)


# chi-squared -------------------------------------------------------------


def test_chi_squared_matches_scipy_chisquare_on_hand_computed_expectation(rng):
    values = rng.normal(50, 4, size=2000)
    bins = 8
    result = chi_squared_normal(values, bins)

    edges = np.linspace(values.min(), values.max(), bins + 1)
    observed, _ = np.histogram(values, edges)
    mean, std = values.mean(), values.std(ddof=1)
    cdf = stats.norm.cdf(edges[1:-1], mean, std)
    expected = len(values) * np.diff(np.concatenate(([0.0], cdf, [1.0])))
    assert expected.min() >= 5  # no merging happens with this sample
    reference = stats.chisquare(observed, expected, ddof=2)

    assert isinstance(result, ChiSquared)
    assert result.bins == result.requested_bins == bins
    assert result.dof == bins - 3
    assert result.x2 == pytest.approx(reference.statistic, rel=1e-10)
    assert result.p == pytest.approx(reference.pvalue, rel=1e-9)
    assert result.scale == pytest.approx((edges[1] - edges[0]) / std, rel=1e-12)


def test_sparse_bins_are_merged_until_each_expects_five(rng):
    values = rng.normal(0, 1, size=60)
    result = chi_squared_normal(values, 20)
    assert result.requested_bins == 20
    assert result.bins < 20
    assert result.dof == result.bins - 3
    assert result.x2 >= 0


def test_too_few_bins_leave_p_undefined(rng):
    result = chi_squared_normal(rng.normal(size=100), 3)
    assert result.dof == 0
    assert math.isnan(result.p)


def test_chi_squared_of_constant_values_is_nan():
    result = chi_squared_normal(np.full(20, 7.0), "auto")
    assert math.isnan(result.x2) and math.isnan(result.p)


def test_findn_covers_the_default_sweep_sorted_by_p(rng):
    values = rng.normal(10, 1, size=400)
    results = findn(values)
    expected_counts = set(range(4, 2 * math.ceil(math.sqrt(400)) + 1))
    assert {r.requested_bins for r in results} == expected_counts
    ps = [r.p for r in results if not math.isnan(r.p)]
    assert ps == sorted(ps)
    # Undefined p-values come after every defined one.
    first_nan = next((k for k, r in enumerate(results) if math.isnan(r.p)), len(results))
    assert all(math.isnan(r.p) for r in results[first_nan:])


def test_findn_with_explicit_counts(rng):
    results = findn(rng.normal(size=200), bin_counts=[5, 10, 15])
    assert sorted(r.requested_bins for r in results) == [5, 10, 15]


def test_findn_flags_a_bimodal_population(rng):
    values = np.concatenate([rng.normal(100, 1, 300), rng.normal(110, 1, 100)])
    assert all(r.p < 1e-6 for r in findn(values) if not math.isnan(r.p))


# normality ---------------------------------------------------------------


@pytest.mark.parametrize("n", [20, 30, 800, 4_000])
def test_normality_fields_equal_scipy(rng, n):
    values = rng.gamma(4.0, 2.0, size=n) + 1000.0
    result = normality(values)
    assert isinstance(result, Normality)
    assert result.n == n
    assert result.skewness == pytest.approx(stats.skew(values, bias=False), rel=1e-9)
    assert result.kurtosis == pytest.approx(stats.kurtosis(values, fisher=True, bias=False), rel=1e-9)
    skew = stats.skewtest(values)
    assert result.skew_z == pytest.approx(skew.statistic, rel=1e-9)
    assert result.skew_p == pytest.approx(skew.pvalue, rel=1e-8)
    k2 = stats.normaltest(values)
    assert result.dagostino_k2 == pytest.approx(k2.statistic, rel=1e-9)
    assert result.dagostino_p == pytest.approx(k2.pvalue, rel=1e-8)
    shapiro = stats.shapiro(values)
    assert result.shapiro_w == pytest.approx(shapiro.statistic, rel=1e-6)
    assert result.shapiro_p == pytest.approx(shapiro.pvalue, rel=1e-4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy's deprecation of critical_values
        anderson = stats.anderson(values, dist="norm")
    assert result.anderson_stat == pytest.approx(anderson.statistic, rel=1e-9)
    assert result.anderson_critical_5pct == pytest.approx(anderson.critical_values[2])


# Populations of every shape Shapiro-Wilk meets in a cluster: normal, skewed,
# flat, one far outlier, few distinct values (ties) and two modes.
SHAPES = {
    "normal": lambda rng, n: rng.normal(100.0, 2.0, n),
    "skewed": lambda rng, n: rng.gamma(2.0, 2.0, n),
    "flat": lambda rng, n: rng.uniform(size=n),
    "outlier": lambda rng, n: np.r_[rng.normal(size=n - 1), 8.0],
    "ties": lambda rng, n: np.r_[rng.integers(0, 4, n - 1), 4].astype(float),
    "two modes": lambda rng, n: np.r_[rng.normal(0.0, 1.0, n // 2), rng.normal(6.0, 1.0, n - n // 2)],
}


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("n", [*range(3, 24), 30, 31, 57, 100, 211, 1000, 4999, 5000])
def test_shapiro_wilk_equals_scipy_at_every_size_on_every_shape(rng, n, shape):
    values = SHAPES[shape](rng, n)
    w, p = shapiro_wilk(values)
    theirs = stats.shapiro(values)
    assert w == pytest.approx(theirs.statistic, rel=1e-8)
    # Royston's p from the same W: equal but for scipy's own rounding, which
    # shows at p below 1e-9 (a relative 1e-5 there).
    assert p == pytest.approx(theirs.pvalue, rel=1e-5, abs=1e-15)


def test_shapiro_wilk_at_its_edges_as_scipy():
    for values in ([0.0, 0.0, 1.0], [0.0, 1.0, 2.0], [0.0] * 4 + [1.0], [0.0] * 11 + [1.0], list(range(12)),
                   [0.0] * 30 + [1.0]):
        theirs = stats.shapiro(values)
        assert shapiro_wilk(values) == pytest.approx((theirs.statistic, theirs.pvalue), rel=1e-6, abs=1e-15)
    # the order of the values does not matter
    assert shapiro_wilk([3.0, 1.0, 2.0, 7.0]) == shapiro_wilk([1.0, 2.0, 3.0, 7.0])


@pytest.mark.parametrize("values, why", [([1.0, 2.0], "3 to 5000 values"), ([1.0] * 5001, "3 to 5000 values"),
                                         ([2.0, 2.0, 2.0], "not all equal")])
def test_shapiro_wilk_refuses_what_it_cannot_judge(values, why):
    with pytest.raises(ValueError, match=why):
        shapiro_wilk(values)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 5, 7, 8, 19, 20])
def test_normality_small_samples_return_nan_without_warnings(rng, n):
    values = rng.normal(size=n)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = normality(values)
    assert result.n == n
    assert math.isnan(result.skew_p) == (n < 8)
    assert math.isnan(result.dagostino_p) == (n < 20)
    assert math.isnan(result.shapiro_p) == (n < 3)


def test_normality_skips_shapiro_above_5000(rng):
    result = normality(rng.normal(size=5001))
    assert math.isnan(result.shapiro_w) and math.isnan(result.shapiro_p)
    assert not math.isnan(result.dagostino_p)


def test_normality_of_constant_values_is_nan_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = normality(np.full(50, 3.0))
    assert result.n == 50
    assert math.isnan(result.skewness) and math.isnan(result.shapiro_p)


# dip test ----------------------------------------------------------------


def test_dip_detects_two_normals_six_sigma_apart(rng):
    values = np.concatenate([rng.normal(0, 1, 250), rng.normal(6, 1, 250)])
    result = dip_test(values)
    assert isinstance(result, Dip)
    assert result.p < 0.001


def test_dip_accepts_one_normal():
    values = np.random.default_rng(7).normal(0, 1, 500)
    assert dip_test(values).p > 0.01


def test_dip_matches_the_diptest_package_on_unsorted_input(rng):
    import diptest

    values = rng.normal(size=200)
    dip, p = diptest.diptest(np.sort(values))
    result = dip_test(values)
    assert result.statistic == pytest.approx(dip) and result.p == pytest.approx(p)


def test_dip_needs_four_values():
    result = dip_test(np.array([1.0, 2.0, 3.0]))
    assert math.isnan(result.statistic) and math.isnan(result.p)


# two-group split ---------------------------------------------------------


def test_best_split_recovers_planted_groups_and_ashman_d(rng):
    low = rng.normal(100, 2, size=216)
    high = rng.normal(130, 3, size=84)
    values = np.sort(np.concatenate([low, high]))
    split = best_two_group_split(values)
    assert isinstance(split, Split)
    assert split.index == 216
    assert split.low_mean == pytest.approx(low.mean())
    assert split.high_mean == pytest.approx(high.mean())
    assert split.low_std == pytest.approx(low.std())
    assert split.high_std == pytest.approx(high.std())
    expected_d = math.sqrt(2) * abs(low.mean() - high.mean()) / math.sqrt(low.var() + high.var())
    assert split.ashman_d == pytest.approx(expected_d)
    assert split.ashman_d > 2


def test_best_split_maximises_between_group_sum_of_squares(rng):
    values = np.sort(rng.gamma(2.0, 1.0, size=60))

    def between(k):
        lo, hi = values[:k], values[k:]
        return k * (len(values) - k) / len(values) * (lo.mean() - hi.mean()) ** 2

    brute = max(range(1, len(values)), key=between)
    assert best_two_group_split(values).index == brute


def test_best_split_needs_sorted_values():
    with pytest.raises(ValueError, match="sorted"):
        best_two_group_split(np.array([3.0, 1.0, 2.0]))


def test_ashman_d_of_two_points_is_infinite_and_of_one_value_zero():
    assert best_two_group_split(np.array([1.0, 1.0, 5.0, 5.0])).ashman_d == math.inf
    assert ashman_d(3.0, 3.0, 0.0, 0.0) == 0.0
