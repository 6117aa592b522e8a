import math

import numpy as np
import pytest

from oddnode.readings.fit import MAX_RELATIVE_ERROR, find_switch_point, fit_latency_bandwidth, fit_table

# Ping-pong's usual sizes: 0 and every power of two up to 4 MiB.
SIZES = [0] + [2**k for k in range(23)]
SWITCH = 65536  # where the two-regime curves change protocol


def line(latency_us: float, bandwidth_mb_s: float, sizes=SIZES) -> list[float]:
    """One-way times in us: a MB/s is a byte/us."""
    return [latency_us + size / bandwidth_mb_s for size in sizes]


def two_regimes(size: int) -> float:
    """Eager up to 64 KiB (3 us, 1000 MB/s), rendezvous above (15 us of handshake, 2500 MB/s)."""
    return 3.0 + size / 1000.0 if size <= SWITCH else 15.0 + size / 2500.0


def test_exact_line_is_recovered():
    fit = fit_latency_bandwidth(SIZES, line(25.0, 1000.0))
    assert fit.latency_us == pytest.approx(25.0, rel=1e-9)
    assert fit.bandwidth_mb_s == pytest.approx(1000.0, rel=1e-9)
    assert fit.slope_us_per_byte == pytest.approx(1e-3, rel=1e-9)
    assert fit.size_range == (0, 4194304) and fit.points == len(SIZES)
    assert fit.max_relative_error < 1e-9
    assert not fit.poor and fit.reason is None and fit.switch is None
    assert [row.size for row in fit.rows] == SIZES and all(row.in_range for row in fit.rows)


def test_input_order_does_not_matter_and_rows_come_sorted():
    order = np.random.default_rng(1).permutation(len(SIZES))
    times = line(6.9, 233.0)
    fit = fit_latency_bandwidth([SIZES[i] for i in order], [times[i] for i in order])
    assert fit.latency_us == pytest.approx(6.9, rel=1e-9)
    assert fit.bandwidth_mb_s == pytest.approx(233.0, rel=1e-9)
    assert [row.size for row in fit.rows] == SIZES
    assert [row.observed_us for row in fit.rows] == pytest.approx(times)


def test_noisy_repetitions_are_recovered_within_the_noise():
    rng = np.random.default_rng(2024)
    sizes = np.repeat(SIZES, 5)
    times = np.array(line(25.0, 1000.0, sizes)) * (1.0 + rng.normal(0.0, 0.015, sizes.size))
    fit = fit_latency_bandwidth(sizes, times)
    assert fit.points == sizes.size
    assert fit.latency_us == pytest.approx(25.0, rel=0.01)
    assert fit.bandwidth_mb_s == pytest.approx(1000.0, rel=0.02)
    assert not fit.poor
    assert find_switch_point(sizes, times) is None


def test_relative_weighting_keeps_the_latency_that_plain_least_squares_loses():
    rng = np.random.default_rng(7)
    times = np.array(line(2.0, 10000.0)) * (1.0 + rng.normal(0.0, 0.02, len(SIZES)))
    fit = fit_latency_bandwidth(SIZES, times)
    _, a = np.polyfit(SIZES, times, 1)
    assert abs(fit.latency_us - 2.0) < 0.1
    assert abs(a - 2.0) > abs(fit.latency_us - 2.0)


def test_size_range_restricts_the_fit_and_the_other_rows_stay_for_comparison():
    # Below 1 KiB the messages take another path, 10 us slower.
    times = [t + (10.0 if size < 1024 else 0.0) for size, t in zip(SIZES, line(25.0, 1000.0))]
    whole = fit_latency_bandwidth(SIZES, times)
    fit = fit_latency_bandwidth(SIZES, times, min_size=1024)
    assert fit.latency_us == pytest.approx(25.0, rel=1e-9)
    assert fit.bandwidth_mb_s == pytest.approx(1000.0, rel=1e-9)
    assert fit.size_range == (1024, 4194304) and fit.points == 13
    assert [row.size for row in fit.rows if not row.in_range] == SIZES[:11]
    assert fit.max_relative_error < 1e-9 < whole.max_relative_error
    # Outside the range the line shows the missing 10 us: -10/35 at 0 bytes.
    assert fit.rows[0].relative_error == pytest.approx(-10.0 / 35.0)

    upper = fit_latency_bandwidth(SIZES, times, min_size=1024, max_size=65536)
    assert upper.size_range == (1024, 65536) and upper.points == 7


def test_two_regimes_are_a_poor_fit_that_names_the_switch():
    times = [two_regimes(size) for size in SIZES]
    fit = fit_latency_bandwidth(SIZES, times)
    assert fit.poor and fit.max_relative_error > MAX_RELATIVE_ERROR
    assert "eager to rendezvous" in fit.reason
    assert "up to 65536 bytes and another from 131072 bytes" in fit.reason
    switch = fit.switch
    assert (switch.last_below, switch.first_above) == (65536, 131072)
    assert switch.below.latency_us == pytest.approx(3.0, rel=1e-6)
    assert switch.below.bandwidth_mb_s == pytest.approx(1000.0, rel=1e-6)
    assert switch.above.latency_us == pytest.approx(15.0, rel=1e-6)
    assert switch.above.bandwidth_mb_s == pytest.approx(2500.0, rel=1e-6)
    assert find_switch_point(SIZES, times) == switch
    table = fit_table(fit)
    assert "poor fit: " in table and "up to 65536 bytes: latency 3 us, bandwidth 1000 MB/s" in table

    below = fit_latency_bandwidth(SIZES, times, max_size=SWITCH)
    assert not below.poor and below.bandwidth_mb_s == pytest.approx(1000.0, rel=1e-9)


def test_a_change_of_slope_alone_is_flagged_near_it():
    # Continuous at 64 KiB, four times the bandwidth above it.
    times = [5.0 + min(size, SWITCH) / 1000.0 + max(size - SWITCH, 0) / 4000.0 for size in SIZES]
    fit = fit_latency_bandwidth(SIZES, times)
    assert fit.poor
    worst = max(fit.rows, key=lambda row: abs(row.relative_error))
    assert f"{worst.size} bytes is" in fit.reason
    assert SWITCH / 4 <= worst.size <= SWITCH * 4
    assert fit.switch is not None
    assert fit.switch.last_below <= SWITCH <= fit.switch.first_above


def test_negative_latency_is_a_poor_fit_with_a_reason():
    sizes = SIZES[17:]  # 64 KiB and up only
    fit = fit_latency_bandwidth(sizes, line(-5.0, 1000.0, sizes))
    assert fit.latency_us == pytest.approx(-5.0, rel=1e-6)
    assert fit.poor and "negative latency" in fit.reason and "start it lower" in fit.reason


def test_time_that_does_not_grow_with_size_has_no_bandwidth():
    sizes = [0, 1, 2, 4, 8]
    fit = fit_latency_bandwidth(sizes, [10.0 - size * 0.01 for size in sizes])
    assert fit.bandwidth_mb_s is None and fit.slope_us_per_byte < 0
    assert fit.poor and "does not grow with the size" in fit.reason
    assert "no bandwidth" in fit_table(fit)


@pytest.mark.parametrize(
    ("sizes", "times", "bounds", "message"),
    [
        ([8], [5.0], {}, "1 point given: a line needs at least 2"),
        (SIZES, line(5.0, 100.0), {"min_size": 5000, "max_size": 6000}, "0 points from 5000 to 6000 bytes"),
        (SIZES, line(5.0, 100.0), {"min_size": 4194304}, "1 point from 4194304 bytes on"),
        ([8, 8, 8], [5.0, 5.1, 4.9], {}, "every point given has the size 8 bytes: a line needs two sizes"),
        ([0, 8, 16], [5.0, math.nan, 6.0], {}, "the time at 8 bytes is NaN"),
        ([0, math.nan, 16], [5.0, 5.5, 6.0], {}, "a size is NaN"),
        ([0, 8, 16], [5.0, 0.0, 6.0], {}, "times must be positive and finite, got 0.0 us at 8 bytes"),
        ([0, 8, 16], [5.0, -1.0, 6.0], {}, "got -1.0 us at 8 bytes"),
        ([0, 8, 16], [5.0, math.inf, 6.0], {}, "got inf us at 8 bytes"),
        ([0, -8, 16], [5.0, 5.5, 6.0], {}, "non-negative numbers of bytes, got -8"),
        ([0, 8.5, 16], [5.0, 5.5, 6.0], {}, "whole, non-negative numbers of bytes, got 8.5"),
        ([0, 8, 16], [5.0, 6.0], {}, "same length"),
        (SIZES, line(5.0, 100.0), {"min_size": 10, "max_size": 1}, "min_size 10 is above max_size 1"),
    ],
)
def test_bad_input_is_an_error_that_names_the_problem(sizes, times, bounds, message):
    with pytest.raises(ValueError, match=message):
        fit_latency_bandwidth(sizes, times, **bounds)


def test_table_lists_observed_and_fitted_times():
    times = line(25.0, 1000.0)
    table = fit_table(fit_latency_bandwidth(SIZES, times, min_size=1024, max_size=1048576))
    lines = table.splitlines()
    assert lines[0] == "latency 25 us, bandwidth 1000 MB/s over 1024-1048576 bytes (11 points, largest error 0.0%)"
    assert "MB = 10^6 bytes" in lines[1]
    assert lines[3].split() == ["bytes", "observed", "us", "fitted", "us", "error"]
    assert "        1024        26.024        26.024     +0.0%" in lines
    assert "           0        25.000        25.000     +0.0%  (not fitted)" in lines
    assert "poor fit" not in table
