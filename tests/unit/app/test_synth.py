"""The synthetic cluster: well-formed files, the planted faults visible in the
raw numbers, a fault-free control, and the ground truth that describes them.

The files are parsed here with plain Python, not with oddnode's importer, so
that the generator is checked against the format itself."""

from __future__ import annotations

import csv
import json
import math
import re
import statistics
from collections import Counter
from pathlib import Path

import pytest

from oddnode.app import synth
from oddnode.core.model import Finding, Severity
from oddnode.core.nodes import expand

NODE = re.compile(r"^node\d{3,5}$")
UNITS = {"MB/s", "Mop/s", "GFLOP/s", "us"}
STREAM = ("c.ppc64", "c_omp.ppc64", "f.ppc64")
NODE_SERIES = (*STREAM, *(f"{b}.B.ppc64" for b in ("bt", "cg", "ep", "ft", "lu", "mg", "sp")), "xhpl.ppc64")
SPP = tuple(f"spp.{p}.bw.4194304" for p in ("sort", "cut", "fold", "shuffle"))
IP = tuple(f"ip.{p}.bw.4194304" for p in ("sort", "cut", "fold", "shuffle"))
PAIR_SERIES = (*SPP, *IP, "spp.sort.lat.0")
BC02 = [f"node{i:03d}" for i in range(15, 29)]


# --- plain parsers of the format ------------------------------------------


def read_plot(path: Path) -> dict[str, float]:
    """label -> value; fails on anything the format does not allow."""
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines and lines[0].startswith("#"), f"{path.name} has no header comment"
    rows: dict[str, float] = {}
    for line in lines:
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split()
        assert len(fields) == 2, f"{path.name}: {line!r}"
        value = float(fields[0])
        assert math.isfinite(value) and value > 0, f"{path.name}: {line!r}"
        assert fields[1] not in rows, f"{path.name}: label {fields[1]} repeated"
        rows[fields[1]] = value
    return rows


def read_csv(path: Path, header: list[str]) -> list[list[str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == header
    assert all(len(row) == len(header) and all(row) for row in rows[1:])
    return rows[1:]


def pair(label: str) -> tuple[str, str]:
    a, b = label.split("-")
    assert NODE.match(a) and NODE.match(b) and a != b, label
    return a, b


def robust_z(values: list[float]) -> list[float]:
    median = statistics.median(values)
    mad = statistics.median(abs(v - median) for v in values)
    return [(v - median) / (1.4826 * mad) for v in values]


def skewness(values: list[float]) -> float:
    mean = statistics.fmean(values)
    m2 = statistics.fmean((v - mean) ** 2 for v in values)
    m3 = statistics.fmean((v - mean) ** 3 for v in values)
    return m3 / m2**1.5


# --- fixtures -------------------------------------------------------------


@pytest.fixture(scope="module")
def faulty(tmp_path_factory):
    directory = tmp_path_factory.mktemp("synth") / "faulty"
    return directory, synth.generate(directory)


@pytest.fixture(scope="module")
def healthy(tmp_path_factory):
    directory = tmp_path_factory.mktemp("synth") / "healthy"
    return directory, synth.generate(directory, faults=False)


def nodes_484() -> list[str]:
    return [f"node{i:03d}" for i in range(1, 485)]


# --- layout and determinism -----------------------------------------------


def test_node_names_are_padded_to_the_width_of_n():
    assert synth.node_names(32)[:2] == ["node001", "node002"]
    assert synth.node_names(484)[-1] == "node484"
    assert synth.node_names(1000)[0] == "node0001" and synth.node_names(1000)[-1] == "node1000"
    assert synth.node_names(10000)[-1] == "node10000"


def test_same_seed_same_files_other_seed_other_values(tmp_path):
    first = synth.generate(tmp_path / "a", nodes=64, seed=7)
    second = synth.generate(tmp_path / "b", nodes=64, seed=7)
    assert first == second
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "b").iterdir())
    for name in names:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    synth.generate(tmp_path / "c", nodes=64, seed=8)
    assert read_plot(tmp_path / "a" / "plot.c.ppc64") != read_plot(tmp_path / "c" / "plot.c.ppc64")


@pytest.mark.parametrize("which", ["faulty", "healthy"])
def test_files_are_well_formed(which, request):
    directory, truth = request.getfixturevalue(which)
    nodes = set(nodes_484())
    assert truth.node_set == "node[001-484]" and truth.nodes == 484 and truth.seed == 2005
    plots = {p.name[len("plot."):]: read_plot(p) for p in directory.glob("plot.*")}
    assert set(plots) == set(NODE_SERIES) | set(PAIR_SERIES)
    for name in NODE_SERIES:
        assert set(plots[name]) <= nodes
    for name in PAIR_SERIES:
        for label in plots[name]:
            assert set(pair(label)) <= nodes

    units = read_csv(directory / "units.csv", ["benchmark", "unit", "direction"])
    assert sorted(row[0] for row in units) == sorted(plots)
    assert {row[1] for row in units} <= UNITS
    direction = {row[0]: row[2] for row in units}
    assert direction["spp.sort.lat.0"] == "lower"
    assert all(d == "higher" for name, d in direction.items() if name != "spp.sort.lat.0")
    assert {row[0]: row[1] for row in units}["xhpl.ppc64"] == "GFLOP/s"

    inventory = read_csv(directory / "inventory.csv", ["node", "key", "value"])
    keys = Counter((node, key) for node, key, _ in inventory)
    assert set(keys.values()) == {1}
    assert {node for node, _ in keys} == nodes
    assert {key for _, key in keys} == {"bios_date", "memory_total_kb", "cpu_model", "cpus", "kernel", "os"}

    topology = read_csv(directory / "topology.csv", ["node", "group"])
    assert sorted(node for node, _ in topology) == sorted(nodes)
    groups = dict(topology)
    assert groups["node001"] == groups["node014"] == "bc01"
    assert {groups[n] for n in BC02} == {"bc02"} and groups["node029"] == "bc03"
    assert Counter(groups.values())["bc35"] == 484 - 34 * 14

    if (directory / "failed").exists():
        for line in (directory / "failed").read_text().splitlines():
            if line.startswith("#"):
                continue
            *benchmark, node, run = line.split(".")
            assert ".".join(benchmark) in plots and node in nodes and run.isdigit(), line


# --- pair patterns --------------------------------------------------------


@pytest.mark.parametrize("n", [484, 37])
def test_pair_patterns_are_perfect_matchings(n, tmp_path):
    synth.generate(tmp_path, nodes=n)
    names = synth.node_names(n)
    m = n - n % 2
    paired = names[:m]
    position = {node: i + 1 for i, node in enumerate(names)}
    for name in PAIR_SERIES:
        text = (tmp_path / f"plot.{name}").read_text()
        pairs = [pair(label) for label in read_plot(tmp_path / f"plot.{name}")]
        members = [node for p in pairs for node in p]
        assert sorted(members) == paired, name  # every paired node exactly once
        if n % 2:
            assert f"{names[-1]} sits out" in text
        pattern = name.split(".")[1]
        numbers = sorted(tuple(sorted((position[a], position[b]))) for a, b in pairs)
        if pattern == "sort":
            assert numbers == [(i, i + 1) for i in range(1, m, 2)]
        elif pattern == "cut":
            assert numbers == [(i, i + m // 2) for i in range(1, m // 2 + 1)]
        elif pattern == "fold":
            assert numbers == [(i, m + 1 - i) for i in range(1, m // 2 + 1)]
        else:
            assert numbers != [(i, i + 1) for i in range(1, m, 2)]
    spp = read_plot(tmp_path / "plot.spp.shuffle.bw.4194304")
    ip = read_plot(tmp_path / "plot.ip.shuffle.bw.4194304")
    assert set(spp) != set(ip)  # each network draws its own shuffle


# --- the planted faults, in the raw numbers -------------------------------


def test_fast_memory_mode_is_a_second_mode(faulty):
    directory, truth = faulty
    fast = {f"node{i:03d}" for i in range(1, 85)}
    for name in STREAM:
        values = read_plot(directory / f"plot.{name}")
        high = [v for node, v in values.items() if node in fast]
        rest = [v for node, v in values.items() if node not in fast]
        assert statistics.fmean(high) >= 1.04 * statistics.fmean(rest)
        assert statistics.fmean(high) - statistics.fmean(rest) >= 4 * statistics.stdev(rest)
        assert len(values) == 484  # node224 (less memory) and node483 are here, normal
    bimodal = [f for f in truth.findings if f.kind == "bimodal"]
    assert sorted(f.subject for f in bimodal) == sorted(STREAM)
    assert {f.nodes for f in bimodal} == {"node[001-084]"}


def test_competing_process_slows_ep_and_bt_only(faulty):
    directory, _ = faulty
    for name in NODE_SERIES:
        values = read_plot(directory / f"plot.{name}")
        if name == "xhpl.ppc64":
            assert "node100" in values
        median = statistics.median(values.values())
        if name in ("ep.B.ppc64", "bt.B.ppc64"):
            assert values["node100"] < 0.88 * median
        else:
            assert abs(values["node100"] / median - 1) < 0.06, name


def test_accuracy_node_fails_and_has_no_hpl_line(faulty):
    directory, _ = faulty
    failed = [line for line in (directory / "failed").read_text().splitlines() if not line.startswith("#")]
    assert all(".node483." in line for line in failed)
    assert {f"xhpl.ppc64.node483.{run}" for run in range(1, 11)} <= set(failed)
    assert {f"bt.B.ppc64.node483.{run}" for run in range(1, 6)} <= set(failed)
    assert any(line.startswith("ft.B.ppc64.") for line in failed)
    assert any(line.startswith("sp.B.ppc64.") for line in failed)
    for name in NODE_SERIES:
        assert ("node483" in read_plot(directory / f"plot.{name}")) == (name != "xhpl.ppc64"), name


def test_two_nodes_missing_from_hpl_only(faulty):
    directory, _ = faulty
    hpl = read_plot(directory / "plot.xhpl.ppc64")
    assert set(nodes_484()) - set(hpl) == {"node215", "node224", "node483"}
    for name in NODE_SERIES[:-1]:
        assert {"node215", "node224"} <= set(read_plot(directory / f"plot.{name}"))
    inventory = read_csv(directory / "inventory.csv", ["node", "key", "value"])
    assert {"node215", "node224"} <= {node for node, _, _ in inventory}


def test_inventory_has_two_odd_facts(faulty, healthy):
    for (directory, _), odd in ((faulty, {"bios_date": ("node443", "09/02/2004"),
                                          "memory_total_kb": ("node224", "1460116")}), (healthy, {})):
        inventory = read_csv(directory / "inventory.csv", ["node", "key", "value"])
        by_key: dict[str, dict[str, str]] = {}
        for node, key, value in inventory:
            by_key.setdefault(key, {})[node] = value
        for key, values in by_key.items():
            counts = Counter(values.values())
            if key in odd:
                node, value = odd[key]
                assert values[node] == value and counts[value] == 1 and len(counts) == 2
            else:
                assert len(counts) == 1, key
        assert by_key["bios_date"]["node001"] == "10/21/2004"
        assert by_key["memory_total_kb"]["node001"] == "1977208"


def test_weak_myrinet_card_halves_its_pairs_only(faulty):
    directory, _ = faulty
    for name in SPP:
        values = read_plot(directory / f"plot.{name}")
        median = statistics.median(values.values())
        weak = [v for label, v in values.items() if "node406" in pair(label)]
        assert len(weak) == 1 and weak[0] < 0.5 * median
        assert all(v > 0.95 * median for label, v in values.items() if "node406" not in pair(label))
    for name in IP:  # its GigE is fine
        values = read_plot(directory / f"plot.{name}")
        median = statistics.median(values.values())
        assert all(v > 0.95 * median for label, v in values.items() if "node406" in pair(label))


def test_bad_chassis_uplink_slows_crossing_pairs_only(faulty):
    directory, truth = faulty
    inside = set(BC02)
    for name in IP:
        values = read_plot(directory / f"plot.{name}")
        median = statistics.median(values.values())
        crossing = inside_pairs = 0
        for label, value in values.items():
            members = set(pair(label))
            if len(members & inside) == 1:
                crossing += 1
                assert 45 <= value <= 72, label
            else:
                inside_pairs += len(members & inside) == 2
                assert value > 0.95 * median, label
        if name.startswith("ip.sort"):
            assert crossing == 0 and inside_pairs == 7
        else:
            assert crossing >= 10
    for name in SPP:  # Myrinet does not go through the GigE uplink
        values = read_plot(directory / f"plot.{name}")
        median = statistics.median(values.values())
        assert all(v > 0.95 * median for label, v in values.items()
                   if set(pair(label)) & inside and "node406" not in pair(label))
    (group,) = [f for f in truth.findings if f.kind == "weak-group"]
    assert group.nodes == "node[015-028]" and group.evidence == {"group": "bc02"}
    assert group.series == IP[1:]


def test_cg_is_skewed_without_outliers(faulty, healthy):
    values = list(read_plot(faulty[0] / "plot.cg.B.ppc64").values())
    assert skewness(values) > 0.5
    assert max(abs(z) for z in robust_z(values)) < 5.0
    assert abs(statistics.fmean(values) / 41.94 - 1) < 0.01
    assert abs(skewness(list(read_plot(healthy[0] / "plot.cg.B.ppc64").values()))) < 0.4


# --- the healthy control --------------------------------------------------


def test_healthy_control_has_no_fault(healthy):
    directory, truth = healthy
    assert truth.findings == () and truth.faults is False
    failed = directory / "failed"
    assert not failed.exists() or all(line.startswith("#") for line in failed.read_text().splitlines())
    nodes = set(nodes_484())
    for name in NODE_SERIES:
        values = read_plot(directory / f"plot.{name}")
        assert set(values) == nodes, name
        assert max(abs(z) for z in robust_z(list(values.values()))) < 4.5, name
    for name in PAIR_SERIES:
        values = read_plot(directory / f"plot.{name}")
        assert len(values) == 242
        assert max(abs(z) for z in robust_z(list(values.values()))) < 4.5, name
    for name in STREAM:
        values = read_plot(directory / f"plot.{name}")
        first = [values[f"node{i:03d}"] for i in range(1, 85)]
        rest = [values[f"node{i:03d}"] for i in range(85, 485)]
        assert abs(statistics.fmean(first) / statistics.fmean(rest) - 1) < 0.005


def test_healthy_and_faulty_share_the_fault_free_series(faulty, healthy):
    for name in ("lu.B.ppc64", "mg.B.ppc64", "spp.sort.lat.0"):
        assert read_plot(faulty[0] / f"plot.{name}") == read_plot(healthy[0] / f"plot.{name}")


# --- the ground truth -----------------------------------------------------


def test_truth_lists_one_finding_per_fault_and_series(faulty):
    directory, truth = faulty
    found = [(f.kind, f.severity, f.subject, f.series, f.nodes) for f in truth.findings]
    assert found == [
        ("bimodal", "warning", "c.ppc64", None, "node[001-084]"),
        ("bimodal", "warning", "c_omp.ppc64", None, "node[001-084]"),
        ("bimodal", "warning", "f.ppc64", None, "node[001-084]"),
        ("outlier", "warning", "bt.B.ppc64", None, "node100"),
        ("outlier", "warning", "ep.B.ppc64", None, "node100"),
        ("accuracy", "error", None, ("bt.B.ppc64", "c_omp.ppc64", "ft.B.ppc64", "sp.B.ppc64", "xhpl.ppc64"),
         "node483"),
        ("missing", "warning", "xhpl.ppc64", None, "node[215,224]"),
        ("inconsistent-fact", "warning", "bios_date", None, "node443"),
        ("inconsistent-fact", "warning", "memory_total_kb", None, "node224"),
        ("weak-pair-member", "warning", None, SPP, "node406"),
        ("weak-group", "warning", None, IP[1:], "node[015-028]"),
        ("skewed", "info", "cg.B.ppc64", None, ""),
    ]
    assert all(f.why.endswith(".") and "\n" not in f.why for f in truth.findings)


def test_truth_round_trips_through_json(faulty):
    directory, truth = faulty
    on_disk = json.loads((directory / "truth.json").read_text())
    assert on_disk == truth.to_json()
    assert synth.Truth.from_json(on_disk) == truth
    assert synth.read_truth(directory) == truth
    assert json.loads(json.dumps(truth.to_json())) == on_disk
    accuracy = next(f for f in on_disk["findings"] if f["kind"] == "accuracy")
    assert accuracy["subject"] is None and "series" in accuracy
    assert "series" not in on_disk["findings"][0]
    with pytest.raises(synth.SynthError, match="not a ground truth"):
        synth.Truth.from_json({"findings": []})


# --- sizes ----------------------------------------------------------------


@pytest.mark.parametrize("n", [32, 37, 1000])
def test_other_sizes_place_every_fault(n, tmp_path):
    truth = synth.generate(tmp_path, nodes=n)
    names = synth.node_names(n)
    assert truth.node_set == f"{names[0][:4]}[{names[0][4:]}-{names[-1][4:]}]"
    for f in truth.findings:
        assert set(expand(f.nodes) if f.nodes else []) <= set(names)
    assert next(f for f in truth.findings if f.kind == "accuracy").nodes == names[-2]
    assert len(truth.findings) == 12
    hpl = read_plot(tmp_path / "plot.xhpl.ppc64")
    assert len(hpl) == n - 3
    assert len(read_plot(tmp_path / "plot.spp.cut.bw.4194304")) == n // 2


@pytest.mark.slow
def test_fault_placement_holds_for_every_size():
    for n in [*range(32, 520), 999, 1000, 1001, 1386, 1387, 2048, 5000]:
        names = synth.node_names(n)
        plan = synth.plan_faults(names)
        patterns = synth.pair_patterns(names, n, plan)
        single = [plan.competing, plan.inaccurate, plan.unbooted, plan.small_memory, plan.old_bios, plan.weak_card]
        assert len(set(single)) == 6, n
        assert not set(single) & set(plan.fast) and names[-1] not in single, n
        assert plan.bad_chassis_nodes == tuple(names[14:28])
        assert plan.bad_chassis == ("bc02" if n <= 99 * 14 else "bc002")  # padded to the chassis count
        bad = set(plan.bad_chassis_nodes)
        assert plan.weak_card not in bad
        for pairs in (patterns["spp.shuffle"], patterns["ip.shuffle"]):
            assert sorted(node for p in pairs for node in p) == names[: n - n % 2], n
        for pairs in patterns.values():
            for a, b in pairs:
                if plan.weak_card in (a, b):
                    assert not {a, b} & bad, (n, a, b)
    names = synth.node_names(484)
    plan = synth.plan_faults(names)
    assert (plan.competing, plan.unbooted, plan.small_memory, plan.weak_card, plan.old_bios, plan.inaccurate) == (
        "node100", "node215", "node224", "node406", "node443", "node483")


@pytest.mark.parametrize("bad", [31, 0, -5, True, 3.5])
def test_node_count_out_of_range_is_refused(bad, tmp_path):
    with pytest.raises(synth.SynthError, match="node"):
        synth.generate(tmp_path / "x", nodes=bad)
    assert not (tmp_path / "x").exists()


# --- the output directory -------------------------------------------------


def test_refuses_a_foreign_non_empty_directory(tmp_path):
    (tmp_path / "notes.txt").write_text("mine\n")
    with pytest.raises(synth.SynthError, match="not empty"):
        synth.generate(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    (tmp_path / "truth.json").write_text('{"something": "else"}\n')
    with pytest.raises(synth.SynthError, match="not a ground truth"):
        synth.generate(tmp_path)
    assert (tmp_path / "notes.txt").read_text() == "mine\n"
    file = tmp_path / "notes.txt"
    with pytest.raises(synth.SynthError, match="not a directory"):
        synth.generate(file)


def test_writes_into_an_empty_directory_and_over_a_previous_synth(tmp_path):
    tmp_path.joinpath("out").mkdir()
    synth.generate(tmp_path / "out", nodes=40)
    assert (tmp_path / "out" / "failed").exists()
    truth = synth.generate(tmp_path / "out", nodes=40, faults=False)
    assert not (tmp_path / "out" / "failed").exists()  # the previous faults are gone
    assert synth.read_truth(tmp_path / "out") == truth
    assert len(read_plot(tmp_path / "out" / "plot.xhpl.ppc64")) == 40


# --- comparing findings with the truth ------------------------------------


def as_finding(expected: synth.ExpectedFinding, **changes) -> Finding:
    subject = expected.subject if expected.subject is not None else ", ".join(expected.series)
    fields = dict(kind=expected.kind, severity=Severity(expected.severity), subject=subject, nodes=expected.nodes,
                  message="", evidence=dict(expected.evidence), remedy="")
    fields.update(changes)
    return Finding(**fields)


def test_check_findings_pairs_findings_with_the_truth(faulty):
    _, truth = faulty
    exact = [as_finding(e) for e in truth.findings]
    result = synth.check_findings(truth, exact)
    assert result.ok and len(result.matched) == 12
    assert "match the ground truth" in result.summary()

    result = synth.check_findings(truth, exact[1:] + [as_finding(truth.findings[3], nodes="node101")])
    assert not result.ok and result.missed == [truth.findings[0]] and len(result.unexpected) == 1
    assert "missed" in result.summary() and "unexpected" in result.summary()

    group = next(e for e in truth.findings if e.kind == "weak-group")
    changed = [f for f in exact if f.kind != "weak-group"]
    for subject, ok in (("ip.cut.bw.4194304, ip.fold.bw.4194304", True), ("bc02", True),
                        ("ip.sort.bw.4194304", False)):
        result = synth.check_findings(truth, changed + [as_finding(group, subject=subject)])
        assert result.ok is ok, subject
    result = synth.check_findings(truth, changed + [as_finding(group, evidence={"group": "bc03"})])
    assert not result.ok

    outlier = truth.findings[3]
    result = synth.check_findings(truth, [f for f in exact if f.subject != outlier.subject or f.kind != "outlier"]
                                  + [as_finding(outlier, severity=Severity.ERROR)])
    assert result.ok and len(result.severity_differs) == 1 and "severity" in result.summary()

    healthy = synth.Truth(nodes=484, seed=2005, faults=False, node_set="node[001-484]", findings=())
    assert synth.check_findings(healthy, []).ok
    assert not synth.check_findings(healthy, exact[:1]).ok
