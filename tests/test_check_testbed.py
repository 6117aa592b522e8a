"""The diagnostics stage end to end, over ssh, on 8 real testbed nodes (root)."""

from __future__ import annotations

import time

import pytest

from oddnode import testbed as tb
from oddnode.check import CheckPlan, make_target, run_check
from oddnode.model import Severity
from oddnode.store import open_store
from testbed_support import needs_root, running_testbed

pytestmark = needs_root


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    yield from running_testbed(tmp_path_factory, 8)


@pytest.fixture
def clean(bed):
    """Every test starts from, and leaves, a testbed without faults."""
    tb.clear_faults(bed.state_dir)
    yield bed
    tb.clear_faults(bed.state_dir)


def check(bed, tmp_path, timeout=30.0, nodes=None):
    target = make_target(nodes or bed.nodes, "ssh", bed.ssh_config)
    with open_store(tmp_path / "check.duckdb") as store:
        return run_check(store, target, CheckPlan(stages=(), probe_timeout=timeout))


def summary(findings):
    return {(f.kind, f.subject, f.nodes) for f in findings}


def test_identical_nodes_give_every_fact_and_no_finding(clean, tmp_path):
    result = check(clean, tmp_path)
    assert sorted(result.inventory.reports) == clean.nodes
    for report in result.inventory.reports.values():
        assert {"cpu_model", "memory_total_kb", "kernel", "os", "bios_date"} <= report.facts.keys()
    assert result.analysis.findings == []
    assert result.analysis.ready


def test_two_fact_faults_are_exactly_the_two_inconsistencies(clean, tmp_path):
    tb.fault_file(clean.state_dir, "node03", "/sys/class/dmi/id/bios_date", "09/02/2004\n")
    tb.fault_file(clean.state_dir, "node06", "/proc/meminfo", tb.meminfo_with_total(tb.real_memory_total_kib() * 3 // 4))
    result = check(clean, tmp_path)
    assert summary(result.analysis.findings) == {
        ("inconsistent-fact", "bios_date", "node03"),
        ("inconsistent-fact", "memory_total_kb", "node06"),
    }
    bios = next(f for f in result.analysis.findings if f.subject == "bios_date")
    assert "node03: 09/02/2004" in bios.message and bios.severity is Severity.WARNING
    assert not result.analysis.ready


def test_a_node_without_sshd_is_unreachable_and_the_others_complete(clean, tmp_path):
    tb.stop_sshd(clean.state_dir, "node07")
    result = check(clean, tmp_path)
    assert sorted(result.inventory.reports) == [n for n in clean.nodes if n != "node07"]
    assert list(result.inventory.unreachable) == ["node07"]
    assert summary(result.analysis.findings) == {("unreachable", "inventory", "node07")}
    assert "Connection refused" in result.analysis.findings[0].message


def test_a_hanging_probe_is_cut_at_its_timeout(clean, tmp_path):
    tb.fault_hang(clean.state_dir, "node05", "/etc/os-release")  # as on a stuck file system
    started = time.monotonic()
    result = check(clean, tmp_path, timeout=4.0)
    elapsed = time.monotonic() - started
    assert elapsed < 20
    assert sorted(result.inventory.reports) == [n for n in clean.nodes if n != "node05"]
    assert summary(result.analysis.findings) == {("timeout", "inventory", "node05")}
