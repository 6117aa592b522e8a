"""A site's own program on every node (check --command CMD --parser NAME):
run R times, each node's best judged, the output read by a registered
parser; a slow node named, a healthy cluster silent, a failing run a
failure of its node, bad options refused before anything runs."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from oddnode.app.check import CheckPlan, run_check
from oddnode.reach.base import NodeResult, NodeStatus, Target
from oddnode.reach.jobs import PREPARE_OPTION, RUNNER_VERSION
from support.cli import FIXTURES, invoke
from support.clusters.check import ScriptedCluster

NODES = [f"r{rack}n{slot:02d}" for rack in (1, 2) for slot in range(1, 9)]
NPB = (FIXTURES / "npb" / "bt.S.serial.out").read_text()


def npb_output(factor: float, verified: bool = True) -> str:
    """The real NPB output with its Mop/s scaled (and its verification failed)."""
    text = re.sub(r"(Mop/s total\s+=\s+)(\S+)", lambda m: f"{m.group(1)}{float(m.group(2)) * factor:.2f}", NPB)
    return text if verified else text.replace("SUCCESSFUL", "UNSUCCESSFUL").replace("Successful", "Failed")


class SiteCluster(ScriptedCluster):
    """Runs the site's program as NPB's BT would: ``speed`` scales a node's
    Mop/s, ``failing`` nodes exit 1 with a failed verification."""

    def __init__(self, speed=None, failing=()):
        super().__init__()
        self.speed, self.failing, self.jobs = speed or {}, set(failing), []

    def run(self, nodes, argv, *, timeout):
        job = self._job(argv)
        if job is None or "tool" not in job or PREPARE_OPTION in argv:
            return super().run(nodes, argv, timeout=timeout)
        self.jobs.append(job)
        self.kernel_calls += 1
        results = {}
        for i, node in enumerate(nodes):
            failing = node in self.failing
            stdout = npb_output(self.speed.get(node, 1.0) * (1 + 0.003 * ((i + self.kernel_calls) % 4)), not failing)
            report = {"runner_version": RUNNER_VERSION, "tool": job["tool"], "tool_path": f"/opt/npb/{job['tool']}",
                      "tool_version": None, "cpu_model": "Test CPU", "returncode": 1 if failing else 0,
                      "stdout": stdout, "stderr": "", "collected": {}}
            results[node] = NodeResult(node, NodeStatus.OK, json.dumps(report) + "\n", "", 0, 1.0)
        return results


def plan(**command) -> CheckPlan:
    return CheckPlan(stages=("compute",), repetitions=3, skip=("dgemm", "hpl"), add=("command",),
                     parameters={"command": {"command": "bt.S.x --class S", "parser": "npb", **command}})


def check(tmp_path, cluster, **command):
    from oddnode.store import open_store

    checked = plan(**command)
    checked.validate()  # as make_plan does: bad options refused before the check starts
    with open_store(tmp_path / "site.duckdb") as store:
        return run_check(store, Target(NODES, cluster), checked, keep_going=True), store.load_dataset()


@pytest.mark.slow
def test_the_program_runs_on_every_node_three_times_without_a_shell_and_a_slow_node_is_named(tmp_path):
    cluster = SiteCluster(speed={"r2n03": 0.6})
    result, dataset = check(tmp_path, cluster)
    assert [(job["tool"], job["args"]) for job in cluster.jobs] == [("bt.S.x", ["--class", "S"])] * 3
    rate = dataset.by_name("command.npb.bt.S:rate")
    assert sorted(rate.labels.tolist()) == sorted(NODES) and set(rate.repetitions.tolist()) == {3}
    named = {(f.kind, f.subject, f.nodes) for f in result.analysis.findings if f.severity.rank >= 1}
    assert ("outlier", "command.npb.bt.S:rate", "r2n03") in named
    assert {nodes for _, _, nodes in named} == {"r2n03"}


@pytest.mark.slow
def test_a_healthy_cluster_gives_no_finding(tmp_path):
    result, _ = check(tmp_path, SiteCluster())
    assert [f for f in result.analysis.findings if f.severity.rank >= 1] == []


@pytest.mark.slow
def test_a_run_that_fails_its_verification_is_a_failure_of_its_node(tmp_path):
    result, dataset = check(tmp_path, SiteCluster(failing={"r1n05"}))
    assert {f.label for f in dataset.failures} == {"r1n05"}
    assert "r1n05" not in dataset.by_name("command.npb.bt.S:rate").labels.tolist()
    assert any(f.nodes == "r1n05" for f in result.analysis.findings)


@pytest.mark.parametrize("command, message", [
    ({"parser": "nosuchtool"}, "nosuchtool"),
    ({"command": "'unclosed"}, "closing quotation"),
    ({"parser": None}, "give the parser"),
])
def test_bad_options_are_refused_before_anything_runs(tmp_path, command, message):
    cluster = SiteCluster()
    with pytest.raises(ValueError, match=message):
        check(tmp_path, cluster, **command)
    assert cluster.jobs == []


def test_the_check_s_command_flag_adds_the_step_with_its_options():
    shown = invoke("check", "--command", "cg.B.x", "--parser", "npb", "--command-timeout", "120", "--show-plan")
    assert shown.exit_code == 0, shown.output
    shown_plan = yaml.safe_load(shown.stdout)
    assert shown_plan["add"] == ["command"]
    assert shown_plan["steps"]["command"] == {"command": "cg.B.x", "parser": "npb", "output_file": None,
                                              "timeout": 120.0}
    refused = invoke("check", "--command", "cg.B.x", "--parser", "nosuchtool", "--show-plan")
    assert refused.exit_code == 2 and "nosuchtool" in refused.output
