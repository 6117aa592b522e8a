"""Expectations files: every form passes and fails as it should, YAML 1.1's
booleans stay text, errors name file, key and line, and a snapshot of a
cluster checks clean against the same cluster."""

from __future__ import annotations

import math
import statistics

import pytest

from oddnode.findings.expectations import (
    Expectation,
    ExpectationError,
    ExpectationReport,
    check_expectations,
    load_expectations,
    parse_expectations,
    snapshot,
)
from oddnode.core.model import Severity


def nodes(n: int) -> list[str]:
    return [f"node{i:02d}" for i in range(1, n + 1)]


def one(text: str) -> Expectation:
    (expectation,) = parse_expectations(text).values()
    return expectation


# ---------------------------------------------------------------- each form


@pytest.mark.parametrize(
    "text, good, bad",
    [
        ("smt: off", ["off"], ["on", "Off", "false", ""]),
        ("kernel: '6.1.*'", ["6.1.0-18-amd64", "6.1.76"], ["6.10.2", "5.15.0"]),
        ("kernel: 6.1.0-18-amd64", ["6.1.0-18-amd64"], ["6.1.0-17-amd64"]),
        ("gpu_count: 8", ["8", "8.0", "08"], ["7", "eight", "(not reported)"]),
        ("bios_version: 1.10", ["1.10"], ["1.1.0"]),
        ("bios_date: 2004-10-21", ["2004-10-21"], ["10/21/2004"]),
        ("transparent_hugepages: never", ["never"], ["madvise"]),
        ("memory_total_kb: {min: 1000}", ["1000", "5000"], ["999", "lots"]),
        ("edac_ce: {max: 0}", ["0"], ["3"]),
        ("cpu_mhz_max: {min: 2000, max: 3000}", ["2000", "2500.5", "3000"], ["1999", "3001"]),
        ("os: {equals: Rocky Linux 9.3 (Blue Onyx)}", ["Rocky Linux 9.3 (Blue Onyx)"], ["Rocky Linux 9.2"]),
        ("kernel_cmdline: {equals: 'x[1]'}", ["x[1]"], ["x1"]),  # equals: exact, no glob
        ("cpu_model: {match: '*EPYC 9654*'}", ["AMD EPYC 9654 96-Core Processor"], ["AMD EPYC 7763"]),
        ("kernel_cmdline: {regex: 'isolcpus=\\d'}", ["quiet isolcpus=2-5"], ["quiet"]),
        ("cpu_governor: {in: [performance, ondemand]}", ["performance", "ondemand"], ["powersave"]),
        ("numa_nodes: {in: [2, 4]}", ["2", "4.0"], ["8"]),
        ("memory_total_gib: {equals: 251.5, tolerance: 0.02}", ["251.5", "247", "256"], ["245", "258", "x"]),
        ("memory_total_gib: {equals: 100, tolerance: 5%}", ["95", "105"], ["94.9"]),
        ("hugepages_total: {min: 0, in: [0, 1024]}", ["0", "1024"], ["512"]),  # every condition must hold
    ],
)
def test_expectation_forms(text, good, bad):
    expectation = one(text)
    for value in good:
        assert expectation.accepts(value), f"{text} should accept {value!r}"
    for value in bad:
        assert not expectation.accepts(value), f"{text} should reject {value!r}"


def test_yaml_booleans_stay_the_text_written():
    """YAML 1.1 reads off/on/yes/no/true as booleans; here they are the strings."""
    loaded = parse_expectations("smt: off\nturbo: on\nflag: yes\nthing: true\nother: False\n")
    assert {key: e.equals for key, e in loaded.items()} == {
        "smt": "off", "turbo": "on", "flag": "yes", "thing": "true", "other": "False"
    }
    report = check_expectations(loaded, {"smt": {"n1": "off"}}, ["n1"])
    assert "smt" in report.passed


def test_descriptions_read_as_sentences():
    assert one("smt: off").describe() == "be off"
    assert one("kernel: '6.1.*'").describe() == "match 6.1.*"
    assert one("x: {min: 1, max: 2.5}").describe() == "be between 1 and 2.5"
    assert one("x: {min: 1000}").describe() == "be at least 1000"
    assert one("x: {equals: 8, tolerance: 0.02}").describe() == "be 8 ± 2%"
    assert one("x: {in: [a, b]}").describe() == "be one of a, b"


# ---------------------------------------------------------------- checking a cluster


def test_check_reports_violating_nodes_folded_with_their_values():
    names = nodes(8)
    facts = {
        "smt": {node: ("on" if node in ("node03", "node07") else "off") for node in names},
        "kernel": {node: "6.1.0-18-amd64" for node in names},
        "gpu_count": {node: "8" for node in names if node != "node05"},
    }
    expectations = parse_expectations("smt: off\nkernel: '6.1.*'\ngpu_count: 8\n", source="site.yaml")
    report = check_expectations(expectations, facts, names)
    assert isinstance(report, ExpectationReport) and not report.ok
    assert report.passed == ["kernel"]
    failures = {f.subject: f for f in report.failures}
    smt = failures["smt"]
    assert smt.kind == "expectation" and smt.severity is Severity.ERROR
    assert smt.nodes == "node[03,07]"
    assert smt.message == "smt must be off; node[03,07]: on"
    assert smt.evidence == {"expected": {"equals": "off"}, "violations": {"on": "node[03,07]"}, "passed": 6}
    assert "site.yaml" in smt.remedy
    missing = failures["gpu_count"]
    assert missing.nodes == "node05"
    assert missing.message == "gpu_count must be 8; node05: (not reported)"


def test_a_key_no_node_reports_fails_on_every_node():
    report = check_expectations(parse_expectations("gpu_count: 8"), {}, nodes(3))
    (failure,) = report.failures
    assert failure.nodes == "node[01-03]" and failure.evidence["violations"] == {"(not reported)": "node[01-03]"}


def test_process_expectations_read_absence_as_not_running():
    names = nodes(4)
    facts = {"process.sshd": {n: "running" for n in names}, "process.httpd": {"node02": "running"}}
    report = check_expectations(
        parse_expectations("process.httpd: not running\nprocess.sshd: running\nprocess.slurmd: running\n"),
        facts, names,
    )
    failures = {f.subject: f for f in report.failures}
    assert report.passed == ["process.sshd"]
    assert failures["process.httpd"].evidence["violations"] == {"running": "node02"}
    assert failures["process.slurmd"].message == "process.slurmd must be running; node[01-04]: not running"


def test_check_accepts_a_list_of_expectations():
    report = check_expectations([Expectation("smt", equals="off")], {"smt": {"a": "off"}}, ["a"])
    assert report.ok and report.passed == ["smt"]


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "text, key, line, problem",
    [
        ("smt: off\nkernel:\n", "kernel", 2, "no expectation given"),
        ("a: 1\nsmt: {eq: off}\n", "smt", 2, "unknown option eq"),
        ("x: {min: lots}\n", "x", 1, "min must be a number"),
        ("x: {min: 5, max: 1}\n", "x", 1, "above max"),
        ("x: {regex: '(unclosed'}\n", "x", 1, "does not compile"),
        ("x: {in: []}\n", "x", 1, "non-empty list"),
        ("x: {in: off}\n", "x", 1, "non-empty list"),
        ("x: {tolerance: 0.02}\n", "x", 1, "no condition given"),
        ("x: {equals: abc, tolerance: 0.02}\n", "x", 1, "numeric equals"),
        ("x: {min: 1, tolerance: 0.02}\n", "x", 1, "numeric equals"),
        ("x: {equals: 5, tolerance: 2}\n", "x", 1, "tolerance must be a fraction"),
        ("x: [a, b]\n", "x", 1, "{in: [...]}"),
        ("x: {equals: [a]}\n", "x", 1, "single value"),
        ("\n\nsmt: off\nkernel: 6.1\nsmt: on\n", "smt", 5, "given twice (lines 3 and 5)"),
    ],
)
def test_validation_errors_name_file_key_and_line(text, key, line, problem):
    with pytest.raises(ExpectationError) as raised:
        parse_expectations(text, source="site.yaml")
    error = raised.value
    assert (error.source, error.key, error.line) == ("site.yaml", key, line)
    assert str(error).startswith(f"site.yaml:{line}: {key}: ")
    assert problem in str(error)


def test_yaml_syntax_errors_and_wrong_shapes(tmp_path):
    with pytest.raises(ExpectationError, match=r"^site\.yaml:2: not valid YAML"):
        parse_expectations("smt: off\nkernel: a: b\n", source="site.yaml")
    with pytest.raises(ExpectationError, match="a mapping of fact keys"):
        parse_expectations("- smt\n- kernel\n", source="site.yaml")
    path = tmp_path / "expect.yaml"
    path.write_text("smt: off\ngpu_count: {max: many}\n")
    with pytest.raises(ExpectationError) as raised:
        load_expectations(path)
    assert str(raised.value).startswith(f"{path}:2: gpu_count: max must be a number")
    with pytest.raises(ExpectationError, match="cannot read"):
        load_expectations(tmp_path / "absent.yaml")
    assert parse_expectations("# nothing yet\n") == {}


def test_load_from_a_file_keeps_source_and_line(tmp_path):
    path = tmp_path / "expect.yaml"
    path.write_text("# site\nsmt: off\nkernel: '6.1.*'\n")
    loaded = load_expectations(path)
    assert loaded["kernel"].line == 3 and loaded["kernel"].source == str(path)


# ---------------------------------------------------------------- snapshots


def cluster_facts(names: list[str]) -> dict[str, dict[str, str]]:
    facts = {
        "smt": {n: "off" for n in names},
        "transparent_hugepages": {n: "never" for n in names},
        "kernel": {n: "6.1.0-18-amd64" for n in names},
        "kernel_cmdline": {n: "BOOT_IMAGE=/vmlinuz-6.1.0-18-amd64 root=UUID=1c2d ro quiet isolcpus=[1-3]"
                           for n in names},
        "os": {n: "Debian GNU/Linux 12 (bookworm)" for n in names},
        "cpu_model": {n: "AMD EPYC 9654 96-Core Processor" for n in names},
        "cpu_microcode": {n: "0xa10113e" for n in names},
        "bios_date": {n: "10/21/2004" for n in names},
        "bios_version": {n: "1.10" for n in names},
        "gpu_count": {n: "8" for n in names},
        "edac_ce": {n: "0" for n in names},
        "nic.ib0.speed": {n: "-1" for n in names},
        "disk.nvme0n1.model": {n: "" for n in names},
        "memory_total_kb": {n: str(263856012 - 4096 * i) for i, n in enumerate(names)},
        "memory_total_gib": {n: f"{(263856012 - 4096 * i) / 2**20:.1f}" for i, n in enumerate(names)},
        "numa.0.memory_kb": {n: str(131928006 + 100 * i) for i, n in enumerate(names)},
        "nic.eth0.mac": {n: f"52:54:00:00:00:{i:02x}" for i, n in enumerate(names)},
        "process.sshd": {n: "running" for n in names},
        "process.httpd": {names[0]: "running"},
        "cpu_governor": {n: ("performance" if i % 2 else "powersave") for i, n in enumerate(names)},
    }
    return facts


def test_snapshot_round_trip_checks_clean():
    names = nodes(10)
    facts = cluster_facts(names)
    text = snapshot(facts, names)
    assert text.startswith("# ")
    assert "edit it" in text.splitlines()[1]
    loaded = parse_expectations(text, source="snapshot.yaml")
    report = check_expectations(loaded, facts, names)
    assert report.failures == []
    assert set(report.passed) == set(loaded)
    # Unique by nature, absent on most, or without a majority: left out.
    assert "nic.eth0.mac" not in loaded and "process.httpd" not in loaded and "cpu_governor" not in loaded
    assert "# cpu_governor: no value held by a majority" in text
    # Kept, with the values YAML would otherwise misread.
    assert loaded["smt"].equals == "off"
    assert loaded["bios_version"].equals == "1.10"
    assert loaded["kernel_cmdline"].equals.startswith("BOOT_IMAGE=")  # has [ ]: written as equals, not a glob
    assert loaded["disk.nvme0n1.model"].equals == ""
    assert loaded["process.sshd"].equals == "running"
    # Jittering numbers: the band the analysis counts as one value, here 1%
    # either side of the median (wider than 25 robust sigmas of this jitter).
    memory = loaded["memory_total_kb"]
    assert memory.equals is None
    median = statistics.median(int(v) for v in facts["memory_total_kb"].values())
    assert (memory.minimum, memory.maximum) == (math.floor(median * 0.99), math.ceil(median * 1.01))
    assert "# memory_total_kb: 263819148 to 263856012 on the nodes, one value (jitter)" in text
    assert loaded["memory_total_gib"].equals == "251.6"  # the jitter is below its last digit


def test_snapshot_catches_the_odd_node_afterwards():
    names = nodes(10)
    facts = cluster_facts(names)
    loaded = parse_expectations(snapshot(facts, names))
    facts["smt"]["node04"] = "on"
    facts["memory_total_kb"]["node09"] = "247078912"  # a DIMM gone
    report = check_expectations(loaded, facts, names)
    assert {(f.subject, f.nodes) for f in report.failures} == {("smt", "node04"), ("memory_total_kb", "node09")}
