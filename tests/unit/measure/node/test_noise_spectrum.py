"""The noise spectrum on synthetic detours with a known truth: the FTQ
series keeps every detour's lost time; the period of periodic detours with
jitter, among random ones, from a harmonic-rich train (its fundamental, not
a harmonic); a daemon under a faster periodic throttle, and two sources
side by side, as components of their own (not their beat); no period
claimed for random detours or slow drifts, over many seeds."""

from __future__ import annotations

import numpy as np
import pytest

from oddnode.parsers.oddnode_noise import BIN_SECONDS, dominant_period, ftq_series, periodic_components

WINDOW = 10.0  # seconds, the kernel's default run
QUANTUM = 10e-6  # the undisturbed quantum that holds each detour


def periodic(rng, period: float, lost: float, jitter: float = 0.0, window: float = WINDOW):
    """Detours every ``period`` from a random phase, each start moved by up
    to ``jitter`` either way (the mean period stays exact)."""
    starts = np.arange(rng.uniform(0, period), window - period, period)
    return starts + rng.uniform(-jitter, jitter, len(starts)), np.full(len(starts), lost)


def random_detours(rng, rate: float, mean_lost: float, window: float = WINDOW):
    """Poisson detours with exponential lengths: noise without a period."""
    count = rng.poisson(rate * window)
    return np.sort(rng.uniform(0, window, count)), rng.exponential(mean_lost, count)


def series_of(*parts, window: float = WINDOW):
    starts = np.concatenate([p[0] for p in parts])
    lost = np.concatenate([p[1] for p in parts])
    keep = (starts >= 0) & (starts < window)
    return ftq_series(starts[keep], lost[keep], lost[keep] + QUANTUM, window)


def spectrum(*parts, window: float = WINDOW):
    return dominant_period(series_of(*parts, window=window))


def components(*parts, window: float = WINDOW):
    return periodic_components(series_of(*parts, window=window))


def test_the_series_keeps_every_detours_lost_time_in_the_bins_it_covers():
    starts = np.array([0.0001, 0.0012, 0.0030])
    lost = np.array([0.0002, 0.0015, 0.00001])
    series = ftq_series(starts, lost, lost + QUANTUM, window=0.005, bin_width=0.001)
    assert len(series) == 5 and series.sum() == pytest.approx(lost.sum())
    assert series[0] == pytest.approx(0.0002)
    # The long detour spreads over its quantum [1.2, 2.71) ms: most in the second bin.
    assert series[1] == pytest.approx(0.0015 * 0.8 / 1.51, rel=1e-6)
    assert series[2] == pytest.approx(0.0015 * 0.71 / 1.51, rel=1e-6)
    assert series[3] == pytest.approx(0.00001) and series[4] == 0
    # Nothing past the window counts.
    assert ftq_series(np.array([0.006]), np.array([0.001]), np.array([0.001]), window=0.005,
                      bin_width=0.001).sum() == 0


@pytest.mark.parametrize("seed", range(20))
def test_periodic_detours_with_jitter_among_random_ones_give_their_period(seed):
    rng = np.random.default_rng(seed)
    found = spectrum(periodic(rng, 0.020, 0.0012, jitter=0.001), random_detours(rng, 2000, 3e-6),
                     random_detours(rng, 5, 0.002))
    assert found.period_s == pytest.approx(0.020, rel=0.01)
    assert found.share > 0.2 and found.significance > found.threshold


@pytest.mark.parametrize("seed", range(20))
def test_a_harmonic_rich_train_gives_its_fundamental_not_a_harmonic(seed):
    # 50 us detours every 20 ms: peaks of nearly equal height at 50, 100,
    # 150 ... 1000 Hz, any of which may be the highest.
    rng = np.random.default_rng(seed)
    found = spectrum(periodic(rng, 0.020, 50e-6), random_detours(rng, 2000, 3e-6))
    assert found.period_s == pytest.approx(0.020, rel=0.01)
    assert found.harmonics >= 10


@pytest.mark.parametrize("seed", range(10))
def test_a_daemon_under_a_faster_throttle_is_a_component_of_its_own(seed):
    # A CPU quota throttling every 10 ms, and a daemon every 20 ms: the
    # whole pattern repeats every 20 ms.  When the throttle's comb (100, 200,
    # ... Hz) holds nearly all of its power it is the dominant component and
    # the daemon's odd harmonics (50, 150, ... Hz) a second one; otherwise
    # the 20 ms comb holds both.  Either way 20 ms is found.
    rng = np.random.default_rng(seed)
    found = components(periodic(rng, 0.010, 0.00875, jitter=0.0002), periodic(rng, 0.020, 0.001, jitter=0.0005),
                       random_detours(rng, 2000, 3e-6))
    periods = [c.period_s for c in found]
    if periods[0] == pytest.approx(0.010, rel=0.01):
        assert periods[1:] == [pytest.approx(0.020, rel=0.01)]
    else:
        assert periods == [pytest.approx(0.020, rel=0.01)] and found[0].harmonics > 10
    # The throttle alone repeats every 10 ms, not 20 or 5.
    alone = components(periodic(rng, 0.010, 0.00875, jitter=0.0002), random_detours(rng, 2000, 3e-6))
    assert [c.period_s for c in alone] == [pytest.approx(0.010, rel=0.01)]


@pytest.mark.parametrize("seed", range(10))
def test_two_sources_are_two_components_not_their_beat(seed):
    # 0.3 ms every 7 ms beside a 4 ms timer tick: together they repeat every
    # 28 ms, whose comb holds both; the dominant period is the 7 ms one.
    rng = np.random.default_rng(seed)
    found = components(periodic(rng, 0.007, 0.0003), periodic(rng, 0.004, 3e-6, jitter=2e-6),
                       random_detours(rng, 500, 2e-6))
    assert found[0].period_s == pytest.approx(0.007, rel=0.01)
    assert all(c.period_s == pytest.approx(0.004, rel=0.01) for c in found[1:])


def test_a_weak_period_among_random_detours_is_still_found():
    rng = np.random.default_rng(1)
    found = spectrum(periodic(rng, 0.020, 5e-6), random_detours(rng, 2000, 3e-6))
    assert found.period_s == pytest.approx(0.020, rel=0.01)
    assert found.share < 0.2  # most of the lost time is not periodic


@pytest.mark.parametrize("period", [0.0025, 0.003, 0.0047, 0.1, 0.45])
def test_periods_from_two_and_a_half_milliseconds_to_a_twentieth_of_the_window(period):
    # Each detour takes 2% of its period (0.3 ms at the least), 2% jitter.
    rng = np.random.default_rng(7)
    found = spectrum(periodic(rng, period, max(0.0003, 0.02 * period), jitter=period / 50),
                     random_detours(rng, 1000, 3e-6))
    assert found.period_s == pytest.approx(period, rel=0.01)


@pytest.mark.slow
def test_no_period_is_claimed_for_random_detours_over_many_seeds():
    claimed = []
    for seed in range(300):
        rng = np.random.default_rng(1000 + seed)
        found = spectrum(random_detours(rng, 2000, 3e-6), random_detours(rng, 20, 1e-3))
        if found.period_s is not None:
            claimed.append((seed, found.period_s))
    # A lone significant peak (alpha = 1e-3 per spectrum) is no period: a
    # comb of two or more harmonics is wanted.
    assert claimed == []


def test_no_period_for_slow_drifts_of_the_load():
    # Bursts of lost time lasting seconds (another job starting): power at
    # the lowest frequencies only, under MIN_CYCLES cycles per window.
    rng = np.random.default_rng(3)
    starts = np.sort(rng.uniform(0, WINDOW, 4000))
    lost = np.where((starts > 2.0) & (starts < 5.5), 2e-4, 2e-6) * rng.exponential(1.0, len(starts))
    found = dominant_period(ftq_series(starts, lost, lost + QUANTUM, WINDOW))
    assert found.period_s is None


def test_nothing_to_judge_gives_no_period():
    assert dominant_period(np.zeros(20000)).period_s is None
    assert dominant_period(np.ones(20000)).period_s is None
    assert dominant_period(np.zeros(10)).period_s is None  # too short a series
    assert dominant_period(np.full(20000, np.nan)).period_s is None
    found = dominant_period(np.zeros(20000))
    assert found.to_json()["period_ms"] is None and found.to_json()["spectrum_bin_ms"] == BIN_SECONDS * 1e3
