"""Step options as command-line flags, made from their fields' descriptions
(measure.steps.option): the check's step flags (catalog.CHECK_FLAGS), put
in place of its ``step_flags`` parameter as ``with_configuration`` puts the
connection's options in place of ``connection``."""

from __future__ import annotations

import functools
import inspect
import types
import typing
from dataclasses import dataclass
from typing import Annotated, Any, Callable, Optional

import typer

from oddnode.app.cli.common import in_place_of, message_sizes, positive_seconds, seconds_or_zero
from oddnode.measure.steps import CheckFlag, option_field, option_flag, option_help, shown_default

# What each check an option's description names does on the command line:
# a callback that refuses a bad value before anything runs, and a parser
# that turns the flag's text into the option's value.
CALLBACKS: dict[str, Callable] = {"seconds": positive_seconds, "seconds_or_zero": seconds_or_zero}
PARSERS: dict[str, Callable[[str], Any]] = {"sizes": message_sizes}

# A command's ``step_flags`` parameter: the STEP.OPTION each given step flag
# sets and its value (the flags left out are not there).
StepFlags = dict[str, Any]
# That parameter's default: the command line fills it.
FROM_FLAGS: StepFlags = {}


@dataclass(frozen=True)
class StepFlag:
    """A step flag as a command's parameter: its name, its typer annotation,
    the step options it sets and how its text becomes their value."""

    parameter: str
    annotation: Any
    settings: tuple[str, ...]
    parse: Callable[[str], Any] | None = None


def flag_type(kind: Any) -> type:
    """The type a flag reads for an option annotated ``kind``: the option's
    own (int, float, str, bool), text for a tuple (comma-separated), the
    inner type of ``X | None``."""
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        return flag_type(next(k for k in typing.get_args(kind) if k is not type(None)))
    if origin is tuple:
        return str
    if kind in (int, float, str, bool):
        return kind
    raise TypeError(f"options of type {kind} have no flag")


def check_help(text: str, settings: tuple[str, ...], default: str | None) -> str:
    """A check flag's help: what it is, the options it sets, their default
    ("memory.ntimes, default 10"; several options: "a, b; default 0")."""
    where = ", ".join(settings)
    separator = "; " if len(settings) > 1 else ", "
    return f"{text} ({where}{separator}default {default})." if default is not None else f"{text} ({where})."


def check_step_flag(entry: CheckFlag) -> StepFlag:
    """The check's flag of ``entry``: its name STEP-FLAG of its option where
    the entry names none, its help, type and check those of its (first) option."""
    from oddnode.measure import catalog

    step, name = entry.settings[0].split(".")
    options = catalog.get_step(step).options
    described = option_help(options, name)
    flag = entry.flag or f"{step}-{option_flag(options, name)}"
    kind = flag_type(typing.get_type_hints(options)[name])
    declarations = [f"--{flag}/--no-{flag}"] if kind is bool else [f"--{flag}"]
    annotation = Annotated[Optional[kind], typer.Option(
        *declarations, callback=CALLBACKS.get(described.check),
        help=check_help(entry.help or described.help, entry.settings, shown_default(options, name)))]
    return StepFlag(flag.replace("-", "_"), annotation, entry.settings, PARSERS.get(described.check))


def check_step_flags() -> list[StepFlag]:
    """The check's step flags, from the catalog's table and the registered steps."""
    from oddnode.measure import catalog

    return [check_step_flag(entry) for entry in catalog.CHECK_FLAGS]


def with_step_flags(command: Callable, flags: list[StepFlag]) -> Callable:
    """``command`` with ``flags`` in place of its ``step_flags`` parameter,
    handed to it as the STEP.OPTION -> value of each flag given."""
    signature = inspect.signature(command, eval_str=True)
    hints = typing.get_type_hints(command, include_extras=True)
    taken = set(signature.parameters) & {flag.parameter for flag in flags}
    if taken:
        raise ValueError(f"step flags named like the command's own options: {', '.join(sorted(taken))}")
    by_parameter = {flag.parameter: flag for flag in flags}

    @functools.wraps(command)
    def flagged(*args, **options):
        given: StepFlags = {}
        for parameter, flag in by_parameter.items():
            value = options.pop(parameter)
            if value is not None:
                value = flag.parse(value) if flag.parse else value
                given.update(dict.fromkeys(flag.settings, value))
        return command(*args, step_flags=given, **options)

    flagged.__signature__ = signature.replace(parameters=in_place_of(
        signature, "step_flags", [(flag.parameter, flag.annotation, None) for flag in flags]))
    flagged.__annotations__ = {name: hint for name, hint in hints.items() if name != "step_flags"} | {
        flag.parameter: flag.annotation for flag in flags}
    return flagged


# -- a standalone command's flags of its step's options -----------------------------


def option_step_flag(options: type, name: str) -> tuple[StepFlag, Any]:
    """A standalone command's flag of the option ``name`` and its default:
    --FLAG, the option's own default (shown by the help), a tuple's as text
    (None, its default said in the help)."""
    described = option_help(options, name)
    flag = option_flag(options, name)
    kind = flag_type(typing.get_type_hints(options)[name])
    default = option_field(options, name).default
    text = f"{described.help}."
    if typing.get_origin(typing.get_type_hints(options)[name]) is tuple or default is None:
        said = shown_default(options, name)
        text = f"{described.help} (default {said})." if said is not None else text
        kind, default = Optional[kind], None
    annotation = Annotated[kind, typer.Option(f"--{flag}", callback=CALLBACKS.get(described.check), help=text)]
    return StepFlag(name, annotation, (name,), PARSERS.get(described.check)), default


def with_step_options(command: Callable, options: type, names: tuple[str, ...]) -> Callable:
    """``command`` with a flag for each of the options ``names`` in place of its
    ``options`` parameter, handed to it as ``options`` built from the flags given."""
    made = [option_step_flag(options, name) for name in names]
    signature = inspect.signature(command, eval_str=True)
    hints = typing.get_type_hints(command, include_extras=True)
    taken = set(signature.parameters) & set(names)
    if taken:
        raise ValueError(f"step options named like the command's own options: {', '.join(sorted(taken))}")

    @functools.wraps(command)
    def flagged(*args, **given):
        values = {}
        for flag, _ in made:
            value = given.pop(flag.parameter)
            if value is not None:
                values[flag.parameter] = flag.parse(value) if flag.parse else value
        return command(*args, options=options(**values), **given)

    flagged.__signature__ = signature.replace(parameters=in_place_of(
        signature, "options", [(flag.parameter, flag.annotation, default) for flag, default in made]))
    flagged.__annotations__ = {name: hint for name, hint in hints.items() if name != "options"} | {
        flag.parameter: flag.annotation for flag, _ in made}
    return flagged
