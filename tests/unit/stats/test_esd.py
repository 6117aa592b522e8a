"""The generalized ESD test for small populations and its calibration."""

from __future__ import annotations

import numpy as np
import pytest

from oddnode.stats import esd
from oddnode.stats.calibrate import smallest_esd_level


def test_critical_values_and_step_levels_are_inverses():
    for n in (5, 8, 17, 30):
        steps = esd.max_outliers(n)
        for level in (1e-5, 3e-4, 1e-2):
            critical = esd.critical_values(n, level, steps)
            assert esd.step_levels(critical, n) == pytest.approx(np.full(steps, level), rel=1e-6)
            assert np.all(np.diff(critical) > 0)  # fewer values left, a wider bound


def test_one_slow_node_among_eight_is_the_only_outlier():
    values = np.array([10.0, 10.1, 9.9, 10.05, 9.95, 10.02, 9.98, 5.0])
    result = esd.low_outliers(values, 1e-4)
    assert result.count == 1 and result.outliers.tolist() == [7]
    # 5.0 lies (mean 10.0 − 5.0) / sd 0.066 ≈ 76 σ below the others.
    assert result.statistics[0] == pytest.approx(5.0 / np.std(values[:7], ddof=1), rel=1e-9)


def test_two_slow_nodes_that_mask_each_other_are_both_found():
    values = np.array([10.0, 10.1, 9.9, 10.05, 9.95, 10.02, 5.1, 5.0])
    result = esd.low_outliers(values, 1e-4)
    # Step 1 alone (Grubbs' test) misses 5.0: 5.1 among the others widens their spread.
    assert result.statistics[0] < result.critical[0]
    assert result.statistics[1] > result.critical[1]
    assert result.count == 2 and result.outliers.tolist() == [6, 7]


def test_identical_nodes_and_one_apart_are_found_without_dividing_by_zero():
    assert esd.low_outliers(np.array([7.0] * 7 + [3.0]), 1e-4).outliers.tolist() == [7]
    assert esd.low_outliers(np.array([7.0] * 8), 1e-4).count == 0
    high_only = esd.low_outliers(np.array([7.0] * 7 + [9.0]), 1e-4)
    assert high_only.count == 0


def test_large_values_with_a_small_spread_keep_their_precision():
    rng = np.random.default_rng(3)
    values = 1e9 + rng.normal(0.0, 1e-3, 12)
    values[4] -= 0.05  # 50 σ below
    assert esd.low_outliers(values, 1e-4).outliers.tolist() == [4]


@pytest.mark.parametrize("n", [6, 8, 12])
def test_false_alarms_on_identical_nodes_happen_at_the_calibrated_rate(n):
    # 40,000 healthy populations at alpha = 1e-2: 400 false alarms expected,
    # sd 20.  Rosner's uncalibrated bounds give about 1.6 times as many at
    # these sizes (see the calibration table), far outside 330-470.
    rng = np.random.default_rng(20 + n)
    populations = 40_000
    smallest = smallest_esd_level(rng, n, populations)
    alarms = int((smallest < esd.nominal_level(n, 1e-2)).sum())
    assert 330 <= alarms <= 470


def test_the_calibrated_level_is_below_rosners_where_his_bounds_run_high():
    assert esd.nominal_level(8, 1e-4) < 0.8e-4
    assert esd.nominal_level(5, 1e-4) == pytest.approx(1e-4, rel=0.1)  # one step: Grubbs' exact test
    for n in range(esd.MIN_N, esd.MAX_N + 1):
        levels = [esd.nominal_level(n, alpha) for alpha in (5e-6, 2e-5, 1e-4, 3e-4, 1e-3, 1e-2)]
        assert np.all(np.diff(levels) > 0)


def test_sizes_and_levels_outside_the_calibration_are_refused():
    with pytest.raises(ValueError, match="5 to 30 values, not 4"):
        esd.low_outliers(np.arange(4.0), 1e-4)
    with pytest.raises(ValueError, match="5 to 30 values, not 31"):
        esd.low_outliers(np.arange(31.0), 1e-4)
    with pytest.raises(ValueError, match="alpha"):
        esd.nominal_level(8, 0.5)


def test_a_node_fifteen_sigma_low_among_eight_is_found_more_often_than_not():
    # The modified z-score needs 27 σ at 8 nodes and alpha = 1e-4 and finds a
    # node 15 σ low about one time in ten; the ESD test, two times in three.
    rng = np.random.default_rng(11)
    found = 0
    for _ in range(400):
        values = rng.normal(0.0, 1.0, 8)
        values[0] -= 15.0
        found += esd.low_outliers(values, 0.5e-4).outliers.tolist() == [0]
    assert found >= 220
