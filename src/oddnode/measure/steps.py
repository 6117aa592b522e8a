"""What every step of a check is: a name, the stage it belongs to, typed
options, the series it stores, and ``run``.

A step's options are a frozen dataclass whose defaults are the step's
defaults: a plan, the command line and a plan file all build them through
``make_options``, which refuses an option the step does not have and turns
text (``--set memory.threads=1``) into the field's type.  A step lives in
its own module and is registered (``register_step``) by naming its class
in ``benchmarks.catalog``; ``check`` runs the registered steps of each
stage in that order.

Node benchmarks (one spec run on every node at once, R times) need only
their spec: ``NodeBenchmark.run`` repeats it, resumes it and records it.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from oddnode.measure.benchmarks import BenchmarkSpec
from oddnode.core.config import MAX_SECONDS
from oddnode.core.inputs import quote
from oddnode.core.registry import Registry
from oddnode.measure.runner import RunSummary, run_benchmark
from oddnode.store import Store
from oddnode.reach.base import Target

if TYPE_CHECKING:  # the finding rules load scipy: not for every command's start
    from oddnode.findings.registry import Sensitivity
    from oddnode.measure.estimate import Estimate

# The stages of a check after its diagnostics, in STAB's order: memory first
# (if it is ruled out, later anomalies cannot be blamed on it), then the
# operating system's noise (what takes the CPUs from every later stage),
# then the processor, then the disk, then the interconnect between pairs,
# then parallel benchmarks on sets of nodes (which any of those can slow).
STAGES = ("memory", "noise", "compute", "disk", "interconnect", "sets")


class StepObserver:
    """What a running step tells its caller (a progress bar); no-ops here."""

    def benchmark_started(self, step: str, done: int, total: int) -> None: ...

    def repetition_done(self, step: str, done: int, total: int) -> None: ...


@dataclass
class StepContext:
    """What a step runs with: the store, the nodes, how often and how long,
    and the check it belongs to (``check_id`` None: a step run on its own).

    ``recorded``: the check's steps already recorded by an earlier,
    interrupted invocation, step -> (run id, repetitions wanted, stored).
    """

    store: Store
    target: Target
    repetitions: int
    timeout: float  # seconds one repetition may take on a node
    command: str = "oddnode check"
    check_id: int | None = None
    recorded: Mapping[str, tuple[int, int, int]] = field(default_factory=dict)
    observer: StepObserver = field(default_factory=StepObserver)
    sensitivity: Sensitivity | None = None  # for steps that judge as they go (matrix); None: the default

    def finished(self, step: str) -> bool:
        """Whether an earlier invocation of the check finished ``step``."""
        run_id, wanted, done = self.recorded.get(step, (None, self.repetitions, 0))
        return run_id is not None and done >= wanted

    def step_command(self, step: str) -> str:
        return f"{self.command} [{step}]"

    def begin(self, step: str) -> int:
        """A new run of ``step`` over the target, recorded with the check at
        once (in one transaction): its repetitions are resumed one by one."""
        with self.store.transaction():
            run_id = self.store.new_run(self.step_command(step), nodes=self.target.nodes,
                                        source=f"{self.target.transport.name}:{self.target.nodeset}")
            if self.check_id is not None:
                self.store.add_check_step(self.check_id, step, run_id, self.repetitions)
        return run_id

    def record(self, step: str, run_id: int) -> None:
        """Record ``step``'s run as part of the check (nothing on its own)."""
        if self.check_id is not None:
            with self.store.transaction():
                self.store.add_check_step(self.check_id, step, run_id, self.repetitions)

    def progress(self, step: str, repetitions: int | None = None) -> Callable[[int, int], None]:
        """The ``on_progress(done, total)`` of a step's run, told to the
        observer; a run that counts rounds of its own (bisection: the cut
        pairs at once, then each alone) is told as ``repetitions`` whole
        repetitions, the unit the observer counts."""
        if repetitions is None:
            return lambda done, total: self.observer.repetition_done(step, done, total)
        return lambda done, total: self.observer.repetition_done(
            step, done * repetitions // total if total else repetitions, repetitions)

    def run_once(self, step: str) -> bool:
        """Whether ``step`` should run: False, with the observer not told,
        when an earlier invocation of the check finished it."""
        return step not in self.recorded


@dataclass
class StepOutcome:
    """What a step did: its runs' summaries (None where an earlier
    invocation had finished it), and what it did in words."""

    runs: dict[str, RunSummary | None] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


class Step(ABC):
    """One step of a check.  Subclasses set the class attributes and ``run``."""

    name: ClassVar[str]
    stage: ClassVar[str]
    options: ClassVar[type]  # a frozen dataclass; its defaults are the step's
    series: ClassVar[tuple[str, ...]]  # the families of the series it stores (memory, pingpong.sort)
    default: ClassVar[bool] = True  # in every check of its stage, or only when asked for
    min_nodes: ClassVar[int] = 1
    summary: ClassVar[str] = ""  # one line for help texts

    @abstractmethod
    def run(self, context: StepContext, options: Any) -> StepOutcome:
        """Run the step with its options, recorded through the context."""

    def already_done(self) -> StepOutcome:
        return StepOutcome(notes=[f"{self.name}: finished by an earlier, interrupted invocation"])

    def check(self, options: Any) -> None:
        """Refuse options that would fail the step (ValueError), before any runs."""

    def estimate(self, options: Any, nodes: int, repetitions: int,
                 link_bytes_per_s: float | None = None) -> Estimate | None:
        """How long the step takes on ``nodes`` nodes (``link_bytes_per_s``:
        the slowest measured pair's rate, when known); None where its time
        is not the plan's to say (a node benchmark's depends on the node)."""
        return None


STEPS: Registry[Step] = Registry("step")


def register_step(cls: type[Step]) -> type[Step]:
    """Make a step available to checks by its name."""
    if cls.stage not in STAGES:
        raise ValueError(f"step {cls.name!r}: unknown stage {cls.stage!r} (stages: {', '.join(STAGES)})")
    if not (dataclasses.is_dataclass(cls.options) and cls.options.__dataclass_params__.frozen):
        raise TypeError(f"step {cls.name!r}: its options must be a frozen dataclass")
    STEPS.add(cls.name, cls())
    return cls


def steps_of(stage: str, default_only: bool = False) -> list[Step]:
    """The registered steps of a stage, in registration order."""
    return [step for step in STEPS.values() if step.stage == stage and (step.default or not default_only)]


def series_stage(benchmark: str) -> str | None:
    """The stage of a stored series: the stage of the step whose family it is
    (``memory.triad`` is the memory step's ``memory``; ``pingpong.sort``
    the pairs step's); None for series no step writes (an imported tool's)."""
    families = {family: step.stage for step in STEPS.values() for family in step.series}
    parts = benchmark.split(".")
    for end in range(len(parts), 0, -1):
        stage = families.get(".".join(parts[:end]))
        if stage is not None:
            return stage
    return None


# -- options ------------------------------------------------------------------------

# The largest count, size or number of elements an option may give: 2^40
# elements of 8 bytes are 8 TiB, more memory than a node has, so a larger
# value is a typo (1e23) that would fail mid-run instead of when planned.
MAX_COUNT = 1 << 40
# A seed names a random stream rather than counting anything: any 64-bit
# unsigned number.
MAX_SEED = (1 << 64) - 1


# Where a step option's field keeps its command-line description.
OPTION_METADATA = "oddnode.option"
# What an option's value must be, checked on the command line before anything runs.
CHECKS = ("seconds", "seconds_or_zero", "sizes", "counts", "lengths", "network")


@dataclass(frozen=True)
class OptionHelp:
    """A step option as the command line shows it, plain data (the command
    line, above measure, makes it a flag): ``help``, the flag's name where
    it is not the field's (``min-seconds`` for ``min_loop_seconds``), what
    the value must be (``check``: "seconds", a duration above 0;
    "seconds_or_zero", 0 allowed; "sizes", message sizes in bytes,
    comma-separated; "counts", node counts, and "lengths", chain lengths,
    whole numbers comma-separated), and the default in words where its
    value does not say it (``shown_default``: "the node's" for None).
    A standalone command's flag may have other names too (``aliases``,
    without the dashes), and a list option that is ``repeatable`` takes
    one value per use of its flag instead of comma-separated text (a path
    may hold a comma)."""

    help: str
    flag: str | None = None
    check: str | None = None
    shown_default: str | None = None
    aliases: tuple[str, ...] = ()
    repeatable: bool = False

    def __post_init__(self) -> None:
        if self.check is not None and self.check not in CHECKS:
            raise ValueError(f"unknown option check {self.check!r} (known: {', '.join(CHECKS)})")


def option(default: Any = dataclasses.MISSING, *, help: str, flag: str | None = None, check: str | None = None,
           shown_default: str | None = None, aliases: tuple[str, ...] = (), repeatable: bool = False) -> Any:
    """A step option's field: its default and its command-line description (OptionHelp)."""
    return field(default=default, metadata={OPTION_METADATA: OptionHelp(help, flag, check, shown_default, aliases,
                                                                         repeatable)})


def option_field(options: type, name: str) -> dataclasses.Field:
    """The field ``name`` of an options dataclass; KeyError naming the known ones."""
    fields = {f.name: f for f in dataclasses.fields(options)}
    if name not in fields:
        raise KeyError(f"{options.__name__} has no option {name!r} (its options: {', '.join(fields)})")
    return fields[name]


def option_help(options: type, name: str) -> OptionHelp:
    """The command-line description of an option; TypeError when its field has none."""
    described = option_field(options, name).metadata.get(OPTION_METADATA)
    if described is None:
        raise TypeError(f"{options.__name__}.{name} has no command-line description: declare it with option()")
    return described


def option_flag(options: type, name: str) -> str:
    """An option's flag name, without the dashes: its own, else the field's name with dashes."""
    return option_help(options, name).flag or name.replace("_", "-")


def shown_default(options: type, name: str) -> str | None:
    """An option's default as a help text says it: its words, else its value
    (a tuple comma-separated); None when there is nothing to say (no value)."""
    described = option_help(options, name)
    if described.shown_default is not None:
        return described.shown_default
    default = option_field(options, name).default
    if default is None or default == () or default is dataclasses.MISSING:
        return None
    if isinstance(default, tuple):
        return ",".join(map(str, default))
    return str(default)


@dataclass(frozen=True)
class CheckFlag:
    """A flag of the check that sets step options: ``settings``, STEP.OPTION
    each (several for a flag shared by steps, which then takes its check
    and type from the first); ``flag`` (no dashes) where it is not
    STEP-FLAG of the one option; ``help`` where it is not the first option's."""

    settings: tuple[str, ...]
    flag: str | None = None
    help: str | None = None


def check_flag(*settings: str, flag: str | None = None, help: str | None = None) -> CheckFlag:
    return CheckFlag(settings, flag, help)


def option_names(step: Step) -> list[str]:
    return [f.name for f in dataclasses.fields(step.options)]


def option_defaults(step: Step) -> dict[str, Any]:
    """A step's options and their defaults (None where the node decides)."""
    return dataclasses.asdict(step.options())


def make_options(step: Step, values: Mapping[str, Any] | None = None) -> Any:
    """A step's options from plain values (a stored plan's JSON, a plan file,
    ``--set`` text): an unknown name or a value of the wrong type is a
    ValueError that names the step, the option and what it takes."""
    values = dict(values or {})
    types_of = typing.get_type_hints(step.options)
    unknown = [name for name in values if name not in types_of]
    if unknown:
        raise ValueError(f"{step.name} has no option {', '.join(map(quote, unknown))} "
                         f"(its options: {', '.join(option_names(step))})")
    defaults = option_defaults(step)
    typed = {}
    for name, value in values.items():
        try:
            typed[name] = coerce(value, types_of[name])
            check_range(name, typed[name], defaults[name])
        except (TypeError, ValueError) as err:
            raise ValueError(f"{step.name}.{name}: {err}") from None
    try:
        return step.options(**typed)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{step.name}: {err}") from None


# The highest TCP port (ports are 16-bit; 0 asks the system for any).
MAX_PORT = 65535


def check_range(name: str, value: Any, default: Any) -> None:
    """Refuse a number no step can run with, whatever the step: every
    number finite; a float (a duration or a fraction) above 0 and at most
    MAX_SECONDS, or 0 where the default is 0 (none); a whole number (a
    count, a size, a port, a CPU) 0 to MAX_COUNT.  A step's ``check``
    then refuses what only it knows to be wrong."""
    for number in value if isinstance(value, tuple) else (value,):
        if isinstance(number, bool) or not isinstance(number, (int, float)):
            continue
        if isinstance(number, float):
            least = 0.0 if default == 0 else None
            if not (number == least or 0 < number <= MAX_SECONDS):
                above = "0 or above" if least is not None else "above 0"
                raise ValueError(f"wants a finite number {above} and at most {MAX_SECONDS:g}, not {number!r}")
        elif name == "port" or name.endswith("_port"):
            if not 1 <= number <= MAX_PORT:
                raise ValueError(f"wants a TCP port from 1 to {MAX_PORT}, not {number}")
        else:
            most = MAX_SEED if name == "seed" else MAX_COUNT
            if not 0 <= number <= most:
                raise ValueError(f"wants a whole number from 0 to {most}, not {number}")


def coerce(value: Any, kind: Any) -> Any:
    """``value`` as the annotated type ``kind``: int, float, str, bool,
    ``X | None``, ``tuple[X, ...]`` (a list, or comma-separated text)."""
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        members = [k for k in typing.get_args(kind) if k is not type(None)]
        if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none", "null")):
            return None
        return coerce(value, members[0])
    if origin is tuple:
        element = typing.get_args(kind)[0]
        items = [part.strip() for part in value.split(",") if part.strip()] if isinstance(value, str) else value
        if not isinstance(items, (list, tuple)):
            raise TypeError(f"wants a list, not {quote(value)}")
        return tuple(coerce(item, element) for item in items)
    if kind is bool:
        return _boolean(value)
    if kind is int:
        return _whole(value)
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise TypeError(f"wants a number, not {quote(value)}")
        try:
            return float(value)
        except ValueError:
            raise ValueError(f"wants a number, not {quote(value)}") from None
    if kind is str:
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise TypeError(f"wants text, not {quote(value)}")
        return str(value)
    raise TypeError(f"options of type {kind} cannot be set")


def _whole(value: Any) -> int:
    if isinstance(value, bool):
        raise TypeError(f"wants a whole number, not {quote(value)}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip().replace("_", ""))
        except ValueError:
            pass
    raise ValueError(f"wants a whole number, not {quote(value)}")


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "on", "1"):
        return True
    if text in ("false", "no", "off", "0"):
        return False
    raise ValueError(f"wants true or false, not {quote(value)}")


# -- node benchmarks ------------------------------------------------------------------


class NodeBenchmark(Step):
    """A step that runs one benchmark spec on every node at once, R times."""

    @abstractmethod
    def spec(self, options: Any) -> BenchmarkSpec:
        """The argv, parser and series of the benchmark these options make."""

    def check(self, options: Any) -> None:
        self.spec(options)

    def run(self, context: StepContext, options: Any) -> StepOutcome:
        """Run the spec (the repetitions an interrupted run lacks, when
        resuming), recorded with the check from its first repetition."""
        if context.finished(self.name):
            return StepOutcome(runs={self.name: None})
        store, target = context.store, context.target
        run_id, wanted, done = context.recorded.get(self.name, (None, context.repetitions, 0))
        if run_id is None:
            run_id = context.begin(self.name)
        context.observer.benchmark_started(self.name, done, wanted)
        summary = run_benchmark(store, target, self.spec(options), wanted, context.timeout,
                                on_progress=context.progress(self.name), run_id=run_id, start=done + 1)
        notes = []
        if summary.unavailable_everywhere:
            notes.append(f"{self.name}: not run, no node has its tool ({_first_detail(store, summary.run_id)})")
        return StepOutcome({self.name: summary}, notes)


def _first_detail(store: Store, run_id: int) -> str:
    detail = store.first_node_detail(run_id) or "unavailable"
    return detail.split(": ", 1)[-1]
