"""What the commands say after a run: one-line summaries and verdicts, as
rich markup strings (or renderables) that the command line prints and tests
read without running a command.  Every name, path and note in them is
escaped (``literal``): only our own markup is markup."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import RenderableType

from oddnode.core.model import Finding, Severity
from oddnode.core.nodes import fold
from oddnode.report.text import literal

if TYPE_CHECKING:
    from oddnode.judge.analysis import Analysis
    from oddnode.stats.correlation import Correlation
    from oddnode.measure.pair.bisection import BisectionSummary
    from oddnode.measure.pair.matrix import MatrixSummary
    from oddnode.measure.pair.switchbench import AllToAllRepetition, AllToAllRunSummary, ChainRunSummary
    from oddnode.measure.collect.inventory import InventoryResult
    from oddnode.measure.runner import RunSummary
    from oddnode.measure.set.runner import SetRunSummary

# How many of a failed all-to-all's problems are quoted.
ALLTOALL_PROBLEMS_SHOWN = 5


def dim_lines(notes: Iterable[str], indent: str = "") -> list[str]:
    """Run notes, dimmed."""
    return [f"{indent}[dim]{literal(note)}[/]" for note in notes]


def stored_line(db: Path | str, *run_ids: int | None) -> str:
    """Where a command's results are kept, and under which runs."""
    ids = [str(run_id) for run_id in run_ids if run_id is not None]
    runs = f" ({'runs' if len(ids) > 1 else 'run'} {', '.join(ids)})" if ids else ""
    return f"[dim]results stored in {literal(db)}{runs}[/]"


# -- imports -----------------------------------------------------------------


def stab_import_line(summary, db: Path | str) -> str:
    return (f"run {summary.run_id}: {summary.benchmarks} benchmarks, {summary.results} results, "
            f"{summary.failures} failed runs, {summary.facts} facts, {summary.topology_nodes} nodes "
            f"in the topology -> {literal(db)}")


def ignored_import_lines(summary) -> list[str]:
    return [f"[dim]ignored {literal(ignored)} "
            "(not a plot.* file, units.csv, inventory.csv, topology.csv, nodes or failed)[/]"
            for ignored in summary.ignored]


def tool_import_line(summary, db: Path | str) -> str:
    return (f"run {summary.run_id}: {summary.files} files, {summary.labels} labels, "
            f"{summary.measurements} measurements -> {literal(db)}")


def invalid_import_lines(summary) -> list[str]:
    return [f"[yellow]failed its accuracy check:[/] {literal(path)}" for path in summary.invalid_runs]


# -- nodes -------------------------------------------------------------------


def inventory_line(result: InventoryResult, target, db: Path | str) -> str:
    return (f"{len(result.reports)} of {len(target.nodes)} nodes answered "
            f"({target.transport.name}: {literal(target.nodeset)}); facts stored in {literal(db)}")


def unanswered_lines(result: InventoryResult) -> list[str]:
    """The nodes that gave no inventory, folded."""
    return [f"[red]{label}:[/] {literal(fold(nodes))}"
            for label, nodes in (("unreachable", result.unreachable), ("failed", result.failed)) if nodes]


def skipped_probe_lines(result: InventoryResult) -> list[str]:
    """What the probe skipped, and on which nodes, folded."""
    skipped: dict[str, list[str]] = defaultdict(list)
    for node, report in result.reports.items():
        for note in report.notes:
            skipped[note].append(node)
    return [f"[dim]{literal(fold(nodes))}: {literal(note)}[/]" for note, nodes in sorted(skipped.items())]


# -- pair patterns -----------------------------------------------------------


def troubled_pairs(per_pair: Mapping[str, Mapping[str, int]]) -> list[str]:
    """The pair labels with a failed or invalid repetition."""
    return [label for label, counts in per_pair.items() if counts["failed"] or counts["invalid"]]


def pattern_run_line(pattern: str, summary, repetitions: int) -> str:
    """A pattern run's pairs, repetitions and run id, and how many pairs had trouble."""
    failed = troubled_pairs(summary.per_pair)
    return (f"{literal(pattern)}: {len(summary.per_pair)} pairs, {repetitions} repetitions, run {summary.run_id}"
            + (f"; [red]{len(failed)} pairs with failed or invalid runs[/]" if failed else ""))


def troubled_pairs_line(per_pair: Mapping[str, Mapping[str, int]]) -> str | None:
    """The pairs with a failed or invalid repetition, named."""
    failed = troubled_pairs(per_pair)
    return f"[red]{len(failed)} pairs with failed or invalid runs[/]: {literal(', '.join(failed))}" if failed else None


def slow_pairs_verdict(findings: Sequence[Finding]) -> RenderableType:
    """Who the slow pairs have in common, or that nobody is."""
    from oddnode.report.terminal import findings_by_nodes

    return findings_by_nodes(findings) if findings else "No node or group is common to the slow pairs."


# -- bisection and the matrix ------------------------------------------------


def bisection_line(summary: BisectionSummary, message_size: int) -> str:
    """Demonstrated bisection bandwidth next to the full one, or why there is none."""
    figures = summary.figures
    if figures.demonstrated is None:
        return (f"run {summary.run_id}: [red]no repetition in which every cut pair streamed[/]: "
                "no demonstrated bisection")
    full = (f"; full bisection {figures.full:.6g} MB/s ({figures.pairs} × {figures.single_pair:.6g} MB/s, the "
            f"median pair alone): {figures.fraction * 100:.1f}% of it" if figures.full else "")
    return (f"bisection of {literal(summary.nodes)}, {figures.pairs} cut pairs at {message_size} B "
            f"(run {summary.run_id}): demonstrated {figures.demonstrated:.6g} MB/s{full}")


def bisection_pair_lines(summary: BisectionSummary) -> list[str]:
    """Each cut pair's best bandwidth all at once and alone."""
    return [f"[dim]{literal(pair)}: {summary.concurrent.get(pair, float('nan')):.6g} MB/s at once, "
            f"{summary.alone.get(pair, float('nan')):.6g} MB/s alone[/]" for pair in summary.per_pair]


def matrix_line(summary: MatrixSummary, nodeset: str) -> str:
    limit = f", slow below {summary.limit:.6g} MB/s" if summary.limit is not None else ""
    return (f"matrix of {literal(nodeset)}: {len(summary.values)} ordered pairs in {len(summary.plans)} rounds "
            f"(run {summary.run_id}){limit}; {len(summary.suspects)} slow, {len(summary.retests)} retest rounds")


def matrix_verdict_lines(summary: MatrixSummary) -> list[str]:
    """Each slow pair and what its retests made of it (bad-link, contention)."""
    return [f"[dim]{literal(pair)}: {literal(verdict)}[/]" for pair, verdict in summary.verdicts.items()]


def matrix_findings(findings: Sequence[Finding]) -> RenderableType:
    from oddnode.report.terminal import findings_by_nodes

    return findings_by_nodes(findings, Severity.INFO) if findings else "No slow pair."


# -- switchbench -------------------------------------------------------------


def chain_line(summary: ChainRunSummary, nodeset: str, message_size: int) -> str:
    """Where the switch stopped scaling, or that it never did."""
    best = summary.best_aggregate()
    where = f"chain of {literal(nodeset)}, {message_size} B writes (run {summary.run_id})"
    if not best:
        return f"{where}: [red]no chain streamed[/]"
    if summary.saturation is not None:
        joined = next(p.nodes[-1] for p in summary.points if p.length == summary.saturation)
        return (f"{where}: the switch stops scaling at k = {summary.saturation}, where {literal(joined)} joined: "
                f"aggregate {best[summary.saturation]:.6g} MB/s")
    top = max(best)
    return f"{where}: the aggregate grew with every node added, {best[top]:.6g} MB/s at k = {top}"


def complete_alltoall(summary: AllToAllRunSummary) -> AllToAllRepetition | None:
    """The best repetition, if every node ran it and checked its data."""
    best = summary.best()
    if best is None or best.total_seconds is None or best.aggregate_bandwidth is None:
        return None
    return best


def alltoall_charged_line(charged: Iterable[str]) -> str | None:
    """The nodes charged with a failed or invalid repetition."""
    charged = set(charged)
    return f"[red]failed or invalid on[/] {literal(fold(charged))}" if charged else None


def alltoall_line(summary: AllToAllRunSummary) -> str:
    """Total time, aggregate and the slowest receiver, or that no repetition completed."""
    where = f"all-to-all of {literal(fold(summary.nodes))}, {summary.message_size} B per phase (run {summary.run_id})"
    best = complete_alltoall(summary)
    if best is None:
        return f"{where}: [red]no repetition in which every node ran and checked its data[/]"
    receivers = Counter(phase.slowest_receiver for phase in best.phases)
    slowest, count = receivers.most_common(1)[0]
    return (f"{where}: total {best.total_seconds:.6g} s, aggregate {best.aggregate_bandwidth:.6g} MB/s; "
            f"slowest receiver {literal(slowest)} (lowest in {count} of {len(best.phases)} phases)")


def alltoall_problem_lines(summary: AllToAllRunSummary) -> list[str]:
    """The first distinct problems of the repetitions, dimmed."""
    problems = dict.fromkeys(problem for r in summary.repetitions for problem in r.problems)
    return dim_lines(list(problems)[:ALLTOALL_PROBLEMS_SHOWN])


# -- node sets ---------------------------------------------------------------


def set_run_line(family: str, summary: SetRunSummary) -> str:
    """An ordering's set runs: how many, and how many failed or were invalid."""
    runs = len(summary.outcomes)
    sets = len({label for _, label in summary.outcomes})
    repetitions = len({repetition for repetition, _ in summary.outcomes})
    bad = runs - summary.count("ok")
    trouble = (f"; [red]{summary.count('failed')} failed, {summary.count('invalid')} invalid[/]" if bad else "")
    return (f"{literal(family)} {literal(summary.ordering)}: {runs} set runs ({sets} distinct sets, "
            f"{repetitions} repetitions), run {summary.run_id}{trouble}")


def no_set_findings(kinds: Sequence[str]) -> str:
    """What a set command says when none of its findings was made."""
    if "scaling-loss" in kinds:
        return "No scaling loss: the shuffled curve keeps up with the sorted one."
    return "No node is common to the slow or failed sets, and shuffled sets vary no more than sorted ones."


# -- the check ---------------------------------------------------------------


def stage_line(result) -> str:
    """A judged stage: consistent, or how many findings stop the check."""
    blocking = result.blocking
    verdict = (f"[red]{len(blocking)} finding{'s' if len(blocking) > 1 else ''} of warning severity or above[/]"
               if blocking else "[green]consistent[/]")
    return f"[bold]{literal(result.name)}[/]: {verdict}"


def step_lines(runs: Mapping[str, RunSummary | None]) -> list[str]:
    """Each benchmark run of a stage: its run id, repetitions and outcomes."""
    lines = []
    for benchmark, summary in runs.items():
        if summary is None:
            lines.append(f"  [dim]{literal(benchmark)}: finished by an earlier, interrupted invocation[/]")
            continue
        outcomes: Counter[str] = Counter()
        for counts in summary.per_node.values():
            outcomes.update({outcome: n for outcome, n in counts.items() if n})
        told = ", ".join(f"{n} {outcome}" for outcome, n in outcomes.items()) or "nothing run"
        lines.append(f"  [dim]{literal(benchmark)}: run {summary.run_id}, {summary.repetitions} repetitions "
                     f"on {len(summary.per_node)} nodes: {literal(told)}[/]")
    return lines


def diagnostics_line(target, inventory: InventoryResult) -> str:
    return (f"Diagnostics on {literal(target.nodeset)} ({target.transport.name}): "
            f"{len(inventory.reports)} of {len(target.nodes)} nodes answered")


def stopped_line(stopped_after: str, not_run: Sequence[str], db: Path | str) -> str:
    return (f"[red]stopped after {literal(stopped_after)}[/]: its findings make later benchmarks "
            f"inconsistent; not run: {literal(', '.join(not_run))}. "
            f"`oddnode check --resume --continue --db {literal(db)}` runs them anyway.")


def interrupted_line(db: Path | str) -> str:
    return (f"interrupted: every finished repetition is kept in {literal(db)}; "
            f"`oddnode check --resume --db {literal(db)}` goes on from there")


# -- the testbed -------------------------------------------------------------


def testbed_up_line(bed: Any) -> str:
    """The nodes brought up and how to reach them."""
    return (f"testbed up: {literal(bed.nodeset)} ({len(bed.nodes)} nodes); "
            f"ssh -F {literal(bed.ssh_config)} {literal(bed.nodes[0])}")


def testbed_leaves_line(bed: Any) -> str | None:
    """The leaf switches and their nodes, and the topology file naming them."""
    if not bed.leaves:
        return None
    return (f"leaves: {literal(', '.join(f'{leaf} {fold(nodes)}' for leaf, nodes in bed.leaves.items()))}; "
            f"topology file {literal(bed.topology)}")


# A correlation is shown (counted in the terminal, listed and drawn in the
# report) when it is significant at the analysis' alpha, strong, and over
# at least MIN_CORRELATION_LABELS labels: a line through a handful of points
# (the 4 cut pairs of a bisection, |r| = 1.00) looks like a law and says nothing.
MIN_CORRELATION_LABELS = 8
STRONG_R = 0.5


def strong_correlations(analysis: Analysis) -> list[Correlation]:
    """The correlations every view of an analysis shows, strongest first."""
    shown = [c for c in analysis.correlations if c.pearson_p < analysis.sensitivity.alpha
             and abs(c.pearson_r) >= STRONG_R and c.n >= MIN_CORRELATION_LABELS]
    return sorted(shown, key=lambda c: -abs(c.pearson_r))


def findings_heading(findings: Sequence[Finding]) -> str:
    """'3 of warning severity or above, 2 notes': the counts every view of
    an analysis gives its findings."""
    serious = sum(1 for f in findings if f.severity.rank >= Severity.WARNING.rank)
    notes = len(findings) - serious
    return f"{serious} of warning severity or above" + (f", {notes} note{'s' if notes != 1 else ''}" if notes else "")
