"""The daisy chain's saturation is a finding, named after the node that
joined where the aggregate stopped growing, and silent while it grows."""

from __future__ import annotations

import pytest

from oddnode.findings import Sensitivity, get_rule
from oddnode.measure.pair.switchbench import run_chain
from oddnode.readings.switchbench import chain_scaling
from oddnode.core.model import Severity
from oddnode.store import open_store
from oddnode.reach.base import Target
from support.clusters.switchbench import CHAIN, NODES, SwitchCluster


def chain_dataset(tmp_path, nodes):
    with open_store(tmp_path / "chain.duckdb") as store:
        run_chain(store, Target(nodes, SwitchCluster()), 1, options=CHAIN)
        return store.load_dataset()


@pytest.mark.slow
def test_a_full_switch_is_named_where_the_chain_stops_scaling(tmp_path):
    # The scripted switch carries 4000 MB/s: four 1000 MB/s hops fill it at
    # k = 5, and the sixth node adds nothing.
    dataset = chain_dataset(tmp_path, NODES)
    (finding,) = get_rule("switch-saturation")(dataset, Sensitivity())
    assert finding.kind == "switch-saturation" and finding.severity is Severity.WARNING
    assert finding.nodes == "node06" and finding.subject == "chain:bandwidth.aggregate"
    assert finding.evidence["saturation"] == 6 and finding.evidence["fell"] is False
    assert finding.evidence["hop"] == pytest.approx(1000.0, rel=1e-3)
    assert "stops scaling at k = 6" in finding.message and "4000 MB/s (k = 5)" in finding.message
    assert chain_scaling(dataset).joined_at_saturation == ("node06",)


@pytest.mark.slow
def test_a_chain_that_grows_with_every_node_gives_no_finding(tmp_path):
    dataset = chain_dataset(tmp_path, NODES[:5])
    scaling = chain_scaling(dataset)
    assert scaling.aggregate == pytest.approx({2: 1000.0, 3: 2000.0, 4: 3000.0, 5: 4000.0}, rel=1e-3)
    assert get_rule("switch-saturation")(dataset, Sensitivity()) == []


def test_no_chain_gives_no_finding(tmp_path):
    with open_store(tmp_path / "empty.duckdb") as store:
        assert get_rule("switch-saturation")(store.load_dataset(), Sensitivity()) == []
