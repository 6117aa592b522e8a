"""The command line's commands loaded when used, not at every start.

Each family of commands is a module with a registration function (it adds
its commands to the typer app it is given).  Loading all of them loads the
whole library (numpy, DuckDB, every step), which ``oddnode --help`` and a
Tab of completion do not need: the root group here answers both from an
index of the commands (name, family, help panel, help text), written from
the command line itself and checked against it by a test, and loads a
family only when one of its commands runs or prints its own help."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple

import typer
from typer.core import TyperCommand, TyperGroup, TyperOption

from oddnode.app.cli.help_layout import prepare_help
from oddnode.app.cli.quick import CommandEntry, Root, RootOption, StyledText


class Registration(NamedTuple):
    """A family of commands: the module, and its function that adds them to an app."""

    module: str
    function: str = "register"


def register_family(app: typer.Typer, registration: Registration) -> None:
    """Add the family's commands to ``app``: its module imported, its function run."""
    getattr(importlib.import_module(registration.module), registration.function)(app)


def load_family(registration: Registration, prepare=None) -> TyperGroup:
    """The family's commands as a click group: registered on an app of
    their own, ``prepare(app)`` after that (the configuration defaults
    every command takes)."""
    family = typer.Typer()
    register_family(family, registration)
    if prepare is not None:
        prepare(family)
    return typer.main.get_group(family)


def command_entries(registrations: Sequence[Registration], prepare=None) -> list[CommandEntry]:
    """Every command of ``registrations`` in the order the app lists them
    (typer's: commands in their families' order, then groups): the index."""
    entries, groups = [], []
    for registration in registrations:
        for name, command in load_family(registration, prepare).commands.items():
            panel = getattr(command, "rich_help_panel", None)  # typer's placeholder where none was given
            help_text = command.short_help or command.help or ""
            (groups if isinstance(command, TyperGroup) else entries).append(CommandEntry(
                name, registration.module, registration.function, panel if isinstance(panel, str) else None,
                bool(command.hidden), help_text, TyperCommand(name, help=help_text).get_short_help_str()))
    return entries + groups


def root_listing(group: TyperGroup) -> Root | None:
    """What the root's help shows besides its commands, as quick.print_help
    needs it; None where that help would not be typer's (arguments, an
    epilog, markdown), so that the command line answers itself."""
    from rich.text import Text
    from typer import rich_utils

    ctx = group.make_context("oddnode", [], resilient_parsing=True)
    prepare_help(group, ctx)
    if group.epilog or group.deprecated or group.rich_markup_mode != "rich":
        return None
    options = []
    for param in group.get_params(ctx):
        if getattr(param, "hidden", False):
            continue
        if not isinstance(param, TyperOption):
            return None
        help_items = rich_utils._get_parameter_help(param=param, ctx=ctx, markup_mode="rich").renderables
        if not all(isinstance(item, Text) for item in help_items):
            return None
        value = param.display_type_rich(ctx=ctx) or ""
        value_range = param._get_number_range_help_str()
        options.append(RootOption(
            getattr(param, "rich_help_panel", None),
            *(",".join(name for name in names if ("--" in name) == long)
              for names in (param.opts, param.secondary_opts) for long in (True, False)),
            value + (f" [{value_range}]" if value_range else ""), bool(param.required),
            tuple(StyledText.of(item) for item in help_items)))
    return Root(" ".join(group.collect_usage_pieces(ctx)), group.help or "", tuple(ctx.help_option_names),
                bool(group.no_args_is_help), tuple(options))


def _plain_tuples(value):
    """Named tuples as plain ones, to be written as literals that load nothing."""
    return tuple(_plain_tuples(item) for item in value) if isinstance(value, tuple) else value


def index_source(entries: Sequence[CommandEntry], root: Root | None, docstring: str) -> str:
    """The index as a Python module of plain tuples, which loads nothing:
    the commands, and the root's usage, help and options (quick.Root)."""
    rows = "".join(f"    {tuple(entry)!r},\n" for entry in entries)
    if root is None:
        root_source = "None"
    else:
        head = "".join(f"    {field!r},\n" for field in root[:-1])
        options = "".join(f"        {_plain_tuples(option)!r},\n" for option in root.options)
        root_source = f"(\n{head}    (\n{options}    ),\n)"
    return (f'"""{docstring}"""\n\n# (name, module, function, help panel, hidden, help, short help)\n'
            f"COMMANDS = (\n{rows})\n\n"
            f"# (usage, help, help options, no arguments is help, options: (panel, long, short, negative long,\n"
            f"# negative short, value, required, help texts: (text, style, spans, overflow)))\n"
            f"ROOT = {root_source}\n")


class _Commands(Mapping):
    """The root group's commands by name, each family loaded on first use;
    ``given``, commands registered on the root app itself, as they are."""

    def __init__(self, entries: Sequence[CommandEntry], prepare, given: Mapping[str, Any]) -> None:
        self._entries = {entry.name: entry for entry in entries}
        self._given = dict(given)
        self._prepare = prepare
        self._families: dict[Registration, TyperGroup] = {}

    def __getitem__(self, name: str):
        if name in self._given:
            return self._given[name]
        entry = self._entries[name]
        registration = Registration(entry.module, entry.function)
        if registration not in self._families:
            self._families[registration] = load_family(registration, self._prepare)
        return self._families[registration].commands[name]

    def __iter__(self) -> Iterator[str]:
        yield from self._entries
        yield from (name for name in self._given if name not in self._entries)

    def __len__(self) -> int:
        return len(self._entries.keys() | self._given.keys())

    def listed(self, name: str) -> TyperCommand | None:
        """A stand-in for listing the command: its name, panel and help, nothing loaded."""
        if name in self._given:
            return self._given[name]
        entry = self._entries.get(name)
        if entry is None:
            return None
        return TyperCommand(name, help=entry.help, hidden=entry.hidden, rich_help_panel=entry.panel)


class LazyGroup(TyperGroup):
    """A root group whose commands come from an index (``entries``, set
    by lazy_group_class) and load when used; its help and the completion
    of command names read the index alone."""

    entries: Sequence[CommandEntry] = ()
    prepare: Any = None

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = _Commands(self.entries, type(self).prepare, self.commands)
        self._listing = False

    @contextmanager
    def _index_only(self) -> Iterator[None]:
        self._listing = True
        try:
            yield
        finally:
            self._listing = False

    def list_commands(self, ctx) -> list[str]:
        return list(self.commands)  # the index's names, nothing loaded

    def get_command(self, ctx, cmd_name: str):
        if self._listing:
            return self.commands.listed(cmd_name)
        return self.commands.get(cmd_name)

    def format_help(self, ctx, formatter) -> None:
        with self._index_only():
            return super().format_help(ctx, formatter)

    def shell_complete(self, ctx, incomplete: str):
        with self._index_only():
            return super().shell_complete(ctx, incomplete)


def lazy_group_class(entries: Sequence[CommandEntry], prepare=None) -> type[LazyGroup]:
    """The root group's class for ``typer.Typer(cls=...)``, bound to the
    index and to what every loaded family gets (``prepare``)."""
    return type("OddnodeCommands", (LazyGroup,), {"entries": tuple(entries), "prepare": staticmethod(prepare)})
