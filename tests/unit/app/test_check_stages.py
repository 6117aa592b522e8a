"""The staged check on a scripted cluster: stages in order, stopping on
warnings unless told to go on, resuming an interrupted check where it stopped,
and a report with a section per stage."""

from __future__ import annotations

import json
import re

import pytest

from oddnode.app.check import CheckPlan, ResumeError, resumable_check, run_check
from oddnode.findings import Sensitivity
from oddnode.report.html import render_report
from oddnode.store import open_store
from oddnode.reach.base import Target
from support.clusters.check import NODES, ScriptedCluster, plan


def named(findings):
    return {(f.kind, f.subject, f.nodes) for f in findings}


@pytest.mark.slow
def test_identical_nodes_pass_every_stage(store):
    cluster = ScriptedCluster()
    result = run_check(store, Target(NODES, cluster), plan())
    assert [stage.name for stage in result.stages] == ["diagnostics", "memory"]
    assert result.analysis.findings == [] and result.analysis.ready
    assert result.stopped_after is None and result.not_run == ()
    assert cluster.kernel_calls == 3
    assert store.latest_check()[1] == "finished"
    with pytest.raises(ResumeError, match="finished: there is nothing to resume"):
        resumable_check(store)


@pytest.mark.slow
def test_a_slow_node_is_the_memory_stages_only_finding(store):
    result = run_check(store, Target(NODES, ScriptedCluster(speed={"node03": 0.5})), plan())
    memory = result.stages[1]
    assert {f.nodes for f in memory.blocking} == {"node03"}
    assert all(f.subject.startswith("memory.") for f in memory.blocking)
    assert not result.analysis.ready
    html = render_report(result.analysis, result)
    assert 'id="stage-diagnostics"' in html and 'id="stage-memory"' in html
    assert re.search(r"<td>node03</td><td class=\"num flagged\">", html)
    assert not re.search(r"<td>node0[124-8]</td><td class=\"num flagged\">", html)
    # Each finding once, in its stage; the histograms of what no finding
    # names are folded away; one Interconnect in the navigation at most.
    for finding in memory.blocking:
        assert html.count(finding.message) == 1, finding.message
    assert f"Findings (0 of warning severity or above, besides the {len(result.analysis.findings)} in the stages above)" in html
    assert "Every finding is in its stage's section above." in html
    flagged = sum(1 for f in memory.blocking)
    memory_section = html.split('id="stage-memory"')[1].split("</section>")[0]
    shown, folded = memory_section.split("<details>") if "<details>" in memory_section else (memory_section, "")
    assert shown.count("<svg") == flagged and folded.count("<svg") == 0


@pytest.mark.slow
def test_the_check_judges_with_the_sensitivity_it_is_given(tmp_path):
    # node03 20% slow: a warning by default, nothing when only 25% or more is worth one.
    for min_effect, expected in ((0.01, {"node03"}), (0.25, set())):
        with open_store(tmp_path / f"{min_effect}.duckdb") as store:
            result = run_check(store, Target(NODES, ScriptedCluster(speed={"node03": 0.8})), plan(),
                               sensitivity=Sensitivity(min_effect=min_effect))
        assert {f.nodes for f in result.stages[1].blocking} == expected, min_effect


@pytest.mark.slow
def test_diagnostics_warnings_stop_the_check_until_resumed_with_continue(store):
    cluster = ScriptedCluster(facts={"node05": {"kernel": "5.10.0-28-amd64"}})
    target = Target(NODES, cluster)
    stopped = run_check(store, target, plan())
    assert stopped.stopped_after == "diagnostics" and stopped.not_run == ("memory",)
    assert named(stopped.stages[0].blocking) == {("inconsistent-fact", "kernel", "node05")}
    assert cluster.kernel_calls == 0
    assert "not run: the check stopped after diagnostics" in render_report(stopped.analysis, stopped)

    check_id, described, stored_plan = resumable_check(store)
    assert check_id == stopped.check_id and described["nodes"] == NODES and stored_plan == plan()
    again = run_check(store, target, stored_plan, resume=check_id)  # without --continue: stops again
    assert again.stopped_after == "diagnostics" and cluster.kernel_calls == 0

    went_on = run_check(store, target, stored_plan, resume=check_id, keep_going=True)
    assert went_on.stopped_after is None and cluster.kernel_calls == 3
    assert went_on.inventory is None  # the inventory was not taken again
    assert named(went_on.analysis.findings) == {("inconsistent-fact", "kernel", "node05")}
    assert store.latest_check()[1] == "finished"


@pytest.mark.slow
def test_an_interrupted_check_resumes_at_the_repetition_it_lacks(store):
    cluster = ScriptedCluster(interrupt_at=2)
    with pytest.raises(KeyboardInterrupt):
        run_check(store, Target(NODES, cluster), plan())
    repetitions = store.con.execute("SELECT DISTINCT repetition FROM raw_outputs").fetchall()
    assert repetitions == [(1,)]  # the finished repetition is kept

    check_id, described, stored_plan = resumable_check(store)
    cluster.interrupt_at = None
    result = run_check(store, Target(described["nodes"], cluster), stored_plan, resume=check_id)
    assert result.stages[1].runs["memory"].repetitions == 2  # repetitions 2 and 3 only
    assert store.con.execute(
        "SELECT count(DISTINCT repetition), count(DISTINCT run_id) FROM raw_outputs").fetchone() == (3, 1)
    assert result.analysis.ready and store.latest_check()[1] == "finished"


def test_plans_are_checked_and_kept_in_stab_order():
    assert CheckPlan(stages=("disk", "memory")).stages == ("memory", "disk")
    with pytest.raises(ValueError, match="unknown stage network"):
        CheckPlan(stages=("network",))
    with pytest.raises(ValueError, match="repetitions must be >= 1"):
        CheckPlan(repetitions=0)
    with pytest.raises(KeyError, match="no step named 'stream'"):
        CheckPlan(parameters={"stream": {}})
    assert CheckPlan.from_json(json.loads(json.dumps(plan().to_json()))) == plan()


def test_a_bad_benchmark_parameter_is_refused_before_anything_runs():
    with pytest.raises(ValueError, match="absolute"):
        CheckPlan(parameters={"disk": {"directory": "scratch"}}).validate()
    CheckPlan(parameters={"disk": {"directory": "scratch"}}, skip=("disk",)).validate()
