"""Expectations scoped by node set: a GPU partition and a CPU partition
expect different facts from one file."""

import pytest

from oddnode.findings.expectations import ExpectationError, check_expectations, governed_nodes, parse_expectations
from oddnode.report.nodes_json import expectation_verdicts

SITE = """\
smt: off
gpu_count: 0
nodes:
  "gpu-a[01-04]":
    gpu_count: 4
  gpu-a04,fat-c7:
    gpu_count: 8
    memory_total_kb: {min: 1000000000}
"""
NODES = ["gpu-a01", "gpu-a02", "gpu-a03", "gpu-a04", "fat-c7", "cn-x1", "cn-x2"]


def facts(**overrides):
    values = {
        "smt": dict.fromkeys(NODES, "off"),
        "gpu_count": {"gpu-a01": "4", "gpu-a02": "4", "gpu-a03": "4", "gpu-a04": "8", "fat-c7": "8",
                      "cn-x1": "0", "cn-x2": "0"},
        "memory_total_kb": {node: "263000000" for node in NODES} | {"gpu-a04": "1056000000", "fat-c7": "1056000000"},
    }
    for key, per_node in overrides.items():
        values[key] = values[key] | per_node
    return values


def test_old_files_read_as_before():
    (expectation,) = parse_expectations("gpu_count: 8\n").values()
    assert expectation.scope is None and expectation.label == "gpu_count"


def test_each_node_gets_the_last_section_that_names_it_else_the_global_expectation():
    expectations = parse_expectations(SITE, source="site.yaml")
    deciders = {(e.label, tuple(nodes)) for e, nodes in governed_nodes(expectations, NODES)}
    assert deciders == {
        ("gpu_count", ("cn-x1", "cn-x2")),
        ("gpu_count on gpu-a[01-04]", ("gpu-a01", "gpu-a02", "gpu-a03")),
        ("gpu_count on gpu-a04,fat-c7", ("fat-c7", "gpu-a04")),
        ("memory_total_kb on gpu-a04,fat-c7", ("fat-c7", "gpu-a04")),
        ("smt", tuple(sorted(NODES))),
    }
    report = check_expectations(expectations, facts(), NODES)
    assert report.ok and "gpu_count on gpu-a[01-04]" in report.passed


def test_a_failure_names_the_section_it_came_from():
    expectations = parse_expectations(SITE, source="site.yaml")
    report = check_expectations(expectations, facts(gpu_count={"gpu-a02": "3", "cn-x2": "4"}), NODES)
    by_scope = {f.evidence.get("scope"): f for f in report.failures}
    assert set(by_scope) == {None, "gpu-a[01-04]"}
    scoped = by_scope["gpu-a[01-04]"]
    assert scoped.nodes == "gpu-a02" and scoped.message.startswith("gpu_count must be 4 on gpu-a[01-04]; gpu-a02: 3")
    assert "site.yaml (line 5)" in scoped.remedy
    assert by_scope[None].nodes == "cn-x2" and by_scope[None].message.startswith("gpu_count must be 0; cn-x2: 4")


def test_a_section_for_nodes_not_checked_is_left_out():
    expectations = parse_expectations(SITE)
    report = check_expectations(expectations, facts(), ["cn-x1", "cn-x2"])
    assert sorted(report.passed) == ["gpu_count", "smt"]


def test_json_verdicts_cover_only_the_nodes_of_their_section():
    verdicts = expectation_verdicts(parse_expectations(SITE), facts(), NODES)
    scoped = next(v for v in verdicts if v.get("scope") == "gpu-a04,fat-c7" and v["key"] == "gpu_count")
    assert scoped["passed"] == "fat-c7,gpu-a04" and scoped["verdict"] == "pass"


@pytest.mark.parametrize("text, message", [
    ("smt: off\nnodes:\n  'gpu[01-':\n    gpu_count: 8\n", r"site.yaml:3: gpu\[01-: not a node set"),
    ("nodes:\n  'cn a1':\n    smt: off\n", r"site.yaml:2: cn a1: not a node set"),
    ("nodes: [gpu01]\n", r"site.yaml:1: nodes: expected a mapping of node sets"),
    ("nodes:\n  gpu01: 8\n", r"site.yaml:2: gpu01: expected a mapping of fact keys"),
    ("nodes:\n  gpu01:\n    gpu_count: {least: 8}\n", r"site.yaml:3: gpu_count: unknown option least"),
    ("nodes:\n  gpu01:\n    smt: off\n  gpu01:\n    smt: on\n", r"site.yaml:4: gpu01: given twice"),
])
def test_bad_sections_name_the_file_and_line(text, message):
    with pytest.raises(ExpectationError, match=message):
        parse_expectations(text, source="site.yaml")
