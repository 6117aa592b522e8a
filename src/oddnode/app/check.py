"""The main job: run the stages of a production-readiness check on a set of
nodes, keep everything in the store, and judge it.

Diagnostics come first: the inventory of every node, compared across nodes
and against an expectations file.  Then the benchmark stages, in STAB's
order -- memory, noise, compute, disk -- each run R times on every node at once and
judged across nodes before the next begins; then the interconnect: ping-pong
in STAB's four pair patterns and bisection bandwidth, judged on the pairs.  A stage whose findings are
warnings or worse stops the check (benchmarks are inconsistent until what
comes before them is), unless the caller asks to go on.

Every step is recorded with the check, and every repetition is stored as it
ends: an interrupted check loses only the repetition under way, and
``resume`` goes on from there.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from oddnode.judge.analysis import Analysis, analyze
from oddnode.measure import catalog
from oddnode.findings import Sensitivity, sort_findings
from oddnode.measure.collect.inventory import InventoryResult, collect
from oddnode.findings.expectations import ExpectationError, ExpectationReport, check_expectations, load_expectations
from oddnode.findings.targets import Target as BenchmarkTarget, check_targets, load_targets
from oddnode.core.connection import Connection
from oddnode.core.model import Dataset, Finding, LabelKind, Severity
from oddnode.core.inputs import InputError, plain_path, read_text
from oddnode.core.subset import series_subset
from oddnode.core.nodes import NodeNameError, expand, expand_command_line, node_sets
from oddnode.measure.estimate import BudgetSpent
from oddnode.measure.plan import PROBE_TIMEOUT, CheckPlan
from oddnode.measure.runner import RunSummary
from oddnode.measure.steps import StepContext, StepObserver
from oddnode.store import CHECK_SOURCE, FINDINGS_SOURCE, Store
from oddnode.reach import Target
from oddnode.reach.targets import reach

INVENTORY_STAGE = "inventory"  # the diagnostics' one step, as node status and check steps name it
DIAGNOSTICS = "diagnostics"


def read_hostfile(path: Path) -> list[str]:
    """Node names or node sets, one a line; ``#`` comments and blank lines
    skipped.  The file is data: a group (``@name``) in it is refused."""
    names: list[str] = []
    try:
        lines = read_text(path).splitlines()
    except InputError as err:
        raise NodeNameError(f"cannot read host file {plain_path(path)}: {err.detail}") from None
    for number, raw in enumerate(lines, start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            names.extend(expand(line.split()[0]))
        except NodeNameError as err:
            raise NodeNameError(f"{plain_path(path)}:{number}: {err}") from None
    return names


def select_nodes(nodes: str | Sequence[str] | None = None, exclude: str | Sequence[str] | None = None,
                 hostfile: Path | None = None) -> list[str]:
    """The node list from ``-w``, ``--hostfile`` and ``-x``, in ClusterShell
    syntax, in the order given (``-w`` first, then the host file's lines):
    the pair patterns follow it.  A node named twice keeps its first place.
    ``-w`` and ``-x`` may name the site's groups (``@rack1``), the host file
    not, and may be given several times.  Nodes named that leave none is an
    error, not the local machine."""
    nodes, exclude = node_sets(nodes), node_sets(exclude)
    chosen: list[str] = []
    if nodes:
        chosen.extend(expand_command_line(nodes))
    if hostfile:
        chosen.extend(read_hostfile(hostfile))
    excluded = set(expand_command_line(exclude)) if exclude else set()
    selected = [node for node in dict.fromkeys(chosen) if node not in excluded]
    if (nodes or hostfile) and not selected:
        given = " and ".join(option for option, value in (("-w", nodes), ("--hostfile", hostfile)) if value)
        raise NodeNameError(f"no node left to run on ({given}{' minus -x' if exclude else ''})")
    return selected


def make_target(
    nodes: list[str],
    transport: str | None = None,
    ssh_config: Path | None = None,
    fanout: int | None = None,
    *,
    user: str | None = None,
    connect_timeout: float | None = None,
    environ: Mapping[str, str] = os.environ,
) -> Target:
    """The nodes reached as a :class:`Connection` with these fields says."""
    return reach(Connection(transport, ssh_config, fanout, user, connect_timeout), nodes, environ)


def collect_inventory(store: Store, target: Target, timeout: float = PROBE_TIMEOUT,
                      command: str = "oddnode inventory", check_id: int | None = None) -> InventoryResult:
    """Probe every node, then store its facts and how every node fared, in
    one transaction: a node that fails loses nothing the others gave."""
    result = collect(target.transport, target.nodes, timeout)
    statuses = [(node, "ok", None) for node in result.reports]
    # A node that ran the probe but gave no usable answer counts as failed.
    troubled = {**result.unreachable, **result.failed}
    statuses += [(node, "failed" if r.ok else r.status.value, result.reasons.get(node))
                 for node, r in sorted(troubled.items())]
    with store.transaction():
        run_id = store.new_run(command, source=f"{target.transport.name}:{target.nodeset}", nodes=target.nodes)
        store.add_facts(run_id, result.fact_rows())
        store.add_node_status(run_id, INVENTORY_STAGE, statuses)
        if check_id is not None:
            store.add_check_step(check_id, INVENTORY_STAGE, run_id, 1)
    result.run_id = run_id
    return result


@dataclass
class StageResult:
    """One stage as judged: its findings, and per benchmark what its run did
    (None for a benchmark an earlier, interrupted invocation had finished)."""

    name: str
    findings: list[Finding]
    runs: dict[str, RunSummary | None] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    series: tuple[str, ...] = ()  # the families of the series its steps store
    between_pairs: bool = False  # its results are of pairs of nodes, not of nodes
    seconds: float | None = None  # wall-clock time it took, run and judged (None: not timed)

    def owns(self, benchmark: str) -> bool:
        """Whether a stored series is one of this stage's."""
        return any(benchmark == family or benchmark.startswith(family + ".") for family in self.series)

    @property
    def blocking(self) -> list[Finding]:
        """Findings of warning severity or worse: they stop the check here."""
        return [f for f in self.findings if f.severity.rank >= Severity.WARNING.rank]


@dataclass
class CheckResult:
    """A check's verdict: the analysis of everything it ran, stage by stage."""

    check_id: int
    analysis: Analysis
    expectations: ExpectationReport | None
    inventory: InventoryResult | None  # None when a resumed check had it already
    stages: list[StageResult]
    stopped_after: str | None = None  # the stage whose findings stopped the check
    not_run: tuple[str, ...] = ()  # the stages it did not reach (or, stopped by its budget, finish)
    # Targets of the expectations file whose stage ran yet stored no series
    # of their name (a misspelt metric), or whose unit the series' cannot
    # take (known only once measured), one line each.
    unmeasured_targets: list[str] = field(default_factory=list)
    # Where the time budget (--max-minutes) stopped the check, in words; the
    # stage under way then is among ``not_run`` and ``--resume`` finishes it.
    budget_stopped: str | None = None


class CheckObserver(StepObserver):
    """What a check tells its caller as it goes (a progress bar); no-ops here."""

    def stage_started(self, stage: str) -> None: ...

    def stage_judged(self, result: StageResult) -> None: ...


class ResumeError(RuntimeError):
    """There is no check to resume, or it cannot be resumed as asked."""


def describe_target(target: Target) -> dict[str, Any]:
    """What a resumed check needs to reach the same nodes the same way: the
    nodes, the transport, and ssh's configuration file and fan-out."""
    ssh_config = getattr(target.transport, "ssh_config", None)
    description = {"nodes": list(target.nodes), "transport": target.transport.name,
                   "ssh_config": str(Path(ssh_config).absolute()) if ssh_config else None,
                   "fanout": getattr(target.transport, "fanout", None)}
    # The remote user and connect timeout (-l, --connect-timeout) when the transport has them.
    for name in ("user", "connect_timeout"):
        if getattr(target.transport, name, None) is not None:
            description[name] = getattr(target.transport, name)
    return description


def described_target(description: dict[str, Any]) -> Target:
    """The target a stored description names (describe_target's inverse)."""
    ssh_config = description.get("ssh_config")
    return make_target(description["nodes"], description["transport"], Path(ssh_config) if ssh_config else None,
                       description.get("fanout"), user=description.get("user"),
                       connect_timeout=description.get("connect_timeout"))


# -- judging a subset of the store ------------------------------------------------------


def _restricted(dataset: Dataset, nodes: set[str], stages: set[str]) -> Dataset:
    """The part of the store a check judges: its own nodes, and the facts and
    benchmark series of the given stages only (``diagnostics`` = the facts).
    The node list comes with the diagnostics, where every node must answer:
    a stage alone may leave a node out (an odd one in the pair patterns)."""
    series = []
    for s in dataset.series:
        if catalog.series_stage(s.benchmark) not in stages:
            continue
        if s.label_kind is LabelKind.NODE:
            keep = np.array([label in nodes for label in s.labels], dtype=bool)
            if not keep.any():
                continue
            s = series_subset(s, keep)
        series.append(s)
    benchmark_steps = {step.name for step in catalog.STEPS.values() if step.stage in stages}
    allowed_steps = benchmark_steps | ({INVENTORY_STAGE} if DIAGNOSTICS in stages else set())

    def judged_trouble(trouble) -> bool:
        # Recorded under a step's name (memory), or under the series a pair
        # step stores (pingpong.sort).
        return trouble.stage in allowed_steps or catalog.series_stage(trouble.stage) in stages

    return Dataset(
        series=series,
        set_runs=[runs for runs in dataset.set_runs if catalog.series_stage(runs.benchmark) in stages],
        failures=[f for f in dataset.failures
                  if catalog.series_stage(f.benchmark) in stages and set(f.members) & nodes],
        facts=({key: {node: value for node, value in per_node.items() if node in nodes}
                for key, per_node in dataset.facts.items()} if DIAGNOSTICS in stages else {}),
        topology=dataset.topology,
        benchmarks_with_results={b for b in dataset.benchmarks_with_results if catalog.series_stage(b[0]) in stages},
        node_trouble={node: trouble for node, trouble in dataset.node_trouble.items()
                      if node in nodes and judged_trouble(trouble)},
        declared_nodes=[node for node in dataset.declared_nodes if node in nodes] if DIAGNOSTICS in stages else [],
        details={name: {label: reps for label, reps in per_label.items() if label in nodes}
                 for name, per_label in dataset.details.items() if catalog.series_stage(name) in stages},
    )


def _judge(store: Store, nodes: list[str], stages: set[str], sensitivity: Sensitivity | None,
           correlations: bool = False) -> Analysis:
    return analyze(_restricted(store.load_dataset(), set(nodes), stages), sensitivity, correlations=correlations)


# -- running a check ---------------------------------------------------------------------


def run_check(
    store: Store,
    target: Target,
    plan: CheckPlan | None = None,
    *,
    keep_going: bool = False,
    sensitivity: Sensitivity | None = None,
    command: str = "oddnode check",
    resume: int | None = None,
    observer: CheckObserver | None = None,
) -> CheckResult:
    """Diagnostics, then the plan's benchmark stages (none without a plan),
    each judged before the next; a stage with warnings stops the check
    unless ``keep_going``.  ``resume`` is the id of an unfinished check to go
    on with (its steps already done are not run again)."""
    plan = plan or CheckPlan(stages=())
    observer = observer or CheckObserver()
    targets = _targets(plan)
    if resume is None:
        with store.transaction():
            check_id = store.new_run(command, source=CHECK_SOURCE, nodes=target.nodes)
            store.start_check(check_id, describe_target(target), plan.to_json())
    else:
        check_id = resume
        with store.transaction():
            store.set_check_status(check_id, "running")
    steps = store.check_steps(check_id)
    store.release()  # the nodes run next: let others read the store meanwhile

    observer.stage_started(DIAGNOSTICS)
    began = time.monotonic()
    inventory = None
    if INVENTORY_STAGE not in steps:
        inventory = collect_inventory(store, target, plan.probe_timeout, command, check_id)
    diagnostics, expectations = _diagnostics(store, target, plan, sensitivity)
    diagnostics.seconds = time.monotonic() - began
    stages = [diagnostics]
    observer.stage_judged(diagnostics)

    judged = {DIAGNOSTICS}
    stopped_after = budget_stopped = None
    if diagnostics.blocking and not keep_going and plan.stages:
        stopped_after = DIAGNOSTICS
    else:
        for stage in plan.stages:
            observer.stage_started(stage)
            began = time.monotonic()
            try:
                result = _run_stage(store, target, plan, stage, steps, check_id, command, sensitivity, observer)
            except BudgetSpent as spent:
                # Between two repetitions, all before them stored: the
                # stages judged so far are the verdict, the rest is resumable.
                budget_stopped = str(spent)
                break
            result.seconds = time.monotonic() - began
            judged.add(stage)
            stages.append(result)
            observer.stage_judged(result)
            if result.blocking and not keep_going and stage != plan.stages[-1]:
                stopped_after = stage
                break

    analysis = _judge(store, target.nodes, judged, sensitivity, correlations=len(judged) > 2)
    unmeasured: list[str] = []
    if expectations is not None or targets:
        # A target of a series the check did not measure (a stage not run,
        # not planned) misses nothing: its names were checked beforehand.
        missed, unmeasured = [], _unmeasured_targets(targets, analysis.dataset, stages)
        for target in targets:
            try:
                missed += check_targets([target], analysis.dataset.series, may_be_absent=lambda name: True)
            except ExpectationError as err:  # a unit of another dimension shows only now: say so, keep the check
                unmeasured.append(str(err))
        failures = expectations.failures if expectations is not None else []
        analysis.findings = sort_findings(analysis.findings + failures + missed)
    not_run = tuple(stage for stage in plan.stages if stage not in judged)
    with store.transaction():
        store.add_findings(store.new_run(command, source=FINDINGS_SOURCE), analysis.findings)
        store.set_check_status(check_id, "stopped" if not_run else "finished")
    return CheckResult(check_id, analysis, expectations, inventory, stages, stopped_after, not_run, unmeasured,
                       budget_stopped)


def _targets(plan: CheckPlan) -> list[BenchmarkTarget]:
    """The plan's expectations file's benchmark targets, each naming a series
    a step writes: a name no step writes is refused before the nodes run."""
    if plan.expectations is None:
        return []
    targets = load_targets(Path(plan.expectations))
    for target in targets:
        if catalog.series_stage(target.series.partition(":")[0]) is None:
            raise target.error(f"no check step writes a series named {target.series!r} (the series as "
                               "`oddnode stats` names them, such as memory.triad)")
    return targets


def _unmeasured_targets(targets: list[BenchmarkTarget], dataset: Dataset, stages: list[StageResult]) -> list[str]:
    """A line for each target whose family's stage ran and stored series,
    none of its name (a misspelt metric: memory.tirad), with those it stored."""
    names = {one.name for one in dataset.series}
    lines = []
    for target in targets:
        if target.series in names:
            continue
        for stage in stages:
            stored = sorted(name for name in names if stage.owns(name.partition(":")[0]))
            if stage.owns(target.series.partition(":")[0]) and stored:
                lines.append(f"{target.error('no series of that name was measured').args[0]} "
                             f"(the {stage.name} stage stored {', '.join(stored[:8])}"
                             f"{' ...' if len(stored) > 8 else ''})")
    return lines


def _diagnostics(store: Store, target: Target, plan: CheckPlan,
                 sensitivity: Sensitivity | None) -> tuple[StageResult, ExpectationReport | None]:
    """Consistency of the facts across the checked nodes, and the expectations."""
    analysis = _judge(store, target.nodes, {DIAGNOSTICS}, sensitivity)
    findings = analysis.findings
    report = None
    if plan.expectations is not None:
        facts = analysis.dataset.facts
        answered = sorted({node for per_node in facts.values() for node in per_node})
        report = check_expectations(load_expectations(Path(plan.expectations)), facts, answered)
        findings = sort_findings(findings + report.failures)
    return StageResult(DIAGNOSTICS, findings), report


def _run_stage(store: Store, target: Target, plan: CheckPlan, stage: str, steps: dict[str, tuple[int, int, int]],
               check_id: int, command: str, sensitivity: Sensitivity | None,
               observer: CheckObserver) -> StageResult:
    """Run each step of a stage (what an interrupted run left, when
    resuming), then judge the stage's results across the nodes."""
    context = StepContext(store, target, plan.repetitions, plan.benchmark_timeout, command, check_id, steps, observer,
                          sensitivity)
    runs: dict[str, RunSummary | None] = {}
    notes = []
    for step in plan.steps(stage):
        if len(target.nodes) < step.min_nodes:
            notes.append(f"{step.name}: not run, it needs {step.min_nodes} nodes or more")
            continue
        store.release()  # the nodes run next: let others read the store meanwhile
        outcome = step.run(context, plan.options(step.name))
        runs.update(outcome.runs)
        notes += outcome.notes
    analysis = _judge(store, target.nodes, {stage}, sensitivity)
    steps = plan.steps(stage)
    return StageResult(stage, analysis.findings, runs, notes, series=tuple(f for step in steps for f in step.series),
                       between_pairs=any(step.min_nodes > 1 for step in steps))


def resumable_check(store: Store) -> tuple[int, dict[str, Any], CheckPlan]:
    """The newest check, if it did not finish: (id, its target's
    description, see described_target, and its plan)."""
    latest = store.latest_check()
    if latest is None:
        raise ResumeError("no check in this store to resume")
    check_id, status, target, plan = latest
    if status == "finished":
        raise ResumeError(f"the newest check ({check_id}) finished: there is nothing to resume")
    return check_id, target, CheckPlan.from_json(plan)
