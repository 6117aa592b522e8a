"""The inconsistent-fact rule's tolerance for memory sizes that vary a little
from boot to boot, and its reading of process.* facts as running / not running."""

from __future__ import annotations

import pytest

from oddnode.findings import find_all
from oddnode.findings.facts import (
    MEMORY_TOLERANCE,
    NOT_REPORTED,
    parse_number,
    tolerance_for,
    tolerant_majority,
)
from oddnode.model import Dataset


def nodes(n: int) -> list[str]:
    return [f"node{i:02d}" for i in range(1, n + 1)]


def fact_findings(facts: dict[str, dict[str, str]]) -> dict:
    found = [f for f in find_all(Dataset(facts=facts), rules=["inconsistent-fact"])]
    return {f.subject: f for f in found}


# ---------------------------------------------------------------- the registry


@pytest.mark.parametrize(
    "key, tolerance",
    [
        ("memory_total_kb", MEMORY_TOLERANCE),
        ("memory_total_gib", MEMORY_TOLERANCE),
        ("numa.0.memory_kb", MEMORY_TOLERANCE),
        ("numa.13.memory_kb", MEMORY_TOLERANCE),
        ("mem_kb", None),
        ("numa.0.cpus", None),
        ("kernel", None),
    ],
)
def test_tolerant_keys_by_pattern(key, tolerance):
    assert tolerance_for(key) == tolerance


def test_parse_number_takes_plain_decimals_only():
    assert parse_number("263856012") == 263856012.0
    assert parse_number("251.6") == 251.6
    assert parse_number("-1") == -1.0
    for text in ("nan", "inf", "1_000", "6.1.0", "", "0x1f", "32 GB"):
        assert parse_number(text) is None, text


def test_tolerant_majority_recentres_on_the_median():
    values = {"a": "100", "b": "101", "c": "99", "d": "102.5", "e": "80", "f": "text"}
    # 101 gathers the fullest band (99..102.5), whose median is 100; 102.5 is
    # 2.5% above that median, so it is outside the final group.
    centre, members = tolerant_majority(values, 0.02)
    assert centre == "100" and members == ["a", "b", "c"]
    centre, members = tolerant_majority({**values, "d": "101.9"}, 0.02)
    assert centre == "100" and members == ["a", "b", "c", "d"]
    assert tolerant_majority({"a": "x"}, 0.02) is None


# ---------------------------------------------------------------- memory within 2%


def test_memory_within_tolerance_is_consistent():
    names = nodes(12)
    # Identical nodes: the kernel reserved a few MB more or less at each boot.
    kb = {node: str(263856012 - 4096 * i) for i, node in enumerate(names)}
    gib = {node: f"{int(v) / 2**20:.1f}" for node, v in kb.items()}
    numa = {node: str(131928006 + 512 * i) for i, node in enumerate(names)}
    found = fact_findings({"memory_total_kb": kb, "memory_total_gib": gib, "numa.0.memory_kb": numa})
    assert found == {}


def test_memory_outside_tolerance_names_only_the_outliers_with_their_values():
    names = nodes(12)
    kb = {node: str(263856012 + 3000 * i) for i, node in enumerate(names)}
    kb["node03"] = "247078912"  # one 16 GiB DIMM of 16 missing: 6% less
    kb["node07"] = "230686720"  # two missing
    numa = {node: "131928006" for node in names}
    numa["node03"] = "115150790"
    found = fact_findings({"memory_total_kb": kb, "numa.1.memory_kb": numa})
    memory = found["memory_total_kb"]
    assert memory.nodes == "node[03,07]"
    assert memory.evidence["minority"] == {"230686720": "node07", "247078912": "node03"}
    assert memory.evidence["tolerance"] == MEMORY_TOLERANCE
    low, high = memory.evidence["majority_range"]
    assert low == "263856012" and high == str(263856012 + 3000 * 11)
    assert memory.evidence["counts"][memory.evidence["majority"]] == 10
    assert memory.message.startswith(f"all nodes but node[03,07] have memory_total_kb {memory.evidence['majority']} "
                                     "(within 2%); ")
    assert "node03: 247078912" in memory.message and "node07: 230686720" in memory.message
    assert found["numa.1.memory_kb"].nodes == "node03"


def test_tolerance_keeps_text_and_absent_values_apart():
    names = nodes(6)
    kb = {node: "263856012" for node in names[:-1]}
    kb["node02"] = "unknown"
    found = fact_findings({"memory_total_kb": kb, "kernel": {node: "6.1" for node in names}})
    assert found["memory_total_kb"].evidence["minority"] == {NOT_REPORTED: "node06", "unknown": "node02"}


def test_exact_keys_are_still_exact():
    """A key outside the registry differs by 4 kB and is still reported (the original behaviour)."""
    names = nodes(5)
    mem = {node: "1977204" for node in names}
    mem["node05"] = "1977208"
    assert fact_findings({"mem_kb": mem})["mem_kb"].nodes == "node05"


# ---------------------------------------------------------------- processes


def process_facts(names: list[str], running: dict[str, list[str]]) -> dict[str, dict[str, str]]:
    facts = {"process.sshd": {node: "running" for node in names}, "kernel": {node: "6.1" for node in names}}
    for comm, where in running.items():
        facts[f"process.{comm}"] = {node: "running" for node in where}
    return facts


def test_process_on_a_minority_runs_there_only():
    names = nodes(8)
    found = fact_findings(process_facts(names, {"httpd": ["node03", "node05"]}))
    assert set(found) == {"process.httpd"}
    httpd = found["process.httpd"]
    assert httpd.nodes == "node[03,05]"
    assert httpd.message == "httpd runs on node[03,05] only"
    assert httpd.evidence["majority"] == "not running"
    assert httpd.evidence["counts"] == {"not running": 6, "running": 2}
    assert "stop httpd on node[03,05]" in httpd.remedy


def test_process_missing_on_a_minority_is_not_running_there():
    names = nodes(8)
    found = fact_findings(process_facts(names, {"slurmd": [n for n in names if n != "node04"]}))
    slurmd = found["process.slurmd"]
    assert slurmd.nodes == "node04"
    assert slurmd.message.endswith("not running on node04")
    assert slurmd.evidence["minority"] == {"not running": "node04"}
    assert "start slurmd on node04" in slurmd.remedy


def test_process_tie_has_no_majority():
    names = nodes(4)
    found = fact_findings(process_facts(names, {"cron": ["node01", "node02"]}))
    cron = found["process.cron"]
    assert cron.evidence["majority"] is None
    assert "cron runs on node[01-02] and is not running on node[03-04]" in cron.message


def test_nodes_without_a_process_list_are_not_reported_not_idle():
    """A node whose probe reported no processes at all is not said to run nothing."""
    names = nodes(5)
    facts = process_facts(names[:-1], {})
    facts["kernel"]["node05"] = "6.1"  # node05 is in the inventory, its process section failed
    found = fact_findings(facts)
    assert found["process.sshd"].evidence["minority"] == {NOT_REPORTED: "node05"}
    assert "not reported" in found["process.sshd"].message
