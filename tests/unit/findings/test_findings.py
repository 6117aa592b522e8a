"""Finding rules on synthetic clusters with known truth: each fault planted
is found, with its exact nodes, and healthy clusters raise no warning."""

from __future__ import annotations

import json

import numpy as np
import pytest

from oddnode.findings import RULES, Sensitivity, UnknownRuleError, find_all
from oddnode.core.model import Dataset, Direction, Failure, LabelKind, NodeStage, Series, Severity
from oddnode.core.nodes import fold
from support.series import make_series, node_names, pair_series, warnings_and_errors

# ---------------------------------------------------------------- builders


def chassis_topology(nodes: list[str], size: int) -> dict[str, str]:
    return {node: f"BC{i // size + 1}" for i, node in enumerate(nodes)}


def healthy_dataset(n: int, seed: int, pairs: bool = True) -> Dataset:
    """n identical nodes with normal noise (CV 1–5%), consistent facts, a topology."""
    rng = np.random.default_rng(seed)
    nodes = node_names(n)
    series = [
        make_series("stream", nodes, rng.normal(2000.0, 2000.0 * rng.uniform(0.01, 0.05), n)),
        make_series(
            "npb.cg",
            nodes,
            rng.normal(40.0, 40.0 * rng.uniform(0.01, 0.05), n),
            direction=Direction.LOWER,
            unit="s",
        ),
    ]
    if pairs:
        series += pair_series(nodes, rng, cv=rng.uniform(0.01, 0.05))
    facts = {"bios_date": {node: "10/21/2004" for node in nodes}}
    return Dataset(series=series, facts=facts, topology=chassis_topology(nodes, max(4, min(14, n // 4))))


def kinds(findings, kind):
    return [f for f in findings if f.kind == kind]


# ---------------------------------------------------------------- healthy clusters


@pytest.mark.slow
@pytest.mark.parametrize("n", [8, 12, 50, 484])
def test_no_false_alarms_on_healthy_clusters(n):
    alarms = []
    for seed in range(200):
        alarms += [(seed, f.kind, f.message) for f in warnings_and_errors(find_all(healthy_dataset(n, seed)))]
    assert alarms == []


@pytest.mark.parametrize("n", [2000, 10_000])
def test_no_false_alarms_on_large_healthy_clusters(n):
    alarms = []
    for seed in range(3):
        alarms += [(seed, f.kind, f.message) for f in warnings_and_errors(find_all(healthy_dataset(n, seed)))]
    assert alarms == []


@pytest.mark.slow
def test_odd_sizes_and_tiny_clusters_raise_nothing():
    for n in (2, 3, 5, 9, 13, 21, 201):
        for seed in range(20):
            assert warnings_and_errors(find_all(healthy_dataset(n, seed, pairs=n % 2 == 0))) == []


# ---------------------------------------------------------------- outlier


@pytest.mark.parametrize("n", [12, 50, 484, 10_000])
def test_outlier_names_the_slow_node_and_its_side(n):
    rng = np.random.default_rng(7)
    nodes = node_names(n)
    values = rng.normal(2000.0, 20.0, n)
    odd = nodes[n // 3]
    values[n // 3] = 1400.0  # 30% slower
    found = kinds(find_all(Dataset(series=[make_series("stream", nodes, values)])), "outlier")
    assert [f.nodes for f in found] == [odd]
    finding = found[0]
    assert finding.severity is Severity.WARNING
    assert finding.evidence["side"] == "low" and finding.evidence["worse"] is True
    assert "worse (low)" in finding.message
    assert finding.evidence["nodes"][odd]["deviation_pct"] == pytest.approx(-30.0, abs=3.0)
    assert {"median", "mad", "test", "threshold", "nodes", "side"} <= set(finding.evidence)
    node = finding.evidence["nodes"][odd]
    if n <= 30:  # the worse side of a small population: the generalized ESD test
        assert finding.evidence["test"] == "generalized ESD"
        assert node["esd_statistic"] > node["esd_critical"] == finding.evidence["threshold"]
        assert "σ of the nodes above it" in finding.message and "generalized ESD test over 12 nodes" in finding.message
    else:
        assert finding.evidence["test"] == "modified z"
        assert node["modified_z"] < -finding.evidence["threshold"]


@pytest.mark.parametrize("seed", range(5))
def test_a_node_at_half_bandwidth_among_eight_is_named_although_the_others_scatter(seed):
    # Seven nodes scattering by 3% (their standard deviation) and one at half
    # their bandwidth, 16.7 σ below them: the modified z-score would need 27
    # (the MAD of 8 values is that noisy), the generalized ESD test at
    # alpha/2 needs 15.4.
    rng = np.random.default_rng(seed)
    nodes = node_names(8)
    others = rng.normal(0.0, 1.0, 7)
    others = 1.0 + 0.03 * (others - others.mean()) / others.std(ddof=1)
    values = np.insert(others, 5, 0.5)
    found = kinds(find_all(Dataset(series=[make_series("stream", nodes, values)])), "outlier")
    assert [f.nodes for f in found] == [nodes[5]]


def test_two_slow_nodes_among_eight_are_both_named():
    nodes = node_names(8)
    values = np.array([1.00, 1.02, 0.98, 1.01, 0.99, 1.00, 0.51, 0.50])
    found = kinds(find_all(Dataset(series=[make_series("stream", nodes, values)])), "outlier")
    assert [f.nodes for f in found] == [fold(nodes[6:])]


@pytest.mark.parametrize("n", [8, 16, 30])
def test_a_fast_node_does_not_hide_a_slow_one(n):
    # The fast node, an outlier on the better side, would widen the others'
    # standard deviation in the worse side's ESD test.
    rng = np.random.default_rng(n)
    nodes = node_names(n)
    values = rng.normal(2000.0, 20.0, n)
    values[1], values[2] = 3500.0, 800.0
    found = {(f.nodes, f.evidence["side"]) for f in kinds(find_all(Dataset(series=[make_series("stream", nodes,
                                                                                                  values)])), "outlier")}
    assert found == {(nodes[1], "high"), (nodes[2], "low")}


def test_outlier_on_a_lower_is_better_metric_is_worse_on_the_high_side():
    rng = np.random.default_rng(3)
    nodes = node_names(50)
    values = rng.normal(40.0, 0.4, 50)
    values[4] = 52.0
    values[30] = 30.0
    found = kinds(find_all(Dataset(series=[make_series("cg", nodes, values, direction=Direction.LOWER)])), "outlier")
    by_side = {f.evidence["side"]: f for f in found}
    assert by_side["high"].nodes == "node005" and by_side["high"].evidence["worse"] is True
    assert by_side["low"].nodes == "node031" and by_side["low"].evidence["worse"] is False


def test_outlier_below_min_effect_is_not_a_warning():
    rng = np.random.default_rng(5)
    nodes = node_names(484)
    values = rng.normal(2000.0, 0.4, 484)  # CV 0.02%: 0.5% is many sigmas but small
    values[10] = 1990.0
    dataset = Dataset(series=[make_series("stream", nodes, values)])
    assert kinds(find_all(dataset), "outlier") == []
    assert [f.nodes for f in kinds(find_all(dataset, Sensitivity(min_effect=0.001)), "outlier")] == ["node011"]


# ---------------------------------------------------------------- bimodal


def case_study_stream(seed: int, with_faults: bool = True) -> tuple[list[str], Series]:
    """484 nodes; node001-node084 have a faster memory configuration; node224 has less memory.

    The spread (CV 0.4%) matches the case study's 5.7% variability for a 4.4%
    gap; the dip test needs about 7 sigma between modes of 84 and 400 nodes.
    """
    rng = np.random.default_rng(seed)
    nodes = node_names(484)
    values = rng.normal(2060.0, 8.0, 484)
    if with_faults:
        values[:84] = rng.normal(2150.0, 8.0, 84)
        values[223] = 1700.0
    return nodes, make_series("stream.c", nodes, values)


def test_bimodal_names_the_second_mode_and_outliers_are_sought_within_modes():
    _, stream = case_study_stream(11)
    findings = find_all(Dataset(series=[stream]))
    bimodal = kinds(findings, "bimodal")
    assert len(bimodal) == 1
    finding = bimodal[0]
    assert finding.nodes == "node[001-084]"
    groups = {g["side"]: g for g in finding.evidence["groups"]}
    assert groups["high"]["nodes"] == "node[001-084]" and groups["high"]["size"] == 84
    assert groups["low"]["size"] == 400 and groups["low"]["nodes"] == "node[085-484]"
    assert finding.evidence["gap_pct"] == pytest.approx(4.4, abs=0.5)
    assert finding.evidence["ashman_d"] > 3 and finding.evidence["dip_p"] < 1e-4
    assert "faster mode" in finding.message and "node[085-484] (400 nodes" in finding.message
    # the 84 fast nodes are a mode, not outliers; node224 is an outlier within its mode
    outliers = kinds(findings, "outlier")
    assert [f.nodes for f in outliers] == ["node224"]
    assert outliers[0].evidence["mode"] == "low"
    assert kinds(findings, "skewed") == [] and kinds(findings, "not-normal") == []


def test_bimodal_needs_a_big_enough_minority_and_gap():
    rng = np.random.default_rng(2)
    nodes = node_names(484)
    values = rng.normal(2060.0, 15.0, 484)
    values[:5] = rng.normal(2300.0, 15.0, 5)  # 1% of the nodes: outliers, not a mode
    findings = find_all(Dataset(series=[make_series("stream", nodes, values)]))
    assert kinds(findings, "bimodal") == []
    assert [f.nodes for f in kinds(findings, "outlier")] == ["node[001-005]"]
    # two modes closer than min_effect are not worth a warning
    values = rng.normal(2060.0, 1.0, 484)
    values[:84] += 12.0  # 0.6% apart, 12 sigma
    dataset = Dataset(series=[make_series("stream", nodes, values)])
    assert kinds(find_all(dataset), "bimodal") == []
    assert len(kinds(find_all(dataset, Sensitivity(min_effect=0.001)), "bimodal")) == 1


# ---------------------------------------------------------------- skewed / not-normal


def test_skewed_and_not_normal_are_information():
    rng = np.random.default_rng(4)
    nodes = node_names(2000)
    skewed = make_series("iozone", nodes, 100.0 + rng.gamma(4.0, 2.0, 2000))
    flat = make_series("hpl", nodes, rng.uniform(90.0, 110.0, 2000))
    findings = find_all(Dataset(series=[skewed, flat]), rules=["normality"])
    by_subject = {f.subject: f for f in findings}
    assert by_subject["iozone"].kind == "skewed" and by_subject["iozone"].evidence["side"] == "high"
    assert by_subject["iozone"].evidence["test"] == "skewtest" and by_subject["iozone"].evidence["p"] < 1e-4
    assert by_subject["hpl"].kind == "not-normal" and by_subject["hpl"].evidence["test"] == "dagostino-pearson"
    assert all(f.severity is Severity.INFO for f in findings)


def test_normality_is_not_judged_on_a_bimodal_population():
    _, stream = case_study_stream(12)
    findings = find_all(Dataset(series=[stream]), rules=["normality"])
    assert findings == []


# ---------------------------------------------------------------- accuracy


def test_accuracy_names_single_node_failures_and_the_common_node_of_failed_sets():
    rng = np.random.default_rng(9)
    nodes = node_names(484)
    failures = [Failure("stream.omp", "node483", LabelKind.NODE, 3, ("node483",))]
    failures += [Failure("stream.c", "node100", LabelKind.NODE, 1, ("node100",))]
    for rep in range(12):
        others = [nodes[i] for i in rng.choice(480, 7, replace=False)]
        members = tuple(sorted(others + ["node483"]))
        failures.append(Failure("npb.bt", f"set{rep}", LabelKind.SET, rep, members))
    # two stray failures with nothing in common
    failures.append(Failure("npb.cg", "setA", LabelKind.SET, 0, tuple(nodes[200:208])))
    failures.append(Failure("npb.cg", "setB", LabelKind.SET, 0, tuple(nodes[300:308])))
    findings = kinds(find_all(Dataset(failures=failures)), "accuracy")
    assert all(f.severity is Severity.ERROR for f in findings)
    by_nodes = {f.nodes: f for f in findings}
    node483 = by_nodes["node483"]
    assert node483.evidence["single_node_runs"] == 1 and node483.evidence["multi_node_runs"] == 12
    assert node483.evidence["benchmarks"] == {"npb.bt": 12, "stream.omp": 1}
    assert "replace memory, processors, then system board" in node483.remedy
    assert by_nodes["node100"].evidence["runs"] == 1  # a single-node failure is named even once
    leftover = by_nodes["node[201-208,301-308]"]
    assert leftover.evidence["runs"] == 2 and leftover.evidence["benchmarks"] == {"npb.cg": 2}
    assert len(findings) == 3


def test_accuracy_greedy_cover_reads_like_xcommon():
    # node483 in 20 failed runs, node435 in 4 others, node073 in 2 more
    def run(i, members):
        return Failure("xhpl", f"set{i}", LabelKind.SET, i, tuple(sorted(members)))

    failures = [run(i, ["node483", f"node{100 + i:03d}"]) for i in range(20)]
    failures += [run(20 + i, ["node435", "node483" if i == 0 else f"node{200 + i:03d}"]) for i in range(5)]
    failures += [run(30 + i, ["node073", f"node{300 + i:03d}"]) for i in range(2)]
    findings = kinds(find_all(Dataset(failures=failures)), "accuracy")
    counts = {f.nodes: f.evidence["multi_node_runs"] for f in findings}
    assert counts == {"node483": 21, "node435": 4, "node073": 2}
    assert "multi-node" in findings[0].message and "single-node benchmarks" in findings[0].remedy


# ---------------------------------------------------------------- weak pairs and groups


def test_weak_pair_member_names_only_the_weak_node():
    rng = np.random.default_rng(21)
    nodes = node_names(484)
    series = pair_series(nodes, rng, slowdown=lambda a, b: 0.37 if "node406" in (a, b) else 1.0, cv=0.01)
    for topology in ({}, chassis_topology(nodes, 14)):
        findings = warnings_and_errors(find_all(Dataset(series=series, topology=topology)))
        assert [(f.kind, f.nodes) for f in findings] == [("weak-pair-member", "node406")]
        evidence = findings[0].evidence
        assert evidence["count"] == 4 and len(evidence["partners"]) == 4
        assert "node405" in evidence["partners"] and evidence["partner_max_count"] == 1
        assert sorted(evidence["series"]) == ["spp.cut.bw", "spp.fold.bw", "spp.shuffle.bw", "spp.sort.bw"]


def bc2_uplink(nodes: list[str], topology: dict[str, str]):
    def slowdown(a, b):
        crosses = topology[a] != topology[b]
        return 0.6 if crosses and "BC2" in (topology[a], topology[b]) else 1.0

    return slowdown


def test_weak_group_finds_a_bad_uplink_and_explains_its_nodes():
    nodes = node_names(484)
    topology = chassis_topology(nodes, 14)
    for seed in range(5):
        rng = np.random.default_rng(100 + seed)
        series = pair_series(nodes, rng, slowdown=bc2_uplink(nodes, topology), cv=0.03)
        findings = warnings_and_errors(find_all(Dataset(series=series, topology=topology)))
        assert [(f.kind, f.nodes) for f in findings] == [("weak-group", "node[015-028]")]
        finding = findings[0]
        assert finding.evidence["group"] == "BC2" and finding.evidence["uplink"] is True
        assert "uplink" in finding.message and "uplink" in finding.remedy
        assert finding.evidence["within_group_low"] == 0 and finding.evidence["within_group_pairs"] == 7
        assert {"spp.cut.bw", "spp.fold.bw"} <= set(finding.evidence["series"])


def test_without_a_topology_the_uplink_shows_as_weak_members():
    nodes = node_names(484)
    topology = chassis_topology(nodes, 14)
    rng = np.random.default_rng(31)
    series = pair_series(nodes, rng, slowdown=bc2_uplink(nodes, topology), cv=0.03)
    findings = warnings_and_errors(find_all(Dataset(series=series)))
    assert {f.kind for f in findings} == {"weak-pair-member"}
    assert {f.nodes for f in findings} <= set(nodes[14:28])
    assert len(findings) >= 10


def test_weak_group_of_slow_nodes_is_not_called_an_uplink():
    rng = np.random.default_rng(41)
    nodes = node_names(484)
    topology = chassis_topology(nodes, 14)
    values = rng.normal(2060.0, 15.0, 484)
    values[28:42] *= 0.85  # BC3 all slow (cooling)
    findings = find_all(Dataset(series=[make_series("stream", nodes, values)], topology=topology))
    groups = kinds(findings, "weak-group")
    assert [(f.nodes, f.evidence["group"], f.evidence["uplink"]) for f in groups] == [("node[029-042]", "BC3", False)]
    assert "uplink" not in groups[0].message


# ---------------------------------------------------------------- facts and missing


def test_inconsistent_fact_names_the_minority():
    nodes = node_names(484)
    bios = {node: "10/21/2004" for node in nodes}
    bios["node443"] = "09/02/2004"
    memory = {node: "1977204" for node in nodes}
    memory["node224"] = "1460116"
    memory["node300"] = "1460116"
    memory["node301"] = "1977208"
    kernel = {node: ("2.6.5" if i % 2 else "2.6.9") for i, node in enumerate(nodes)}
    same = {node: "ppc64" for node in nodes}
    facts = {"bios_date": bios, "mem_kb": memory, "kernel": kernel, "arch": same}
    findings = {f.subject: f for f in kinds(find_all(Dataset(facts=facts)), "inconsistent-fact")}
    assert set(findings) == {"bios_date", "mem_kb", "kernel"}
    bios_finding = findings["bios_date"]
    assert bios_finding.nodes == "node443"
    assert bios_finding.message == "all nodes but node443 have bios_date 10/21/2004; node443: 09/02/2004"
    assert bios_finding.evidence["majority"] == "10/21/2004"
    # node301's 4 kB more (2 ppm) is the same memory; the quarter less is not.
    assert findings["mem_kb"].nodes == "node[224,300]"
    assert findings["mem_kb"].evidence["minority"] == {"1460116": "node[224,300]"}
    assert "(1977204 to 1977208: one value, close)" in findings["mem_kb"].message
    tie = findings["kernel"]
    assert tie.evidence["majority"] is None and "no value" in tie.message
    assert tie.evidence["counts"] == {"2.6.5": 242, "2.6.9": 242}


def test_missing_groups_benchmarks_with_the_same_missing_nodes():
    rng = np.random.default_rng(8)
    nodes = node_names(50)
    without = lambda *gone: [n for n in nodes if n not in gone]  # noqa: E731

    def series(name, present):
        return make_series(name, present, rng.normal(100.0, 1.0, len(present)))

    data = Dataset(
        series=[
            series("stream.c", without("node015")),
            series("stream.omp", without("node015")),
            series("hpl", without("node015", "node046")),
            series("npb.ep", without("node033")),  # node033 failed npb.ep: accuracy, not missing
            series("dgemm", nodes),
        ],
        failures=[Failure("npb.ep", "node033", LabelKind.NODE, 1, ("node033",))],
        facts={"bios_date": {n: "x" for n in nodes + ["node051"]}},
    )
    found = {f.nodes: f for f in kinds(find_all(data), "missing")}
    assert set(found) == {"node[015,051]", "node[015,046,051]", "node051"}
    assert found["node[015,051]"].subject == "stream.c, stream.omp"
    assert found["node[015,051]"].evidence["benchmarks"] == ["stream.c", "stream.omp"]
    assert found["node[015,046,051]"].evidence["benchmarks"] == ["hpl"]
    assert found["node051"].evidence["benchmarks"] == ["npb.ep", "dgemm"]


# ---------------------------------------------------------------- registry and the whole case study


def test_unknown_rule_is_named_with_the_known_ones():
    with pytest.raises(UnknownRuleError) as raised:
        find_all(Dataset(), rules=["outliers"])
    assert isinstance(raised.value, KeyError)
    assert "'outliers'" in str(raised.value) and "outlier" in str(raised.value) and "bimodal" in str(raised.value)
    assert set(RULES) >= {"outlier", "bimodal", "normality", "accuracy", "weak-pair-member", "weak-group",
                          "inconsistent-fact", "missing"}


def test_sensitivity_is_validated():
    with pytest.raises(ValueError, match="alpha"):
        Sensitivity(alpha=0.05)
    with pytest.raises(ValueError, match="min_effect"):
        Sensitivity(min_effect=-0.1)


def test_case_study_findings_are_sorted_worst_first():
    nodes, stream = case_study_stream(13)
    rng = np.random.default_rng(13)
    topology = chassis_topology(nodes, 14)
    myrinet = pair_series(nodes, rng, slowdown=lambda a, b: 0.37 if "node406" in (a, b) else 1.0, cv=0.01)
    gige = pair_series(nodes, rng, slowdown=bc2_uplink(nodes, topology), cv=0.03, base=100.0, prefix="ip")
    bios = {node: "10/21/2004" for node in nodes}
    bios["node443"] = "09/02/2004"
    failures = [Failure("stream.omp", "node483", LabelKind.NODE, 3, ("node483",))]
    dataset = Dataset(series=[stream, *myrinet, *gige], failures=failures, facts={"bios_date": bios}, topology=topology)
    findings = find_all(dataset)
    summary = [(f.kind, f.nodes) for f in warnings_and_errors(findings)]
    assert summary == [
        ("accuracy", "node483"),
        ("bimodal", "node[001-084]"),
        ("inconsistent-fact", "node443"),
        ("outlier", "node224"),
        ("weak-group", "node[015-028]"),
        ("weak-pair-member", "node406"),
    ]
    ranks = [f.severity.rank for f in findings]
    assert ranks == sorted(ranks, reverse=True)
    for finding in findings:
        assert finding.remedy and finding.message
        assert json.loads(json.dumps(finding.to_json(), allow_nan=False))["kind"] == finding.kind


def test_no_false_alarm_on_100_benchmarks_of_10000_nodes():
    rng = np.random.default_rng(0)
    nodes = node_names(10_000)
    labels = np.asarray(nodes, dtype=object)
    series = [
        Series(f"bench{i:03d}", "value", "MB/s", Direction.HIGHER, LabelKind.NODE, labels,
               rng.normal(1000.0, 1000.0 * rng.uniform(0.01, 0.05), 10_000), np.ones(10_000, dtype=np.int64))
        for i in range(100)
    ]
    dataset = Dataset(series=series)
    findings = find_all(dataset)
    assert warnings_and_errors(findings) == []  # its speed is measured by bench/analyze_scale.py


def best_of_runs_series(n: int, repetitions: int, rng, direction=Direction.HIGHER, benchmark="triad") -> Series:
    """Every node's value is the best of R normal runs, as the runner keeps it."""
    runs = rng.normal(2000.0, 20.0, size=(n, repetitions))
    best = runs.max(axis=1) if direction is Direction.HIGHER else runs.min(axis=1)
    series = make_series(benchmark, node_names(n), best, direction=direction)
    return Series(series.benchmark, series.metric, series.unit, series.direction, series.label_kind,
                  series.labels, series.values, np.full(n, repetitions, dtype=np.int64))


@pytest.mark.parametrize("n, seeds", [(8, 40), (50, 40), (484, 30), (10_000, 3)])
@pytest.mark.parametrize("repetitions", [5, 10])
def test_best_of_several_runs_raises_no_false_alarm(n, seeds, repetitions):
    """The best of R runs has a long tail on the better side: neither it nor
    the skew it gives may pass for a fault.  (The widened threshold keeps a
    false warning to about one series in 28,000, as test_robust checks by
    simulation; the seeds are fixed so the run repeats.)"""
    for seed in range(1000, 1000 + seeds):
        rng = np.random.default_rng(seed)
        dataset = Dataset(series=[best_of_runs_series(n, repetitions, rng),
                                  best_of_runs_series(n, repetitions, rng, Direction.LOWER, "latency")])
        findings = find_all(dataset)
        assert warnings_and_errors(findings) == [], (n, seed)
        assert findings == [], (n, seed)


def test_best_of_several_runs_still_shows_a_slow_node():
    rng = np.random.default_rng(7)
    series = best_of_runs_series(484, 10, rng)
    values = series.values.copy()
    values[100] *= 0.9  # a competing process costs 10%
    slow = Series(series.benchmark, series.metric, series.unit, series.direction, series.label_kind,
                  series.labels, values, series.repetitions)
    (finding,) = warnings_and_errors(find_all(Dataset(series=[slow])))
    assert (finding.kind, finding.nodes, finding.evidence["side"]) == ("outlier", "node101", "low")


# ---------------------------------------------------------------- the declared node list


def test_a_declared_node_that_left_nothing_is_the_first_finding_an_error():
    nodes = node_names(20)
    present = [n for n in nodes if n != "node007"]
    data = Dataset(
        series=[make_series("stream", present, np.random.default_rng(1).normal(100.0, 1.0, 19))],
        facts={"bios_date": dict.fromkeys(present, "x")},
        declared_nodes=nodes,
    )
    findings = find_all(data)
    first = findings[0]
    assert (first.kind, first.severity, first.nodes) == ("missing", Severity.ERROR, "node007")
    assert first.evidence == {"missing": 1, "declared_nodes": 20}
    assert "left nothing at all" in first.message and "boot" in first.remedy
    assert [f for f in findings if f.severity.rank >= Severity.WARNING.rank] == [first]


def test_a_declared_node_seen_anywhere_is_not_never_seen():
    nodes = node_names(8)
    pairs = [f"{a}-{b}" for a, b in zip(nodes[::2], nodes[1::2])]
    data = Dataset(
        series=[make_series("pingpong", pairs[:3], [1.0, 1.0, 1.0], kind=LabelKind.PAIR),
                make_series("stream", nodes[:5], [1.0] * 5)],
        failures=[Failure("hpl", "node006", LabelKind.NODE, 1, ("node006",))],
        node_trouble={"node008": NodeStage("inventory", "unreachable", "Connection refused")},
        declared_nodes=nodes,
    )
    missing = kinds(find_all(data), "missing")
    # node007 is in no result, failure or status: the only one never seen.
    errors = [f for f in missing if f.severity is Severity.ERROR]
    assert [f.nodes for f in errors] == ["node007"]
    # node006, in a pair and a failed run, and node008, unreachable, were seen.
    assert all("node006" not in f.nodes or f.severity is Severity.WARNING for f in missing)


def test_a_store_of_process_accounting_alone_calls_no_node_missing_but_one_that_left_none():
    from oddnode.core.model import NodeProcesses

    nodes = [f"gpu{i:03d}" for i in range(1, 9)]
    counted = {node: NodeProcesses(node, 20.0, "proc", {}) for node in nodes[:7]}
    missing = kinds(find_all(Dataset(processes=counted, declared_nodes=nodes)), "missing")
    assert [(f.severity, f.nodes) for f in missing] == [(Severity.ERROR, "gpu008")]


def test_a_declared_node_without_inventory_is_a_warning_once_there_is_an_inventory():
    nodes = node_names(6)
    series = [make_series("stream", nodes, [1.0] * 6)]
    data = Dataset(series=series, facts={"bios_date": dict.fromkeys(nodes[:5], "x")}, declared_nodes=nodes)
    (finding,) = kinds(find_all(data), "missing")
    assert (finding.severity, finding.subject, finding.nodes) == (Severity.WARNING, "inventory", "node006")
    # Without any inventory there is nothing to be missing from.
    assert kinds(find_all(Dataset(series=series, declared_nodes=nodes)), "missing") == []


def test_without_a_node_list_missing_judges_against_the_nodes_seen():
    nodes = node_names(6)
    data = Dataset(series=[make_series("stream", nodes[:5], [1.0] * 5), make_series("hpl", nodes, [1.0] * 6)])
    (finding,) = kinds(find_all(data), "missing")
    assert (finding.severity, finding.nodes, finding.subject) == (Severity.WARNING, "node006", "stream")


def test_every_rule_and_each_of_its_kinds_has_a_row_and_a_section_in_the_findings_reference():
    import re

    from oddnode.findings.registry import RULE_KINDS
    from support.cli import REPOSITORY

    text = (REPOSITORY / "docs" / "findings.md").read_text(encoding="utf-8")
    rows = {match[0]: match[1] for match in re.findall(r"^\| `([a-z-]+)` \| (.*?) \|", text, re.M)}
    # A section may head several kinds: ### `skewed` and `not-normal`.
    sections = {kind for heading in re.findall(r"^### (.*)$", text, re.M)
                for kind in re.findall(r"`([a-z-]+)`", heading)}
    for rule_name, kinds in RULE_KINDS.items():
        assert rule_name in rows, f"docs/findings.md has no row for the rule {rule_name}"
        for kind in kinds:
            assert f"`{kind}`" in rows[rule_name], f"the row of {rule_name} does not list its kind {kind}"
            assert kind in sections, f"docs/findings.md has no section for {kind}"
