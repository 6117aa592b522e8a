"""Help that stays whole at 80 columns, with plain metavars.

Typer lays an option's help, default and "required" out as rich
``Columns``, whose cells cut a word longer than the cell with "…": at 80
columns the help cell of a command with long option names is about 22
characters, and a value such as ``memory,noise,compute,disk,…`` or a name
such as ``(pairs.seconds_per_size,`` lost its end.  Folding those words onto
the next line keeps every character.  Typer loads its help layout only when
help is printed (it costs 30 ms of start-up), and so does this.

Typer also names each value by its Python type (``--json <bool>``, ``--db
<path>``, ``<list[str]>``), which reads as if a flag took a value; help
here names values as click and most tools do (``--db PATH``, ``--runs
INTEGER``, ``--fail-on never|warning|error``) and flags by nothing.
"""

from __future__ import annotations

_INSTALLED = "_oddnode_readable_help"  # marks what is already wrapped
# Typer's names of value types, as the placeholders click and most tools show.
_PLACEHOLDERS = {"int": "INTEGER", "int range": "INTEGER", "float": "FLOAT", "float range": "FLOAT", "str": "TEXT",
                 "path": "PATH", "bool": "BOOLEAN"}


def plain_metavar(typed: str, *, flag: bool = False) -> str:
    """A parameter's placeholder from the type typer shows (``<int>``,
    ``<list[Path]>``, ``<never|warning|error>``): nothing for a flag, the
    choices, ``WHEN`` for a date format, else the type's name (``INTEGER``,
    ``PATH``), followed by ``...`` when it takes several."""
    if flag:
        return ""
    text = typed.strip("<>")
    several = text.startswith("list[") and text.endswith("]")
    if several:
        text = text[len("list["):-1]
    if "%" in text:  # datetime formats: %Y-%m-%d|%Y-%m-%dT%H:%M|...
        text = "WHEN"
    elif "|" not in text:
        text = _PLACEHOLDERS.get(text.lower(), text.upper())
    return f"{text}..." if several else text


def _plain_metavars(command, ctx) -> None:
    """Give every parameter of ``command`` (a click command, as typer has
    it) without a metavar of its own a plain one.  Where typer does not name
    types (before 0.29) its own placeholders stay."""
    for param in command.get_params(ctx):
        display_type = getattr(param, "display_type", None)
        if display_type is None or param.param_type_name not in ("option", "argument"):
            continue
        if param.param_type_name == "option":
            if param.metavar is None:
                flag = getattr(param, "is_flag", False) and not getattr(param, "count", False)
                param.metavar = "" if flag else plain_metavar(display_type(ctx))
        elif "display_type_rich" not in vars(param):
            shown = param.metavar or plain_metavar(display_type(ctx))
            param.display_type_rich = lambda ctx, shown=shown: shown


def _fold_in_layout() -> None:
    """Make typer's option help fold a word too long for its cell instead
    of cutting it."""
    from rich.text import Text
    from typer import rich_utils

    lay_out = getattr(rich_utils, "_get_parameter_help", None)
    if lay_out is None or getattr(lay_out, _INSTALLED, False):
        return

    def folding(*args, **kwargs):
        columns = lay_out(*args, **kwargs)
        for item in getattr(columns, "renderables", ()):
            if isinstance(item, Text):
                item.overflow = "fold"
        return columns

    setattr(folding, _INSTALLED, True)
    rich_utils._get_parameter_help = folding


def prepare_help(command, ctx) -> None:
    """Lay ``command``'s help out readably: long words folded, plain metavars."""
    _fold_in_layout()
    _plain_metavars(command, ctx)


def readable_help() -> None:
    """From the first help a command prints on, fold long words in option
    help and name values plainly.  Where typer lays help out another way
    this does nothing, and the help tests see it."""
    from typer import core

    for command_class in (core.TyperCommand, core.TyperGroup):
        format_help = command_class.format_help
        if getattr(format_help, _INSTALLED, False):
            continue

        def readable_format_help(self, ctx, formatter, _format_help=format_help):
            prepare_help(self, ctx)
            return _format_help(self, ctx, formatter)

        setattr(readable_format_help, _INSTALLED, True)
        command_class.format_help = readable_format_help
