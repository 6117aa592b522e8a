"""Help that stays whole at 80 columns.

Typer lays an option's help, default and "required" out as rich
``Columns``, whose cells cut a word longer than the cell with "…": at 80
columns the help cell of a command with long option names is about 22
characters, and a value such as ``memory,noise,compute,disk,…`` or a name
such as ``(pairs.seconds_per_size,`` lost its end.  Folding those words onto
the next line keeps every character.  Typer loads its help layout only when
help is printed (it costs 30 ms of start-up), and so does this.
"""

from __future__ import annotations

_FOLDS = "_oddnode_folds_long_words"


def _fold_in_layout() -> None:
    """Make typer's option help fold a word too long for its cell instead
    of cutting it."""
    from rich.text import Text
    from typer import rich_utils

    lay_out = getattr(rich_utils, "_get_parameter_help", None)
    if lay_out is None or getattr(lay_out, _FOLDS, False):
        return

    def folding(*args, **kwargs):
        columns = lay_out(*args, **kwargs)
        for item in getattr(columns, "renderables", ()):
            if isinstance(item, Text):
                item.overflow = "fold"
        return columns

    setattr(folding, _FOLDS, True)
    rich_utils._get_parameter_help = folding


def fold_long_words() -> None:
    """From the first help a command prints on, fold long words in option
    help.  Where typer lays help out another way this does nothing, and the
    help test sees the cut words."""
    from typer import core

    for command_class in (core.TyperCommand, core.TyperGroup):
        format_help = command_class.format_help
        if getattr(format_help, _FOLDS, False):
            continue

        def folding_help(self, ctx, formatter, _format_help=format_help):
            _fold_in_layout()
            return _format_help(self, ctx, formatter)

        setattr(folding_help, _FOLDS, True)
        command_class.format_help = folding_help
