"""Text from input printed as it is: a benchmark, metric, unit, fact, group
or file name with brackets in it is never read as rich markup, which would
recolour the output, or end the command with a MarkupError (``[/bold]``)."""

from __future__ import annotations

from typing import Any

from rich.markup import escape


def literal(value: Any) -> Any:
    """``value`` as rich prints it literally, in a markup string, a table's
    cell, title or caption: a string or a path with its brackets escaped; a
    rich renderable (Text, a table), which holds no markup, and None as they
    are."""
    if value is None or hasattr(value, "__rich_console__") or hasattr(value, "__rich__"):
        return value
    return escape(str(value))


def literals(values: Any) -> list[Any]:
    """Every value of a table row through ``literal``."""
    return [literal(value) for value in values]
