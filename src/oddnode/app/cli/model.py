"""``oddnode model``: an application's profile turned into microbenchmarks,
measured on candidate placements of its job, and the communication time
predicted per placement."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from oddnode.core.connection import Connection
from oddnode.app.cli.common import (
    DEFAULT_DB,
    DbOption,
    ExcludeOption,
    FROM_OPTIONS,
    HostfileOption,
    NodesOption,
    TestbedOption,
    TopologyOption,
    WideOption,
    command_line,
    console,
    detail,
    err_console,
    exit_for_findings,
    inform,
    positive_seconds,
    print_json,
    progress_run,
    user_errors,
)
from oddnode.app.cli.interconnect import MpiYieldOption, network_run
from oddnode.app.cli.sets import RshAgentOption
from oddnode.core.model import Severity
from oddnode.report import summaries
from oddnode.report.text import literal

if TYPE_CHECKING:
    from oddnode.report import documents

MODEL_FINDINGS = ("placement-sensitive",)


def stored_profile_id(store, text: str) -> int:
    """A profile named on the command line: a stored id, ``latest``, or the
    path of a profile file (our profiler's output or an mpiP report), which
    is stored first."""
    if text == "latest":
        latest = store.latest_profile_id()
        if latest is None:
            raise ValueError(f"{store.path} holds no profile: run oddnode profile -- mpirun ... or oddnode import "
                             "mpip FILE first")
        return latest
    if text.isdigit():
        profile_id = int(text)
        store.profile(profile_id)  # an unknown id is refused here, naming the known ones
        return profile_id
    path = Path(text)
    if not path.is_file():
        raise ValueError(f"{text!r} is neither a stored profile id, 'latest', nor a profile file")
    return store.add_profile(read_profile_file(path), command=command_line())


def read_profile_file(path: Path):
    """Our profiler's output or an mpiP report, told apart by their first
    lines; an Intel Trace Collector dump needs its tick rate: import it."""
    from oddnode.parsers.mpip import read_mpip
    from oddnode.measure.profile.profiler import FORMAT, read_profiler_output

    with path.open(encoding="utf-8", errors="replace") as handle:
        head = handle.read(4096)
    if head.startswith(FORMAT):
        return read_profiler_output(path)
    if "mpiP" in head:
        return read_mpip(path)
    raise ValueError(f"{path}: neither our profiler's output nor an mpiP report; import an Intel Trace Collector "
                     "dump with oddnode import itc FILE --ticks-per-second N, then model it by its id")


def model_command(
    profile: Annotated[str, typer.Argument(
        help="The profile: a stored id, 'latest', or a file (oddnode profile's output, an mpiP report).")],
    placements: Annotated[str, typer.Option(
        "--placements", help="Placements to measure, comma-separated: given (where the profile ran), packed "
                             "(one group filled first), striped (round-robin across groups), shuffled, sorted.")]
    = "given,packed,striped,shuffled",
    count: Annotated[Optional[int], typer.Option(
        "--count", help="Nodes of the job (default: the profile's hosts).")] = None,
    repetitions: Annotated[int, typer.Option(
        "-r", "--repetitions", help="Runs of every placement (5 lets packed and striped be told apart at "
                                    "p < 0.05; 3 cannot).")] = 5,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the shuffled placement and the run order.")] = 0,
    coverage: Annotated[float, typer.Option(
        "--coverage", help="Share of the time in MPI the measured calls must hold.")] = 0.9,
    max_points: Annotated[int, typer.Option(
        "--max-points", help="At most this many benchmark sizes are measured.")] = 8,
    seconds_per_size: Annotated[float, typer.Option(
        "--seconds-per-size", callback=positive_seconds, help="Seconds each benchmark size is timed per placement and repetition.")] = 0.2,
    mpi_rsh_agent: RshAgentOption = None,
    mpi_yield: MpiYieldOption = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the model as JSON.")] = False,
    plot: Annotated[Optional[Path], typer.Option("--plot", help="Write the per-placement figure (PNG).")] = None,
    wide: WideOption = False,
    topology: TopologyOption = None,
    nodes: NodesOption = None, exclude: ExcludeOption = None, hostfile: HostfileOption = None,
    connection: Connection = FROM_OPTIONS,
    testbed: TestbedOption = False, db: DbOption = DEFAULT_DB,
) -> None:
    """Predict an application's communication per node placement from its profile and our MPI kernels.

    The calls and message sizes that hold most of the profile's time in MPI
    are measured with our set kernel (Alltoall, Allreduce, Sendrecv, Bcast,
    Barrier at those sizes) on placements of the job's node count: where it
    ran, packed into a topology group, striped across the groups, shuffled.
    The prediction per placement is the sum of each call's count times its
    measured time; packed and striped apart by more than the noise is the
    placement-sensitive finding, naming the groups."""
    from oddnode.judge.analysis import analyze
    from oddnode.readings.placement import select
    from oddnode.measure.profile.placement_runs import measure
    from oddnode.readings.placement import candidates, prediction_metric
    from oddnode.report.placement import model_document, model_figure, model_view
    from oddnode.report.terminal import findings_by_nodes
    from oddnode.readings.partition import PLACEMENTS

    wanted = [name.strip() for name in placements.split(",") if name.strip()]
    unknown = [name for name in wanted if name not in PLACEMENTS]
    if unknown or not wanted:
        raise typer.BadParameter(f"placements are among {', '.join(PLACEMENTS)}, not {placements!r}",
                                 param_hint="--placements")
    out = err_console if json_out else None
    # The model measures a few of the nodes on purpose: the topology's others
    # are not declared, or they would look as if they had left nothing.
    with network_run(topology, nodes, exclude, hostfile, connection, testbed, db,
                     declare_topology=False) as (target, store):
        with user_errors():
            profile_id = stored_profile_id(store, profile)
            selection = select(store.profile(profile_id), coverage, max_points)
            job_nodes = count or len(selection.hosts)
            if job_nodes < 2:
                raise ValueError("the profile does not name its ranks' hosts: give the job's node count, --count N")
            groups = store.load_topology()
            chosen, notes = candidates(target.nodes, job_nodes, groups, selection.hosts, seed, wanted)
            if selection.ranks != job_nodes:
                notes.append(f"the profile ran {selection.ranks} ranks on {job_nodes} nodes; the kernels run one "
                             "rank per node (the traffic between nodes)")
            for note in notes:
                inform(literal(note), highlight=False, out=out)
            run = progress_run("model", lambda progress: measure(
                store, target, selection, chosen, profile_id=profile_id, repetitions=repetitions, seed=seed,
                seconds_per_size=seconds_per_size, rsh_agent=mpi_rsh_agent,
                mpi_yield=testbed if mpi_yield is None else mpi_yield, command=command_line(),
                on_progress=progress))
        dataset = store.load_dataset()
    metric = prediction_metric(profile_id)
    findings = [f for f in analyze(dataset, correlations=False).findings
                if f.kind in MODEL_FINDINGS and f.evidence.get("metric") == metric]
    if plot is not None:
        from oddnode.report.plots import save_figure

        save_figure(model_figure(selection, run, chosen), plot)
    if json_out:
        document: documents.Model = {**model_document(selection, run, notes, profile_id),
                                     "findings": [f.to_json() for f in findings]}
        print_json(document)
    else:
        console.print(model_view(selection, run, repetitions, (), None if wide else console.width))
        if findings:
            console.print(findings_by_nodes(findings, minimum=Severity.INFO))
        else:
            inform("no placement-sensitive finding: packed and striped are within the noise "
                   f"(or not both measured with {repetitions} repetitions)", highlight=False)
    if plot is not None:
        detail(f"figure: {literal(plot)}", highlight=False, out=out)
    detail(summaries.stored_line(db, run.run_id), highlight=False, out=out)
    exit_for_findings(findings)


def register(app: typer.Typer) -> None:
    from oddnode.app.cli.profile import PROFILE_PANEL

    app.command("model", rich_help_panel=PROFILE_PANEL)(model_command)
