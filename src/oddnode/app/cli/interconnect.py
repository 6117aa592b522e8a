"""The interconnect commands: ping-pong in pair patterns, bisection, the
pair matrix, and switchbench's daisy chain, streams and all-to-all."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Iterator, Optional

import typer

from oddnode.core.connection import Connection
from oddnode.app.cli.common import (
    DEFAULT_DB,
    DbOption,
    ExcludeOption,
    FROM_OPTIONS,
    HostfileOption,
    MaxMinutesOption,
    NodesOption,
    TestbedOption,
    TopologyOption,
    command_line,
    console,
    could_not_run,
    detail,
    budget_stop,
    err_console,
    exit_for_findings,
    inform,
    open_db,
    print_json,
    progress_run,
    quiet,
    read_topology,
    run_budget,
    save_topology,
    selected_target,
    testbed_errors,
    user_errors,
    verbose,
)
from oddnode.measure.pair import switchbench
from oddnode.measure.pair.matrix import MatrixOptions
from oddnode.measure.pair.pairs import CHECK_PATTERNS, PairsOptions, StreamOptions
from oddnode.app.cli.step_flags import with_step_options
from oddnode.report import summaries
from oddnode.report.text import literal

if TYPE_CHECKING:
    from oddnode.report import documents

INTERCONNECT_PANEL = "Interconnect"
# Runs of each pattern, chain or all-to-all: fewer than a node benchmark's,
# each run of a pattern measures every pair.
NETWORK_REPETITIONS = 3
DEFAULT_PATTERNS = ",".join(CHECK_PATTERNS)
# The findings the interconnect commands print after their runs.
PAIR_FINDINGS = ("weak-pair-member", "weak-group", "oversubscription", "slow-link", "link-contention")
# The findings the streaming command prints: who the slow pairs have in common.
STREAM_FINDINGS = ("weak-pair-member", "weak-group")
# The daisy chain's: the length where the switch stops scaling.
CHAIN_FINDINGS = ("switch-saturation",)

# The options the interconnect commands share (each gives its own default).
PatternRepetitionsOption = Annotated[int, typer.Option(
    "-r", "--repetitions", help="Runs of each pattern (shuffle reshuffles each time).")]
SerialOption = Annotated[bool, typer.Option(
    "--serial", help="One pair at a time (isolates), instead of all at once (loads the switch).")]
PatternSeedOption = Annotated[int, typer.Option("--seed", help="Seed of the shuffle and random patterns.")]
PairsFileOption = Annotated[Optional[Path], typer.Option(
    "--pairs-file", help="Pairs to run, one 'nodeA nodeB' per line (pattern 'file').")]
MpiYieldOption = Annotated[Optional[bool], typer.Option(
    "--mpi-yield/--no-mpi-yield", help="Idle MPI ranks yield their CPU (Open MPI's mpi_yield_when_idle): for nodes "
                                       "whose CPUs are capped or shared; default on with --testbed only.")]
JsonOption = Annotated[bool, typer.Option(
    "--json", help="Print the runs, the tables and findings as one JSON document; the other lines go to stderr.")]


@contextmanager
def network_run(topology, nodes, exclude, hostfile, connection, testbed,
                db, declare_topology: bool = True) -> Iterator[tuple[Any, Any]]:
    """An interconnect command's target and writable store, the topology
    saved first (its nodes declared the cluster's unless ``declare_topology``
    is false); user and testbed errors said in one line."""
    with user_errors(), testbed_errors():
        target = selected_target(nodes, exclude, hostfile, connection, testbed)
        groups = read_topology(topology, testbed)
        with open_db(db, read_only=False, hold=False) as store:
            save_topology(store, groups, declare=declare_topology)
            yield target, store


def pattern_names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def findings_of(dataset, kinds: Sequence[str]):
    """The findings of ``kinds`` in the analysis of ``dataset``."""
    from oddnode.judge.analysis import analyze

    return [f for f in analyze(dataset).findings if f.kind in kinds]


def human_console(json_out: bool):
    """Where the human lines go: stderr when stdout carries the JSON document."""
    return err_console if json_out else console


def print_pattern_run(pattern: str, summary, repetitions: int, db: Path, json_out: bool = False) -> None:
    """A pattern run's summary and who sat out; its troubled pairs named with -q or -v."""
    out = human_console(json_out)
    inform(summaries.pattern_run_line(pattern, summary, repetitions), out=out)
    for line in summaries.dim_lines(dict.fromkeys(summary.notes)):
        inform(line, highlight=False, out=out)
    trouble = summaries.troubled_pairs_line(summary.per_pair)
    if trouble and (quiet() or verbose()):
        out.print(f"{literal(pattern)}: {trouble}", highlight=False)
    detail(summaries.stored_line(db, summary.run_id), highlight=False, out=out)


def print_document(command: str, runs: dict[str, dict[str, Any]], tables: dict[str, Any], findings=()) -> None:
    """A command's runs, tables and findings as one JSON document on stdout."""
    from oddnode.report.interconnect_json import document

    print_json(document(command, runs, tables, findings))


def run_json(summary, repetitions: int) -> documents.NetworkRun:
    return {**summary.to_json(), "repetitions": repetitions}


def print_patterns(dataset) -> None:
    from oddnode.report.terminal import pattern_table

    table = pattern_table(dataset)
    if table is not None:
        inform(table)


def pairs_command(
    patterns: Annotated[str, typer.Option(
        "--patterns", help="Pair patterns, comma-separated: sort, cut, fold, shuffle, random, file (with "
                           "--pairs-file).")] = DEFAULT_PATTERNS,
    repetitions: PatternRepetitionsOption = NETWORK_REPETITIONS,
    serial: SerialOption = False,
    options: PairsOptions = PairsOptions(),  # --sizes, --seconds-per-size, --port, --network (PAIRS_OPTIONS)
    seed: PatternSeedOption = 0,
    pairs_file: PairsFileOption = None,
    kernel: Annotated[str, typer.Option("--kernel", help="tcp: our TCP ping-pong (a server on the second node); "
                                                         "mpi: our MPI ping-pong, two ranks started by mpirun on "
                                                         "the first node (Open MPI and mpicc on every node).")] = "tcp",
    mpi_rsh_agent: Annotated[Optional[str], typer.Option(
        "--mpi-rsh-agent", help="With --kernel mpi: the command mpirun reaches the second node with (default ssh; "
                                "with --testbed, ssh with the testbed's configuration).")] = None,
    mpi_yield: MpiYieldOption = None,
    json_out: JsonOption = False,
    max_minutes: MaxMinutesOption = None,
    topology: TopologyOption = None,
    nodes: NodesOption = None, exclude: ExcludeOption = None, hostfile: HostfileOption = None,
    connection: Connection = FROM_OPTIONS,
    testbed: TestbedOption = False, db: DbOption = DEFAULT_DB,
) -> None:
    """Ping-pong between pairs of nodes in STAB's patterns; the nodes and uplinks behind slow pairs.

    Store every pair's
    latency and bandwidth per message size, then name the node or group
    common to the slow pairs, and oversubscribed uplinks (sorted against
    shuffled)."""
    from oddnode.measure.estimate import BudgetSpent, slowest_pair_rate
    from oddnode.measure.pair.pairs import PAIR_KERNELS, pairs_estimate, run_pairs
    from oddnode.readings.interconnect_series import MPI, NETWORK_MARK, PINGPONG, pattern_series

    if kernel not in PAIR_KERNELS:
        raise typer.BadParameter(f"{kernel!r}: choose {' or '.join(PAIR_KERNELS)}", param_hint="--kernel")
    over = options.over
    if over is not None and kernel != "tcp":
        raise typer.BadParameter("is for the TCP kernel: MPI chooses its own network (Open MPI's "
                                 "btl_tcp_if_include, its UCX settings)", param_hint="--network")
    with network_run(topology, nodes, exclude, hostfile, connection, testbed, db) as (target, store):
        if kernel == "mpi" and mpi_rsh_agent is None and testbed:
            mpi_rsh_agent = f"ssh -F {target.transport.ssh_config}"
        names = pattern_names(patterns)
        budget = run_budget(max_minutes, [pairs_estimate(
            "pairs", options, len(names), len(target.nodes), repetitions, slowest_pair_rate(store.pair_rates()),
            serial=serial, kernel=kernel)])
        runs, stopped = {}, None
        for pattern in names:
            # The run's name as its series has it: sort@ib on another network.
            shown = pattern if over is None else f"{pattern}{NETWORK_MARK}{over.name}"
            try:
                summary = progress_run(f"pairs {shown}", lambda progress: run_pairs(
                    store, target, pattern, repetitions, options=options, seed=seed, serial=serial,
                    pairs_file=pairs_file, on_progress=budget.watching(progress), command=command_line(),
                    kernel=kernel, rsh_agent=mpi_rsh_agent, mpi_yield=testbed if mpi_yield is None else mpi_yield,
                    network=over))
            except BudgetSpent as spent:
                stopped = budget.stopped = f"pairs {shown}: {spent}"
                break
            runs[pattern] = summary
            print_pattern_run(shown, summary, repetitions, db, json_out)
        dataset = store.load_dataset()
        findings = findings_of(dataset, PAIR_FINDINGS)
        if json_out:
            from oddnode.report.interconnect_json import pattern_json

            benchmarks = [pattern_series(MPI if kernel == "mpi" else PINGPONG, p, over.name if over else None)
                          for p in runs]
            print_document("pairs", {p: run_json(s, repetitions) for p, s in runs.items()},
                           {"patterns": pattern_json(dataset, benchmarks), "estimate": budget.to_json()}, findings)
        else:
            print_patterns(dataset)
            console.print(summaries.slow_pairs_verdict(findings))
    if stopped is not None:
        raise budget_stop(stopped, db)
    if not any(counts["ok"] for summary in runs.values() for counts in summary.per_pair.values()):
        raise could_not_run("no pair gave a result (see above)")
    # A pair that failed is a problem found, as in bisection and the matrix: its nodes or link may be down.
    exit_for_findings(findings, problems=any(summaries.troubled_pairs(s.per_pair) for s in runs.values()))


def bisection_command(
    repetitions: Annotated[int, typer.Option(
        "-r", "--repetitions", help="Runs of the cut pairs at once, and of each alone.")] = NETWORK_REPETITIONS,
    options: StreamOptions = StreamOptions(),  # --message-size, --seconds, --both, --port (BISECTION_OPTIONS)
    json_out: JsonOption = False,
    topology: TopologyOption = None,
    nodes: NodesOption = None, exclude: ExcludeOption = None, hostfile: HostfileOption = None,
    connection: Connection = FROM_OPTIONS,
    testbed: TestbedOption = False, db: DbOption = DEFAULT_DB,
) -> None:
    """Bisection bandwidth: the cut pairs streaming at once against each alone.

    The cut pairs (node i with node i+N/2) stream all at
    once, then each alone; demonstrated = the sum of the pairs' bandwidths,
    next to N/2 × the median pair alone (full bisection)."""
    from oddnode.measure.pair.bisection import run_bisection

    with network_run(topology, nodes, exclude, hostfile, connection, testbed, db) as (target, store):
        summary = progress_run("bisection", lambda progress: run_bisection(
            store, target, repetitions, options=options, on_progress=progress, command=command_line()))
    out = human_console(json_out)
    for line in summaries.dim_lines(summary.notes):
        inform(line, highlight=False, out=out)
    for line in summaries.bisection_pair_lines(summary):
        detail(line, highlight=False, out=out)
    trouble = summaries.troubled_pairs_line(summary.per_pair)
    if trouble:
        out.print(trouble)
    out.print(summaries.bisection_line(summary, options.message_size), highlight=summary.figures.demonstrated is None)
    detail(summaries.stored_line(db, summary.run_id), highlight=False, out=out)
    if json_out:
        from oddnode.report.interconnect_json import bisection_json

        print_document("bisection", {"bisection": run_json(summary, repetitions)}, {"bisection": bisection_json(summary)})
    if summary.figures.demonstrated is None and not trouble:
        raise could_not_run("no bisection figure: the cut pairs gave no valid result together (see above)")
    exit_for_findings((), problems=bool(trouble))


def matrix_command(
    options: MatrixOptions = MatrixOptions(),  # --sizes, --seconds-per-size, --port, --retest (MATRIX_OPTIONS)
    json_out: JsonOption = False,
    topology: TopologyOption = None,
    nodes: NodesOption = None, exclude: ExcludeOption = None, hostfile: HostfileOption = None,
    connection: Connection = FROM_OPTIONS,
    testbed: TestbedOption = False, db: DbOption = DEFAULT_DB,
) -> None:
    """Every ordered pair's bandwidth and latency; slow pairs retested to tell contention from a bad link.

    Every ordered pair, in rounds of disjoint pairs: bandwidth and latency per
    pair (heatmaps in the HTML report); slow pairs are retested with half as
    many pairs at once, then half again, to tell contention from a bad link."""
    from oddnode.measure.pair.matrix import run_matrix

    with network_run(topology, nodes, exclude, hostfile, connection, testbed, db) as (target, store):
        summary = progress_run("matrix", lambda progress: run_matrix(
            store, target, options=options, retest=options.retest, on_progress=progress, command=command_line()))
        dataset = store.load_dataset()
        out = human_console(json_out)
        for line in summaries.dim_lines(dict.fromkeys(summary.notes)):
            inform(line, highlight=False, out=out)
        trouble = summaries.troubled_pairs_line(summary.per_pair)
        if trouble:
            out.print(trouble)
        out.print(summaries.matrix_line(summary, target.nodeset), highlight=False)
        for line in summaries.matrix_verdict_lines(summary):
            detail(line, highlight=False, out=out)
        findings = findings_of(dataset, PAIR_FINDINGS)
        if not json_out:
            console.print(summaries.matrix_findings(findings))
    detail(summaries.stored_line(db, summary.run_id), highlight=False, out=out)
    if json_out:
        from oddnode.report.interconnect_json import matrix_json

        print_document("matrix", {"matrix": run_json(summary, 1)}, {"matrix": matrix_json(dataset, summary)}, findings)
    if not summary.values and not trouble:
        raise could_not_run("no matrix: no pair gave a result (see above)")
    # A pair that failed is a problem found, as in bisection: its nodes or link may be down.
    exit_for_findings(findings, problems=bool(trouble))


def switchbench_chain_command(
    repetitions: Annotated[int, typer.Option(
        "-r", "--repetitions", help="Runs of every chain length.")] = NETWORK_REPETITIONS,
    options: switchbench.ChainOptions = switchbench.ChainOptions(),  # --lengths, --message-size, ... (CHAIN_OPTIONS)
    json_out: JsonOption = False,
    topology: TopologyOption = None,
    nodes: NodesOption = None, exclude: ExcludeOption = None, hostfile: HostfileOption = None,
    connection: Connection = FROM_OPTIONS,
    testbed: TestbedOption = False, db: DbOption = DEFAULT_DB,
) -> None:
    """Daisy chain: one TCP stream forwarded through the first k nodes, k = 2 to
    N; aggregate throughput ((k-1) hops at once) against k, and the length
    where the switch stops scaling."""
    from oddnode.report.terminal import chain_table

    with network_run(topology, nodes, exclude, hostfile, connection, testbed, db) as (target, store):
        summary = progress_run("chain", lambda progress: switchbench.run_chain(
            store, target, repetitions, options=options, on_progress=progress, command=command_line()))
        findings = findings_of(store.load_dataset(), CHAIN_FINDINGS)
    out = human_console(json_out)
    if not json_out:
        inform(chain_table(summary))
    out.print(summaries.chain_line(summary, target.nodeset, options.message_size), highlight=False)
    detail(summaries.stored_line(db, summary.run_id), highlight=False, out=out)
    if json_out:
        from oddnode.report.interconnect_json import chain_json

        print_document("switchbench chain", {"chain": {**run_json(summary, repetitions),
                                                   "message_size": options.message_size}},
                   {"chain": chain_json(summary)}, findings)
    exit_for_findings(findings)


def switchbench_stream_command(
    patterns: Annotated[str, typer.Option(
        "--patterns", "--pattern", help="Pair patterns, comma-separated: sort, cut, fold, shuffle, random, file "
                                        "(with --pairs-file).")] = DEFAULT_PATTERNS,
    repetitions: PatternRepetitionsOption = NETWORK_REPETITIONS,
    serial: SerialOption = False,
    options: switchbench.StreamsOptions = switchbench.StreamsOptions(),  # --message-size, --seconds, --port
    seed: PatternSeedOption = 0,
    pairs_file: PairsFileOption = None,
    json_out: JsonOption = False,
    topology: TopologyOption = None,
    nodes: NodesOption = None, exclude: ExcludeOption = None, hostfile: HostfileOption = None,
    connection: Connection = FROM_OPTIONS,
    testbed: TestbedOption = False, db: DbOption = DEFAULT_DB,
) -> None:
    """Pairwise streaming: sustained streams both ways at once between the pairs
    of each pattern; per-pair throughput, then the node or group common to
    the slow pairs."""
    from oddnode.report.terminal import stream_table

    with network_run(topology, nodes, exclude, hostfile, connection, testbed, db) as (target, store):
        runs = {}
        for pattern in pattern_names(patterns):
            summary = progress_run(f"stream {pattern}", lambda progress: switchbench.run_streams(
                store, target, pattern, repetitions, options=options, seed=seed, serial=serial,
                pairs_file=pairs_file, on_progress=progress, command=command_line()))
            runs[pattern] = summary
            print_pattern_run(pattern, summary, repetitions, db, json_out)
            if not json_out:
                inform(stream_table(summary))
        findings = findings_of(store.load_dataset(), STREAM_FINDINGS)
    if json_out:
        from oddnode.report.interconnect_json import stream_json

        print_document("switchbench stream", {p: {**run_json(s, repetitions), "message_size": options.message_size}
                                          for p, s in runs.items()},
                   {"streams": [stream_json(s) for s in runs.values()]}, findings)
    else:
        console.print(summaries.slow_pairs_verdict(findings))
    exit_for_findings(findings)


def charged_nodes(store) -> set[str]:
    """The nodes charged with a failed or invalid all-to-all repetition, not
    the ranks that stopped because of them."""
    from oddnode.core.model import LabelKind

    return {f.label for f in store.load_failures()
            if f.benchmark == switchbench.ALLTOALL_BENCHMARK and f.label_kind is LabelKind.NODE}


def switchbench_alltoall_command(
    repetitions: Annotated[int, typer.Option(
        "-r", "--repetitions", help="Runs of the whole all-to-all.")] = NETWORK_REPETITIONS,
    options: switchbench.AllToAllOptions = switchbench.AllToAllOptions(),  # --message-size, ... (ALLTOALL_OPTIONS)
    seed: Annotated[int, typer.Option("--seed", help="Seed of the data each repetition sends and checks.")] = 0,
    json_out: JsonOption = False,
    topology: TopologyOption = None,
    nodes: NodesOption = None, exclude: ExcludeOption = None, hostfile: HostfileOption = None,
    connection: Connection = FROM_OPTIONS,
    testbed: TestbedOption = False, db: DbOption = DEFAULT_DB,
) -> None:
    """Congestion-controlled all-to-all: in phase i = 1 to N-1 every node sends
    to node (self+i) mod N and receives from (self-i) mod N, a barrier between
    phases; total time, aggregate throughput, minimum bandwidth per phase."""
    from oddnode.report.terminal import alltoall_table

    with network_run(topology, nodes, exclude, hostfile, connection, testbed, db) as (target, store):
        summary = progress_run("alltoall", lambda progress: switchbench.run_alltoall(
            store, target, repetitions, options=options, seed=seed, on_progress=progress, command=command_line()))
        charged = charged_nodes(store)
    out = human_console(json_out)
    charged_line = summaries.alltoall_charged_line(charged)
    if charged_line:
        out.print(charged_line, highlight=False)
    if summaries.complete_alltoall(summary) is None:
        out.print(summaries.alltoall_line(summary), highlight=False)
        for line in summaries.alltoall_problem_lines(summary):
            out.print(line, highlight=False)
    else:
        if not json_out:
            inform(alltoall_table(summary))
        out.print(summaries.alltoall_line(summary), highlight=False)
    detail(summaries.stored_line(db, summary.run_id), highlight=False, out=out)
    if json_out:
        from oddnode.report.interconnect_json import alltoall_json

        print_document("switchbench alltoall", {"alltoall": {**run_json(summary, repetitions), "seed": seed}},
                   {"alltoall": alltoall_json(summary, charged)})
    if summaries.complete_alltoall(summary) is None and not charged:
        raise could_not_run("no repetition of the all-to-all completed, and no node is charged with it (see above)")
    exit_for_findings((), problems=bool(charged))


# The step options the interconnect commands take as flags, made from the
# options' fields (their help, default and check), in this order.
PAIRS_OPTIONS = ("sizes", "seconds_per_size", "port", "network")
BISECTION_OPTIONS = ("message_size", "seconds", "both", "port")
MATRIX_OPTIONS = ("sizes", "seconds_per_size", "port", "retest")
CHAIN_OPTIONS = ("lengths", "message_size", "seconds", "port")
STREAMS_OPTIONS = ("message_size", "seconds", "port")
ALLTOALL_OPTIONS = ("message_size", "warmup_passes", "port")


def register(app: typer.Typer) -> None:
    pairs = with_step_options(pairs_command, PairsOptions, PAIRS_OPTIONS)
    bisection = with_step_options(bisection_command, StreamOptions, BISECTION_OPTIONS)
    matrix = with_step_options(matrix_command, MatrixOptions, MATRIX_OPTIONS)
    for name, command in (("pairs", pairs), ("bisection", bisection), ("matrix", matrix)):
        app.command(name, rich_help_panel=INTERCONNECT_PANEL)(command)


def register_switchbench(app: typer.Typer) -> None:
    group = typer.Typer(help="Switchbench's three switch benchmarks: daisy chain, pairwise streaming, all-to-all.",
                        no_args_is_help=True)
    for name, command, options, names in (
            ("chain", switchbench_chain_command, switchbench.ChainOptions, CHAIN_OPTIONS),
            ("stream", switchbench_stream_command, switchbench.StreamsOptions, STREAMS_OPTIONS),
            ("alltoall", switchbench_alltoall_command, switchbench.AllToAllOptions, ALLTOALL_OPTIONS)):
        group.command(name)(with_step_options(command, options, names))
    app.add_typer(group, name="switchbench", rich_help_panel=INTERCONNECT_PANEL)
