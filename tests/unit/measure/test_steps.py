"""The shape every step has: one registry type, typed options whose
defaults are the step's, and a check that runs whatever is registered --
a new step is its module and one registration, nothing in check."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pytest

from oddnode.measure import catalog
from oddnode.app.check import run_check
from oddnode.measure.plan import CheckPlan
from oddnode.core.registry import Registry, UnknownNameError
from oddnode.measure.steps import STAGES, Step, StepOutcome, coerce, make_options, register_step, series_stage
from oddnode.store import ResultBatch
from oddnode.reach.base import Target
from support.clusters.check import NODES, ScriptedCluster

# -- the registry -----------------------------------------------------------------


def test_a_registry_finds_by_name_and_names_the_known_ones_when_it_cannot():
    shapes: Registry[int] = Registry("shape")
    shapes.register("square")(4)
    shapes.add("triangle", 3)
    assert shapes.get("square") == 4 and shapes["triangle"] == 3
    assert shapes.names() == ["square", "triangle"] and "square" in shapes and len(shapes) == 2
    with pytest.raises(UnknownNameError, match=r"no shape named 'circle' \(known: square, triangle\)"):
        shapes.get("circle")
    with pytest.raises(ValueError, match="already registered"):
        shapes.add("square", 5)
    assert shapes.remove("square") == 4 and shapes.names() == ["triangle"]


def test_transports_parsers_rules_and_steps_share_the_registry_type():
    from oddnode.findings.registry import RULES
    from oddnode.parsers.base import PARSERS
    from oddnode.reach.base import TRANSPORTS

    for registry in (RULES, PARSERS, TRANSPORTS, catalog.STEPS):
        assert isinstance(registry, Registry) and len(registry) > 0
        with pytest.raises(KeyError, match=f"no {registry.kind} named 'nosuch'"):
            registry.get("nosuch")


# -- options ------------------------------------------------------------------------


def test_text_becomes_the_option_s_type():
    assert coerce("4", int) == 4 and coerce("1_000", int) == 1000 and coerce(6.0, int) == 6
    assert coerce("0.5", float) == 0.5 and coerce(2, float) == 2.0
    assert coerce("0,1024, 65536", tuple[int, ...]) == (0, 1024, 65536)
    assert coerce([0, "8"], tuple[int, ...]) == (0, 8)
    assert coerce("none", int | None) is None and coerce("3", int | None) == 3
    assert coerce("no", bool) is False and coerce("on", bool) is True
    for value, kind in (("four", int), (2.5, int), (True, int), ("fast", float), ("maybe", bool), ([1], str)):
        with pytest.raises((TypeError, ValueError)):
            coerce(value, kind)


def test_options_are_refused_by_name_and_by_value_naming_the_step():
    memory = catalog.get_step("memory")
    assert make_options(memory, {"threads": "1", "ntimes": 3}) == memory.options(threads=1, ntimes=3)
    with pytest.raises(ValueError, match=r"memory has no option 'thread' \(its options: elements, ntimes, threads"):
        make_options(memory, {"thread": 1})
    with pytest.raises(ValueError, match=r"memory\.ntimes: wants a whole number, not 'ten'"):
        make_options(memory, {"ntimes": "ten"})
    with pytest.raises(ValueError, match="pairs: the check's pair patterns .* not zigzag"):
        make_options(catalog.get_step("pairs"), {"patterns": "sort,zigzag"})


@pytest.mark.parametrize("name", catalog.STEPS.names())
def test_every_step_has_the_shape(name):
    step = catalog.get_step(name)
    assert step.name == name and step.stage in STAGES and step.series and step.summary
    assert dataclasses.is_dataclass(step.options) and step.options.__dataclass_params__.frozen
    defaults = make_options(step)  # every option has a default: the step's
    assert make_options(step, dataclasses.asdict(defaults)) == defaults  # plain values round-trip
    for family in step.series:
        assert series_stage(f"{family}.x") == step.stage


def test_series_no_step_writes_belong_to_no_stage():
    assert series_stage("c.ppc64") is None and series_stage("memoryless") is None
    assert series_stage("memory.triad") == "memory" and series_stage("compute.hpcc_fft") == "compute"
    assert series_stage("pingpong.matrix-retest") == "interconnect"


# -- plans ----------------------------------------------------------------------------


def test_a_plan_runs_default_steps_less_skipped_plus_added_ones():
    plan = CheckPlan(skip=("hpl", "bisection"), add=("matrix", "alltoall"))
    assert plan.benchmarks("compute") == ["dgemm"]
    assert plan.benchmarks("interconnect") == ["pairs", "matrix", "alltoall"]
    assert CheckPlan().benchmarks("interconnect") == ["pairs", "bisection"]
    with pytest.raises(ValueError, match="matrix belongs to the interconnect stage, which this check does not run"):
        CheckPlan(stages=("memory",), add=("matrix",))
    with pytest.raises(KeyError, match="no step named 'hpcc'"):
        CheckPlan(add=("hpcc",))


def test_a_stored_plan_rebuilds_the_same_typed_options():
    plan = CheckPlan(repetitions=3, add=("chain",), parameters={"memory": {"threads": 1}, "chain": {"lengths": [2, 4]}})
    again = CheckPlan.from_json(plan.to_json())
    assert again == plan and again.options("chain").lengths == (2, 4) and again.options("memory").threads == 1
    older = {k: v for k, v in plan.to_json().items() if k != "add"}  # a plan stored before steps could be added
    assert CheckPlan.from_json({**older, "stages": ["memory"]}).add == ()


# -- a new step is its module and one registration ---------------------------------------


@dataclass(frozen=True)
class LatencyOptions:
    slow_node: str = ""
    factor: float = 10.0


class LocalLatencyStep(Step):
    """A step the check has never heard of: it stores one value per node
    (a slow one for ``slow_node``) and says what it did."""

    name = "latency-probe"
    stage = "memory"
    options = LatencyOptions
    series = ("latency-probe",)
    summary = "a test's own step"

    def run(self, context, options):
        batch = ResultBatch()
        rng = np.random.default_rng(7)
        for node in context.target.nodes:
            value = 100.0 * (1 + 0.002 * rng.standard_normal()) * (options.factor if node == options.slow_node else 1)
            batch.add("latency-probe.load", node, value, unit="ns", direction="lower", repetition=1)
        run_id = context.begin(self.name)
        with context.store.transaction():
            context.store.add_results(run_id, batch)
        return StepOutcome(notes=[f"{self.name}: {len(context.target.nodes)} nodes probed"])


@pytest.fixture
def latency_step():
    register_step(LocalLatencyStep)
    yield catalog.get_step(LocalLatencyStep.name)
    catalog.STEPS.remove(LocalLatencyStep.name)


@pytest.mark.slow
@pytest.mark.parametrize("slow_node", ["node03", ""])
def test_a_registered_step_joins_a_check_and_is_judged_with_its_stage(store, latency_step, slow_node):
    plan = CheckPlan(stages=("memory",), skip=("memory",), parameters={"latency-probe": {"slow_node": slow_node}})
    result = run_check(store, Target(NODES, ScriptedCluster()), plan)
    (stage,) = [s for s in result.stages if s.name == "memory"]
    assert stage.notes == ["latency-probe: 8 nodes probed"] and stage.owns("latency-probe.load")
    assert {(f.kind, f.nodes) for f in stage.blocking} == ({("outlier", "node03")} if slow_node else set())


@pytest.mark.slow
def test_steps_run_in_the_catalog_s_order_whatever_was_imported_first():
    import subprocess
    import sys

    code = ("import oddnode.measure.pair.switchbench, oddnode.measure.node.disk; "
            "from oddnode.measure import catalog; print(','.join(catalog.STEPS.names()))")
    names = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert names.split(",") == [step.name for step in catalog.CATALOG]
