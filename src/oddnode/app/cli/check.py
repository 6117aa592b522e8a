"""``oddnode check``: the production-readiness check, stage by stage, with
a progress bar per benchmark and the verdict at the end."""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Optional

import typer
import yaml
from rich.console import Console

from oddnode.core.connection import Connection
from oddnode.app.cli.common import (
    AlphaOption,
    DEFAULT_ALPHA,
    DEFAULT_DB,
    DEFAULT_MIN_EFFECT,
    DbOption,
    ExcludeOption,
    ExitStatus,
    FROM_OPTIONS,
    HostfileOption,
    JunitOption,
    MaxMinutesOption,
    MinEffectOption,
    NodesOption,
    TestbedOption,
    TopologyOption,
    WideOption,
    analysis_document,
    budget_stop,
    command_line,
    console,
    detail,
    err_console,
    heartbeat,
    fail,
    inform,
    open_db,
    positive_seconds,
    print_json,
    progress_bars,
    quiet,
    read_topology,
    registered_testbed,
    run_budget,
    save_topology,
    selected_target,
    testbed_errors,
    user_errors,
)
from oddnode.core.nodes import node_count
from oddnode.measure import catalog
from oddnode.measure.estimate import Budget, BudgetSpent, slowest_pair_rate
from oddnode.measure.node.command import CommandStep
from oddnode.measure.node.noise import capped_noise_options
from oddnode.measure.plan import (
    CheckPlan,
    PlanError,
    layered_parameters,
    make_plan,
    parse_settings,
    plan_document,
    read_plan_file,
)
from oddnode.app.cli.nodes import print_unanswered
from oddnode.app.cli.option_groups import option_group, with_option_groups
from oddnode.app.cli.step_flags import FROM_FLAGS, StepFlags, check_step_flags, with_step_flags
from oddnode.report import summaries
from oddnode.core.atomic import check_target
from oddnode.report.junit import STDOUT, check_suite, refuse_both_on_stdout, write_junit
from oddnode.report.text import literal
from oddnode.reach.base import interrupt_status


class _CheckProgress:
    """One line per judged stage on ``out`` (not with -q; with -v, each
    benchmark run of the stage too); a progress bar per benchmark on stderr
    where it is a terminal, else a progress line on it every 30 s."""

    def __init__(self, out: Console, budget: Budget | None = None):
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

        self.out = out
        self.budget = budget or Budget()
        self.progress = progress_bars(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                      TextColumn("repetitions"), TimeElapsedColumn(), transient=False)
        self.tasks: dict[str, int] = {}
        self.under_way = "the diagnostics stage"  # what an interrupt stops, in words

    def __enter__(self):
        self._running = ExitStack()
        self._running.callback(self.progress.stop)
        self.progress.start()
        self.beat = self._running.enter_context(heartbeat())
        return self

    def __exit__(self, *exc):
        self._running.close()

    def stage_started(self, stage: str) -> None:
        self.under_way = f"the {stage} stage"
        self.beat.update(f"the {stage} stage")
        if stage == "diagnostics":
            inform("[bold]diagnostics[/]: inventory of every node", out=self.out)

    def benchmark_started(self, benchmark: str, done: int, total: int) -> None:
        if self.budget.spent():
            raise BudgetSpent(f"the --max-minutes budget of {self.budget.minutes:g} min was spent before {benchmark}")
        self.tasks[benchmark] = self.progress.add_task(literal(benchmark), total=total, completed=done)
        self.under_way = f"{benchmark} repetition {done + 1} of {total}"
        self.beat.update(f"{literal(benchmark)} repetitions", done, total)

    def repetition_done(self, benchmark: str, done: int, total: int) -> None:
        self.progress.update(self.tasks[benchmark], completed=done)
        self.beat.update(done=done, total=total)
        self.under_way = f"{benchmark} repetition {done + 1} of {total}" if done < total else f"the {benchmark} step"
        if done < total and self.budget.spent():
            raise BudgetSpent(f"the --max-minutes budget of {self.budget.minutes:g} min was spent after {benchmark} "
                              f"repetition {done} of {total}")

    def stage_judged(self, result) -> None:
        inform(summaries.stage_line(result), out=self.out)
        for line in summaries.dim_lines(result.notes, indent="  "):
            inform(line, out=self.out, highlight=False)
        for line in summaries.step_lines(result.runs):
            detail(line, out=self.out, highlight=False)


def _planned_nodes(chosen: list[str], testbed: bool) -> int | None:
    """How many nodes a check would run on: those named, the running
    testbed's, else this machine; None for a testbed not up."""
    if chosen:
        return len(chosen)
    if testbed:
        provider = registered_testbed()
        try:
            return node_count(provider.running().nodeset)
        except provider.error:
            return None
    return 1


def _estimate_comment(plan: CheckPlan, nodes: int | None) -> str:
    """The plan's estimate as YAML comments, so that the plan stays a plan file."""
    from oddnode.measure.estimate import estimate_lines

    if nodes is None:
        lines = ["estimate: no testbed is up to count its nodes"]
    else:
        lines = [f"estimate on {nodes} node{'s' if nodes > 1 else ''}:", *estimate_lines(*plan.estimates(nodes))]
    return "".join(f"# {line}\n" for line in lines)


def _refuse_orderings_without_topology(plan: CheckPlan, store) -> None:
    """Packed or striped sets need a topology: said before any stage runs."""
    from oddnode.readings.sets_series import TOPOLOGY_ORDERINGS
    from oddnode.measure.steps import make_options

    for step in (s for stage in plan.stages for s in plan.steps(stage)):
        options = make_options(step, plan.parameters.get(step.name))
        wanted = [o for o in getattr(options, "orderings", ()) if o in TOPOLOGY_ORDERINGS]
        if wanted and not store.load_topology():
            raise typer.BadParameter(f"{step.name}: {','.join(wanted)} needs a topology: --topology FILE (which "
                                     "group, a leaf switch or line card, each node hangs from)")


def _names(text: str | None) -> tuple[str, ...] | None:
    """A comma-separated option (None: not given; '' and 'none': nothing)."""
    if text is None:
        return None
    if text.strip() in ("", "none"):
        return ()
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _settings(flags: dict[str, object]) -> dict[str, dict[str, object]]:
    """The step options the check's own flags set (those given)."""
    parameters: dict[str, dict[str, object]] = {}
    for setting, value in flags.items():
        if value is not None:
            step, option = setting.split(".")
            parameters.setdefault(step, {})[option] = value
    return parameters


STEP_NAMES = ", ".join(catalog.STEPS.names())
COMMAND_STEP = CommandStep.name
OPT_IN = ", ".join(step.name for step in catalog.STEPS.values() if not step.default)


def _report(result, target, db: Path, html: Optional[Path], json_out: bool, wide: bool,
            stdout_taken: bool = False, drained: list | None = None, budget: Budget | None = None) -> None:
    """A finished check for people (or as JSON), its HTML report, and its
    exit status: 1 when the cluster is not ready.  ``stdout_taken``: stdout
    carries another document (--junit -), people's lines go to stderr."""
    from oddnode.core.atomic import OutputRefused
    from oddnode.report.html import write_report
    from oddnode.report.terminal import expectation_table, print_analysis

    out = err_console if json_out else console
    if stdout_taken:
        print_analysis(out, result.analysis, wide, brief=True)
    elif json_out:
        document = analysis_document(result.analysis)
        if budget is not None:
            document["estimate"] = budget.to_json()
        if drained is not None:
            document["drain"] = drained
        print_json(document)
    else:
        if result.inventory is not None:
            inform(summaries.diagnostics_line(target, result.inventory))
            print_unanswered(result.inventory)
        if result.expectations is not None:
            inform(expectation_table(result.expectations))
        print_analysis(console, result.analysis, wide, brief=quiet())
    for line in result.unmeasured_targets:
        err_console.print(f"[yellow]{literal(line)}[/]", highlight=False)
    if result.stopped_after:
        out.print(summaries.stopped_line(result.stopped_after, result.not_run, db))
    unwritten = None
    if html:
        try:
            write_report(result.analysis, html, result, source=f"oddnode check {result.check_id} in {db}")
        except (OSError, OutputRefused) as err:
            reason = getattr(err, "strerror", None) or err
            unwritten = f"cannot write the HTML report {html}: {reason} (the results are in {db})"
            err_console.print(f"[bold red]error:[/] {literal(unwritten)}", highlight=False)
        else:
            inform(f"report written to {literal(html)}", out=out)
    detail(f"[dim]check {result.check_id}: results stored in {literal(db)}[/]", out=out, highlight=False)
    if not result.analysis.ready:
        raise typer.Exit(code=int(ExitStatus.FINDINGS))
    if unwritten:
        raise typer.Exit(code=int(ExitStatus.COULD_NOT_RUN))


def _testbed_noise() -> dict[str, object]:
    """The noise kernel's options on the testbed: within each node's CPU
    quota (the testbed's default size when none is up yet)."""
    quota, cpus = registered_testbed().node_cpu_quota()
    return capped_noise_options(quota, cpus)


@option_group
@dataclass(frozen=True)
class PlanOptions:
    """What makes a check's plan: a plan file, then the flags and --set over it."""

    timeout: Annotated[Optional[float], typer.Option(
        callback=positive_seconds,
        help=f"Seconds the inventory probe may take on a node (default {CheckPlan.probe_timeout:g}).")] = None
    expect: Annotated[Optional[Path], typer.Option(
        "--expect", help="Expectations file (YAML): the facts, and the benchmarks: targets every node must reach.")] = None
    plan_file: Annotated[Optional[Path], typer.Option(
        "--plan", help="Plan file (YAML): stages, repetitions, skip, add, steps: {STEP: {OPTION: VALUE}}; "
                       "flags and --set override it. --show-plan writes one.")] = None
    settings: Annotated[Optional[list[str]], typer.Option(
        "--set", help="A step's option, STEP.OPTION=VALUE (e.g. memory.threads=1, pairs.sizes=0,1024); "
                      "repeatable; --show-plan lists them all.")] = None
    stages: Annotated[Optional[str], typer.Option(
        help="Stages after diagnostics, in this order: memory,noise,compute,disk,interconnect,sets (the default); "
             "'none' for diagnostics only.")] = None
    skip: Annotated[Optional[str], typer.Option(
        help=f"Steps to leave out of their stage, comma-separated: {STEP_NAMES}.")] = None
    add: Annotated[Optional[str], typer.Option(
        "--with", help=f"Steps a check runs only when asked, comma-separated: {OPT_IN}.")] = None
    repetitions: Annotated[Optional[int], typer.Option(
        "--repetitions", "-r", help=f"Runs of each benchmark per node (default {CheckPlan.repetitions}).")] = None
    benchmark_timeout: Annotated[Optional[float], typer.Option(
        callback=positive_seconds,
        help=f"Seconds one repetition may take on a node (default {CheckPlan.benchmark_timeout:g}).")] = None

    def plan(self, step_flags: StepFlags, testbed: bool) -> CheckPlan:
        """The plan of these options and the check's step flags given (each
        sets step options, catalog.CHECK_FLAGS; --set any of them, a plan
        file all); PlanError or ValueError for one they cannot make."""
        flags = _settings(step_flags)
        file = read_plan_file(self.plan_file) if self.plan_file else {}
        if testbed:
            # The testbed's nodes share capped CPUs: MPI ranks yield when idle
            # (see reach/launch.py), unless the plan file says otherwise.
            steps = file["steps"] = dict(file.get("steps") or {})
            for step in ("sets", "scale", "sync"):
                steps[step] = {"mpi_yield": True, **(steps.get(step) or {})}
            # ... and the noise kernel keeps within each node's quota (measure/node/noise.py).
            steps["noise"] = {**_testbed_noise(), **(steps.get("noise") or {})}
        # --command names a program to run: its step runs without --with command.
        wanted = _names(self.add)
        if flags.get(COMMAND_STEP, {}).get("command") and COMMAND_STEP not in (wanted or ()):
            wanted = (*(wanted or ()), COMMAND_STEP)
        return make_plan(file, layered_parameters(flags, parse_settings(self.settings or ())),
                         stages=_names(self.stages), skip=_names(self.skip), add=wanted,
                         repetitions=self.repetitions, benchmark_timeout=self.benchmark_timeout,
                         probe_timeout=self.timeout, expectations=str(self.expect) if self.expect else None)


@option_group
@dataclass(frozen=True)
class DrainOptions:
    """Whether a check drains in Slurm the nodes its findings name, and how far."""

    drain: Annotated[bool, typer.Option(
        "--drain", help="Drain in Slurm every node a finding at warning or above names (reason 'oddnode: ...'); "
                        "nodes drained by someone else keep their reason.")] = False
    drain_max: Annotated[Optional[int], typer.Option(
        "--drain-max", help="Drain nothing when the findings name more nodes than this (default: a quarter of "
                            "the checked nodes).")] = None
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="With --drain: print the scontrol commands instead of running them.")] = False

    def check(self) -> None:
        """Refuse a dry run without a drain, before anything runs."""
        if self.dry_run and not self.drain:
            raise typer.BadParameter("--dry-run shows what --drain would do: give both")


def check_command(
    nodes: NodesOption = None, exclude: ExcludeOption = None, hostfile: HostfileOption = None,
    connection: Connection = FROM_OPTIONS,
    testbed: TestbedOption = False, db: DbOption = DEFAULT_DB,
    planning: PlanOptions = PlanOptions(),
    show_plan: Annotated[bool, typer.Option(
        "--show-plan", help="Print the plan, every option of every step, as YAML, and run nothing.")] = False,
    keep_going: Annotated[bool, typer.Option(
        "--continue", help="Run the next stage even when one has warnings.")] = False,
    resume: Annotated[bool, typer.Option(
        help="Go on with the newest unfinished check in --db (its nodes and plan).")] = False,
    step_flags: StepFlags = FROM_FLAGS,
    html: Annotated[Optional[Path], typer.Option(help="HTML report (default: oddnode-report.html).")] = Path("oddnode-report.html"),
    json_out: Annotated[bool, typer.Option("--json", help="Print findings as JSON.")] = False,
    junit: JunitOption = None,
    draining: DrainOptions = DrainOptions(),
    wide: WideOption = False,
    max_minutes: MaxMinutesOption = None,
    topology: TopologyOption = None,
    alpha: AlphaOption = DEFAULT_ALPHA,
    min_effect: MinEffectOption = DEFAULT_MIN_EFFECT,
) -> None:
    """The production-readiness check: diagnostics, then memory, noise, compute, disk and the interconnect.

    Diagnostics (inventory, consistency,
    expectations), then memory, OS noise, compute and disk benchmarks, R runs per node,
    then the interconnect (ping-pong pair patterns, bisection), each stage
    judged across nodes before the next; a stage with warnings
    stops the check unless --continue. Exit 1 when not ready, 130 when
    interrupted (everything finished is kept: --resume goes on)."""
    from oddnode.app.check import ResumeError, described_target, resumable_check, run_check, select_nodes
    from oddnode.findings import Sensitivity

    command = command_line()
    out = err_console if json_out else console
    try:
        plan = planning.plan(step_flags, testbed)
        sensitivity = Sensitivity(alpha=alpha, min_effect=min_effect)
        refuse_both_on_stdout(junit, json_out)
    except (PlanError, ValueError) as err:
        raise fail(str(err)) from None
    draining.check()
    if resume and (nodes or hostfile or exclude or testbed):
        raise fail("--resume goes on with the nodes of the interrupted check: name none")
    with user_errors():  # the node options read before anything is shown, opened or run
        chosen = select_nodes(nodes, exclude, hostfile)
    if show_plan:
        typer.echo(yaml.safe_dump(plan_document(plan), sort_keys=False), nl=False)
        typer.echo(_estimate_comment(plan, _planned_nodes(chosen, testbed)), nl=False)
        return
    with user_errors():  # outputs refused before hours of benchmarks, not after
        for output in (html, None if junit == STDOUT else junit):
            if output is not None:
                check_target(output)
    target = None
    if not resume:
        with user_errors(), testbed_errors():
            target = selected_target(nodes, exclude, hostfile, connection, testbed)
    with user_errors(), testbed_errors(), open_db(db, read_only=False, hold=False) as store:
        save_topology(store, read_topology(topology, testbed))
        _refuse_orderings_without_topology(plan, store)
        resume_id = None
        if resume:
            try:
                resume_id, described, plan = resumable_check(store)
                target = described_target(described)
            except ResumeError as err:
                raise typer.BadParameter(str(err)) from None
            inform(f"resuming check {resume_id} on {literal(target.nodeset)}", out=out)
        budget = run_budget(max_minutes, *plan.estimates(len(target.nodes), slowest_pair_rate(store.pair_rates())))
        progress = _CheckProgress(out, budget)
        try:
            with progress:
                result = run_check(store, target, plan, keep_going=keep_going, command=command,
                                   sensitivity=sensitivity,
                                   resume=resume_id, observer=progress)
        except KeyboardInterrupt as interrupt:
            # The transport has ended the processes on the nodes on its way
            # out; what they gave of this repetition is not stored.
            err_console.print(f"stopped: {literal(progress.under_way)} on {literal(target.nodeset)}, its processes "
                              "on the nodes ended and its partial results dropped", highlight=False)
            err_console.print(summaries.interrupted_line(db))
            raise typer.Exit(code=interrupt_status(interrupt)) from None
    if junit:
        with user_errors():
            write_junit(check_suite(result), junit)
    # A check its budget stopped between two repetitions is reported as a
    # finished one is, on the stages it judged (the JSON's estimate saying
    # where it stopped); it drains no node on a part of the check, and
    # exits 3 with the way to go on.
    stopped = budget.stopped = result.budget_stopped
    drained = None
    if draining.drain and not stopped:
        from oddnode.app.cli.health import drain_for_check

        drained = drain_for_check(result.analysis.problems, len(target.nodes), dry_run=draining.dry_run,
                                  limit=draining.drain_max, out=out, check_id=result.check_id)
    try:
        _report(result, target, db, html, json_out or junit == STDOUT, wide, junit == STDOUT, drained, budget)
    except typer.Exit as verdict:
        if not stopped or verdict.exit_code != int(ExitStatus.FINDINGS):
            raise
    if stopped:
        stop = budget_stop(stopped, db)
        err_console.print(f"`oddnode check --resume --db {literal(db)}` goes on from there", highlight=False)
        raise stop


def register(app: typer.Typer) -> None:
    # The step flags made now, from the steps registered when the command line is built.
    app.command("check")(with_step_flags(with_option_groups(check_command), check_step_flags()))
