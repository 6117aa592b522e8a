from oddnode.findings import find_all
from oddnode.core.model import Dataset, NodeStage, Severity


def test_unanswered_nodes_are_errors_folded_by_stage_and_status():
    dataset = Dataset(node_trouble={
        "node03": NodeStage("inventory", "unreachable", "ssh: connect to host node03 port 22: Connection refused"),
        "node04": NodeStage("inventory", "unreachable", "ssh: connect to host node04 port 22: Connection refused"),
        "node07": NodeStage("inventory", "timeout", "cut after 5 s"),
    })
    findings = find_all(dataset, rules=["node-trouble"])
    by_kind = {f.kind: f for f in findings}
    assert set(by_kind) == {"unreachable", "timeout"}
    assert by_kind["unreachable"].nodes == "node[03-04]"
    assert by_kind["unreachable"].severity is Severity.ERROR
    assert "Connection refused" in by_kind["unreachable"].message
    assert by_kind["timeout"].nodes == "node07" and by_kind["timeout"].subject == "inventory"


def test_no_trouble_no_finding():
    assert find_all(Dataset(), rules=["node-trouble"]) == []
