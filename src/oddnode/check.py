"""The main job: run the stages of a production-readiness check on a set of
nodes, keep everything in the store, and judge it.

Diagnostics come first: the inventory of every node, compared across nodes
and against an expectations file.  Then the benchmark stages, in STAB's
order -- memory, compute, disk -- each run R times on every node at once and
judged across nodes before the next begins; then the interconnect: ping-pong
in STAB's four pair patterns and bisection bandwidth, judged on the pairs.  A stage whose findings are
warnings or worse stops the check (benchmarks are inconsistent until what
comes before them is), unless the caller asks to go on.

Every step is recorded with the check, and every repetition is stored as it
ends: an interrupted check loses only the repetition under way, and
``resume`` goes on from there.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from oddnode.analysis import Analysis, analyze
from oddnode.benchmarks import catalog
from oddnode.findings import Sensitivity, sort_findings
from oddnode.inventory import InventoryResult, collect
from oddnode.inventory.expectations import ExpectationReport, check_expectations, load_expectations
from oddnode.model import Dataset, Finding, LabelKind, Severity
from oddnode.nodes import NodeNameError, expand
from oddnode.runner import DEFAULT_REPETITIONS, RunSummary, run_benchmark
from oddnode.runner import DEFAULT_TIMEOUT as BENCHMARK_TIMEOUT
from oddnode.store import FINDINGS_SOURCE, Store
from oddnode.transport import Target, get_transport
from oddnode.transport.local import local_node_name

INVENTORY_STAGE = "inventory"  # the diagnostics' one step, as node status and check steps name it
DIAGNOSTICS = "diagnostics"
DEFAULT_TIMEOUT = 60.0  # seconds for the inventory probe on one node
CHECK_SOURCE = "check"  # runs.source of a staged check's own run


def read_hostfile(path: Path) -> list[str]:
    """Node names or node sets, one a line; ``#`` comments and blank lines skipped."""
    names: list[str] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise NodeNameError(f"cannot read host file {path}: {err.strerror or err}") from err
    for number, raw in enumerate(lines, start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            names.extend(expand(line.split()[0]))
        except NodeNameError as err:
            raise NodeNameError(f"{path}:{number}: {err}") from None
    return names


def select_nodes(nodes: str | None = None, exclude: str | None = None, hostfile: Path | None = None) -> list[str]:
    """The node list from ``-w``, ``--hostfile`` and ``-x``, in ClusterShell
    syntax, in the order given (``-w`` first, then the host file's lines):
    the pair patterns follow it.  A node named twice keeps its first place."""
    chosen: list[str] = []
    if nodes:
        chosen.extend(expand(nodes))
    if hostfile:
        chosen.extend(read_hostfile(hostfile))
    excluded = set(expand(exclude)) if exclude else set()
    return [node for node in dict.fromkeys(chosen) if node not in excluded]


def make_target(
    nodes: list[str],
    transport: str | None = None,
    ssh_config: Path | None = None,
    fanout: int | None = None,
) -> Target:
    """Choose the transport: local with no nodes, ssh with nodes, slurm when
    asked (then the allocation gives the nodes if none were named)."""
    name = transport or ("ssh" if nodes else "local")
    options: dict[str, object] = {}
    if name == "ssh":
        if ssh_config is not None:
            options["ssh_config"] = ssh_config
        if fanout is not None:
            options["fanout"] = fanout
    chosen = get_transport(name, **options)
    if not nodes:
        if name == "local":
            nodes = [local_node_name()]
        elif name == "slurm":
            from oddnode.transport.slurm import allocation_nodes

            nodes = allocation_nodes(os.environ)
        else:
            raise NodeNameError(f"the {name} transport needs nodes: give -w NODES or --hostfile FILE")
    return Target(nodes=nodes, transport=chosen)


def collect_inventory(store: Store, target: Target, timeout: float = DEFAULT_TIMEOUT,
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
    return result


# -- what a check runs -----------------------------------------------------------


@dataclass
class CheckPlan:
    """What a check runs after diagnostics, stored with it as JSON so that
    ``resume`` rebuilds the same benchmarks.

    ``parameters`` gives, per catalog benchmark, the keyword parameters of
    its builder (``{"memory": {"elements": 20000000}}``).
    """

    stages: tuple[str, ...] = catalog.STAGES
    repetitions: int = DEFAULT_REPETITIONS
    benchmark_timeout: float = BENCHMARK_TIMEOUT
    probe_timeout: float = DEFAULT_TIMEOUT
    parameters: dict[str, dict[str, Any]] = field(default_factory=dict)
    skip: tuple[str, ...] = ()  # catalog benchmarks left out of their stage
    expectations: str | None = None

    def __post_init__(self) -> None:
        unknown = [stage for stage in self.stages if stage not in catalog.STAGES]
        if unknown:
            raise ValueError(f"unknown stage {', '.join(unknown)} (stages: {', '.join(catalog.STAGES)})")
        # Always in STAB's order, whatever order they were named in.
        self.stages = tuple(stage for stage in catalog.STAGES if stage in self.stages)
        if self.repetitions < 1:
            raise ValueError(f"repetitions must be >= 1, got {self.repetitions}")
        for benchmark in [*self.parameters, *self.skip]:
            catalog.stage_of(benchmark)
        self.skip = tuple(self.skip)

    def validate(self) -> None:
        """Build every benchmark of the plan, so that a bad parameter (a
        relative disk directory, a negative size) is refused before the check
        starts, not stages later; raises ValueError or TypeError."""
        for stage in self.stages:
            for benchmark in self.benchmarks(stage):
                catalog.build(benchmark, self.parameters.get(benchmark))  # an interconnect step's options too

    def benchmarks(self, stage: str) -> list[str]:
        """The benchmarks this plan runs in a stage."""
        return [name for name in catalog.benchmarks_of(stage) if name not in self.skip]

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "stages": list(self.stages), "skip": list(self.skip)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CheckPlan:
        return cls(**{**data, "stages": tuple(data["stages"]), "skip": tuple(data.get("skip", ()))})


@dataclass
class StageResult:
    """One stage as judged: its findings, and per benchmark what its run did
    (None for a benchmark an earlier, interrupted invocation had finished)."""

    name: str
    findings: list[Finding]
    runs: dict[str, RunSummary | None] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

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
    not_run: tuple[str, ...] = ()  # the stages it did not reach


class CheckObserver:
    """What a check tells its caller as it goes (a progress bar); no-ops here."""

    def stage_started(self, stage: str) -> None: ...

    def benchmark_started(self, benchmark: str, done: int, total: int) -> None: ...

    def repetition_done(self, benchmark: str, done: int, total: int) -> None: ...

    def stage_judged(self, result: StageResult) -> None: ...


class ResumeError(RuntimeError):
    """There is no check to resume, or it cannot be resumed as asked."""


def describe_target(target: Target, options: dict[str, Any]) -> dict[str, Any]:
    """What a resumed check needs to reach the same nodes the same way."""
    return {"nodes": list(target.nodes), "transport": target.transport.name, **options}


def _repetitions_of(observer: CheckObserver, step: str, wanted: int) -> Callable[[int, int], None]:
    """A step's progress in rounds (bisection: the cut pairs at once, then
    each pair alone, every repetition) told to the observer as whole
    repetitions, the unit its bar counts."""
    return lambda done, total: observer.repetition_done(step, done * wanted // total if total else wanted, wanted)


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
            s = dataclasses.replace(s, labels=s.labels[keep], values=s.values[keep], repetitions=s.repetitions[keep],
                                    spread=None if s.spread is None else s.spread[keep])
        series.append(s)
    benchmark_steps = {name for name, (stage, _) in catalog.BENCHMARKS.items() if stage in stages}
    allowed_steps = benchmark_steps | ({INVENTORY_STAGE} if DIAGNOSTICS in stages else set())

    def interconnect_trouble(trouble) -> bool:
        # Recorded under the series an interconnect step stores (pingpong.sort), not the step's name.
        return catalog.INTERCONNECT in stages and catalog.series_stage(trouble.stage) == catalog.INTERCONNECT

    return Dataset(
        series=series,
        failures=[f for f in dataset.failures
                  if catalog.series_stage(f.benchmark) in stages and set(f.members) & nodes],
        facts=({key: {node: value for node, value in per_node.items() if node in nodes}
                for key, per_node in dataset.facts.items()} if DIAGNOSTICS in stages else {}),
        topology=dataset.topology,
        benchmarks_with_results={b for b in dataset.benchmarks_with_results if catalog.series_stage(b[0]) in stages},
        node_trouble={node: trouble for node, trouble in dataset.node_trouble.items()
                      if node in nodes and (trouble.stage in allowed_steps or interconnect_trouble(trouble))},
        declared_nodes=[node for node in dataset.declared_nodes if node in nodes] if DIAGNOSTICS in stages else [],
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
    target_options: dict[str, Any] | None = None,
    resume: int | None = None,
    observer: CheckObserver | None = None,
) -> CheckResult:
    """Diagnostics, then the plan's benchmark stages (none without a plan),
    each judged before the next; a stage with warnings stops the check
    unless ``keep_going``.  ``resume`` is the id of an unfinished check to go
    on with (its steps already done are not run again)."""
    plan = plan or CheckPlan(stages=())
    observer = observer or CheckObserver()
    if resume is None:
        with store.transaction():
            check_id = store.new_run(command, source=CHECK_SOURCE, nodes=target.nodes)
            store.start_check(check_id, describe_target(target, target_options or {}), plan.to_json())
    else:
        check_id = resume
        with store.transaction():
            store.set_check_status(check_id, "running")
    steps = store.check_steps(check_id)

    observer.stage_started(DIAGNOSTICS)
    inventory = None
    if INVENTORY_STAGE not in steps:
        inventory = collect_inventory(store, target, plan.probe_timeout, command, check_id)
    diagnostics, expectations = _diagnostics(store, target, plan, sensitivity)
    stages = [diagnostics]
    observer.stage_judged(diagnostics)

    judged = {DIAGNOSTICS}
    stopped_after = None
    if diagnostics.blocking and not keep_going and plan.stages:
        stopped_after = DIAGNOSTICS
    else:
        for stage in plan.stages:
            observer.stage_started(stage)
            result = _run_stage(store, target, plan, stage, steps, check_id, command, sensitivity, observer)
            judged.add(stage)
            stages.append(result)
            observer.stage_judged(result)
            if result.blocking and not keep_going and stage != plan.stages[-1]:
                stopped_after = stage
                break

    analysis = _judge(store, target.nodes, judged, sensitivity, correlations=len(judged) > 2)
    if expectations is not None:
        analysis.findings = sort_findings(analysis.findings + expectations.failures)
    not_run = tuple(stage for stage in plan.stages if stage not in judged)
    with store.transaction():
        store.add_findings(store.new_run(command, source=FINDINGS_SOURCE), analysis.findings)
        store.set_check_status(check_id, "stopped" if not_run else "finished")
    return CheckResult(check_id, analysis, expectations, inventory, stages, stopped_after, not_run)


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
    """Run each benchmark of a stage (what an interrupted run left, when
    resuming), then judge the stage's results across the nodes."""
    if stage == catalog.INTERCONNECT:
        notes = _run_interconnect(store, target, plan, steps, check_id, command, observer)
        return StageResult(stage, _judge(store, target.nodes, {stage}, sensitivity).findings, {}, notes)
    runs: dict[str, RunSummary | None] = {}
    notes = []
    for benchmark in plan.benchmarks(stage):
        spec = catalog.build(benchmark, plan.parameters.get(benchmark))
        run_id, wanted, done = steps.get(benchmark, (None, plan.repetitions, 0))
        if run_id is not None and done >= wanted:
            runs[benchmark] = None
            continue
        if run_id is None:
            with store.transaction():
                run_id = store.new_run(f"{command} [{benchmark}]", source=f"{target.transport.name}:{target.nodeset}",
                                       nodes=target.nodes)
                store.add_check_step(check_id, benchmark, run_id, wanted)
        observer.benchmark_started(benchmark, done, wanted)
        summary = run_benchmark(
            store, target, spec, wanted, plan.benchmark_timeout,
            on_progress=lambda finished, total, name=benchmark: observer.repetition_done(name, finished, total),
            run_id=run_id, start=done + 1,
        )
        runs[benchmark] = summary
        if summary.unavailable_everywhere:
            notes.append(f"{benchmark}: not run, no node has its tool ({_first_detail(summary, store)})")
    analysis = _judge(store, target.nodes, {stage}, sensitivity)
    return StageResult(stage, analysis.findings, runs, notes)


def _run_interconnect(store: Store, target: Target, plan: CheckPlan, steps: dict[str, tuple[int, int, int]],
                      check_id: int, command: str, observer: CheckObserver) -> list[str]:
    """Each pair pattern, then bisection, R times; a step is recorded once it
    has finished, so a resumed check runs again only the one under way (an
    interrupted pattern's stored repetitions stay, as measurements of the same
    pairs).  Returns what each step did, in words."""
    from oddnode.interconnect.bisection import run_bisection
    from oddnode.interconnect.pairs import run_pairs

    if len(target.nodes) < 2:
        return ["interconnect: not run, it needs two nodes or more"]
    notes = []
    wanted = plan.repetitions
    names = plan.benchmarks(catalog.INTERCONNECT)
    pairs = catalog.build("pairs", plan.parameters.get("pairs")) if "pairs" in names else None
    for pattern in pairs.patterns if pairs else ():
        step = f"pairs.{pattern}"
        if step in steps:
            notes.append(f"{step}: finished by an earlier, interrupted invocation")
            continue
        observer.benchmark_started(step, 0, wanted)
        summary = run_pairs(store, target, pattern, wanted, options=pairs.options, command=f"{command} [{step}]",
                            on_progress=lambda done, total, name=step: observer.repetition_done(name, done, total))
        with store.transaction():
            store.add_check_step(check_id, step, summary.run_id, wanted)
        good = sum(counts["ok"] > 0 for counts in summary.per_pair.values())
        notes.append(f"{step}: {wanted} repetitions, {good} of {len(summary.per_pair)} pairs gave valid results")
        notes += list(dict.fromkeys(summary.notes))
    if "bisection" in names and "bisection" not in steps:
        observer.benchmark_started("bisection", 0, wanted)
        bisection = run_bisection(store, target, wanted, options=catalog.build("bisection", plan.parameters.get("bisection")),
                                  command=f"{command} [bisection]",
                                  on_progress=_repetitions_of(observer, "bisection", wanted))
        with store.transaction():
            store.add_check_step(check_id, "bisection", bisection.run_id, wanted)
        figures = bisection.figures
        if figures.demonstrated is None:
            notes.append("bisection: no repetition in which every cut pair streamed")
        else:
            full = (f", {figures.fraction * 100:.1f}% of full bisection ({figures.full:.4g} MB/s)"
                    if figures.full else "")
            notes.append(f"bisection: demonstrated {figures.demonstrated:.4g} MB/s over {figures.pairs} cut pairs{full}")
    elif "bisection" in names:
        notes.append("bisection: finished by an earlier, interrupted invocation")
    return notes


def _first_detail(summary: RunSummary, store: Store) -> str:
    rows = store.con.execute("SELECT detail FROM node_status WHERE run_id = ? AND detail IS NOT NULL LIMIT 1",
                             [summary.run_id]).fetchall()
    detail = rows[0][0] if rows else "unavailable"
    return detail.split(": ", 1)[-1]


def resumable_check(store: Store) -> tuple[int, dict[str, Any], CheckPlan]:
    """The newest check, if it did not finish: (id, target description, plan)."""
    latest = store.latest_check()
    if latest is None:
        raise ResumeError("no check in this store to resume")
    check_id, status, target, plan = latest
    if status == "finished":
        raise ResumeError(f"the newest check ({check_id}) finished: there is nothing to resume")
    return check_id, target, CheckPlan.from_json(plan)
