"""What a check runs after its diagnostics: the stages, how often, and
each step's typed options -- from a plan file (YAML), the command's flags
and ``--set STEP.OPTION=VALUE``, in that order of precedence.

A plan is stored with its check as JSON, so that ``resume`` rebuilds the
same steps; it refuses an unknown stage, step or option, or a value of the
wrong type, when it is made, before anything runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oddnode.measure import catalog
from oddnode.core.config import seconds
from oddnode.core.inputs import InputError, parse_yaml, quote, read_text
from oddnode.measure.runner import DEFAULT_REPETITIONS
from oddnode.measure.runner import DEFAULT_TIMEOUT as BENCHMARK_TIMEOUT
from oddnode.measure.estimate import Estimate
from oddnode.measure.steps import Step, make_options

PROBE_TIMEOUT = 60.0  # seconds for the inventory probe on one node
# The most repetitions of a benchmark: STAB runs a few to some tens; a
# million would keep a check running for weeks, so more is a typo.
MAX_REPETITIONS = 1_000_000


@dataclass
class CheckPlan:
    """What a check runs after diagnostics, stored with it as JSON so that
    ``resume`` rebuilds the same steps.

    ``parameters`` gives, per step, the options set for it as plain values
    (``{"memory": {"elements": 20000000}}``; the step's defaults for the
    rest).  A stage runs its default steps less ``skip``, plus the steps
    named in ``add`` (those a check runs only when asked, e.g. the matrix).
    Unknown steps, options and values are refused when the plan is made.
    """

    stages: tuple[str, ...] = catalog.STAGES
    repetitions: int = DEFAULT_REPETITIONS
    benchmark_timeout: float = BENCHMARK_TIMEOUT
    probe_timeout: float = PROBE_TIMEOUT
    parameters: dict[str, dict[str, Any]] = field(default_factory=dict)
    skip: tuple[str, ...] = ()
    add: tuple[str, ...] = ()
    expectations: str | None = None

    def __post_init__(self) -> None:
        unknown = [stage for stage in self.stages if stage not in catalog.STAGES]
        if unknown:
            raise ValueError(f"unknown stage {', '.join(unknown)} (stages: {', '.join(catalog.STAGES)})")
        # Always in STAB's order, whatever order they were named in.
        self.stages = tuple(stage for stage in catalog.STAGES if stage in self.stages)
        if isinstance(self.repetitions, bool) or not isinstance(self.repetitions, int) \
                or not 1 <= self.repetitions <= MAX_REPETITIONS:
            raise ValueError(f"repetitions must be >= 1 and at most {MAX_REPETITIONS}, a whole number, "
                             f"not {quote(self.repetitions)}")
        for name in ("benchmark_timeout", "probe_timeout"):
            try:
                setattr(self, name, seconds(getattr(self, name)))
            except ValueError as err:
                raise ValueError(f"{name} must be {err}") from None
        self.skip, self.add = tuple(self.skip), tuple(self.add)
        for name in [*self.skip, *self.add]:
            catalog.get_step(name)
        for name in self.add:
            if catalog.stage_of(name) not in self.stages:
                raise ValueError(f"{name} belongs to the {catalog.stage_of(name)} stage, which this check does not run")
        self._options = {name: make_options(catalog.get_step(name), values)
                         for name, values in self.parameters.items()}

    def options(self, step: str) -> Any:
        """A step's typed options: its defaults with this plan's values."""
        return self._options.get(step) or make_options(catalog.get_step(step))

    def validate(self) -> None:
        """Check every step's options as it would run them, so that a bad
        one (a relative disk directory, a negative size) is refused before
        the check starts, not stages later; raises ValueError or TypeError."""
        for stage in self.stages:
            for step in self.steps(stage):
                step.check(self.options(step.name))

    def steps(self, stage: str) -> list[Step]:
        """The steps this plan runs in a stage, in the catalog's order."""
        return [step for step in catalog.STEPS.values() if step.stage == stage
                and ((step.default and step.name not in self.skip) or step.name in self.add)]

    def benchmarks(self, stage: str) -> list[str]:
        """The names of the steps this plan runs in a stage."""
        return [step.name for step in self.steps(stage)]

    def estimates(self, nodes: int, link_bytes_per_s: float | None = None) -> tuple[list[Estimate], list[str]]:
        """How long each step takes on ``nodes`` nodes, where the plan says
        (pairs, sets: measure/estimate.py), and the steps whose time it
        cannot say (a node benchmark's depends on the node)."""
        estimates, unknown = [], []
        for stage in self.stages:
            for step in self.steps(stage):
                estimate = step.estimate(self.options(step.name), nodes, self.repetitions, link_bytes_per_s)
                if estimate is None:
                    unknown.append(step.name)
                else:
                    estimates.append(estimate)
        return estimates, unknown

    def to_json(self) -> dict[str, Any]:
        return {**{f.name: getattr(self, f.name) for f in dataclasses.fields(self)},
                "stages": list(self.stages), "skip": list(self.skip), "add": list(self.add)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CheckPlan:
        return cls(**{**data, "stages": tuple(data["stages"]), "skip": tuple(data.get("skip", ())),
                      "add": tuple(data.get("add", ()))})


# What a plan file (YAML) may hold: CheckPlan's fields, with ``steps`` for
# its parameters ({step: {option: value}}).
PLAN_FILE_KEYS = ("stages", "repetitions", "benchmark_timeout", "probe_timeout", "skip", "add", "expectations", "steps")


class PlanError(ValueError):
    """A plan file, a setting or a plan that cannot be run, said with where."""


def read_plan_file(path: Path) -> dict[str, Any]:
    """A plan file's contents, checked for shape (a mapping of the known
    keys, ``steps`` a mapping of mappings); values are checked when the
    plan is made."""
    try:
        text = read_text(path)
    except InputError as err:
        raise PlanError(f"cannot read plan file {path}: {err.detail}") from None
    try:
        document = parse_yaml(text, path)
    except InputError as err:
        raise PlanError(str(err)) from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise PlanError(f"{path}: a plan is a mapping of {', '.join(PLAN_FILE_KEYS)}")
    unknown = [key for key in document if key not in PLAN_FILE_KEYS]
    if unknown:
        raise PlanError(f"{path}: unknown key {', '.join(map(repr, unknown))} (a plan has {', '.join(PLAN_FILE_KEYS)})")
    steps = document.get("steps") or {}
    if not isinstance(steps, dict) or not all(isinstance(v, dict) for v in steps.values()):
        raise PlanError(f"{path}: steps is a mapping of step names to their options, e.g. steps: {{memory: {{threads: 1}}}}")
    for key in ("stages", "skip", "add"):
        if isinstance(document.get(key), str):
            document[key] = [part.strip() for part in document[key].split(",") if part.strip()]
    return document


def parse_settings(texts: Sequence[str]) -> dict[str, dict[str, str]]:
    """``STEP.OPTION=VALUE`` settings (``--set memory.threads=1``) as
    parameters, the values still text (the step's options type them)."""
    parameters: dict[str, dict[str, str]] = {}
    for text in texts:
        name, equals, value = text.partition("=")
        step, dot, option = name.strip().partition(".")
        if not (equals and dot and step and option):
            raise PlanError(f"a setting is STEP.OPTION=VALUE (e.g. memory.threads=1), not {quote(text)}")
        parameters.setdefault(step, {})[option.strip()] = value.strip()
    return parameters


def layered_parameters(*layers: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Step parameters from several sources, a later one's option winning
    (a plan file, then the command's flags, then ``--set``)."""
    merged: dict[str, dict[str, Any]] = {}
    for layer in layers:
        for step, options in layer.items():
            merged.setdefault(step, {}).update(options)
    return merged


def make_plan(file: Mapping[str, Any] | None = None, parameters: Mapping[str, Mapping[str, Any]] | None = None,
              **fields: Any) -> CheckPlan:
    """A checked plan from a plan file's contents, overridden by ``fields``
    given (None: not given) and by ``parameters`` option by option; a bad
    step, option or value is a PlanError."""
    file = dict(file or {})
    values = {key: value for key, value in file.items() if key != "steps"}
    values.update({key: value for key, value in fields.items() if value is not None})
    for key in ("stages", "skip", "add"):
        if key in values:
            values[key] = tuple(values[key])
    try:
        plan = CheckPlan(**values, parameters=layered_parameters(file.get("steps") or {}, parameters or {}))
        plan.validate()
    except (TypeError, ValueError, KeyError) as err:
        raise PlanError(str(err).strip('"')) from None
    return plan


def plan_document(plan: CheckPlan) -> dict[str, Any]:
    """A plan as a plan file would write it, every option of every step it
    runs spelled out (defaults included): what ``--show-plan`` prints."""
    steps = {step.name: dataclasses.asdict(plan.options(step.name))
             for stage in plan.stages for step in plan.steps(stage)}
    document = {key: value for key, value in plan.to_json().items() if key != "parameters"}
    document["steps"] = {name: {key: list(value) if isinstance(value, tuple) else value
                                for key, value in options.items()} for name, options in steps.items()}
    return document
