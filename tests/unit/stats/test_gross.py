"""Gross outliers: a node an order of magnitude from its peers is found
whatever their spread, and healthy spreads, however wide, are left alone."""

import numpy as np
import pytest

from oddnode.stats.gross import gross_high, gross_low, peer_ratio

# The testbed's disk stage, best of 3 (MB/s): node05 at a tenth, node07 fast.
TESTBED_READS = np.array([713.9, 713.9, 633.1, 906.9, 65.8, 645.3, 1813.8, 664.4])


def test_the_testbed_slow_disk_is_found_despite_a_fast_node():
    assert gross_low(TESTBED_READS).tolist() == [4]
    assert peer_ratio(TESTBED_READS, 4) == pytest.approx(10.85, rel=0.01)


@pytest.mark.parametrize("n", [3, 5, 8, 30, 484])
def test_a_node_at_a_thirtieth_is_found_at_every_size(n):
    rng = np.random.default_rng(n)
    values = rng.lognormal(np.log(1000), 0.3, n)  # a wide healthy spread
    values[n // 2] = np.median(values) / 30
    assert gross_low(values).tolist() == [n // 2]
    assert gross_high(1 / values).tolist() == [n // 2]


def test_two_broken_nodes_do_not_hide_each_other():
    values = np.array([1000, 980, 1010, 990, 35, 1005, 30, 995, 1002, 999], dtype=float)
    assert gross_low(values).tolist() == [4, 6]


def test_a_broken_node_next_to_a_merely_slow_one():
    values = np.array([1000, 980, 1010, 990, 30, 500, 995, 1002], dtype=float)
    assert gross_low(values).tolist() == [4]


@pytest.mark.slow
def test_healthy_spreads_are_left_alone():
    rng = np.random.default_rng(7)
    for _ in range(3000):
        n = int(rng.integers(3, 500))
        # A log-normal spread of 30%: noisier than any healthy cluster's nodes
        # (the testbed's shared disk varies about that much between nodes).
        values = rng.lognormal(np.log(100), 0.3, n)
        assert len(gross_low(values)) == 0 and len(gross_high(values)) == 0


def test_two_modes_an_order_of_magnitude_apart_are_not_gross():
    # Half the nodes slow is a second kind of node, not an outlier.
    values = np.array([10, 11, 10.5, 9.8, 100, 101, 99, 102], dtype=float)
    assert len(gross_low(values)) == 0 and len(gross_high(values)) == 0


def test_a_continuous_tail_is_left_to_the_statistical_tests():
    # 40 stands apart, a 25th of its peers; 120, an 8th, is the statistics' to judge.
    values = np.array([1000, 990, 1010, 120, 40, 1005, 995, 1002], dtype=float)
    assert gross_low(values).tolist() == [4]
    # 90 is a 11th of its peers but only 2.2 times below the next node: a tail.
    assert gross_low(np.array([1000, 990, 1010, 200, 90, 1005, 995, 1002.0])).tolist() == []


def test_values_without_a_ratio_are_never_gross():
    assert len(gross_low(np.array([0.0, 100, 101, 99, 102]))) == 0
    assert len(gross_low(np.array([-5.0, 100, 101, 99, 102]))) == 0
    assert len(gross_low(np.array([np.nan, 1.0, 100, 101, 99]))) == 1
    assert len(gross_low(np.array([1.0, 100]))) == 0
