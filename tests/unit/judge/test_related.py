"""A competing process named in the findings it may cause: a node that runs a
command the others do not gets it in its slow results' evidence and remedy;
nothing else is touched."""

from __future__ import annotations

import numpy as np

from oddnode.judge.analysis import analyze
from oddnode.core.model import Dataset, Direction
from support.series import make_series, node_names, pair_series, warnings_and_errors
from support.series import memory, processes


def by_kind(findings):
    return {(f.kind, f.nodes): f for f in warnings_and_errors(findings)}


def test_a_slow_node_running_a_command_the_others_do_not_is_told_to_stop_it_first():
    nodes = node_names(16)
    dataset = Dataset(series=[memory(nodes, {"node005": 0.4})],
                      facts=processes(nodes, {"stress-ng": ["node005"], "kworker-x": ["node005"]}))
    findings = by_kind(analyze(dataset, correlations=False).findings)
    outlier = findings[("outlier", "node005")]
    assert outlier.evidence["competing_processes"] == {"node005": ["kworker-x", "stress-ng"]}
    assert outlier.remedy.startswith("node005 runs kworker-x, stress-ng, which the other nodes do not "
                                     "(inconsistent-fact process.kworker-x, process.stress-ng)")
    assert "If the result stays poor: " in outlier.remedy
    # The process findings themselves are as the fact rule made them.
    process = findings[("inconsistent-fact", "node005")]
    assert "competing_processes" not in process.evidence and process.remedy.startswith("A command")


def test_without_such_a_command_the_remedy_is_the_rules_own():
    nodes = node_names(16)
    related = analyze(Dataset(series=[memory(nodes, {"node005": 0.4})],
                              facts=processes(nodes, {"stress-ng": ["node009"]})), correlations=False)
    alone = analyze(Dataset(series=[memory(nodes, {"node005": 0.4})]), correlations=False)
    (outlier,) = [f for f in related.findings if f.kind == "outlier"]
    (reference,) = [f for f in alone.findings if f.kind == "outlier"]
    assert outlier.remedy == reference.remedy and "competing_processes" not in outlier.evidence


def test_a_missing_daemon_or_a_faster_node_is_not_explained_by_a_process():
    nodes = node_names(16)
    # node003 lacks a daemon every other node runs; node005 is faster than
    # the rest and runs an extra command: neither is slowed by a process.
    facts = processes(nodes, {"stress-ng": ["node005"]}, everywhere=("sshd", "munged"))
    del facts["process.munged"]["node003"]
    dataset = Dataset(series=[memory(nodes, {"node003": 0.4, "node005": 1.5})], facts=facts)
    findings = by_kind(analyze(dataset, correlations=False).findings)
    assert findings[("outlier", "node003")].evidence.get("competing_processes") is None
    faster = findings[("outlier", "node005")]
    assert faster.evidence["worse"] is False and "competing_processes" not in faster.evidence


def test_a_weak_pair_member_running_a_command_the_others_do_not_is_told_to_stop_it_first():
    rng = np.random.default_rng(21)
    nodes = node_names(64)
    series = pair_series(nodes, rng, slowdown=lambda a, b: 0.37 if "node040" in (a, b) else 1.0, cv=0.01)
    dataset = Dataset(series=series, facts=processes(nodes, {"backup-agent": ["node040"]}))
    weak = by_kind(analyze(dataset, correlations=False).findings)[("weak-pair-member", "node040")]
    assert weak.evidence["competing_processes"] == {"node040": ["backup-agent"]}
    assert weak.remedy.startswith("node040 runs backup-agent") and "reseat or swap its cable" in weak.remedy


def test_lower_is_better_series_are_related_on_their_worse_side():
    nodes = node_names(16)
    rng = np.random.default_rng(4)
    seconds = rng.normal(40.0, 0.4, 16)
    seconds[nodes.index("node011")] = 80.0
    dataset = Dataset(series=[make_series("npb.cg", nodes, seconds, direction=Direction.LOWER, unit="s")],
                      facts=processes(nodes, {"stress-ng": ["node011"]}))
    outlier = by_kind(analyze(dataset, correlations=False).findings)[("outlier", "node011")]
    assert outlier.evidence["competing_processes"] == {"node011": ["stress-ng"]}


def test_a_finding_whose_nodes_are_not_a_node_set_is_left_as_it_is():
    from oddnode.findings.related import explain_by_processes
    from oddnode.core.model import Finding, Severity

    odd = Finding("weak-pair-member", Severity.WARNING, "pingpong.sort:bandwidth.65536", "node 05 (bad name)",
                  "message", {}, "remedy")
    process = Finding("inconsistent-fact", Severity.WARNING, "process.stress-ng", "node05", "m",
                      {"majority": "not running", "minority": {"running": "node05"}}, "r")
    assert explain_by_processes([odd, process]) == [odd, process]
