"""noisy-node on synthetic stored data with a known truth: a node whose OS
takes more of its CPUs' time (or interrupts them more often), named with its
period and detours in words; healthy clusters over many seeds give none;
foreign node names; the outlier rule's finding on the same series is a
symptom of it, not a second problem; a process-asymmetry finding on the node
is the cause of both."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from oddnode.judge.analysis import analyze
from oddnode.findings import find_all
from oddnode.findings.noise import KIND, node_noise, pattern
from oddnode.findings.problems import group_problems
from oddnode.findings.related import explain_by_processes
from oddnode.readings.noise_series import LOST_FRACTION
from oddnode.core.model import DETAILED_SERIES, Dataset, Direction, Finding, LabelKind, Severity
from oddnode.core.nodes import expand
from support.noise_data import REPETITIONS, TICK_MS, noise_cluster


def nodes_of(count: int, name: str = "node{:02d}") -> list[str]:
    return [name.format(i) for i in range(1, count + 1)]


DAEMON = {"lost": 2.6, "rate": 1050.0, "period_ms": 20.0, "detour_us": 1200.0}


def noisy_findings(dataset: Dataset) -> list[Finding]:
    return [f for f in find_all(dataset) if f.kind == KIND]


def test_the_noisy_node_is_named_with_its_period_and_detours_in_words():
    nodes = nodes_of(16)
    (finding,) = noisy_findings(noise_cluster(nodes, np.random.default_rng(1), {"node07": DAEMON}))
    assert finding.nodes == "node07" and finding.severity is Severity.WARNING
    assert finding.subject == LOST_FRACTION
    assert "every 20 ms, 1.2 ms detours" in finding.message
    assert "the other nodes: every 4 ms" in finding.message
    evidence = finding.evidence
    assert evidence["period_ms"] == pytest.approx(20.0) and evidence["others_period_ms"] == pytest.approx(4.0, rel=0.01)
    assert evidence["detour_us"] == pytest.approx(1200, rel=0.05)
    assert evidence["nodes"]["node07"]["detour_median_us"] == pytest.approx(3.0)
    node = evidence["nodes"]["node07"]
    assert node["lost_fraction"]["value"] == pytest.approx(2.6, rel=0.05)
    assert node["lost_fraction"]["median"] == pytest.approx(2.0, rel=0.05)
    assert node["period_ms"] == pytest.approx(20.0) and node["repetitions"] == REPETITIONS
    assert "oddnode processes" in finding.remedy and "every 20 ms" in finding.remedy


def test_a_node_interrupted_more_often_but_for_no_longer_is_noisy_too():
    nodes = nodes_of(12)
    frequent = {"lost": 2.0, "rate": 2500.0, "period_ms": None, "detour_us": 5.0}
    (finding,) = noisy_findings(noise_cluster(nodes, np.random.default_rng(2), {"node03": frequent}))
    assert finding.nodes == "node03" and set(finding.evidence["nodes"]["node03"]) >= {"detour_rate"}
    assert "lost_fraction" not in finding.evidence["nodes"]["node03"]
    assert "5 us detours, no period" in finding.message


def test_nodes_with_the_same_period_are_one_finding_and_another_period_another():
    nodes = nodes_of(24)
    other = dict(DAEMON, period_ms=100.0, detour_us=4000.0)
    findings = noisy_findings(noise_cluster(nodes, np.random.default_rng(3),
                                            {"node05": DAEMON, "node06": DAEMON, "node17": other}))
    assert {(f.nodes, round(f.evidence["period_ms"])) for f in findings} == {("node[05-06]", 20), ("node17", 100)}
    (hundred,) = [f for f in findings if f.nodes == "node17"]
    assert "every 100 ms, 4 ms detours" in hundred.message


@pytest.mark.slow
@pytest.mark.parametrize("count", [8, 16, 64])
def test_healthy_clusters_give_no_noisy_node_over_many_seeds(count):
    alarms = []
    for seed in range(100):
        findings = noisy_findings(noise_cluster(nodes_of(count, "node{:03d}"), np.random.default_rng(seed)))
        alarms += [(seed, f.nodes) for f in findings]
    assert alarms == []


@pytest.mark.parametrize("names", [
    ["cn-a17", "cn-a2", "cn-b9", "cn-b10", "cn-c01", "cn-c02", "cn-d7", "cn-d8", "cn-e1", "cn-e2", "cn-e3", "cn-e4"],
    expand("gpu[003-014]"),
])
def test_foreign_node_names(names):
    odd = names[5]
    (finding,) = noisy_findings(noise_cluster(names, np.random.default_rng(4), {odd: DAEMON}))
    assert finding.nodes == odd and odd in finding.evidence["nodes"]
    assert "every 20 ms" in finding.message


def test_without_parameters_the_node_is_still_named_without_a_period():
    nodes = nodes_of(16)
    dataset = noise_cluster(nodes, np.random.default_rng(5), {"node07": DAEMON})
    dataset.details = {}
    (finding,) = noisy_findings(dataset)
    assert finding.nodes == "node07" and finding.evidence["period_ms"] is None
    assert "no period" in finding.message and "the other nodes: no common period" in finding.message


def test_a_nodes_period_is_the_median_of_the_repetitions_that_found_one_when_half_did():
    assert node_noise([{"period_ms": 20.0}, {"period_ms": 21.0}, {"period_ms": None}]).period_ms == 20.5
    assert node_noise([{"period_ms": 20.0}, {"period_ms": None}, {"period_ms": None}]).period_ms is None
    assert node_noise([]).period_ms is None
    noise = node_noise([{"period_ms": 100.0, "detour_lost_median_us": 850.0, "detour_median_us": 2.0}])
    assert pattern(noise) == "every 100 ms, 850 us detours"
    assert pattern(dataclasses.replace(noise, period_ms=2500.0, detour_us=1.5e6)) == "every 2.5 s, 1.5 s detours"
    # Outputs stored before the lost-weighted median: the plain one.
    assert node_noise([{"period_ms": 20.0, "detour_median_us": 40.0}]).detour_us == 40.0


def test_the_outlier_on_the_same_series_is_a_symptom_not_a_second_problem():
    nodes = nodes_of(16)
    analysis = analyze(noise_cluster(nodes, np.random.default_rng(1), {"node07": DAEMON}), correlations=False)
    kinds = {(f.kind, f.subject) for f in analysis.findings if f.nodes == "node07"}
    assert (KIND, LOST_FRACTION) in kinds and ("outlier", LOST_FRACTION) in kinds
    (problem,) = [p for p in analysis.problems if "node07" in p.nodes]
    assert [f.kind for f in problem.cause] == [KIND]
    assert {f.kind for f in problem.symptoms} == {"outlier"}
    assert problem.summary == ("OS noise (every 20 ms, 1.2 ms detours) shows in noise (3 benchmarks): "
                               "3 findings it explains")
    assert len(analysis.problems) == 1


def asymmetry(node: str) -> Finding:
    """A process-asymmetry finding as its rule writes one (kind, nodes, fingerprint)."""
    return Finding(kind="process-asymmetry", severity=Severity.WARNING, subject="processes", nodes=node,
                   message=f"{node} runs commands far more often than the other nodes: basename 50×, sed 50×",
                   evidence={"fingerprint": [{"command": "basename", "ratio": 50.0},
                                             {"command": "sed", "ratio": 50.0}]},
                   remedy="Find what spawns basename, sed.")


def test_a_process_asymmetry_on_the_node_is_the_cause_of_the_noise_and_its_echoes():
    nodes = nodes_of(16)
    findings = find_all(noise_cluster(nodes, np.random.default_rng(1), {"node07": DAEMON}))
    related = explain_by_processes(findings + [asymmetry("node07")])
    (noisy,) = [f for f in related if f.kind == KIND]
    assert noisy.evidence["frequent_processes"] == {"node07": ["basename", "sed"]}
    (problem,) = group_problems(related)
    assert [f.kind for f in problem.cause] == ["process-asymmetry"]
    assert {f.kind for f in problem.symptoms} == {KIND, "outlier"}
    # On another node, the asymmetry explains nothing of the noise.
    elsewhere = group_problems(explain_by_processes(findings + [asymmetry("node02")]))
    assert {tuple(f.kind for f in p.cause) for p in elsewhere} == {("process-asymmetry",), (KIND,)}


def test_the_details_are_loaded_from_the_store_for_the_noise_series(store):
    from oddnode.store import ResultBatch

    assert LOST_FRACTION in DETAILED_SERIES
    run = store.new_run("oddnode check [noise]", nodes=["cn-a1", "cn-a2"])
    batch = ResultBatch()
    for repetition in (1, 2):
        for node, period in (("cn-a1", 20.0), ("cn-a2", None)):
            batch.add(LOST_FRACTION, node, 2.0 + repetition, unit="%", direction=Direction.LOWER,
                      label_kind=LabelKind.NODE, repetition=repetition, valid=True,
                      parameters={"period_ms": period, "detour_median_us": 5.0})
    batch.add(LOST_FRACTION, "cn-a2", None, unit="%", direction=Direction.LOWER, label_kind=LabelKind.NODE,
              repetition=3, valid=False, parameters={"error": "exited"})
    with store.transaction():
        store.add_results(run, batch)
    details = store.load_dataset().details[LOST_FRACTION]
    assert [d["period_ms"] for d in details["cn-a1"]] == [20.0, 20.0]
    assert [d["period_ms"] for d in details["cn-a2"]] == [None, None]  # the failed repetition is not there


def test_a_group_of_noisy_nodes_forms_the_worse_mode_and_is_named_as_one():
    # Seaborg's case: a whole kind of node runs the spawning subsystem.
    nodes = nodes_of(30)
    old = [f"node{i:02d}" for i in range(21, 31)]
    (finding,) = noisy_findings(noise_cluster(nodes, np.random.default_rng(6), dict.fromkeys(old, DAEMON)))
    assert finding.nodes == "node[21-30]"
    assert {entry["lost_fraction"]["how"] for entry in finding.evidence["nodes"].values()} == {"mode"}
    assert "node[21-30] lose more CPU time" in finding.message and "every 20 ms" in finding.message


def test_the_period_the_other_nodes_lack_is_named_beside_the_common_one():
    # node07's dominant period is the timer tick every node has; beside it,
    # a second component every 20 ms, which is its own.
    nodes = nodes_of(16)
    both = dict(DAEMON, period_ms=TICK_MS,
                periods=[{"period_ms": TICK_MS, "share": 0.5, "harmonics": 40},
                         {"period_ms": 20.0, "share": 0.2, "harmonics": 12}])
    (finding,) = noisy_findings(noise_cluster(nodes, np.random.default_rng(8), {"node07": both}))
    assert "every 20 ms, 1.2 ms detours (the other nodes: every 4 ms)" in finding.message
    node = finding.evidence["nodes"]["node07"]
    assert node["period_ms"] == 20.0 and node["period_share"] == 0.2
    assert node["dominant_period_ms"] == TICK_MS and [p["period_ms"] for p in node["periods"]] == [TICK_MS, 20.0]


def test_a_period_found_in_fewer_than_half_of_the_repetitions_is_not_the_nodes():
    reps = [{"periods": [{"period_ms": 20.0, "share": 0.4}, {"period_ms": 7.0, "share": 0.1}]},
            {"periods": [{"period_ms": 20.4, "share": 0.3}]},
            {"periods": []}]
    noise = node_noise(reps)
    assert [round(p) for p, _ in noise.periods] == [20] and noise.period_ms == pytest.approx(20.2)
