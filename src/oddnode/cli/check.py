"""``oddnode check``: the production-readiness check, stage by stage, with
a progress bar per benchmark and the verdict at the end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from oddnode.cli.common import (
    DEFAULT_DB,
    DbOption,
    ExcludeOption,
    FanoutOption,
    HostfileOption,
    NodesOption,
    SshConfigOption,
    TestbedOption,
    TimeoutOption,
    TopologyOption,
    TransportOption,
    WideOption,
    command_line,
    console,
    detail,
    err_console,
    inform,
    json_default,
    message_sizes,
    open_db,
    quiet,
    read_topology,
    save_topology,
    selected_target,
    testbed_errors,
    user_errors,
)
from oddnode.cli.nodes import print_unanswered
from oddnode.report import summaries


class _CheckProgress:
    """A progress bar per benchmark, one line per judged stage (neither with
    -q; with -v, each benchmark run of the stage too)."""

    def __init__(self, out: Console):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.out = out
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("repetitions"), TimeElapsedColumn(), console=out, transient=False,
                                 disable=quiet())
        self.tasks: dict[str, int] = {}

    def __enter__(self):
        self.progress.start()
        return self

    def __exit__(self, *exc):
        self.progress.stop()

    def stage_started(self, stage: str) -> None:
        if stage == "diagnostics":
            inform("[bold]diagnostics[/]: inventory of every node", out=self.progress.console)

    def benchmark_started(self, benchmark: str, done: int, total: int) -> None:
        self.tasks[benchmark] = self.progress.add_task(benchmark, total=total, completed=done)

    def repetition_done(self, benchmark: str, done: int, total: int) -> None:
        self.progress.update(self.tasks[benchmark], completed=done)

    def stage_judged(self, result) -> None:
        inform(summaries.stage_line(result), out=self.progress.console)
        for line in summaries.dim_lines(result.notes, indent="  "):
            inform(line, out=self.progress.console, highlight=False)
        for line in summaries.step_lines(result.runs):
            detail(line, out=self.progress.console, highlight=False)


def _names(text: str | None) -> tuple[str, ...]:
    """A comma-separated option ('' and 'none': nothing)."""
    if text is None or text.strip() in ("", "none"):
        return ()
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _check_plan(stages: str, skip: str | None, repetitions: int, benchmark_timeout: float, probe_timeout: float,
                expect: Optional[Path], parameters: dict):
    from oddnode.check import CheckPlan

    try:
        plan = CheckPlan(stages=_names(stages), skip=_names(skip), repetitions=repetitions,
                         benchmark_timeout=benchmark_timeout,
                         probe_timeout=probe_timeout, expectations=str(expect) if expect else None,
                         parameters={name: {k: v for k, v in values.items() if v is not None}
                                     for name, values in parameters.items()})
        plan.validate()
        return plan
    except (ValueError, KeyError) as err:
        raise typer.BadParameter(str(err)) from None


def check_command(
    nodes: NodesOption = None, exclude: ExcludeOption = None, hostfile: HostfileOption = None,
    transport: TransportOption = None, ssh_config: SshConfigOption = None, fanout: FanoutOption = None,
    timeout: TimeoutOption = 60.0, testbed: TestbedOption = False, db: DbOption = DEFAULT_DB,
    expect: Annotated[Optional[Path], typer.Option("--expect", help="Expectations file (YAML).")] = None,
    stages: Annotated[str, typer.Option(
        help="Stages after diagnostics, in this order: memory,compute,disk,interconnect; 'none' for diagnostics only."
    )] = "memory,compute,disk,interconnect",
    skip: Annotated[Optional[str], typer.Option(
        help="Benchmarks to leave out of their stage: memory, dgemm, hpl, disk, pairs, bisection (comma-separated).")] = None,
    repetitions: Annotated[int, typer.Option("--repetitions", "-r", help="Runs of each benchmark per node.")] = 5,
    keep_going: Annotated[bool, typer.Option(
        "--continue", help="Run the next stage even when one has warnings.")] = False,
    resume: Annotated[bool, typer.Option(
        help="Go on with the newest unfinished check in --db (its nodes and plan).")] = False,
    benchmark_timeout: Annotated[float, typer.Option(help="Seconds one repetition may take on a node.")] = 600.0,
    memory_elements: Annotated[Optional[int], typer.Option(
        help="Doubles per array of the memory kernel (default: 4x this machine's last-level cache).")] = None,
    memory_ntimes: Annotated[int, typer.Option(help="Timed iterations of the memory kernel (first discarded).")] = 10,
    memory_min_seconds: Annotated[float, typer.Option(
        help="Repeat each timed memory loop until it lasts about this long (default 0: one pass).")] = 0.0,
    threads: Annotated[Optional[int], typer.Option(help="OpenMP threads of the kernels (default: the node's).")] = None,
    dgemm_n: Annotated[Optional[int], typer.Option(help="Matrix order of DGEMM (default 6000).")] = None,
    hpl_n: Annotated[Optional[int], typer.Option(help="Problem size N of HPL through hpcc (default 10000).")] = None,
    disk_dir: Annotated[Optional[str], typer.Option(
        help="Directory on the nodes the disk benchmark writes in (default /var/tmp).")] = None,
    disk_size: Annotated[Optional[int], typer.Option(help="Bytes the disk benchmark writes (default 4 GiB).")] = None,
    disk_engine: Annotated[Optional[str], typer.Option(
        help="auto (fio where installed, else oddnode's kernel), fio or oddnode.")] = None,
    html: Annotated[Optional[Path], typer.Option(help="HTML report (default: oddnode-report.html).")] = Path("oddnode-report.html"),
    patterns: Annotated[Optional[str], typer.Option(
        help="Pair patterns of the interconnect stage (default sort,cut,fold,shuffle).")] = None,
    sizes: Annotated[Optional[str], typer.Option(
        help="Ping-pong message sizes in bytes, comma-separated (default 0 B to 4 MiB).")] = None,
    seconds_per_size: Annotated[Optional[float], typer.Option(help="Seconds each ping-pong size is timed.")] = None,
    bisection_seconds: Annotated[Optional[float], typer.Option(help="Seconds each bisection stream lasts.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print findings as JSON.")] = False,
    wide: WideOption = False,
    topology: TopologyOption = None,
) -> None:
    """The production-readiness check: diagnostics (inventory, consistency,
    expectations), then memory, compute and disk benchmarks, R runs per node,
    then the interconnect (ping-pong pair patterns, bisection), each stage
    judged across nodes before the next; a stage with warnings
    stops the check unless --continue. Exit 1 when not ready, 130 when
    interrupted (everything finished is kept: --resume goes on)."""
    from oddnode.check import ResumeError, make_target, resumable_check, run_check
    from oddnode.report.html import write_report
    from oddnode.report.terminal import expectation_table, print_analysis

    command = command_line()
    out = err_console if json_out else console
    with user_errors(), testbed_errors(), open_db(db, read_only=False) as store:
        save_topology(store, read_topology(topology, testbed))
        resume_id = None
        if resume:
            if nodes or hostfile or exclude or testbed:
                raise typer.BadParameter("--resume goes on with the nodes of the interrupted check: name none")
            try:
                resume_id, described, plan = resumable_check(store)
            except ResumeError as err:
                raise typer.BadParameter(str(err)) from None
            target = make_target(described["nodes"], described["transport"],
                                 Path(described["ssh_config"]) if described.get("ssh_config") else None,
                                 described.get("fanout"))
            options = {}
            inform(f"resuming check {resume_id} on {target.nodeset}", out=out)
        else:
            target = selected_target(nodes, exclude, hostfile, transport, ssh_config, fanout, testbed)
            plan = _check_plan(stages, skip, repetitions, benchmark_timeout, timeout, expect, {
                "memory": {"elements": memory_elements, "ntimes": memory_ntimes, "threads": threads,
                           "min_loop_seconds": memory_min_seconds},
                "dgemm": {"n": dgemm_n, "threads": threads},
                "hpl": {"n": hpl_n, "threads": threads},
                "disk": {"directory": disk_dir, "size": disk_size, "engine": disk_engine},
                "pairs": {"patterns": list(_names(patterns)) or None, "seconds_per_size": seconds_per_size,
                          "sizes": list(message_sizes(sizes)) if sizes else None},
                "bisection": {"seconds": bisection_seconds},
            })
            options = {"ssh_config": str(target.transport.ssh_config.absolute())
                       if getattr(target.transport, "ssh_config", None)
                       else None, "fanout": fanout}
        try:
            with _CheckProgress(out) as progress:
                result = run_check(store, target, plan, keep_going=keep_going, command=command,
                                   target_options=options, resume=resume_id, observer=progress)
        except KeyboardInterrupt:
            err_console.print(summaries.interrupted_line(db))
            raise typer.Exit(code=130) from None
    if json_out:
        typer.echo(json.dumps(result.analysis.to_json(), indent=2, default=json_default))
    else:
        if result.inventory is not None:
            inform(summaries.diagnostics_line(target, result.inventory))
            print_unanswered(result.inventory)
        if result.expectations is not None:
            inform(expectation_table(result.expectations))
        print_analysis(console, result.analysis, wide, brief=quiet())
    if result.stopped_after:
        out.print(summaries.stopped_line(result.stopped_after, result.not_run, db))
    if html:
        write_report(result.analysis, html, result)
        inform(f"report written to {html}", out=out)
    detail(f"[dim]check {result.check_id}: results stored in {db}[/]", out=out, highlight=False)
    if not result.analysis.ready:
        raise typer.Exit(code=1)


def register(app: typer.Typer) -> None:
    app.command("check")(check_command)
