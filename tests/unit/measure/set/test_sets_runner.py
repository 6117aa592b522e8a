"""Set runs on a scripted cluster: which node launches what, what is
stored (values, failures with each member's reason), the steps of the
check's sets stage, and the ``sets`` and ``scale`` commands."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from oddnode.judge.analysis import analyze
from oddnode.core.nodes import fold
from oddnode.readings.sets import failed_set_members, scaling_curves
from oddnode.measure.set.jobs import HOSTFILE, check_template, command_job, template_argv
from oddnode.measure.set.runner import (
    MAX_LAUNCH_RUN_SECONDS,
    SetsOptions,
    check_set_size_for,
    run_scale,
    run_sets,
)
from oddnode.store import open_store
from oddnode.reach.base import NodeResult, NodeStatus, Target

from support.cli import invoke
from support.outputs import runner_report
from support.clusters.sets import FIXTURES, SIZES, SetCluster, TWELVE, job_spec, set_output


def job_for(target: Target, size: int):
    return SetsOptions(sizes=SIZES, seconds_per_size=0.05).job(target, size)


def test_the_rounds_of_an_ordering_run_in_one_launch_and_each_set_is_stored_under_its_node_set(store):
    cluster = SetCluster()
    target = Target(TWELVE, cluster)
    summary = run_sets(store, target, job_for(target, 4), "sorted", 2, size=4)
    # mpirun starts every member's rank from its own build: all nodes build.
    assert cluster.prepared == [TWELVE]
    # One launch from the first node, a rank on every node, both rounds in it.
    assert cluster.launches == [TWELVE]
    assert cluster.rounds == [{"node01": TWELVE[0:4], "node05": TWELVE[4:8], "node09": TWELVE[8:12]}] * 2
    assert summary.count("ok") == 6 and summary.notes == []
    labels = {label for (label,) in store.con.execute(
        "SELECT DISTINCT label FROM results WHERE benchmark = 'sets.sendrecv.sorted'").fetchall()}
    assert labels == {"node[01-04]", "node[05-08]", "node[09-12]"}
    runs = {(r.benchmark, r.metric): r for r in store.load_dataset().set_runs}
    sendrecv = runs[("sets.sendrecv.sorted", "bandwidth.1048576")]
    assert len(sendrecv) == 6 and sorted(set(sendrecv.repetitions.tolist())) == [1, 2]


def test_shuffled_sets_change_every_repetition_and_the_nodes_left_over_are_named(store):
    cluster = SetCluster()
    nodes = TWELVE[:10]
    target = Target(nodes, cluster)
    summary = run_sets(store, target, job_for(target, 4), "shuffled", 3, size=4, seed=7)
    sets_per_round = [sorted(map(tuple, r.values())) for r in cluster.rounds]
    assert len(set(map(tuple, sets_per_round))) == 3  # reshuffled every time
    assert all(len(r) == 2 for r in cluster.rounds)
    assert len(summary.notes) == 3 and all("sat out" in note for note in summary.notes)
    for note, sets in zip(summary.notes, cluster.rounds):
        idle = set(nodes) - {n for members in sets.values() for n in members}
        assert fold(idle) in note


def test_a_set_that_fails_is_kept_with_each_unreachable_members_reason(store):
    cluster = SetCluster(down={"node06"})
    target = Target(TWELVE, cluster)
    summary = run_sets(store, target, job_for(target, 4), "sorted", 2, size=4)
    assert summary.count("failed") == 2 and summary.count("ok") == 4
    assert all("node[05-08]" in line for line in summary.problems)
    dataset = store.load_dataset()
    failures = [f for f in dataset.failures if f.benchmark == "sets.sendrecv.sorted"]
    assert {f.label for f in failures} == {"node[05-08]"}
    (parameters,) = store.con.execute("""SELECT DISTINCT parameters FROM results
                                          WHERE benchmark = 'sets.sendrecv.sorted' AND NOT valid""").fetchall()[0]
    reasons = json.loads(parameters)["member_reasons"]
    assert list(reasons) == ["node06"] and reasons["node06"].startswith("unreachable")
    (common,) = [c for c in failed_set_members(dataset) if c.benchmark == "sendrecv"]
    assert common.runs == 2 and dict(common.counts)["node06"] == 2
    status = store.con.execute("SELECT node, status FROM node_status WHERE node = 'node06'").fetchall()
    assert status and all(s == "unreachable" for _, s in status)


def test_a_set_whose_data_came_back_wrong_is_invalid_and_says_who_sent_it(store):
    class Corrupting(SetCluster):
        def run_each(self, commands, *, timeout):
            results = super().run_each(commands, timeout=timeout)
            first = "node05"
            members = self.rounds[-1][first]
            bad = set_output(members, 1.0, validation=(
                f"validation failed sendrecv rank=2 host={members[2]} from_rank=1 from_host={members[1]} bad=3/20 "
                "bytes=65536 batch=1 offset=17 expected=0x11 got=0x00"))
            results[first] = NodeResult(first, NodeStatus.OK, runner_report(bad), "", 0, 1.0)
            return results

    target = Target(TWELVE, Corrupting())
    summary = run_sets(store, target, job_for(target, 4), "sorted", 1, size=4)
    assert summary.outcomes[(1, "node[05-08]")][0] == "invalid"
    assert "node06" in summary.outcomes[(1, "node[05-08]")][1] and "node07" in summary.outcomes[(1, "node[05-08]")][1]
    valid = store.con.execute("""SELECT DISTINCT valid FROM results WHERE label = 'node[05-08]'""").fetchall()
    assert valid == [(False,)]


@pytest.mark.slow
def test_a_slow_node_is_named_weak_set_member_and_a_healthy_cluster_nothing(tmp_path):
    for weak, expected in (({"node07"}, ["node07"]), (set(), [])):
        with open_store(tmp_path / f"weak{len(weak)}.duckdb") as store:
            target = Target(TWELVE, SetCluster(weak=weak, factor=3.0))
            job = job_for(target, 4)
            for ordering in ("sorted", "shuffled"):
                run_sets(store, target, job, ordering, 6, size=4, seed=3)
            findings = analyze(store.load_dataset(), correlations=False).findings
            named = sorted({f.nodes for f in findings if f.kind == "weak-set-member"})
            assert named == expected
            assert not [f for f in findings if f.kind.startswith("set") and f.severity.value == "warning"]


def test_sizes_a_slow_set_cut_by_their_time_are_named_once_per_ordering(store):
    cluster = SetCluster(weak={"node05"}, cut_sizes={SIZES[-1]})
    target = Target(TWELVE, cluster)
    summary = run_sets(store, target, job_for(target, 4), "sorted", 2, size=4)
    assert summary.notes == [f"sets.sorted: sizes cut by their time (--seconds-per-size) before the timed batches "
                             f"they want, their medians resting on fewer samples: {SIZES[-1]} B in 2 runs"]
    (labels,) = store.con.execute("""SELECT list(DISTINCT label) FROM results
                                     WHERE json_extract(parameters, '$.cut_by_time')::BOOLEAN""").fetchone()
    assert labels == ["node[05-08]"]


@pytest.mark.slow
def test_scale_runs_one_set_per_count_alone_and_stores_a_curve_per_ordering(store):
    cluster = SetCluster()
    target = Target(TWELVE, cluster)
    job = job_for(target, 12)
    for ordering in ("sorted", "shuffled"):
        run_scale(store, target, job, ordering, 2, counts=[2, 4, 8, 12], seed=1)
    assert all(len(r) == 1 for r in cluster.rounds)  # each count alone
    sorted_sets = [members for r in cluster.rounds[:8] for members in r.values()]
    assert sorted_sets[:4] == [TWELVE[:2], TWELVE[:4], TWELVE[:8], TWELVE]
    curves = {(c.metric, c.ordering): c for c in scaling_curves(store.load_dataset())
              if c.benchmark == "sendrecv"}
    curve = curves[("bandwidth.1048576", "shuffled")]
    assert curve.counts == [2, 4, 8, 12] and all(p.n == 2 for p in curve.points)


def test_the_sets_of_a_round_start_together_and_a_set_alone_at_once(store):
    cluster = SetCluster()
    target = Target(TWELVE, cluster)
    run_sets(store, target, job_for(target, 4), "sorted", 1, size=4)
    # A job that launches each set on its own (a command template, srun):
    run_scale(store, target, replace(job_for(target, 12), rounds_argv=None), "sorted", 1, counts=[2, 12])
    together, *alone = cluster.starts
    assert len(together) == 3 and len(set(together.values())) == 1 and all(together.values())
    assert alone == [{"node01": ()}, {"node01": ()}]
    assert cluster.launches == []


def test_a_failed_launch_of_several_rounds_leaves_them_and_the_rest_to_a_launch_per_set(store):
    cluster = SetCluster(down={"node06"})
    target = Target(TWELVE, cluster)
    summary = run_sets(store, target, job_for(target, 4), "sorted", 3, size=4)
    assert cluster.launches == [TWELVE]
    assert summary.notes == ["sets.sorted: one launch of several rounds failed (failed: ORTE was unable to reach a "
                             "node); rounds 1-3 of 3 and every later one ran a launch per set"]
    # Set by set, the failure is pinned on the set of the node that is down.
    assert len(cluster.rounds) == 3 and summary.count("ok") == 6
    assert {label for (_, label), (outcome, _) in summary.outcomes.items() if outcome == "failed"} == {"node[05-08]"}


def test_a_launch_cut_short_keeps_the_rounds_it_finished(store):
    class DyingInRoundThree(SetCluster):
        def run_plan(self, node, spec):
            result = super().run_plan(node, spec)
            report = json.loads(result.stdout)
            stdout = report["stdout"]
            cut = stdout[:stdout.index("== round 3 set 2")]
            return NodeResult(node, NodeStatus.OK, runner_report(cut, returncode=1,
                                                                  stderr="mpirun noticed that node09 died"), "", 0, 1.0)

    cluster = DyingInRoundThree()
    target = Target(TWELVE, cluster)
    summary = run_sets(store, target, job_for(target, 4), "sorted", 4, size=4)
    assert summary.count("ok") == 12
    assert summary.notes == ["sets.sorted: one launch of several rounds failed (exit status 1: mpirun noticed that "
                             "node09 died); rounds 3-4 of 4 and every later one ran a launch per set"]
    # Rounds 1 and 2 came from the launch; round 3, cut, and 4 ran set by set.
    assert [len(starts) for starts in cluster.starts] == [0, 0, 0, 0, 3, 3]
    repetitions = store.con.execute("""SELECT repetition, count(DISTINCT label) FROM results
                                       WHERE benchmark = 'sets.sendrecv.sorted' GROUP BY ALL ORDER BY 1""").fetchall()
    assert repetitions == [(1, 3), (2, 3), (3, 3), (4, 3)]


def test_rounds_of_pairs_and_of_larger_sets_never_share_a_launch(store):
    # Open MPI binds a launch of two ranks to cores, a larger one to
    # packages: each set must be bound as it would be alone.
    cluster = SetCluster()
    target = Target(TWELVE, cluster)
    run_scale(store, target, job_for(target, 12), "sorted", 2, counts=[2, 4, 12])
    assert [len(sets["node01"]) for sets in cluster.rounds] == [2, 4, 12, 2, 4, 12]
    assert cluster.launches == [TWELVE, TWELVE]  # 4 and 12 of each repetition; each pair alone, set by set
    assert [len(starts) for starts in cluster.starts] == [1, 0, 0, 1, 0, 0]


def test_a_launch_takes_as_many_rounds_as_its_time_bound_allows(store):
    cluster = SetCluster()
    target = Target(TWELVE, cluster)
    job = job_for(target, 4)
    run_sets(store, target, replace(job, run_seconds=MAX_LAUNCH_RUN_SECONDS / 2), "sorted", 5, size=4)
    assert [len(nodes) for nodes in cluster.launches] == [12, 12]  # rounds 1-2, 3-4, then 5 alone: set by set
    assert [len(starts) for starts in cluster.starts] == [0, 0, 0, 0, 3]


@pytest.mark.slow
def test_the_shuffled_curve_falling_behind_a_slow_uplink_is_a_scaling_loss_healthy_is_not(tmp_path):
    groups = {node: f"leaf{1 + i // 4}" for i, node in enumerate(TWELVE)}
    topology = {node: group for node, group in groups.items()}
    for slow, named in ((True, "node[05-08]"), (False, None)):
        with open_store(tmp_path / f"scale{slow}.duckdb") as store:
            with store.transaction():
                store.set_topology(store.new_run("topology"), topology)
            slow_groups = {n: g for n, g in groups.items() if g == "leaf2"} if slow else {}
            target = Target(TWELVE, SetCluster(slow_groups=slow_groups))
            job = job_for(target, 12)
            for ordering in ("sorted", "shuffled"):
                run_scale(store, target, job, ordering, 3, counts=[2, 4, 8, 12], seed=5)
            findings = [f for f in analyze(store.load_dataset(), correlations=False).findings
                        if f.kind == "scaling-loss" and f.subject.startswith("scale.sendrecv.")]
            assert [f.nodes for f in findings] == ([named] if named else [])


# --- installed applications from a command template ---------------------------------


def test_a_command_template_is_filled_per_set_with_a_hostfile_of_its_members():
    words = check_template("mpirun -np {ranks} --hostfile {hostfile} --host {hosts} bt.B.x")
    assert template_argv(words, ["cn-0003", "cn-0001"]) == [
        "mpirun", "-np", "2", "--hostfile", HOSTFILE, "--host", "cn-0003,cn-0001", "bt.B.x"]
    job = command_job("mpirun -np {ranks} --hostfile {hostfile} bt.B.x", "npb")
    spec = job_spec(job.argv(["cn-0003", "cn-0001"]))
    assert spec["tool"] == "mpirun" and spec["files"][HOSTFILE] == "cn-0003 slots=1\ncn-0001 slots=1\n"


@pytest.mark.parametrize("template, problem", [
    ("", "empty"), ("{hosts} run", "start with a program"), ("mpirun -np {cores} x", "unknown or malformed"),
    ("mpirun 'unclosed", "No closing quotation")])
def test_a_bad_command_template_is_refused_before_any_run(template, problem):
    with pytest.raises(ValueError, match=problem):
        command_job(template, "npb")


def test_an_unknown_parser_for_a_command_is_refused():
    with pytest.raises(Exception, match="unknown parser|no parser|known"):
        command_job("mpirun -np {ranks} bt.B.x", "no-such-tool")


def tool_report(stdout: str, returncode: int = 0) -> str:
    return json.dumps({"runner_version": 1, "tool": "mpirun", "tool_path": "/usr/bin/mpirun", "tool_version": None,
                       "cpu_model": "Test CPU", "returncode": returncode, "stdout": stdout, "stderr": "",
                       "collected": {}}) + "\n"


def test_an_applications_output_is_read_by_its_parser_and_a_failed_verification_is_invalid():
    npb = next((FIXTURES / "npb").glob("*.txt"), None) or next((FIXTURES / "npb").iterdir())
    text = npb.read_text()
    job = command_job("mpirun -np {ranks} --host {hosts} bt.B.x", "npb")
    parsed = job.parse(tool_report(text), "node[01-04]")
    assert parsed.measurements and parsed.valid == ("UNSUCCESSFUL" not in text)
    failed = text.replace("SUCCESSFUL", "UNSUCCESSFUL") if "UNSUCCESSFUL" not in text else text
    assert not job.parse(tool_report(failed), "node[01-04]").valid
    exited = job.parse(tool_report(text, returncode=1), "node[01-04]")
    assert not exited.valid and any("exited with status 1" in p for p in exited.problems)


# --- the check's sets stage and the commands -----------------------------------------


def test_a_check_shrinks_its_sets_so_that_there_are_two_and_says_so():
    assert check_set_size_for(100, 8) == (8, None)
    size, note = check_set_size_for(8, 8)
    assert size == 4 and "8 nodes make fewer than two sets of 8" in note
    assert check_set_size_for(3, 8)[0] == 2


def test_set_options_refuse_what_would_fail_the_step():
    with pytest.raises(ValueError, match="ordering"):
        SetsOptions(orderings=("sorted", "random"))
    with pytest.raises(ValueError, match="parser"):
        SetsOptions(command="mpirun bt.B.x")
    with pytest.raises(ValueError, match="at least 2"):
        SetsOptions(size=1)


@pytest.mark.slow
def test_the_sets_command_prints_the_table_and_the_weak_member_and_offers_it_all_as_json(scripted, tmp_path):
    scripted(SetCluster(weak={"node03"}), TWELVE)
    db = tmp_path / "cli.duckdb"
    common = ["-k", "4", "-r", "6", "--sizes", ",".join(map(str, SIZES)), "--seconds-per-size", "0.05",
              "--db", db]
    result = invoke("sets", *common)
    assert result.exit_code == 1, result.output  # a finding
    assert "sets sorted: 18 set runs" in result.text and "weak-set-member" in result.text
    assert "node03" in result.text
    as_json = invoke("sets", *common, "--json")
    assert as_json.exit_code == 1, as_json.output
    document = json.loads(as_json.stdout)
    named = [f for f in document["findings"] if f["kind"] == "weak-set-member"]
    assert {f["nodes"] for f in named} == {"node03"}
    assert {f["subject"].split(".")[1] for f in named} <= {"sendrecv", "allreduce", "alltoall", "barrier"}
    assert set(document["runs"]) == {"sorted", "shuffled"} and "sets" in document


def test_the_scale_command_refuses_counts_beyond_the_nodes(scripted, tmp_path):
    scripted(SetCluster(), TWELVE)
    result = invoke("scale", "--counts", "2,4,16", "--db", tmp_path / "x.duckdb")
    assert result.exit_code != 0 and "from 2 to 12" in result.text


def test_the_check_types_the_sets_stage_options():
    from oddnode.measure import catalog
    from oddnode.measure.plan import make_plan, parse_settings

    plan = make_plan(stages=("sets",), parameters=parse_settings(["sets.size=4", "sets.orderings=shuffled"]))
    options = plan.options("sets")
    assert options.size == 4 and options.orderings == ("shuffled",)
    assert catalog.stage_of("scale") == "sets" and not catalog.get_step("scale").default


@pytest.mark.parametrize("step", ["sets", "scale"])
def test_a_check_refuses_a_set_job_it_could_not_run_before_any_run(step):
    from oddnode.measure import catalog
    from oddnode.measure.steps import make_options

    checked = catalog.get_step(step)
    with pytest.raises(Exception, match="no parser named 'nope'"):
        checked.check(make_options(checked, {"command": "mpirun bt.B.x", "parser": "nope"}))
    with pytest.raises(ValueError, match="message size|sizes: wants a whole number from 0"):
        checked.check(make_options(checked, {"sizes": [-1]}))
