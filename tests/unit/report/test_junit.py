"""JUnit XML of a check and of an analysis: counts that match the data, a
failure per serious finding naming its nodes, skipped and failed stages,
escaping, and the structure CI tools read."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from pathlib import Path

import pytest
import xmlschema

import support

from support.cli import invoke
from oddnode.judge.analysis import Analysis
from oddnode.app.check import CheckResult, StageResult
from oddnode.findings.registry import RULES
from oddnode.measure.collect.inventory import InventoryResult
from oddnode.core.model import Dataset, Finding, Severity
from oddnode.report.junit import analysis_suite, check_suite, structure_problems, to_xml, write_junit
from oddnode.measure.runner import RunSummary

MOMENT = datetime(2026, 3, 4, 5, 6, 7, tzinfo=timezone.utc)
# The JUnit XML CI tools read (tests/support/junit.xsd says what it holds).
JUNIT_SCHEMA = xmlschema.XMLSchema(Path(support.__file__).parent / "junit.xsd")


def finding(kind, severity, nodes, subject="memory:copy", message="slower than the others", **evidence):
    return Finding(kind, Severity(severity), subject, nodes, message, evidence or {"median": 100.0},
                   f"look at {nodes}")


def parsed(suite: ET.Element) -> ET.Element:
    """The written document read back, with its one testsuite."""
    document = to_xml(suite)
    assert structure_problems(document) == []
    JUNIT_SCHEMA.validate(document.decode("utf-8"))
    root = ET.fromstring(document)
    assert root.tag == "testsuites" and len(root.findall("testsuite")) == 1
    return root.find("testsuite")


def cases(suite: ET.Element) -> dict[str, ET.Element]:
    return {case.get("name"): case for case in suite.findall("testcase")}


def a_check(stages, not_run=(), stopped_after=None, inventory=None, extra=()) -> CheckResult:
    findings = [f for stage in stages for f in stage.findings] + list(extra)
    return CheckResult(check_id=42, analysis=Analysis(Dataset(), [], findings), expectations=None,
                       inventory=inventory, stages=list(stages), stopped_after=stopped_after, not_run=not_run)


def test_a_check_has_a_testcase_per_stage_and_one_per_kind_and_node_set_of_its_serious_findings():
    slow = finding("outlier", "error", "cn-a17", evidence_value=51.5)
    spread = finding("noisy-benchmark", "warning", "gpu[003-010]", subject="memory:triad")
    note = finding("few-nodes", "info", "gpu[003-004]", message="only 2 nodes")
    stages = [StageResult("diagnostics", [], seconds=1.25),
              StageResult("memory", [slow, spread, note], series=("memory",), seconds=12.5,
                          runs={"memory": RunSummary(7, 3, {"cn-a17": {"ok": 3}})})]
    suite = parsed(check_suite(a_check(stages, not_run=("noise", "disk"), stopped_after="memory"),
                               timestamp=MOMENT, hostname="admin-01"))
    assert suite.get("name") == "oddnode check" and suite.get("id") == "42"
    assert suite.get("hostname") == "admin-01" and suite.get("timestamp") == "2026-03-04T05:06:07"
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == ("6", "2", "0", "2")
    assert float(suite.get("time")) == pytest.approx(13.75)
    found = cases(suite)
    assert list(found) == ["diagnostics", "memory", "outlier cn-a17", "noisy-benchmark gpu[003-010]", "noise", "disk"]
    memory = found["memory"]
    assert memory.get("classname") == "oddnode.app.check.memory" and float(memory.get("time")) == 12.5
    assert memory.findall("failure") == []
    # One failure a testcase, as CI tools show them.
    assert all(len(case.findall("failure")) <= 1 for case in found.values())
    slow, spread = found["outlier cn-a17"].find("failure"), found["noisy-benchmark gpu[003-010]"].find("failure")
    assert found["outlier cn-a17"].get("classname") == "oddnode.app.check.memory"
    assert (slow.get("type"), slow.get("message").split(":")[0]) == ("outlier", "cn-a17")
    assert "evidence_value: 51.5" in slow.text and "→ look at cn-a17" in slow.text
    assert "[memory:triad]" in spread.get("message")
    assert memory.find("system-out").text == "gpu[003-004]: info few-nodes [memory:copy] only 2 nodes"
    assert found["diagnostics"].findall("failure") == [] and found["diagnostics"].find("skipped") is None
    skipped = found["noise"].find("skipped")
    assert "not reached: memory had findings of warning severity" in skipped.get("message")


def test_a_healthy_check_has_no_failure():
    stages = [StageResult("diagnostics", []), StageResult("memory", [], series=("memory",),
                                                          runs={"memory": RunSummary(3, 3, {"gpu003": {"ok": 3}})})]
    suite = parsed(check_suite(a_check(stages)))
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == ("2", "0", "0", "0")
    assert suite.find("properties/property[@name='ready']").get("value") == "true"


def test_stages_that_could_not_run_are_errors_and_those_left_out_skipped():
    failed = RunSummary(9, 3, {"gpu003": {"ok": 0, "unreachable": 3}, "cn-a17": {"unavailable": 3}})
    stages = [StageResult("diagnostics", [finding("inconsistent-fact", "info", "gpu003", subject="kernel")]),
              StageResult("compute", [], series=("dgemm",), runs={"dgemm": failed},
                          notes=["hpl: not run, no node has its tool (hpcc: command not found)"]),
              StageResult("disk", [], series=()),
              StageResult("sets", [], series=("sets",), notes=["sets: not run, it needs 4 nodes or more"])]
    unreachable = InventoryResult(reports={}, unreachable={}, failed={}, reasons={"cn-a17": "ssh: no route"})
    suite = parsed(check_suite(a_check(stages, inventory=unreachable)))
    found = cases(suite)
    error = found["compute"].find("error")
    assert "3 unreachable" in error.get("message") and "3 unavailable" in error.get("message")
    assert "no node has its tool" in error.text
    assert found["disk"].find("skipped").get("message").endswith("(--skip)")
    assert found["sets"].find("skipped").get("message") == "sets: not run, it needs 4 nodes or more"
    assert found["diagnostics"].find("error").get("type") == "unreachable"
    assert "cn-a17: ssh: no route" in found["diagnostics"].find("error").text
    # The outcome comes before the notes' output, as CI tools read it.
    assert [child.tag for child in found["diagnostics"]] == ["error", "system-out"]
    assert int(suite.get("errors")) == len(suite.findall("testcase/error")) == 2
    assert suite.get("skipped") == "2"


def test_markup_and_control_characters_round_trip(tmp_path):
    nasty = finding("outlier", "warning", "gpu[003-010]", message='a < b & "c"\x01 done\x1b',
                    raw='<tag attr="x">&amp;\x00</tag>')
    stages = [StageResult("diagnostics", [nasty])]
    path = tmp_path / "results.xml"
    write_junit(check_suite(a_check(stages)), path)
    assert not list(tmp_path.glob(".results.xml.*"))  # the temporary file was renamed
    document = path.read_bytes()
    assert structure_problems(document) == []
    failure = ET.fromstring(document).find("testsuite/testcase/failure")
    assert failure.get("message") == 'gpu[003-010]: warning outlier [memory:copy] a < b & "c" done'
    assert 'raw: <tag attr="x">&amp;</tag>' in failure.text


def test_the_structural_check_fails_on_wrong_counts():
    suite = check_suite(a_check([StageResult("memory", [finding("outlier", "error", "cn-a17")])]))
    suite.set("failures", "0")
    assert structure_problems(to_xml(suite)) == ["oddnode check: failures=0 but 1 elements"]
    suite.set("failures", "one")
    assert "is not an integer" in structure_problems(to_xml(suite))[0]


def test_an_analysis_has_a_testcase_per_rule_and_one_per_kind_and_node_set_it_found():
    findings = [finding("outlier", "error", "cn-a17"), finding("outlier", "warning", "gpu[003-010]"),
                finding("outlier", "warning", "cn-a17", subject="memory:triad"),
                finding("bimodal", "info", "gpu[003-004]"), finding("expectation", "warning", "gpu005")]
    suite = parsed(analysis_suite(Analysis(Dataset(), [], findings), timestamp=MOMENT, hostname="admin-01"))
    found = cases(suite)
    # A rule that found something has a failing testcase per node set instead of a passing one.
    passing = [name for name in found if " " not in name]
    assert passing == [name for name in RULES.names() if name != "outlier"]
    failing = [name for name in found if " " in name]
    assert failing == ["outlier cn-a17", "outlier gpu[003-010]", "expectation gpu005"]
    assert suite.get("tests") == str(len(RULES.names()) - 1 + 3) and suite.get("failures") == "3"
    assert all(len(case.findall("failure")) <= 1 for case in found.values())
    twice = found["outlier cn-a17"].find("failure")
    assert twice.get("message").startswith("cn-a17: error outlier") and twice.get("message").endswith("(and 1 more)")
    assert "memory:triad" in twice.text and "memory:copy" in twice.text
    assert found["outlier gpu[003-010]"].get("classname") == "oddnode.analyze.outlier"
    assert found["bimodal"].findall("failure") == [] and "gpu[003-004]" in found["bimodal"].find("system-out").text
    assert found["inconsistent-fact"].findall("*") == []


# -- the commands ---------------------------------------------------------------------------


@pytest.mark.slow
def test_check_writes_junit_from_the_command_line(tmp_path, monkeypatch):
    from oddnode.app.cli import check as check_cli
    from oddnode.reach.base import Target
    from support.clusters.check import ScriptedCluster

    nodes = ["cn-a17", *(f"gpu{i:03d}" for i in range(3, 10))]
    monkeypatch.setattr(check_cli, "selected_target",
                        lambda *args: Target(nodes, ScriptedCluster(speed={"cn-a17": 0.5})))
    path = tmp_path / "results.xml"
    result = invoke("check", "-w", "cn-a17,gpu[003-009]", "--stages", "memory,noise", "-r", "3",
                    "--set", "memory.elements=2000000", "--set", "memory.ntimes=3", "--db", tmp_path / "s.duckdb",
                    "--html", tmp_path / "r.html", "--junit", path)
    assert result.exit_code == 1, result.output
    suite = ET.fromstring(path.read_bytes()).find("testsuite")
    assert structure_problems(path.read_bytes()) == []
    found = cases(suite)
    assert [name for name in found if " " not in name] == ["diagnostics", "memory", "noise"]
    failing = [case for name, case in found.items() if " " in name]
    assert failing and all(case.get("name").endswith(" cn-a17") for case in failing)
    assert all(len(case.findall("failure")) == 1 for case in failing) and found["memory"].findall("failure") == []
    assert found["noise"].find("skipped") is not None and float(found["memory"].get("time")) >= 0
    assert suite.get("failures") == str(len(failing))


def test_junit_and_json_cannot_share_stdout(tmp_path):
    result = invoke("analyze", "--db", tmp_path / "none.duckdb", "--json", "--junit", "-")
    assert result.exit_code == 2 and "both write to stdout" in result.text
    result = invoke("check", "--json", "--junit", "-", "--stages", "none", "--db", tmp_path / "s.duckdb")
    assert result.exit_code == 2 and "both write to stdout" in result.text


@pytest.mark.slow
def test_analyze_junit_on_stdout_is_one_document(tmp_path):
    from oddnode.app.synth import generate

    generate(tmp_path / "data", nodes=32, seed=3, faults=True)
    result = invoke("analyze", tmp_path / "data", "--junit", "-")
    assert structure_problems(result.stdout) == []
    suite = ET.fromstring(result.stdout.encode()).find("testsuite")
    assert suite.get("name") == "oddnode analyze" and int(suite.get("failures")) > 0


def test_the_schema_refuses_what_ci_tools_misread():
    """Two failures in one testcase (the tools show the first), an outcome
    after the output, a count that is not a number: each refused."""
    def document(case: str, failures: str = "1") -> str:
        return (f'<testsuites><testsuite name="s" tests="1" failures="{failures}" errors="0" '
                f'timestamp="2026-03-04T05:06:07" hostname="h">{case}</testsuite></testsuites>')

    one = '<testcase classname="c" name="n"><failure message="m" type="t">x</failure></testcase>'
    assert JUNIT_SCHEMA.is_valid(document(one))
    for bad in (document('<testcase classname="c" name="n"><failure message="m" type="t"/>'
                         '<failure message="m" type="t"/></testcase>'),
                document('<testcase classname="c" name="n"><system-out>x</system-out>'
                         '<failure message="m" type="t"/></testcase>'),
                document('<testcase classname="c" name="n"><failure type="t"/></testcase>'),
                document(one, failures="one")):
        assert not JUNIT_SCHEMA.is_valid(bad), bad
