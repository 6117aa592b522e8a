"""The grid of a parameter sweep: environment variables and step options,
each with its values, and every combination of them (a setting); the
order the settings run in.

``--env NAME=V1,V2`` gives an environment variable's values (separated by
``|`` instead when any value holds a comma: ``OMPI_MCA_btl=tcp,self|tcp,vader,self``);
``--set STEP.OPTION=V1|V2`` a step option's, always separated by ``|``,
because a list option's one value is itself comma-separated
(``pairs.sizes=0,1024|0,65536``).  The first value of each is its default
unless ``--default NAME=VALUE`` names another; the default setting is the
one of every default value, and every other setting is judged against it.

Each setting runs once per round, R rounds, in an order shuffled afresh
every round and balanced over blocks of rounds (``interleaved_order``): a
drift over the sweep's time (a warming machine, another job starting) or
a cost paid by a round's first run then falls on every setting alike
instead of on the ones that ran first or last.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

ENV = "env"
OPTION = "option"
# Alternatives of a --set value (and of an --env value holding a comma).
ALTERNATIVES = "|"
# Settings one sweep may have: every setting runs R times, so a larger grid
# is a mistake more often than a plan.
MAX_SETTINGS = 256
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class GridError(ValueError):
    """A parameter, value or default the sweep cannot run, said with what and where."""


@dataclass(frozen=True)
class Parameter:
    """One swept (or fixed, with one value) parameter: an environment
    variable (``kind`` env) or an option of the step (``kind`` option,
    ``name`` STEP.OPTION); its values as text; the index of its default."""

    kind: str
    name: str
    values: tuple[str, ...]
    default: int = 0

    @property
    def swept(self) -> bool:
        return len(self.values) > 1

    @property
    def option(self) -> str:
        """The option's name within its step (``sizes`` of ``pairs.sizes``)."""
        return self.name.partition(".")[2]

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "values": list(self.values), "default": self.default}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Parameter:
        return cls(str(data["kind"]), str(data["name"]), tuple(str(v) for v in data["values"]), int(data["default"]))


@dataclass(frozen=True)
class Setting:
    """One combination: a value of every parameter (index into each one's values)."""

    index: int
    choice: tuple[int, ...]


@dataclass(frozen=True)
class Grid:
    """A step and its parameters; the settings are their cartesian product,
    the first parameter's values changing slowest."""

    step: str
    parameters: tuple[Parameter, ...]

    def __post_init__(self) -> None:
        if self.size > MAX_SETTINGS:
            raise GridError(f"{self.size} settings: a sweep runs at most {MAX_SETTINGS} (each R times); "
                            "sweep fewer values at once")

    @property
    def size(self) -> int:
        return int(np.prod([len(p.values) for p in self.parameters])) if self.parameters else 1

    @property
    def settings(self) -> list[Setting]:
        ranges = [range(len(p.values)) for p in self.parameters]
        return [Setting(i, tuple(choice)) for i, choice in enumerate(itertools.product(*ranges))]

    @property
    def default(self) -> int:
        """The index of the default setting (every parameter at its default)."""
        wanted = tuple(p.default for p in self.parameters)
        return next(s.index for s in self.settings if s.choice == wanted)

    @property
    def swept(self) -> list[Parameter]:
        return [p for p in self.parameters if p.swept]

    def env(self, setting: Setting) -> dict[str, str]:
        """The environment variables a setting gives the benchmark's processes."""
        return {p.name: p.values[c] for p, c in zip(self.parameters, setting.choice) if p.kind == ENV}

    def options(self, setting: Setting) -> dict[str, str]:
        """The step options a setting sets (as text; the step's options type them)."""
        return {p.option: p.values[c] for p, c in zip(self.parameters, setting.choice) if p.kind == OPTION}

    def values(self, setting: Setting) -> dict[str, str]:
        """Parameter name -> value, every parameter (fixed ones too)."""
        return {p.name: p.values[c] for p, c in zip(self.parameters, setting.choice)}

    def label(self, setting: Setting) -> str:
        """A setting's short name: the values of the swept parameters, in
        their order (``4096``, ``4096, tcp``); ``default`` when none is swept."""
        swept = [p.values[c] for p, c in zip(self.parameters, setting.choice) if p.swept]
        return ", ".join(swept) if swept else "default"

    def labels(self) -> list[str]:
        return [self.label(s) for s in self.settings]

    def describe(self, setting: Setting) -> dict[str, Any]:
        """What a setting's runs are stored with: its environment and options."""
        return {"env": self.env(setting), "options": self.options(setting)}

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "parameters": [p.to_json() for p in self.parameters]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Grid:
        return cls(str(data["step"]), tuple(Parameter.from_json(p) for p in data["parameters"]))


def _split(text: str, what: str, commas: bool) -> tuple[str, str, tuple[str, ...]]:
    """NAME and its values from NAME=V1<sep>V2 (``commas``: commas separate
    the values unless a ``|`` does)."""
    name, equals, value = text.partition("=")
    name = name.strip()
    if not (equals and name):
        example = "OMPI_MCA_btl_tcp_eager_limit=4096,65536" if commas else "pairs.sizes=0,1024|0,65536"
        raise GridError(f"{what} is NAME=VALUES (e.g. {example}), not {text!r}")
    separator = "," if commas and ALTERNATIVES not in value else ALTERNATIVES
    values = tuple(v.strip() for v in value.split(separator))
    if any(v == "" for v in values) and len(values) > 1:
        raise GridError(f"{what} {name}: an empty value in {value!r}")
    duplicates = sorted({v for v in values if values.count(v) > 1})
    if duplicates:
        raise GridError(f"{what} {name}: value {', '.join(map(repr, duplicates))} given twice")
    return name, value, values


def env_parameters(texts: Sequence[str]) -> list[Parameter]:
    """``--env NAME=V1,V2,...`` as parameters; a bad name is refused."""
    parameters = []
    for text in texts:
        name, _, values = _split(text, "--env", commas=True)
        if not _ENV_NAME.match(name):
            raise GridError(f"--env {name!r}: not an environment variable name (letters, digits, _)")
        parameters.append(Parameter(ENV, name, values))
    return parameters


def option_parameters(texts: Sequence[str], step: str) -> list[Parameter]:
    """``--set STEP.OPTION=V1|V2`` as parameters of the swept ``step``."""
    parameters = []
    for text in texts:
        name, _, values = _split(text, "--set", commas=False)
        owner, dot, option = name.partition(".")
        if not (dot and owner and option):
            raise GridError(f"--set is STEP.OPTION=VALUES (e.g. {step}.sizes=0,1024|0,65536), not {text!r}")
        if owner != step:
            raise GridError(f"--set {name}: the sweep runs the {step} step, not {owner}")
        parameters.append(Parameter(OPTION, name, values))
    return parameters


def with_defaults(parameters: Sequence[Parameter], texts: Sequence[str]) -> list[Parameter]:
    """The parameters with the defaults ``--default NAME=VALUE`` names."""
    chosen: dict[str, str] = {}
    for text in texts:
        name, equals, value = text.partition("=")
        if not (equals and name.strip()):
            raise GridError(f"--default is NAME=VALUE (a value of a swept parameter), not {text!r}")
        chosen[name.strip()] = value.strip()
    by_name = {p.name: p for p in parameters}
    out = list(parameters)
    for name, value in chosen.items():
        if name not in by_name:
            raise GridError(f"--default {name}: no such parameter (the sweep's: {', '.join(by_name) or 'none'})")
        parameter = by_name[name]
        if value not in parameter.values:
            raise GridError(f"--default {name}={value}: not one of its values ({', '.join(parameter.values)})")
        out[out.index(parameter)] = Parameter(parameter.kind, name, parameter.values, parameter.values.index(value))
    return out


def make_grid(step: str, env: Sequence[str] = (), options: Sequence[str] = (), defaults: Sequence[str] = (),
              fixed: Mapping[str, str] | None = None) -> Grid:
    """The grid of a sweep of ``step`` from the command's texts (``fixed``:
    options set to one value, STEP.OPTION -> value); a parameter named
    twice is refused."""
    parameters = env_parameters(env) + option_parameters(options, step)
    for name, value in (fixed or {}).items():
        parameters.append(Parameter(OPTION, name, (value,)))
    names = [p.name for p in parameters]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise GridError(f"{', '.join(twice)} given twice: give each parameter once, with all its values")
    return Grid(step, tuple(with_defaults(parameters, defaults)))


def interleaved_order(settings: int, rounds: int, seed: int = 0) -> list[list[int]]:
    """The order of a sweep's runs: ``rounds`` rounds, each running every
    setting once.  Every ``settings`` consecutive rounds form a block in
    which each setting runs once in each place (the rows of a cyclic Latin
    square, drawn from ``seed``: the settings relabelled and the rows
    shuffled afresh every block), so that no setting runs first, after a
    pause, or last, in a drift, more often than another; a last, shorter
    block takes some of its square's rows."""
    if settings < 1:
        raise GridError("a sweep needs at least one setting")
    if rounds < 1:
        raise GridError(f"repetitions must be >= 1, got {rounds}")
    rng = np.random.default_rng(seed)
    order: list[list[int]] = []
    while len(order) < rounds:
        relabelled = rng.permutation(settings)
        for shift in rng.permutation(settings):
            order.append([int(relabelled[(shift + place) % settings]) for place in range(settings)])
    return order[:rounds]