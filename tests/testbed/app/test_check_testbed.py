"""The diagnostics stage end to end, over ssh, on 8 real testbed nodes (root)."""

from __future__ import annotations

import time

import pytest

from oddnode import testbed as tb
from oddnode.app.check import CheckPlan, make_target, run_check
from oddnode.core.model import Severity
from oddnode.judge.analysis import analyze
from oddnode.store import open_store
from support.testbed import clean, needs_root, running_testbed  # noqa: F401 (clean: a fixture)

pytestmark = needs_root


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    yield from running_testbed(tmp_path_factory, 8)


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


# Arrays of 8 M doubles (64 MB): smaller than 4x the last-level cache of a large
# server, enough for 8 nodes sharing this machine's memory at once.  One thread
# and loops of half a second: the nodes' CPU quotas then bind evenly (see
# oddnode.testbed.cgroups and memory.c's -m).
MEMORY_PLAN = CheckPlan(stages=("memory",), repetitions=3, parameters={
    "memory": {"elements": 8_000_000, "ntimes": 3, "threads": 1, "min_loop_seconds": 0.5}})


# The competing process's workers: four, so that the memory kernel's thread
# gets a fifth of node03's CPU time.  With one per CPU (two) it got a third,
# and on this machine, busy with other tests besides, the other nodes' own
# bandwidth fell far enough now and then for node03 to be no outlier.
HOG_WORKERS = 4


def test_a_competing_process_is_named_by_the_diagnostics_and_benchmarks_run_past_it(clean, tmp_path):
    tb.fault_process(clean.state_dir, "node03", tb.hog_argv(seconds=600, workers=HOG_WORKERS), 600)
    target = make_target(clean.nodes, "ssh", clean.ssh_config)
    with open_store(tmp_path / "hog.duckdb") as store:
        stopped = run_check(store, target, MEMORY_PLAN)
        assert stopped.stopped_after == "diagnostics" and stopped.not_run == ("memory",)
        assert {(f.subject, f.nodes) for f in stopped.analysis.findings} == {
            ("process.oddnode-hog", "node03"), ("process.timeout", "node03")}
        went_on = run_check(store, target, MEMORY_PLAN, keep_going=True, resume=stopped.check_id)
    memory = went_on.stages[1]
    assert memory.runs["memory"].per_node["node03"]["ok"] == 3
    # The memory stage names node03 as a low outlier in at least one of its
    # four bandwidths (the hog leaves it a fraction of the others'), and
    # nothing is named but node03.
    low = {f.subject for f in went_on.analysis.findings if f.kind == "outlier" and f.evidence["side"] == "low"}
    assert low & {f"memory.{kernel}:bandwidth" for kernel in ("copy", "scale", "add", "triad")}, \
        summary(went_on.analysis.findings)
    assert {f.nodes for f in went_on.analysis.findings} == {"node03"}, summary(went_on.analysis.findings)
    # Their remedy starts with the process the diagnostics found.
    for finding in went_on.analysis.findings:
        if finding.kind == "outlier" and finding.evidence["worse"]:
            assert finding.evidence["competing_processes"] == {"node03": ["oddnode-hog", "timeout"]}
            assert finding.remedy.startswith("node03 runs oddnode-hog, timeout, which the other nodes do not")


def test_idle_nodes_give_no_memory_finding(clean, tmp_path):
    if clean.cpu_sharing is not None:
        pytest.skip(f"testbed nodes share CPUs as plain processes here: {clean.cpu_sharing}")
    target = make_target(clean.nodes, "ssh", clean.ssh_config)
    with open_store(tmp_path / "idle.duckdb") as store:
        result = run_check(store, target, MEMORY_PLAN)
    assert result.analysis.findings == [], summary(result.analysis.findings)


def test_a_repaired_node_checked_alone_into_the_store_makes_the_cluster_ready(clean, tmp_path):
    """The administrator's loop: the check names the slow node; with the
    fault gone, a check of that node alone into the same store replaces its
    results and no other node's, the store's analysis says READY, and its
    history shows the change."""
    tb.fault_process(clean.state_dir, "node03", tb.hog_argv(seconds=600, workers=HOG_WORKERS), 600)
    with open_store(tmp_path / "loop.duckdb") as store:
        slow = run_check(store, make_target(clean.nodes, "ssh", clean.ssh_config), MEMORY_PLAN, keep_going=True)
        assert {f.nodes for f in slow.analysis.findings} == {"node03"}, summary(slow.analysis.findings)
        tb.clear_faults(clean.state_dir)
        alone = run_check(store, make_target(["node03"], "ssh", clean.ssh_config), MEMORY_PLAN)
        assert alone.analysis.findings == [], summary(alone.analysis.findings)
        judged = analyze(store.load_dataset())
        history = store.node_history("node03")
    assert judged.findings == [] and judged.ready, summary(judged.findings)
    triad = next(s for s in judged.dataset.series if s.name == "memory.triad:bandwidth")
    assert sorted(triad.labels.tolist()) == clean.nodes
    (runs,) = [s.runs for s in history.series if s.name == "memory.triad:bandwidth"]
    (before, after) = [(run.value, run.command) for run in runs]
    assert before[0] < 0.8 * after[0], runs
