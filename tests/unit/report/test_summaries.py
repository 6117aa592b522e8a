"""The run summaries and verdict lines the commands print, called directly
and rendered as a terminal would show them."""

from __future__ import annotations

import io
from types import SimpleNamespace

from rich.console import Console

from oddnode.measure.pair.bisection import BisectionFigures
from oddnode.measure.pair.switchbench import (
    AllToAllPhase,
    AllToAllRepetition,
    AllToAllRunSummary,
    ChainPoint,
    ChainRunSummary,
)
from oddnode.measure.collect.inventory import InventoryResult, ProbeReport
from oddnode.core.model import Finding, Severity
from oddnode.report import summaries
from oddnode.measure.runner import RunSummary


def shown(renderable) -> str:
    """What a terminal shows of ``renderable``: markup applied, no colour."""
    out = io.StringIO()
    Console(file=out, width=300, color_system=None).print(renderable, highlight=False)
    return out.getvalue().rstrip("\n")


def counts(ok=1, failed=0, invalid=0):
    return {"ok": ok, "failed": failed, "invalid": invalid}


def test_troubled_pairs_are_those_with_a_failed_or_invalid_repetition():
    per_pair = {"n1-n2": counts(), "n3-n4": counts(failed=1), "n5-n6": counts(invalid=2)}
    assert summaries.troubled_pairs(per_pair) == ["n3-n4", "n5-n6"]
    assert shown(summaries.troubled_pairs_line(per_pair)) == "2 pairs with failed or invalid runs: n3-n4, n5-n6"
    assert summaries.troubled_pairs_line({"n1-n2": counts()}) is None


def test_a_pattern_run_says_its_pairs_repetitions_and_run_and_counts_trouble():
    summary = SimpleNamespace(run_id=7, per_pair={"n1-n2": counts(), "n3-n4": counts()})
    assert shown(summaries.pattern_run_line("cut", summary, 3)) == "cut: 2 pairs, 3 repetitions, run 7"
    summary.per_pair["n3-n4"] = counts(failed=1)
    line = summaries.pattern_run_line("cut", summary, 3)
    assert shown(line) == "cut: 2 pairs, 3 repetitions, run 7; 1 pairs with failed or invalid runs"
    assert "[red]" in line


def test_notes_are_dimmed_and_indented_and_stored_line_names_the_store():
    assert summaries.dim_lines(["a", "b"], indent="  ") == ["  [dim]a[/]", "  [dim]b[/]"]
    assert shown(summaries.stored_line("x.duckdb", 4)) == "results stored in x.duckdb (run 4)"
    assert shown(summaries.stored_line("x.duckdb")) == "results stored in x.duckdb"


def test_unanswered_nodes_are_folded_and_skipped_probes_grouped_by_note():
    result = InventoryResult(
        reports={f"node0{i}": ProbeReport(f"node0{i}", {}, ["no dmidecode"] if i < 3 else [], 1.0)
                 for i in range(1, 5)},
        unreachable={"node05": None, "node06": None}, failed={"node08": None})
    assert [shown(line) for line in summaries.unanswered_lines(result)] == ["unreachable: node[05-06]",
                                                                           "failed: node08"]
    assert [shown(line) for line in summaries.skipped_probe_lines(result)] == ["node[01-02]: no dmidecode"]
    target = SimpleNamespace(nodes=[f"node0{i}" for i in range(1, 9)], nodeset="node[01-08]",
                             transport=SimpleNamespace(name="ssh"))
    assert (summaries.inventory_line(result, target, "s.duckdb")
            == "4 of 8 nodes answered (ssh: node[01-08]); facts stored in s.duckdb")
    assert summaries.diagnostics_line(target, result) == "Diagnostics on node[01-08] (ssh): 4 of 8 nodes answered"


def test_slow_pairs_verdict_names_the_common_node_or_says_there_is_none():
    assert summaries.slow_pairs_verdict([]) == "No node or group is common to the slow pairs."
    finding = Finding(kind="weak-pair-member", severity=Severity.WARNING, subject="pingpong.cut",
                      nodes="node03", message="in every slow pair", evidence={}, remedy="check its link")
    text = shown(summaries.slow_pairs_verdict([finding]))
    assert "node03" in text and "weak-pair-member" in text
    assert summaries.matrix_findings([]) == "No slow pair."


def bisection(demonstrated, full=4000.0):
    figures = BisectionFigures(pairs=4, demonstrated=demonstrated, single_pair=1000.0, full=full)
    return SimpleNamespace(run_id=3, nodes="node[01-08]", figures=figures, per_pair={"node01-node05": counts()},
                           concurrent={"node01-node05": 500.0}, alone={"node01-node05": 1000.0})


def test_bisection_line_gives_demonstrated_next_to_full_or_says_none_was():
    assert summaries.bisection_line(bisection(2000.0), 65536) == (
        "bisection of node[01-08], 4 cut pairs at 65536 B (run 3): demonstrated 2000 MB/s; full bisection "
        "4000 MB/s (4 × 1000 MB/s, the median pair alone): 50.0% of it")
    assert summaries.bisection_line(bisection(2000.0, full=None), 65536).endswith("demonstrated 2000 MB/s")
    assert shown(summaries.bisection_line(bisection(None), 65536)) == (
        "run 3: no repetition in which every cut pair streamed: no demonstrated bisection")
    assert [shown(line) for line in summaries.bisection_pair_lines(bisection(2000.0))] == [
        "node01-node05: 500 MB/s at once, 1000 MB/s alone"]


def test_matrix_line_counts_pairs_rounds_slow_pairs_and_retests():
    summary = SimpleNamespace(run_id=2, values=dict.fromkeys(range(56), 1.0), plans=[None] * 14, limit=4140.25,
                              suspects=["a", "b"], retests=[None] * 4, verdicts={"node02-node05": "bad-link"})
    assert summaries.matrix_line(summary, "node[01-08]") == (
        "matrix of node[01-08]: 56 ordered pairs in 14 rounds (run 2), slow below 4140.25 MB/s; 2 slow, "
        "4 retest rounds")
    summary.limit = None
    assert "slow below" not in summaries.matrix_line(summary, "node[01-08]")
    assert [shown(line) for line in summaries.matrix_verdict_lines(summary)] == ["node02-node05: bad-link"]


def chain(*rates):
    nodes = tuple(f"node0{i}" for i in range(1, len(rates) + 2))
    return ChainRunSummary(run_id=5, points=[ChainPoint(k, 1, nodes[:k], rate, rate is not None)
                                             for k, rate in enumerate(rates, start=2)])


def test_chain_line_says_where_the_switch_stops_scaling_or_that_it_never_did():
    where = "chain of node[01-05], 1048576 B writes (run 5)"
    saturated = summaries.chain_line(chain(1000.0, 1000.0, 1000.0, 600.0), "node[01-05]", 1 << 20)
    # Three hops carry 3000 MB/s, four only 2400: the fifth node added nothing.
    assert saturated == f"{where}: the switch stops scaling at k = 5, where node05 joined: aggregate 2400 MB/s"
    scaling = summaries.chain_line(chain(1000.0, 1000.0, 1000.0), "node[01-05]", 1 << 20)
    assert scaling == f"{where}: the aggregate grew with every node added, 3000 MB/s at k = 4"
    assert shown(summaries.chain_line(chain(None, None), "node[01-05]", 1 << 20)) == f"{where}: no chain streamed"


def alltoall(complete: bool) -> AllToAllRunSummary:
    phases = [AllToAllPhase(i, 500.0, 900.0, "node03", f"node0{i}") for i in (1, 2, 3)]
    good = AllToAllRepetition(1, phases, 0.6, 2000.0, True)
    bad = AllToAllRepetition(2, [], None, None, False, problems=["node02: unreachable", "node02: unreachable"])
    return AllToAllRunSummary(run_id=9, nodes=["node01", "node02", "node03", "node04"], message_size=100000,
                              repetitions=[good, bad] if complete else [bad])


def test_alltoall_line_names_the_slowest_receiver_or_says_no_repetition_completed():
    where = "all-to-all of node[01-04], 100000 B per phase (run 9)"
    assert summaries.complete_alltoall(alltoall(True)) is not None
    assert summaries.alltoall_line(alltoall(True)) == (
        f"{where}: total 0.6 s, aggregate 2000 MB/s; slowest receiver node03 (lowest in 3 of 3 phases)")
    assert summaries.complete_alltoall(alltoall(False)) is None
    assert shown(summaries.alltoall_line(alltoall(False))) == (
        f"{where}: no repetition in which every node ran and checked its data")
    assert [shown(line) for line in summaries.alltoall_problem_lines(alltoall(False))] == ["node02: unreachable"]
    assert shown(summaries.alltoall_charged_line(["node02", "node01"])) == "failed or invalid on node[01-02]"
    assert summaries.alltoall_charged_line([]) is None


def test_stage_line_is_consistent_or_counts_the_blocking_findings():
    assert shown(summaries.stage_line(SimpleNamespace(name="memory", blocking=[]))) == "memory: consistent"
    assert shown(summaries.stage_line(SimpleNamespace(name="disk", blocking=[1]))) == (
        "disk: 1 finding of warning severity or above")
    assert shown(summaries.stage_line(SimpleNamespace(name="disk", blocking=[1, 2]))) == (
        "disk: 2 findings of warning severity or above")


def test_step_lines_give_each_run_and_its_outcomes():
    outcome = dict.fromkeys(("ok", "invalid", "failed", "unreachable", "timeout", "unavailable"), 0)
    runs = {"memory": RunSummary(11, 3, {"node01": {**outcome, "ok": 3}, "node02": {**outcome, "ok": 2, "failed": 1}}),
            "dgemm": None}
    assert [shown(line) for line in summaries.step_lines(runs)] == [
        "  memory: run 11, 3 repetitions on 2 nodes: 5 ok, 1 failed",
        "  dgemm: finished by an earlier, interrupted invocation"]


def test_check_stopped_and_interrupted_lines_say_how_to_go_on():
    stopped = shown(summaries.stopped_line("memory", ("compute", "disk"), "c.duckdb"))
    assert stopped.startswith("stopped after memory: ") and "not run: compute, disk." in stopped
    assert stopped.endswith("`oddnode check --resume --continue --db c.duckdb` runs them anyway.")
    assert summaries.interrupted_line("c.duckdb").endswith("`oddnode check --resume --db c.duckdb` goes on from there")


def test_import_lines_count_what_was_stored_and_name_what_was_not():
    stab = SimpleNamespace(run_id=1, benchmarks=2, results=40, failures=1, facts=6, topology_nodes=0,
                           ignored=("README",))
    assert summaries.stab_import_line(stab, "s.duckdb") == (
        "run 1: 2 benchmarks, 40 results, 1 failed runs, 6 facts, 0 nodes in the topology -> s.duckdb")
    assert [shown(line) for line in summaries.ignored_import_lines(stab)] == [
        "ignored README (not a plot.* file, units.csv, inventory.csv, topology.csv, nodes or failed)"]
    tool = SimpleNamespace(run_id=2, files=3, labels=2, measurements=9, invalid_runs=("bad.out",))
    assert summaries.tool_import_line(tool, "s.duckdb") == "run 2: 3 files, 2 labels, 9 measurements -> s.duckdb"
    assert [shown(line) for line in summaries.invalid_import_lines(tool)] == ["failed its accuracy check: bad.out"]


def test_testbed_lines_say_how_to_reach_the_nodes_and_their_leaves():
    bed = SimpleNamespace(nodeset="node[01-04]", nodes=["node01", "node02", "node03", "node04"],
                          ssh_config="/run/t/ssh_config", leaves={}, topology=None)
    assert summaries.testbed_up_line(bed) == "testbed up: node[01-04] (4 nodes); ssh -F /run/t/ssh_config node01"
    assert summaries.testbed_leaves_line(bed) is None
    bed.leaves, bed.topology = {"leaf1": ["node01", "node02"], "leaf2": ["node03", "node04"]}, "/run/t/topology"
    assert summaries.testbed_leaves_line(bed) == (
        "leaves: leaf1 node[01-02], leaf2 node[03-04]; topology file /run/t/topology")
