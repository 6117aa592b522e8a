"""The normal, t, chi-squared and binomial tails through scipy.special give
scipy.stats' values, and an analysis that needs no rarer test does not
import scipy.stats (a second at each command's start)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

from oddnode.stats import tails


@pytest.fixture
def rng():
    return np.random.default_rng(7)


def test_the_normal_law_is_scipys(rng):
    x = rng.normal(0.0, 6.0, 2000)
    q = 10.0 ** rng.uniform(-15, -0.01, 2000)
    np.testing.assert_array_equal(tails.normal_cdf(x), stats.norm.cdf(x))
    np.testing.assert_allclose(tails.normal_cdf(x, 3.0, 2.5), stats.norm.cdf(x, loc=3.0, scale=2.5), rtol=1e-15)
    np.testing.assert_array_equal(tails.normal_sf(x), stats.norm.sf(x))
    np.testing.assert_array_equal(tails.normal_log_cdf(x), stats.norm.logcdf(x))
    np.testing.assert_array_equal(tails.normal_ppf(q), stats.norm.ppf(q))
    np.testing.assert_array_equal(tails.normal_isf(q), stats.norm.isf(q))
    np.testing.assert_allclose(tails.normal_pdf(x, 1.0, 3.0), stats.norm.pdf(x, 1.0, 3.0), rtol=1e-14)


def test_the_t_law_is_scipys_for_real_degrees_of_freedom(rng):
    df = rng.uniform(0.5, 1e4, 2000)
    q = 10.0 ** rng.uniform(-12, -0.31, 2000)
    x = rng.normal(0.0, 5.0, 2000)
    np.testing.assert_array_equal(tails.t_isf(q, df), stats.t.isf(q, df))
    np.testing.assert_array_equal(tails.t_sf(x, df), stats.t.sf(x, df))


def test_the_chi_squared_tail_is_scipys(rng):
    dof = rng.integers(1, 60, 500)
    x = rng.uniform(0.0, 150.0, 500)
    np.testing.assert_array_equal(tails.chi2_sf(x, dof), stats.chi2.sf(x, dof))


def test_the_binomial_tail_is_scipys_within_its_rounding(rng):
    n = rng.integers(1, 5000, 3000)
    k = np.array([rng.integers(-1, m + 1) for m in n])
    p = rng.uniform(0.0, 1.0, 3000)
    ours, theirs = tails.binomial_sf(k, n, p), stats.binom.sf(k, n, p)
    # scipy.stats evaluates the incomplete beta function through Boost,
    # scipy.special through Cephes: they part in the 7th digit, and in the 5th
    # at tails below 1e-100, far beyond any significance level.
    usual, deep = theirs > 1e-100, theirs > 1e-300
    np.testing.assert_allclose(ours[usual], theirs[usual], rtol=1e-7)
    np.testing.assert_allclose(ours[deep], theirs[deep], rtol=1e-4)
    assert tails.binomial_sf(-1, 10, 0.3) == 1.0 and tails.binomial_sf(10, 10, 0.3) == 0.0
    assert tails.binomial_sf(2.7, 10, 0.3) == tails.binomial_sf(2, 10, 0.3)


# An analysis of one node series with an outlier: Shapiro-Wilk runs on a
# population of 64 (stats.distribution.shapiro_wilk, Royston's algorithm
# without scipy.stats) and none on 6,000; no other test from scipy.stats.
ANALYSIS = """\
import sys
import numpy as np
from oddnode.core.model import Dataset, Direction, LabelKind, Series
from oddnode.judge.analysis import analyze
nodes = int(sys.argv[1])
values = np.random.default_rng(1).normal(100.0, 2.0, nodes)
values[17] = 40.0
labels = np.array([f"n{i:05d}" for i in range(nodes)], dtype=object)
series = Series("stream.triad", "value", "MB/s", Direction.HIGHER, LabelKind.NODE, labels, values,
                np.ones(nodes, dtype=np.int64))
result = analyze(Dataset(series=[series]), correlations=False)
print(sorted(f.nodes for f in result.findings if f.kind == "outlier"))
print(sorted(m for m in ("scipy.stats", "scipy.optimize") if m in sys.modules))
"""


@pytest.mark.slow
@pytest.mark.parametrize("nodes", [64, 6000])
def test_an_analysis_that_needs_no_rarer_test_does_not_import_scipy_stats(nodes):
    done = subprocess.run([sys.executable, "-c", ANALYSIS, str(nodes)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    found, loaded = done.stdout.splitlines()
    assert found == "['n00017']"
    assert loaded == "[]"


def test_binomial_trials_must_be_whole_numbers_of_any_type():
    assert tails.binomial_sf(3, 10.0, 0.5) == tails.binomial_sf(3, np.int32(10), 0.5) == stats.binom.sf(3, 10, 0.5)
    with pytest.raises(ValueError, match="whole numbers"):
        tails.binomial_sf(3, 10.5, 0.5)
