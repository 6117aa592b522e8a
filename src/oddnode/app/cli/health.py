"""``oddnode health`` (the quick check of the node it runs on, for Slurm's
HealthCheckProgram), ``oddnode baseline`` (what it compares with, from the
last full check) and the drain of the nodes a check names (``check --drain``)."""

from __future__ import annotations

import logging
import math
import os
import time
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Iterable, Optional

import typer

from oddnode.app.cli.common import (
    positive_seconds,
    DEFAULT_DB,
    DbOption,
    ExitStatus,
    console,
    could_not_run,
    err_console,
    fail,
    inform,
    print_json,
    open_db,
    user_errors,
)
from oddnode.report.text import literal

if TYPE_CHECKING:
    from oddnode.report import documents

HEALTH_PANEL = "Slurm"
DEFAULT_BASELINE = Path("oddnode-baseline.yaml")
# The most of a check's nodes ``check --drain`` takes out of service: a
# finding naming more is the cluster's (or the expectations') problem, not
# that of a few odd nodes, and draining them would stop the cluster.
DRAIN_MAX_SHARE = 0.25


class Benchmarks(str, Enum):
    idle = "idle"
    always = "always"
    never = "never"


# -- what to do to Slurm's nodes, printed or done ---------------------------------


def act_on_nodes(actions, dry_run: bool, out) -> list[dict[str, Any]]:
    """Carry out (or with ``dry_run`` print) drain and resume actions; one
    line each; their record for JSON documents."""
    from oddnode.onnode.slurm_node import act

    records = []
    for action, error, record, line in act(actions, dry_run):
        records.append(record)
        if error:
            err_console.print(f"[bold red]error:[/] {literal(line)}", highlight=False)
        elif action.verb == "leave":
            inform(literal(line), out=out, highlight=False)
        else:
            out.print(literal(line), highlight=False)
    return records


def problems_by_node(problems: Iterable[Any]) -> dict[str, list[str]]:
    """Node -> the summaries of the problems (warning or worse) that name it."""
    from oddnode.core.model import Severity
    from oddnode.core.nodes import expand

    by_node: dict[str, list[str]] = {}
    for problem in problems:
        if problem.severity.rank < Severity.WARNING.rank or not problem.nodes:
            continue
        for node in expand(problem.nodes):
            by_node.setdefault(node, []).append(problem.summary)
    return by_node


def drain_for_check(problems, checked: int, *, dry_run: bool, limit: int | None, out,
                    check_id: int | None = None) -> list[dict[str, Any]]:
    """Drain every node a problem of the check names at warning or worse,
    unless they are more than ``limit`` (then none, and say so)."""
    from oddnode.onnode.slurm_node import SlurmError, node_states, plan_actions
    from oddnode.core.nodes import fold

    by_node = problems_by_node(problems)
    if not by_node:
        inform("drain: no node to drain", out=out)
        return []
    most = limit if limit is not None else max(1, math.floor(DRAIN_MAX_SHARE * checked))
    if len(by_node) > most:
        err_console.print(
            f"[bold red]drain refused:[/] the findings name {len(by_node)} nodes ({literal(fold(by_node))}), more than "
            f"--drain-max {most}: a problem this wide is the cluster's, not a few nodes'; drain by hand, or raise "
            "--drain-max", highlight=False)
        return []
    tag = f" (check {check_id})" if check_id is not None else ""
    reasons = {node: [summary + tag for summary in summaries] for node, summaries in by_node.items()}
    try:
        states = node_states(sorted(by_node))
    except SlurmError as err:
        raise could_not_run(f"drain: {err}") from None
    return act_on_nodes(plan_actions(states, reasons, drain=True), dry_run, out)


# -- oddnode health ---------------------------------------------------------------


def _node_name(node: Optional[str]) -> str:
    """--node, else the name slurmd runs the program for, else this host's short name."""
    from oddnode.core.nodes import validate_node_name
    from oddnode.reach.local import local_node_name

    name = node or os.environ.get("SLURMD_NODENAME")
    return validate_node_name(name) if name else local_node_name()


def health_command(
    node: Annotated[Optional[str], typer.Option(
        "--node", help="This node's name in Slurm (default: $SLURMD_NODENAME, else the short host name).")] = None,
    expect: Annotated[Optional[list[Path]], typer.Option(
        "--expect", metavar="FILE", help="Expectations file (YAML) the node's facts must meet; repeatable.")] = None,
    baseline: Annotated[Optional[Path], typer.Option(
        "--baseline", help="Baseline written by `oddnode baseline` from the last full check: the facts most "
                           "nodes had and the memory bandwidth they reached.")] = None,
    benchmarks: Annotated[Benchmarks, typer.Option(
        help="When to run the memory kernel: idle (only while no job holds the node; always without Slurm), "
             "always, never.")] = Benchmarks.idle,
    drain: Annotated[bool, typer.Option(
        "--drain", help="Drain this node in Slurm when a check finds a problem (reason 'oddnode: ...').")] = False,
    resume_when_healthy: Annotated[bool, typer.Option(
        "--resume-when-healthy", help="Resume this node when healthy, if oddnode drained it (never a node "
                                      "drained by someone else).")] = False,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Print the scontrol commands instead of running them.")] = False,
    memory_timeout: Annotated[float, typer.Option(
        callback=positive_seconds, help="Seconds the memory kernel may take, its first build included (slurmd ends a health check "
             "program at 60).")] = 40.0,
    json_out: Annotated[bool, typer.Option("--json", help="Print the checks and problems as JSON.")] = False,
    log: Annotated[Optional[str], typer.Option(
        "--log", metavar="TARGET", help="Also log what was found: syslog, a file to append to, or none (with "
                                        "--install: the program's default, syslog).")] = None,
    install: Annotated[Optional[Path], typer.Option(
        "--install", metavar="DIR", help="Do not check: write DIR/oddnode-health, a program needing only python3 "
                                         "(>= 3.6) on the node, with its settings beside it (these options "
                                         "as its defaults).")] = None,
) -> None:
    """The quick health check of the node it runs on, for Slurm's HealthCheckProgram.

    Facts against the expectations and the baseline, a few seconds of the
    memory kernel against the cluster's bandwidth in the last check (only
    while no job holds the node), and the node's own address.  One line per
    problem; exit 1 when the node has one, 3 when a check could not run.
    With --drain the node is drained in Slurm for its problems, with
    --resume-when-healthy returned once they are gone (only when oddnode
    drained it).  With --install DIR, write the same check as a program for
    nodes without oddnode instead."""
    from oddnode.app.health import checks
    from oddnode.app.health.baseline import BaselineError, read_baseline
    from oddnode.onnode.slurm_node import SlurmError, node_state, plan_actions
    from oddnode.findings.expectations import ExpectationError, load_expectations
    from oddnode.findings.processes import is_process_key
    from oddnode.onnode import health_node

    started = time.monotonic()
    out = err_console if json_out else console
    # The configuration files' expectations come as one path (cli/common.py with_configuration).
    expect = [expect] if isinstance(expect, (str, Path)) else list(expect or ())
    if not expect and baseline is None:
        raise fail("nothing to compare this node with: give --baseline FILE (`oddnode baseline` writes it from a "
                   "check) and/or --expect FILE")
    with user_errors():
        name = _node_name(node)
        try:
            sources = [(str(path), load_expectations(path)) for path in expect]
            loaded = read_baseline(baseline) if baseline else None
        except (ExpectationError, BaselineError) as err:
            raise fail(str(err)) from None
    if loaded is not None:
        sources.append((f"baseline {baseline}", loaded.expect))
    if install is not None:
        _install_program(install, sources, loaded, memory_timeout, drain=drain, resume=resume_when_healthy,
                         benchmarks=benchmarks, log=log)
        return
    try:
        logger = health_node.logger_for(log) if log else None
    except OSError as err:
        raise fail(f"--log {literal(log)}: {literal(err.strerror or err)}") from None

    state, slurm_note = None, None
    if drain or resume_when_healthy or benchmarks is Benchmarks.idle:
        try:
            state = node_state(name)
        except SlurmError as err:
            if drain or resume_when_healthy:
                raise could_not_run(f"{name}: {err}") from None
            slurm_note = f"no Slurm state ({err})"
    busy = None
    if benchmarks is Benchmarks.never:
        busy = "--benchmarks never"
    elif benchmarks is Benchmarks.idle and state is not None and state.busy:
        busy = f"a job holds {state.cpus_allocated} CPUs of {name} ({state.state})"

    with_processes = any(is_process_key(key) for _, expectations in sources for key in expectations)
    outcomes = [
        checks.timed("facts", lambda: checks.check_facts(name, checks.probe_facts(with_processes)[0], sources)),
        checks.timed("memory", lambda: checks.check_memory(loaded.memory if loaded else None,
                                                          lambda b: checks.measure_memory(b, memory_timeout), busy)),
        checks.timed("address", lambda: checks.check_address(name, state.address if state else None)),
    ]
    problems = [problem for outcome in outcomes for problem in outcome.problems]
    failed = [outcome for outcome in outcomes if outcome.status == checks.FAILED]

    actions: list[dict[str, Any]] = []
    if state is not None and (drain or resume_when_healthy):
        planned = plan_actions({name: state}, {name: [p.reason for p in problems]}, drain=drain,
                               resume=resume_when_healthy and not failed)
        actions = act_on_nodes(planned, dry_run, out)
    elapsed = time.monotonic() - started

    if json_out:
        document: documents.Health = {
            "node": name, "healthy": not problems and not failed, "seconds": round(elapsed, 3),
            "slurm_state": state.state if state else None, "slurm_reason": state.reason if state else None,
            "checks": [o.to_json() for o in outcomes], "problems": [p.to_json() for p in problems],
            "actions": actions}
        print_json(document)
    for problem in problems:
        out.print(f"{name}: {literal(problem.message)}", highlight=False, soft_wrap=True)
        _log(logger, logging.WARNING, f"{name}: {problem.message}")
    for outcome in failed:
        err_console.print(f"[bold red]error:[/] {name}: the {outcome.name} check could not run: "
                          f"{literal(outcome.detail)}", highlight=False)
        _log(logger, logging.ERROR, f"error: {name}: the {outcome.name} check could not run: {outcome.detail}")
    for record in actions:
        _log(logger, logging.WARNING, f"{name}: {record['action']}: {record['why']}"
             + (f" (error: {record['error']})" if record["error"] else ""))
    if not problems:
        seen = "; ".join(f"{o.name} {o.status}: {o.detail}" for o in outcomes)
        line = (f"{name}: {'healthy' if not failed else 'no problem found'} in {elapsed:.1f} s ({seen})"
                + (f"; {slurm_note}" if slurm_note else ""))
        inform(literal(line), out=out, highlight=False, soft_wrap=True)
        _log(logger, logging.INFO, line)
    if problems:
        raise typer.Exit(code=int(ExitStatus.FINDINGS))
    if failed or any(record["error"] for record in actions):
        raise typer.Exit(code=int(ExitStatus.COULD_NOT_RUN))


def _log(logger, level: int, line: str) -> None:
    if logger is not None:
        logger.log(level, line)


def _install_program(directory: Path, sources, loaded, memory_timeout: float, *, drain: bool, resume: bool,
                     benchmarks: Benchmarks, log: Optional[str]) -> None:
    """Write the health program and its settings; say where, and how Slurm runs it."""
    from oddnode.app.health.program import install, settings_document

    run = {"drain": drain, "resume_when_healthy": resume, "benchmarks": benchmarks.value, "log": log or "syslog"}
    with user_errors():
        settings = settings_document(sources, loaded, run, memory_timeout)
        program, settings_file = install(directory, settings)
    rules = sum(len(source["rules"]) for source in settings["expectations"])
    memory = "the memory kernel against the baseline" if settings["memory"] else "no memory check (no baseline)"
    inform(f"wrote {literal(program)} and {literal(settings_file)}: {rules} expectations, {memory}; runs with "
           f"{literal(' '.join(f'{k}={v}' for k, v in run.items()))}", highlight=False, soft_wrap=True)
    inform(f"slurm.conf: HealthCheckProgram={literal(program)}", highlight=False, soft_wrap=True)


# -- oddnode baseline -----------------------------------------------------------


def baseline_command(
    db: DbOption = DEFAULT_DB,
    output_file: Annotated[Path, typer.Option(
        "--output", "-o", help="Where to write it ('-': stdout); put it where every node reads it.")] = DEFAULT_BASELINE,
    tolerance: Annotated[float, typer.Option(
        help="The drop below the cluster's median triad bandwidth a node may show before `oddnode health` "
             "calls it a problem (a fraction; never less than 5 robust sigmas of the cluster's spread).")] = 0.20,
    targets: Annotated[Optional[Path], typer.Option(
        "--targets", metavar="FILE",
        help="Also write an expectations file of benchmark targets from the check's results (its benchmarks: "
             "section) for `analyze --expect` and `check --expect`.")] = None,
) -> None:
    """Write the health baseline from the last full check in the store.

    The facts a majority of its nodes held (processes left out: they come
    and go with jobs), the memory kernel's array size and threads, and the
    least triad bandwidth a healthy node shows, as YAML for `oddnode health
    --baseline FILE`."""
    from oddnode.app.health.baseline import BaselineError, baseline_from_store, baseline_targets
    from oddnode.core.atomic import write_atomically

    if not 0 < tolerance < 1:
        raise typer.BadParameter(f"--tolerance is a fraction between 0 and 1, not {tolerance:g}")
    with user_errors(), open_db(db) as store:
        try:
            baseline, text = baseline_from_store(store, str(db), tolerance)
        except BaselineError as err:
            raise fail(str(err)) from None
        targets_written = baseline_targets(store) if targets is not None else None
    if targets is not None and targets_written is not None:
        with user_errors():
            write_atomically(targets, targets_written.encode())
        inform(f"benchmark targets written to {literal(targets)}", highlight=False)
    if str(output_file) == "-":
        typer.echo(text, nl=False)
        return
    with user_errors():
        write_atomically(output_file, text.encode())
    memory = (f"; triad at least {baseline.memory.minimum:,.0f} {baseline.memory.unit} (median "
              f"{baseline.memory.median:,.0f} over {baseline.memory.nodes} nodes)" if baseline.memory
              else "; no memory results in the check: facts only")
    inform(f"baseline of check {baseline.source['check']} written to {literal(output_file)}: {len(baseline.expect)} "
           f"expected facts{memory}", highlight=False)


def register(app: typer.Typer) -> None:
    app.command("health", rich_help_panel=HEALTH_PANEL)(health_command)
    app.command("baseline", rich_help_panel=HEALTH_PANEL)(baseline_command)
