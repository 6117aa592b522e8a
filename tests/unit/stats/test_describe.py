import numpy as np
import pytest

from oddnode.core.model import Direction, Failure, LabelKind, Series
from oddnode.stats.common import common_nodes
from oddnode.stats.describe import describe, describe_values


def test_description_matches_numpy():
    rng = np.random.default_rng(4)
    values = rng.normal(2077.0, 23.0, 484)
    d = describe_values(values)
    assert d.n == 484
    assert d.low == values.min() and d.high == values.max()
    assert d.variability_pct == pytest.approx((values.max() - values.min()) / values.min() * 100, rel=1e-12)
    assert d.mean == pytest.approx(np.mean(values), rel=1e-12)
    assert d.median == pytest.approx(np.median(values), rel=1e-12)
    assert d.std == pytest.approx(np.std(values, ddof=1), rel=1e-12)


def test_description_of_a_series_and_edge_cases():
    s = Series("x", "value", "s", Direction.LOWER, LabelKind.NODE, np.array(["a", "b"], dtype=object),
               np.array([2.0, 4.0]), np.ones(2, dtype=np.int64))
    d = describe(s)
    assert (d.n, d.low, d.high, d.variability_pct, d.std) == (2, 2.0, 4.0, 100.0, pytest.approx(np.sqrt(2)))
    one = describe_values(np.array([5.0]))
    assert (one.n, one.std, one.variability_pct) == (1, 0.0, 0.0)
    assert describe_values(np.array([])).n == 0


def _failure(label, kind, members):
    return Failure("bt.B.16", label, kind, 1, members)


def test_common_nodes_counts_every_member_most_frequent_first():
    failures = [
        _failure("node483", LabelKind.NODE, ("node483",)),
        _failure("node483-node174", LabelKind.PAIR, ("node483", "node174")),
        _failure("node[174,391,483]", LabelKind.SET, ("node174", "node391", "node483")),
        _failure("node391", LabelKind.NODE, ("node391",)),
    ]
    assert common_nodes(failures) == [("node483", 3), ("node174", 2), ("node391", 2)]
    assert common_nodes([]) == []
