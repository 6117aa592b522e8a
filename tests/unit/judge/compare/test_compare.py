"""`oddnode compare`: two runs of a store written through the real store API
(or imported from a site's own results directories), before against after,
and groups of nodes within one run."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from support.cli import invoke, oddnode
from support.foreign import write_foreign_cluster
from oddnode.judge.compare import (
    DEFAULT_ALPHA,
    Comparison,
    SelectionError,
    Settings,
    Verdict,
    compare_groups,
    compare_runs,
    group_by_fact,
    group_by_topology,
    groups_from_sets,
    select_runs,
)
from oddnode.stats import significance as sig
from oddnode.store.stab import import_stab
from oddnode.core.model import Direction, LabelKind
from oddnode.core.nodes import expand
from oddnode.report.compare import comparison_view, write_plots
from oddnode.store import ResultBatch, open_store
from support.set_data import Fabric, write_sets
from support.runs import NODES, write_run


@pytest.fixture
def db(tmp_path):
    return tmp_path / "compare.duckdb"


def verdicts(comparison: Comparison) -> dict[str, Verdict]:
    return {s.name: s.overall.verdict for s in comparison.series}


# -- before and after --------------------------------------------------------------------------------


def test_a_known_improvement_is_detected_and_exits_0(db):
    with open_store(db) as store:
        write_run(store, NODES, seed=1)
        write_run(store, NODES, seed=2, factor=lambda node: 1.15)
        comparison = compare_runs(store, "1", "2")
    (series,) = comparison.series
    assert series.overall.verdict is Verdict.IMPROVED
    assert series.overall.change == pytest.approx(0.15, abs=0.02)
    assert series.overall.p_holm <= DEFAULT_ALPHA
    assert comparison.exit_status == 0


@pytest.mark.slow
def test_a_known_regression_is_detected_and_exits_1(db):
    with open_store(db) as store:
        write_run(store, NODES, seed=1)
        write_run(store, NODES, seed=2, factor=lambda node: 0.85)
    result = oddnode("compare", "1", "2", "--db", db, cwd=db.parent, check=False)
    assert result.returncode == 1, result.stderr
    assert "regressed" in result.stdout and "Exit status 1" in result.stdout
    document = json.loads(oddnode("compare", "1", "2", "--json", "--db", db, cwd=db.parent, check=False).stdout)
    assert document["exit_status"] == 1 and document["regressed"] is True
    assert document["series"][0]["overall"]["verdict"] == "regressed"


@pytest.mark.slow
def test_healthy_runs_change_nothing_and_exit_0(db):
    with open_store(db) as store:
        write_run(store, NODES, seed=1)
        write_run(store, NODES, seed=2)
        write_run(store, NODES, seed=3, benchmark="latency", metric="value", unit="us", level=5.0,
                  direction=Direction.LOWER)
        write_run(store, NODES, seed=4, benchmark="latency", metric="value", unit="us", level=5.0,
                  direction=Direction.LOWER)
    result = oddnode("compare", "1,3", "2,4", "--db", db, cwd=db.parent, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 series: 2 unchanged" in result.stdout


def test_one_node_far_slower_after_is_named_when_repetitions_allow(db):
    """With 10 repetitions each, one node's 20% loss stands out alone; the
    others are unchanged."""
    with open_store(db) as store:
        write_run(store, NODES, seed=1, repetitions=10)
        write_run(store, NODES, seed=2, repetitions=10, factor=lambda node: 0.8 if node == "cn-a05" else 1.0)
        comparison = compare_runs(store, "1", "2")
    (series,) = comparison.series
    regressed = [j.subject for j in series.subjects if j.verdict is Verdict.REGRESSED]
    assert regressed == ["cn-a05"]
    assert all(j.verdict is Verdict.UNCHANGED for j in series.subjects if j.subject != "cn-a05")
    assert comparison.exit_status == 1


@pytest.mark.parametrize("factor, expected", [(0.8, Verdict.IMPROVED), (1.25, Verdict.REGRESSED)])
def test_lower_is_better_series_read_the_change_the_other_way(db, factor, expected):
    with open_store(db) as store:
        for seed, scale in ((1, 1.0), (2, factor)):
            write_run(store, NODES, seed=seed, benchmark="pingpong.sort", metric="latency.0", unit="us",
                      level=12.0, direction=Direction.LOWER, factor=lambda node, s=scale: s)
        comparison = compare_runs(store, "1", "2")
    (series,) = comparison.series
    assert series.overall.verdict is expected
    assert series.overall.change == pytest.approx(factor - 1, abs=0.03)
    assert comparison.exit_status == (1 if expected is Verdict.REGRESSED else 0)


@pytest.mark.slow
def test_the_baseline_option_swaps_the_sides(db):
    with open_store(db) as store:
        write_run(store, NODES, seed=1)
        write_run(store, NODES, seed=2, factor=lambda node: 0.85)
    swapped = json.loads(invoke("compare", "1", "2", "--baseline", "2", "--json", "--db", db).stdout)
    assert swapped["baseline"]["name"] == "run 2" and swapped["series"][0]["overall"]["verdict"] == "improved"
    one = invoke("compare", "2", "--baseline", "1", "--json", "--db", db)
    assert one.exit_code == 1 and json.loads(one.stdout)["baseline"]["name"] == "run 1"


def test_a_node_that_fails_every_run_after_is_a_regression(db):
    with open_store(db) as store:
        write_run(store, NODES, seed=1)
        write_run(store, NODES, seed=2, failing={"cn-a03"})
        comparison = compare_runs(store, "1", "2")
    (series,) = comparison.series
    failed = next(j for j in series.subjects if j.subject == "cn-a03")
    assert failed.verdict is Verdict.REGRESSED and failed.reason == "every run failed after"
    assert series.overall.verdict is Verdict.UNCHANGED
    assert comparison.exit_status == 1


def test_nodes_and_series_on_one_side_only_are_named_not_compared(db):
    with open_store(db) as store:
        write_run(store, NODES, seed=1)
        write_run(store, NODES[:-1], seed=2, benchmark="dgemm", metric="value", unit="GFLOP/s")
        write_run(store, NODES[1:], seed=3)
        comparison = compare_runs(store, "1-2", "3")
    (series,) = comparison.series
    assert series.only_before == ["cn-a01"] and series.only_after == []
    assert comparison.only_in_baseline == ["dgemm"]
    text = rendered(comparison, 120)
    assert "cn-a01: measured before only in stream.triad:bandwidth" in text
    assert "Only in runs 1-2: dgemm." in text


# -- too few repetitions ---------------------------------------------------------------------------------


def test_too_few_repetitions_to_judge_a_node_alone_are_said(db):
    with open_store(db) as store:
        write_run(store, NODES, seed=1, repetitions=3)
        write_run(store, NODES, seed=2, repetitions=3, factor=lambda node: 0.9)
        comparison = compare_runs(store, "1", "2")
    (series,) = comparison.series
    # Three against three: Mann–Whitney's least p is 2 / C(6, 3) = 0.1 > 0.05.
    assert all(j.verdict is Verdict.TOO_FEW and j.p is None for j in series.subjects)
    assert "cannot reach alpha 0.05" in series.subjects[0].reason
    # What would do: 2 / C(2n, n) <= 0.05 / 8 tests at n = 6 (C(12, 6) = 924), not at 5 (C(10, 5) = 252).
    assert series.subjects[0].reason.endswith("; 6 a side could (runs of -r 6 or more)")
    # Judged together, eight nodes that all lost 10% are a regression.
    assert series.overall.verdict is Verdict.REGRESSED
    text = rendered(comparison, 200)
    assert "cn-a[01-08]: 3 repetitions before and 3 after in 1 series: too few to judge one alone" in text


def test_a_series_with_too_few_repetitions_at_all_is_said(db):
    with open_store(db) as store:
        write_run(store, ["cn-a01"], seed=1, repetitions=2)
        write_run(store, ["cn-a01"], seed=2, repetitions=2, factor=lambda node: 0.5)
        comparison = compare_runs(store, "1", "2")
    (series,) = comparison.series
    assert series.overall.verdict is Verdict.TOO_FEW and comparison.exit_status == 0
    assert "Too few repetitions or nodes to judge these series at all: stream.triad:bandwidth" in \
        rendered(comparison, 200)


# -- Holm's correction ------------------------------------------------------------------------------------


def test_holm_adjusts_as_by_hand():
    # Sorted: 0.005, 0.01, 0.03, 0.04 -> times 4, 3, 2, 1 -> 0.02, 0.03, 0.06, 0.04 -> monotone: 0.04 -> 0.06.
    assert sig.holm([0.01, 0.04, 0.03, 0.005]).tolist() == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert sig.holm([0.5, 0.9]).tolist() == pytest.approx([1.0, 1.0])
    assert sig.holm([]).size == 0


def test_the_comparison_corrects_its_tests_by_holm_as_by_hand(db):
    """Three series of one node, six repetitions on each side: all after
    above all before (U = 0), one pair swapped (U = 1), and no change."""
    before = np.array([10.0, 11, 12, 13, 14, 15])
    afters = {"a": before + 10, "b": np.array([14.5, 16, 17, 18, 19, 20]), "c": before + 0.5}
    with open_store(db) as store:
        for run, shift in ((1, False), (2, True)):
            batch = ResultBatch()
            for name, after in afters.items():
                for repetition, value in enumerate(after if shift else before, start=1):
                    batch.add(name, "r01n01", float(value), unit="s", direction=Direction.LOWER,
                              repetition=repetition)
            with store.transaction():
                store.add_results(store.new_run(f"run {run}"), batch)
        comparison = compare_runs(store, "1", "2", Settings(min_effect=0.0))
    got = {s.name: (s.overall.p, s.overall.p_holm) for s in comparison.series}
    # Exact two-sided Mann–Whitney of 6 and 6 values: P(U <= u) doubled over C(12, 6) = 924 splits.
    p_a, p_b = 2 / 924, 2 * 2 / 924
    assert got["a"][0] == pytest.approx(p_a) and got["b"][0] == pytest.approx(p_b)
    assert got["a"][1] == pytest.approx(3 * p_a)
    assert got["b"][1] == pytest.approx(max(3 * p_a, 2 * p_b))
    assert got["c"][1] == pytest.approx(max(got["b"][1], got["c"][0]))
    assert comparison.correction.tests == 3
    assert verdicts(comparison) == {"a": Verdict.REGRESSED, "b": Verdict.REGRESSED, "c": Verdict.UNCHANGED}


def test_tests_that_cannot_reach_alpha_are_left_out_of_the_family():
    # Alone, 0.1 can never be <= 0.05: only the third is tested.
    assert sig.testable([0.1, 0.1, 0.001], 0.05).tolist() == [False, False, True]
    # Sixteen subjects whose least p is 0.0079 cannot reach 0.05 / 18; the two series tests can.
    kept = sig.testable([0.0079] * 16 + [1e-6] * 2, 0.05)
    assert kept.tolist() == [False] * 16 + [True] * 2
    # Four such subjects can: 0.0079 <= 0.05 / 6.
    assert sig.testable([0.0079] * 4 + [1e-6] * 2, 0.05).all()


# -- choosing the runs ----------------------------------------------------------------------------------------


def test_runs_are_chosen_by_id_range_label_and_date(db):
    with open_store(db) as store:
        write_run(store, NODES, seed=1, source="/data/stab/before/")
        write_run(store, NODES, seed=2, source="/data/stab/after")
        write_run(store, NODES, seed=3, factor=lambda node: 0.8, command="oddnode sets -k 4")
        store.con.execute("UPDATE runs SET started = TIMESTAMP '2025-01-10 09:30:00' WHERE id = 1")
        store.con.execute("UPDATE runs SET started = TIMESTAMP '2025-02-20 14:05:00' WHERE id = 2")
        store.con.execute("UPDATE runs SET started = TIMESTAMP '2025-02-20 16:45:00' WHERE id = 3")
        assert select_runs(store, "2").ids == [2]
        assert select_runs(store, "1-3").ids == [1, 2, 3]
        assert select_runs(store, "1,3").ids == [1, 3]
        assert select_runs(store, "before").ids == [1]
        assert select_runs(store, "/data/stab/after").ids == [2]
        assert select_runs(store, "sets -k 4").ids == [3]  # text of the command
        assert select_runs(store, "2025-02-20").ids == [2, 3]
        assert select_runs(store, "2025-02-20T16").ids == [3]
        assert select_runs(store, "2025-02-20 14:05").ids == [2]
        assert verdicts(compare_runs(store, "before", "2025-02-20T16")) == {"stream.triad:bandwidth":
                                                                             Verdict.REGRESSED}
        for bad, why in (("9", "no run with results matches run id 9"), ("3-1", "runs backwards"),
                         ("nothing-like-this", "no run with results matches label"),
                         ("2024-12-31", "date 2024-12-31")):
            with pytest.raises(SelectionError, match=why):
                select_runs(store, bad)
        with pytest.raises(SelectionError, match="name the same runs"):
            compare_runs(store, "1", "1")


@pytest.mark.slow
def test_a_check_id_stands_for_every_step_it_ran(db):
    with open_store(db) as store:
        for check in range(2):
            with store.transaction():
                check_id = store.new_run("oddnode check", source="check", nodes=NODES)
                store.start_check(check_id, {"nodes": "cn-a[01-08]"}, {"stages": ["memory", "compute"]})
            memory = write_run(store, NODES, seed=10 + check, command="oddnode check [memory]",
                               factor=lambda node, c=check: 0.9 if c else 1.0)
            compute = write_run(store, NODES, seed=20 + check, benchmark="dgemm", metric="value",
                                unit="GFLOP/s", command="oddnode check [dgemm]")
            with store.transaction():
                store.add_check_step(check_id, "memory", memory, 5)
                store.add_check_step(check_id, "dgemm", compute, 5)
        first, second = select_runs(store, "1"), select_runs(store, "4")
        assert first.ids == [2, 3] and second.ids == [5, 6]
        assert first.describe().startswith("check 1 (2 runs")
        comparison = compare_runs(store, "1", "4")
    assert comparison.baseline == "check 1" and comparison.other == "check 4"
    assert verdicts(comparison) == {"stream.triad:bandwidth": Verdict.REGRESSED, "dgemm": Verdict.UNCHANGED}


@pytest.mark.slow
def test_two_invocations_of_oddnode_sets_compare_sorted_per_set_and_shuffled_pooled(db):
    nodes = [f"gpu{i:03d}" for i in range(1, 17)]
    with open_store(db) as store:
        write_sets(store, Fabric(nodes), size=4, repetitions=5, seed=1)  # runs 1 (sorted), 2 (shuffled)
        # Every set twice as slow: an application that now pays per node.
        write_sets(store, Fabric(nodes, per_node_cost=0.5), size=4, repetitions=5, seed=2)  # runs 3, 4
        comparison = compare_runs(store, "1-2", "3-4", patterns=["*:bandwidth.*"])
    by_name = {s.name: s for s in comparison.series}
    sorted_, shuffled = by_name["sets.sendrecv.sorted:bandwidth.1048576"], by_name[
        "sets.sendrecv.shuffled:bandwidth.1048576"]
    assert not sorted_.pooled and [j.subject for j in sorted_.subjects] == [
        "gpu[001-004]", "gpu[005-008]", "gpu[009-012]", "gpu[013-016]"]
    assert shuffled.pooled and shuffled.overall.subject.startswith("all ") and not shuffled.subjects
    assert sorted_.overall.verdict is Verdict.REGRESSED and shuffled.overall.verdict is Verdict.REGRESSED
    assert comparison.exit_status == 1


def test_two_healthy_invocations_of_oddnode_sets_change_nothing(db):
    nodes = [f"gpu{i:03d}" for i in range(1, 17)]
    with open_store(db) as store:
        write_sets(store, Fabric(nodes), size=4, repetitions=5, seed=1)
        write_sets(store, Fabric(nodes), size=4, repetitions=5, seed=2)
        comparison = compare_runs(store, "1-2", "3-4")
    assert comparison.exit_status == 0
    assert set(verdicts(comparison).values()) == {Verdict.UNCHANGED}


def write_sync_run(store, nodes, daemon, seed, repetitions=3, counts=(2, 4, 8)):
    """One ordering (sorted) of a sync run as the sync step stores it: per
    set run, ``scale.sync.allreduce.sorted`` (label: the folded set; time
    per iteration), and per rank, ``sync.allreduce.sorted`` (label: the
    rank's node, a set of one; repetition: the set run's number; the wait
    per iteration and the iterations it came last).  A node running a
    daemon slows every set it is in: the others wait for it."""
    from oddnode.core.nodes import fold

    rng = np.random.default_rng(seed)
    batch = ResultBatch()
    number = 0
    for count in counts:
        members = nodes[:count]
        for repetition in range(1, repetitions + 1):
            number += 1
            slowed = daemon in members
            noise = math.exp(0.02 * rng.standard_normal())
            batch.add("scale.sync.allreduce.sorted", fold(members), 1000.0 * (1.3 if slowed else 1.0) * noise,
                      metric="time", unit="us", direction=Direction.LOWER, label_kind=LabelKind.SET,
                      repetition=repetition, parameters={"members": members, "nodes": count})
            for node in members:
                waits = node != daemon and slowed
                wait = (300.0 if waits else 20.0) * math.exp(0.05 * rng.standard_normal())
                last = 900.0 if node == daemon else 1000.0 / count * math.exp(0.1 * rng.standard_normal())
                for metric, value, unit in (("wait", wait, "us"), ("last", last, "count")):
                    batch.add("sync.allreduce.sorted", node, value, metric=metric, unit=unit,
                              direction=Direction.LOWER, label_kind=LabelKind.SET, repetition=number)
    with store.transaction():
        run_id = store.new_run("oddnode sync --testbed [sorted]", nodes=list(nodes))
        store.add_results(run_id, batch)
    return run_id


def test_a_sync_run_before_and_after_stopping_a_daemon(db):
    """The daemon on cn-a02 (in every sorted set) slows every set and makes
    the others wait; once stopped, the sets are faster and the waits
    shorter: improvements, nothing regressed."""
    with open_store(db) as store:
        write_sync_run(store, NODES, daemon="cn-a02", seed=1)
        write_sync_run(store, NODES, daemon=None, seed=2)
        comparison = compare_runs(store, "1", "2")
    got = verdicts(comparison)
    assert got["scale.sync.allreduce.sorted:time"] is Verdict.IMPROVED
    assert got["sync.allreduce.sorted:wait"] is Verdict.IMPROVED
    wait = next(s for s in comparison.series if s.name == "sync.allreduce.sorted:wait")
    assert not wait.pooled and [j.subject for j in wait.subjects] == NODES
    # cn-a01 ran in all nine set runs: nine waits a side judge it alone.
    assert next(j for j in wait.subjects if j.subject == "cn-a01").verdict is Verdict.IMPROVED
    last = next(s for s in comparison.series if s.name == "sync.allreduce.sorted:last")
    assert next(j for j in last.subjects if j.subject == "cn-a02").verdict is Verdict.IMPROVED
    assert comparison.exit_status == 0


def test_overlapping_selections_do_not_compare_a_run_with_itself(db):
    with open_store(db) as store:
        write_run(store, NODES, seed=1)
        write_run(store, NODES, seed=2, benchmark="dgemm", metric="value", unit="GFLOP/s")
        write_run(store, NODES, seed=3, factor=lambda node: 0.8)
        comparison = compare_runs(store, "1-2", "2-3")
        assert comparison.same_run == ["dgemm"] and verdicts(comparison) == {
            "stream.triad:bandwidth": Verdict.REGRESSED}
        with pytest.raises(SelectionError, match="no series in common"):
            compare_runs(store, "2", "2-3", patterns=["dgemm"])


# -- a site's own results ---------------------------------------------------------------------------------------


def scale_plot_file(path: Path, factor: float) -> None:
    """Scale the values (first column) of a plot file, leaving its comments and extra columns."""
    lines = []
    for line in path.read_text().splitlines():
        words = line.split(None, 1)
        if words and not line.lstrip().startswith("#"):
            line = f"{float(words[0]) * factor:.3f}\t{words[1] if len(words) > 1 else ''}"
        lines.append(line)
    path.write_text("\n".join(lines) + "\n")


def test_results_directories_of_a_site_compare_by_their_names(tmp_path):
    """Two STAB results directories with the site's node names (cn-0001),
    benchmark names and units; after maintenance stream_triad lost 10% and
    hpl_walltime (lower is better) gained 10%; one value per node."""
    before = write_foreign_cluster(tmp_path / "before", "cn", 60, seed=1)
    after = write_foreign_cluster(tmp_path / "after", "cn", 60, seed=2)
    scale_plot_file(after.directory / "plot.stream_triad", 0.9)
    scale_plot_file(after.directory / "plot.hpl_walltime", 0.9)
    with open_store(tmp_path / "site.duckdb") as store:
        import_stab(store, [before.directory])
        import_stab(store, [after.directory])
        comparison = compare_runs(store, "before", "after")
    got = verdicts(comparison)
    assert got.pop("stream_triad") is Verdict.REGRESSED
    assert got.pop("hpl_walltime") is Verdict.IMPROVED
    assert set(got) == {"dgemm_1node", "scratch_read", "osu_bw_4M"}
    assert set(got.values()) == {Verdict.UNCHANGED}
    triad = next(s for s in comparison.series if s.name == "stream_triad")
    assert triad.overall.subject == "all 60 nodes" and triad.subjects[0].subject == "cn-0001"
    assert all(j.verdict is Verdict.TOO_FEW for j in triad.subjects)  # one value each side
    pairs = next(s for s in comparison.series if s.name == "osu_bw_4M")
    assert pairs.label_kind is LabelKind.PAIR and pairs.subjects[0].subject == "cn-0001-cn-0002"
    assert comparison.exit_status == 1


# -- groups within one run -----------------------------------------------------------------------------------------


OLD = [f"r01n{i:02d}" for i in range(1, 9)]
NEW = [f"r02n{i:02d}" for i in range(1, 9)]


def grouped_store(db, old_factor: float, seed: int = 0):
    """An inventory (bios_date: old nodes 2019, new 2023; a serial per node)
    and a run where the old nodes' MPI wait is ``old_factor`` times the new ones'."""
    store = open_store(db)
    with store.transaction():
        run_id = store.new_run("oddnode inventory", nodes=OLD + NEW)
        store.add_facts(run_id, [(n, "bios_date", "2019-03-01") for n in OLD] +
                        [(n, "bios_date", "2023-06-15") for n in NEW] +
                        [(n, "serial", f"SN{i:05d}") for i, n in enumerate(OLD + NEW)])
    write_run(store, OLD + NEW, seed=seed, benchmark="sync.allreduce.sorted", metric="wait", unit="us",
              level=40.0, noise=0.03, direction=Direction.LOWER, kind=LabelKind.SET,
              factor=lambda node: old_factor if node in OLD else 1.0)
    write_run(store, OLD + NEW, seed=seed + 1, benchmark="stream.triad", level=1000.0)
    return store


@pytest.mark.slow
def test_groups_by_a_fact_find_the_old_nodes_worse(db):
    with grouped_store(db, old_factor=1.3) as store:
        groups = group_by_fact(store, "bios_date", None)
        assert groups.baseline == "2019-03-01" and list(groups.members) == ["2019-03-01", "2023-06-15"]
        # The old nodes as the baseline: the new ones are better.
        comparison = compare_groups(store, groups)
    got = {(s.name, s.against): s.overall.verdict for s in comparison.series}
    assert got == {("sync.allreduce.sorted:wait", "2023-06-15"): Verdict.IMPROVED,
                   ("stream.triad:bandwidth", "2023-06-15"): Verdict.UNCHANGED}
    result = oddnode("compare", "--groups", "bios_date", "--baseline", "2023-06-15", "--db", db, cwd=db.parent,
                     check=False)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "worse" in result.stdout and "Groups by fact bios_date" in result.stdout


def test_groups_that_do_not_differ_are_alike(db):
    with grouped_store(db, old_factor=1.0) as store:
        comparison = compare_groups(store, group_by_fact(store, "bios_date", 2), "2")
    assert {s.overall.verdict for s in comparison.series} == {Verdict.UNCHANGED}
    assert comparison.exit_status == 0
    assert "alike" in rendered(comparison, 120)


@pytest.mark.slow
def test_groups_given_one_by_one_and_from_a_topology(db, tmp_path):
    with grouped_store(db, old_factor=1.3) as store:
        explicit = groups_from_sets([("old", expand("r01n[01-08]")), ("new", expand("r02n[01-08]"))])
        assert explicit.baseline == "old"
        comparison = compare_groups(store, explicit, patterns=["sync.*"])
        assert [(s.against, s.overall.verdict) for s in comparison.series] == [("new", Verdict.IMPROVED)]
        with store.transaction():
            store.set_topology(store.new_run("topology"), {n: "leaf1" if n in OLD else "leaf2" for n in OLD + NEW})
        by_leaf = compare_groups(store, group_by_topology(None, store, None, baseline="leaf2"), patterns=["sync.*"])
        assert [(s.against, s.overall.verdict) for s in by_leaf.series] == [("leaf1", Verdict.REGRESSED)]
    topology = tmp_path / "topology.txt"
    topology.write_text("old r01n[01-08]\nnew r02n[01-08]\n")
    result = invoke("compare", "--topology", topology, "--baseline", "new", "--benchmark", "sync.*", "--json",
                    "--db", db)
    document = json.loads(result.stdout)
    assert result.exit_code == 1 and document["mode"] == "groups"
    assert document["groups"]["members"] == {"new": "r02n[01-08]", "old": "r01n[01-08]"}
    assert document["series"][0]["overall"]["verdict"] == "regressed"
    given = invoke("compare", "--group", "old=r01n[01-08]", "--group", "new=r02n[01-08]", "--db", db)
    assert given.exit_code == 0 and "better" in given.output


def test_a_fact_that_is_not_a_grouping_is_refused(db):
    with grouped_store(db, old_factor=1.0) as store:
        with pytest.raises(SelectionError, match="too many to compare as groups"):
            group_by_fact(store, "serial", None)
        with pytest.raises(SelectionError, match="no node has a fact named 'bios'"):
            group_by_fact(store, "bios", None)
    result = invoke("compare", "--groups", "serial", "--db", db)
    assert result.exit_code == 2 and "16 distinct values" in result.text


# -- the command line -------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_usage_errors_exit_2_with_a_clear_line(db):
    with open_store(db) as store:
        write_run(store, NODES, seed=1)
        write_run(store, NODES, seed=2)
    for args, why in ((["1"], "one run given"), ([], "give the two runs"), (["1", "2", "--baseline", "7"],
                                                                           "--baseline '7' is neither"),
                      (["1", "5"], "no run with results matches run id 5"),
                      (["1", "2", "--benchmark", "hpl*"], "no series of run 1"),
                      (["1", "2", "--alpha", "1.5"], "alpha must be a probability"),
                      (["1", "--groups", "x", "--group", "a=n1"], "both define groups")):
        result = invoke("compare", *args, "--db", db)
        assert result.exit_code == 2, (args, result.output)
        assert why in result.text and "Traceback" not in result.output, (args, result.output)


def test_list_shows_the_runs_with_results(db):
    with open_store(db) as store:
        write_run(store, NODES, seed=1, source="/data/before")
    rows = json.loads(invoke("compare", "--list", "--json", "--db", db).stdout)
    assert rows == [rows[0] | {"id": 1, "command": "oddnode check [memory]", "source": "/data/before",
                               "series": 1, "results": 40}]


def test_defaults_are_the_library_s():
    import typer

    from oddnode.main import app
    from oddnode.judge.compare import DEFAULT_MIN_EFFECT
    from oddnode.findings import Sensitivity

    command = typer.main.get_command(app).commands["compare"]
    defaults = {p.name: p.default for p in command.params}
    assert defaults["alpha"] == DEFAULT_ALPHA
    assert defaults["min_effect"] == DEFAULT_MIN_EFFECT == Sensitivity().min_effect


def rendered(comparison: Comparison, width: int, **options) -> str:
    out = io.StringIO()
    Console(file=out, width=width, color_system=None).print(comparison_view(comparison, width, **options))
    return out.getvalue()


@pytest.mark.parametrize("width", [60, 80, 120, 200])
def test_the_table_fits_the_terminal_with_every_cell_whole(db, width):
    with open_store(db) as store:
        long = [f"compute-node-rack{i:02d}" for i in range(1, 9)]
        write_run(store, long, seed=1, repetitions=10, benchmark="pingpong.shuffle", metric="bandwidth.1048576")
        write_run(store, long, seed=2, repetitions=10, benchmark="pingpong.shuffle", metric="bandwidth.1048576",
                  factor=lambda node: 0.7 if node.endswith(("03", "04", "05", "06")) else 1.0)
        comparison = compare_runs(store, "1", "2")
    text = rendered(comparison, width)
    table = [line for line in text.splitlines() if line.startswith(("│", "┃", "┏", "└"))]
    assert table and all(len(line) <= width for line in table)
    if width >= 120:
        # Four regressed nodes fold into one row, the range of their changes beside it.
        assert "compute-node-rack[03-06]" in text and "regressed" in text
    assert "…" not in "".join(table)


def test_every_subject_is_listed_with_all(db):
    with open_store(db) as store:
        write_run(store, NODES, seed=1, repetitions=10)
        write_run(store, NODES, seed=2, repetitions=10)
        comparison = compare_runs(store, "1", "2")
    assert "cn-a07" not in rendered(comparison, 200)
    assert "cn-a07" in rendered(comparison, 200, every_subject=True)


@pytest.mark.slow
def test_plots_and_json(db, tmp_path):
    with open_store(db) as store:
        write_run(store, NODES, seed=1)
        write_run(store, NODES, seed=2, benchmark="latency", metric="value", unit="us", level=5.0,
                  direction=Direction.LOWER)
        write_run(store, NODES, seed=3, factor=lambda node: 0.9)
        write_run(store, NODES, seed=4, benchmark="latency", metric="value", unit="us", level=5.0,
                  direction=Direction.LOWER)
        comparison = compare_runs(store, "1-2", "3-4")
    written = write_plots(comparison, tmp_path / "figures")
    assert sorted(p.name for p in written) == ["latency.png", "stream.triad_bandwidth.png"]
    assert all(p.stat().st_size > 1000 for p in written)
    result = oddnode("compare", "1-2", "3-4", "--json", "--plot", tmp_path / "cli-figures", "--db", db,
                     cwd=db.parent, check=False)
    document = json.loads(result.stdout)
    assert "2 figures written" in result.stderr and (tmp_path / "cli-figures" / "latency.png").exists()
    assert document["format"] == "oddnode-compare" and document["mode"] == "runs"
    assert [r["id"] for r in document["baseline"]["runs"]] == [1, 2]
    assert document["summary"]["series"]["regressed"] == 1
    triad = document["series"][0]
    assert triad["name"] == "stream.triad:bandwidth" and triad["direction"] == "higher"
    assert set(triad["overall"]) >= {"before", "after", "change", "p", "p_holm", "test", "verdict"}
    assert triad["subjects"][0]["subject"] == "cn-a01" and triad["spread"]["verdict"] in (
        "alike", "more consistent", "less consistent")


def test_a_more_consistent_after_is_reported(db):
    with open_store(db) as store:
        write_run(store, NODES, seed=1, noise=0.08, repetitions=8)
        write_run(store, NODES, seed=2, noise=0.01, repetitions=8)
        comparison = compare_runs(store, "1", "2")
    (series,) = comparison.series
    assert series.spread.verdict.value == "more consistent"
    assert series.spread.after < series.spread.before
    assert "more consistent after" in rendered(comparison, 200)
