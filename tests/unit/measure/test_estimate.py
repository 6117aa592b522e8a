"""A run's estimate from its plan and its time budget: each step's rounds
and sizes, a size's seconds as the upper bound its kernel keeps, the link
rate of the slowest measured pair in whatever unit it was stored, a plan
refused when it cannot fit, a run stopped between rounds once spent."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import yaml

from oddnode.measure import catalog, runner
from oddnode.measure.estimate import (
    PREPARE_SECONDS,
    ROUND_SECONDS,
    Budget,
    BudgetSpent,
    estimate_lines,
    ping_seconds,
    size_seconds,
    slowest_pair_rate,
)
from oddnode.measure.pair.pairs import PingPongOptions, pairs_estimate, run_pairs
from oddnode.measure.plan import CheckPlan
from oddnode.measure.set.runner import SetsOptions
from oddnode.reach.base import Target
from oddnode.store import open_store
from support.cli import invoke
from support.clusters.pairs import NODES, OPTIONS, PairCluster


def test_a_size_takes_its_seconds_and_one_more_round_trip_or_two_round_trips_when_slower():
    assert size_seconds(0.001, 0.2) == pytest.approx(0.201)
    # A round trip of 0.5 s cannot fit 0.2 s: a warm-up and one batch.
    assert size_seconds(0.5, 0.2) == pytest.approx(1.0)
    # The collectives' batches last 10 ms at the least.
    assert size_seconds(0.0, 0.2, batch=0.01) == pytest.approx(0.21)


def test_round_trips_count_only_at_a_known_rate():
    assert ping_seconds([0, 1 << 20], 0.2, None) == pytest.approx(0.4)
    # 1 MiB both ways at 1.25 MB/s (10 Mbit/s): 1.68 s a round trip, twice.
    assert ping_seconds([1 << 20], 0.2, 1.25e6) == pytest.approx(2 * 2 * (1 << 20) / 1.25e6)


def test_pairs_run_one_round_per_pattern_and_repetition_or_one_per_pair_serially():
    options = PingPongOptions(sizes=(0, 1024), seconds_per_size=0.5)
    together = pairs_estimate("pairs", options, 4, 12, 3)
    # A preparation per pattern: each is a run of its own.
    assert together.seconds == pytest.approx(4 * PREPARE_SECONDS + 12 * (ROUND_SECONDS + 1.0))
    assert "12 rounds" in together.line() and "2 sizes at most 0.5 s each" in together.line()
    serial = pairs_estimate("pairs", options, 4, 12, 3, serial=True)
    assert serial.seconds == pytest.approx(4 * PREPARE_SECONDS + 72 * (ROUND_SECONDS + 1.0))
    mpi = pairs_estimate("pairs", options, 4, 12, 3, kernel="mpi")
    assert mpi.seconds > together.seconds
    assert pairs_estimate("pairs", options, 4, 1, 3).seconds == 4 * PREPARE_SECONDS  # no pair on one node


def test_the_slowest_pairs_best_rate_in_bytes_per_second_whatever_its_unit():
    rates = [("a-b", "MB/s", 110.0), ("c-d", "Gbit/s", 0.5), ("c-d", "MB/s", 40.0), ("e-f", "us", 3.0),
             ("g-h", "furlongs/s", 1.0)]
    # c-d's best is 62.5 MB/s (0.5 Gbit/s); a time and an unknown unit say nothing of a rate.
    assert slowest_pair_rate(rates) == pytest.approx(62.5e6)
    assert slowest_pair_rate([("e-f", "us", 3.0)]) is None and slowest_pair_rate([]) is None


def test_sets_run_one_round_per_ordering_and_repetition_and_a_command_is_not_estimated():
    options = SetsOptions(sizes=(0, 1024), benchmarks=("sendrecv", "barrier"), seconds_per_size=0.1)
    estimate = catalog.get_step("sets").estimate(options, 12, 3)
    # sendrecv at 2 sizes, the barrier once (no size): 0.11 s each (a 10 ms
    # batch more); under mpirun one launch (2 s) per ordering runs its rounds.
    assert estimate.seconds == pytest.approx(2 * PREPARE_SECONDS + 6 * (ROUND_SECONDS + 3 * 0.11) + 2 * 2.0)
    # srun launches each set of each round.
    by_srun = catalog.get_step("sets").estimate(replace(options, launcher="srun"), 12, 3)
    assert by_srun.seconds == pytest.approx(2 * PREPARE_SECONDS + 6 * (ROUND_SECONDS + 2.0 + 3 * 0.11))
    command = SetsOptions(command="mpirun -np {ranks} --host {hosts} app", parser="npb")
    assert catalog.get_step("sets").estimate(command, 12, 3) is None


def test_a_check_plan_estimates_its_pair_and_set_steps_and_names_the_others():
    plan = CheckPlan(stages=("memory", "interconnect", "sets"), repetitions=2)
    estimates, unknown = plan.estimates(16)
    assert [e.step for e in estimates] == ["pairs", "bisection", "sets"] and unknown == ["memory"]
    lines = estimate_lines(estimates, unknown)
    assert lines[-1].startswith("in all about ") and lines[-1].endswith("besides memory (not estimated)")
    assert estimate_lines(estimates[:1]) == [estimates[0].line()]


def test_a_plan_over_its_budget_is_refused_naming_its_estimate():
    estimate = pairs_estimate("pairs", OPTIONS, 4, 12, 3)
    with pytest.raises(ValueError, match=r"the plan takes about .* \(pairs: about .*\), over --max-minutes 0\.1"):
        Budget(0.1).refuse([estimate])
    Budget(60).refuse([estimate])
    Budget(None).refuse([estimate])
    with pytest.raises(ValueError, match="above 0"):
        Budget(-1.0)


def test_a_spent_budget_stops_a_run_after_the_rounds_under_way_which_are_stored(store, monkeypatch):
    monkeypatch.setattr(runner, "MAX_BATCH_ROUNDS", 2)  # the rounds sent to the nodes together
    seen = []
    budget = Budget(1e-9)  # spent at once
    with pytest.raises(BudgetSpent, match="spent after round 2 of 3"):
        run_pairs(store, Target(NODES, PairCluster()), "sort", 3, options=OPTIONS,
                  on_progress=budget.watching(lambda done, total: seen.append((done, total))))
    assert seen == [(2, 3)]
    assert store.con.execute("SELECT DISTINCT repetition FROM results ORDER BY 1").fetchall() == [(1,), (2,)]
    # The last round done: nothing is left to stop.
    Budget(1e-9).watching(None)(3, 3)


def test_show_plan_ends_with_its_estimate_as_comments_and_stays_a_plan_file(tmp_path):
    result = invoke("check", "--show-plan", "-w", "node[01-12]", "--stages", "interconnect", "-r", 2)
    assert result.exit_code == 0, result.output
    comments = [line for line in result.output.splitlines() if line.startswith("#")]
    assert comments[0] == "# estimate on 12 nodes:"
    assert comments[1].startswith("# pairs: about ") and comments[-1].startswith("# in all about ")
    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text(result.output)
    assert yaml.safe_load(result.output)["repetitions"] == 2
    again = invoke("check", "--show-plan", "-w", "node[01-12]", "--plan", plan_file)
    assert again.output == result.output


def test_pairs_refuse_a_budget_their_plan_cannot_fit_before_anything_runs(scripted, tmp_path):
    cluster = scripted(PairCluster(), NODES)
    result = invoke("pairs", "--patterns", "sort,cut", "-r", 2, "--sizes", "0,1024", "--port", 6211,
                    "--max-minutes", 0.01, "--db", tmp_path / "p.duckdb")
    assert result.exit_code == 2, result.output
    assert "over --max-minutes 0.01" in result.text and "pairs: about" in result.text
    assert cluster.rounds == []


@pytest.mark.parametrize("step, args", [("sets", ("-k", "4")), ("scale", ("--counts", "2,4"))])
def test_sets_and_scale_refuse_a_budget_naming_the_estimate_their_step_makes(scripted, tmp_path, step, args):
    from support.clusters.sets import SIZES, SetCluster, TWELVE

    cluster = scripted(SetCluster(), TWELVE)
    sizes = ",".join(map(str, SIZES))
    result = invoke(step, *args, "-r", 2, "--sizes", sizes, "--seconds-per-size", 0.05, "--max-minutes", 0.01,
                    "--db", tmp_path / "s.duckdb")
    assert result.exit_code == 2, result.output
    assert cluster.prepared == [] and cluster.rounds == []
    # The command reckons as the check's step does on these twelve nodes.
    option_name, value = args
    options = catalog.get_step(step).options(sizes=SIZES, seconds_per_size=0.05, **(
        {"size": int(value)} if step == "sets" else {"counts": tuple(int(c) for c in value.split(","))}))
    estimate = catalog.get_step(step).estimate(options, len(TWELVE), 2)
    assert f"({estimate.line()})" in " ".join(result.text.split())


@pytest.mark.slow
def test_pairs_stopped_by_their_budget_keep_their_rounds_and_exit_3(scripted, tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "MAX_BATCH_ROUNDS", 1)  # a round at a time: stopped after the first
    monkeypatch.setattr(Budget, "refuse", lambda self, estimates: None)
    monkeypatch.setattr(Budget, "spent", lambda self: True)
    cluster = scripted(PairCluster(), NODES)
    db = tmp_path / "p.duckdb"
    result = invoke("pairs", "--patterns", "sort,cut", "-r", 3, "--sizes", "0,1024", "--port", 6211,
                    "--max-minutes", 30, "--db", db)
    assert result.exit_code == 3, result.output
    assert "stopped: pairs sort: the --max-minutes budget of 30 min was spent after round 1 of 3" in result.text
    assert len(cluster.rounds) == 1 and str(db) in result.text


@pytest.mark.slow
def test_the_json_document_carries_the_estimate_and_where_the_budget_stopped_the_run(scripted, tmp_path,
                                                                                       monkeypatch):
    from support.clusters.sets import SIZES, SetCluster, TWELVE

    scripted(SetCluster(), TWELVE)
    sizes = ",".join(map(str, SIZES))
    whole = invoke("sets", "-k", 4, "-r", 1, "--sizes", sizes, "--seconds-per-size", 0.05, "--max-minutes", 30,
                   "--json", "--db", tmp_path / "s.duckdb")
    estimate = json.loads(whole.stdout)["estimate"]
    assert [step["step"] for step in estimate["steps"]] == ["sets"] and estimate["seconds"] > 0
    assert (estimate["max_minutes"], estimate["stopped"], estimate["not_estimated"]) == (30, None, [])

    monkeypatch.setattr(Budget, "spent", lambda self: True)
    monkeypatch.setattr(runner, "MAX_BATCH_ROUNDS", 1)  # a round at a time: stopped after the first
    scripted(PairCluster(), NODES)
    stopped = invoke("pairs", "--patterns", "sort,cut", "-r", 3, "--sizes", "0,1024", "--port", 6211,
                     "--max-minutes", 30, "--json", "--db", tmp_path / "p.duckdb")
    assert stopped.exit_code == 3
    estimate = json.loads(stopped.stdout)["estimate"]
    assert estimate["stopped"] == "pairs sort: the --max-minutes budget of 30 min was spent after round 1 of 3"
    assert estimate["steps"][0]["step"] == "pairs"


@pytest.mark.slow
def test_a_check_stopped_by_its_budget_keeps_what_it_did_and_resume_goes_on(tmp_path, monkeypatch):
    from oddnode.app.cli import check as check_cli
    from support.clusters.check import ScriptedCluster

    nodes = [f"r07n{i:02d}" for i in range(1, 5)]
    monkeypatch.setattr(check_cli, "selected_target", lambda *args: Target(nodes, ScriptedCluster()))
    spent = iter([False, True])  # before the memory step: not yet; after its first repetition: spent
    monkeypatch.setattr(Budget, "spent", lambda self: next(spent, True))
    db = tmp_path / "c.duckdb"
    result = invoke("check", "-w", "r07n[01-04]", "--stages", "memory", "-r", 3, "--set", "memory.elements=2000000",
                    "--set", "memory.ntimes=3", "--max-minutes", 45, "--db", db, "--html", tmp_path / "r.html")
    assert result.exit_code == 3, result.output
    assert "stopped: the --max-minutes budget of 45 min was spent after memory repetition 1 of 3" in result.text
    assert f"oddnode check --resume --db {db}" in result.text
    monkeypatch.undo()
    # The stored target names the scripted transport, which only this test knows.
    monkeypatch.setattr("oddnode.app.check.described_target", lambda described: Target(nodes, ScriptedCluster()))
    resumed = invoke("check", "--resume", "--db", db, "--html", tmp_path / "r.html", "--json")
    assert resumed.exit_code == 0, resumed.output
    assert "resuming check" in resumed.text
    # Its document says what was estimated: the memory step's time is its nodes'.
    estimate = json.loads(resumed.stdout)["estimate"]
    assert (estimate["steps"], estimate["not_estimated"], estimate["stopped"]) == ([], ["memory"], None)
    with open_store(db) as store:
        repetitions = store.con.execute("SELECT DISTINCT repetition FROM results WHERE benchmark LIKE 'memory.%' "
                                        "ORDER BY 1").fetchall()
    assert repetitions == [(1,), (2,), (3,)]  # the first before the stop, the others resumed


@pytest.mark.slow
def test_a_check_stopped_by_its_budget_prints_its_json_document_and_drains_nothing(tmp_path, monkeypatch):
    """--json stays a document when the budget stops the check: the stages
    judged so far, the estimate saying where it stopped, exit 3; --drain
    does not act on a part of the check."""
    pytest.importorskip("jsonschema")
    from oddnode.app.cli import check as check_cli
    from oddnode.report.schema import validate
    from support.clusters.check import ScriptedCluster

    nodes = [f"r07n{i:02d}" for i in range(1, 5)]
    monkeypatch.setattr(check_cli, "selected_target", lambda *args: Target(nodes, ScriptedCluster()))
    spent = iter([False, True])  # before the memory step: not yet; after its first repetition: spent
    monkeypatch.setattr(Budget, "spent", lambda self: next(spent, True))
    drained = []
    monkeypatch.setattr("oddnode.app.cli.health.drain_for_check", lambda *args, **kwargs: drained.append(args))
    db = tmp_path / "c.duckdb"
    result = invoke("check", "-w", "r07n[01-04]", "--stages", "memory", "-r", 3, "--set", "memory.elements=2000000",
                    "--set", "memory.ntimes=3", "--max-minutes", 45, "--json", "--drain", "--db", db,
                    "--html", tmp_path / "r.html")
    assert result.exit_code == 3, result.output
    document = json.loads(result.stdout)
    validate(document, "analysis")
    assert document["estimate"]["stopped"] == "the --max-minutes budget of 45 min was spent after memory repetition 1 of 3"
    assert document["estimate"]["max_minutes"] == 45 and not drained
    assert f"oddnode check --resume --db {db}" in result.stderr
