"""Step options as command-line flags, made from their fields' descriptions
(measure.steps.option): the check's step flags (catalog.CHECK_FLAGS), put
in place of its ``step_flags`` parameter as ``with_configuration`` puts the
connection's options in place of ``connection``; and a standalone
command's flags of its step's options, in place of its ``options`` (or
``option_values``) parameter."""

from __future__ import annotations

import functools
import inspect
import types
import typing
from dataclasses import dataclass
from typing import Annotated, Any, Callable, Optional

import typer

from oddnode.app.cli.common import (
    chain_lengths,
    splice_parameters,
    message_sizes,
    node_counts,
    positive_seconds,
    seconds_or_zero,
)
from oddnode.measure.steps import CheckFlag, coerce, option_field, option_flag, option_help, shown_default

# What each check an option's description names does on the command line:
# a callback that refuses a bad value before anything runs, and a parser
# that turns the flag's text into the option's value.
def pair_network(param: typer.CallbackParam, value: Optional[str]) -> Optional[str]:
    """The callback of a network option (NAME=TEMPLATE): refused in one line before anything runs."""
    from oddnode.measure.pair.pairs import Network

    if value is not None:
        try:
            Network.parse(value)
        except ValueError as err:
            raise typer.BadParameter(str(err)) from None
    return value


CALLBACKS: dict[str, Callable] = {"seconds": positive_seconds, "seconds_or_zero": seconds_or_zero,
                                  "network": pair_network}
PARSERS: dict[str, Callable[[str], Any]] = {"sizes": message_sizes, "counts": node_counts, "lengths": chain_lengths}

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

    splice_parameters(flagged, signature, hints,
                      {"step_flags": [(flag.parameter, flag.annotation, None) for flag in flags]})
    return flagged


# -- a standalone command's flags of its step's options -----------------------------


def list_type(kind: Any) -> Any:
    """The tuple type of a list option annotated ``kind`` (``tuple[X, ...]``,
    or ``tuple[X, ...] | None``); None for any other option."""
    if typing.get_origin(kind) is tuple:
        return kind
    members = typing.get_args(kind) if typing.get_origin(kind) in (typing.Union, types.UnionType) else ()
    return next((member for member in members if typing.get_origin(member) is tuple), None)


def list_text(kind: Any) -> Callable[[str], Any]:
    """The parser of a list option's flag that names no check: its
    comma-separated text as the option's type (words, numbers); a word that
    is not one of them refused as the flag's bad value."""
    def parse(text: str) -> Any:
        try:
            return coerce(text, kind)
        except (TypeError, ValueError) as err:
            raise typer.BadParameter(str(err)) from None
    return parse


def option_step_flag(options: type, name: str) -> tuple[StepFlag, Any]:
    """A standalone command's flag of the option ``name`` and its default:
    --FLAG (and its aliases), the option's own default (shown by the help),
    a tuple's as text (None, its default said in the help), a tuple's that
    is repeatable as one value per use; a switch that is on by default
    can be turned off (--no-FLAG)."""
    described = option_help(options, name)
    flag = option_flag(options, name)
    hint = typing.get_type_hints(options)[name]
    kind = flag_type(hint)
    default = option_field(options, name).default
    listed = list_type(hint)
    parse = PARSERS.get(described.check) or (list_text(hint) if listed is not None else None)
    text = f"{described.help}."
    if listed is not None or default is None:
        said = shown_default(options, name)
        text = f"{described.help} (default {said})." if said is not None else text
        kind, default = Optional[kind], None
    if described.repeatable:
        if listed is None:
            raise TypeError(f"{options.__name__}.{name} is no list: its flag cannot be repeated")
        kind, parse = Optional[list[flag_type(typing.get_args(listed)[0])]], tuple
    declarations = [f"--{flag}/--no-{flag}" if kind is bool and default is True else f"--{flag}",
                    *(f"--{alias}" for alias in described.aliases)]
    annotation = Annotated[kind, typer.Option(*declarations, callback=CALLBACKS.get(described.check), help=text)]
    return StepFlag(name, annotation, (name,), parse), default


def given_options(made: list[tuple[StepFlag, Any]], given: dict[str, Any]) -> dict[str, Any]:
    """The options whose flags were given (not None), each parsed; their
    flags taken out of ``given``, the command's other options left in it."""
    values = {}
    for flag, _ in made:
        value = given.pop(flag.parameter)
        if value is not None:
            values[flag.parameter] = flag.parse(value) if flag.parse else value
    return values


def with_option_flags(command: Callable, options: type, names: tuple[str, ...], parameter: str,
                      hand: Callable[[dict[str, Any]], Any]) -> Callable:
    """``command`` with a flag for each of the options ``names`` in place of
    its ``parameter``, handed to it as ``hand`` makes it of the options given."""
    made = [option_step_flag(options, name) for name in names]
    signature = inspect.signature(command, eval_str=True)
    hints = typing.get_type_hints(command, include_extras=True)
    if parameter not in signature.parameters:
        raise ValueError(f"{command.__name__} has no {parameter} parameter for its step options' flags")
    taken = set(signature.parameters) & set(names)
    if taken:
        raise ValueError(f"step options named like the command's own options: {', '.join(sorted(taken))}")

    @functools.wraps(command)
    def flagged(*args, **given):
        return command(*args, **{parameter: hand(given_options(made, given))}, **given)

    splice_parameters(flagged, signature, hints,
                      {parameter: [(flag.parameter, flag.annotation, default) for flag, default in made]})
    return flagged


def with_step_options(command: Callable, options: type, names: tuple[str, ...]) -> Callable:
    """``command`` with a flag for each of the options ``names`` in place of its
    ``options`` parameter, handed to it as ``options`` built from the flags given."""
    return with_option_flags(command, options, names, "options", lambda values: options(**values))


# A command's ``option_values`` parameter: the step options whose flags were
# given, by name, each its option's type (the flags left out are not there).
OptionValues = dict[str, Any]


def with_step_option_values(command: Callable, options: type, names: tuple[str, ...]) -> Callable:
    """``command`` with a flag for each of the options ``names`` in place of its
    ``option_values`` parameter, handed to it as those values: for a command
    that builds its options itself, with settings of its own beside them
    (sets' size, the orderings) and under its own error handling (a value
    the options refuse said in one line), or that sets them on a step it
    picks (sweep's sets or scale)."""
    return with_option_flags(command, options, names, "option_values", dict)
