"""Options that belong together, taken by a command as one typed parameter.

A command declares ``draining: DrainOptions = DrainOptions()``, where
``DrainOptions`` is a frozen dataclass marked with ``option_group`` whose
fields are annotated as typer options; ``with_option_groups`` shows each
field as an option of its own, where the parameter stands, and hands the
command one ``DrainOptions`` made of the values given.  The fields keep the
names they would have as parameters, so that the configuration files still
fill them (``with_configuration`` sees the options, not the group).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from typing import Any, Callable, TypeVar

from oddnode.app.cli.common import splice_parameters

Group = TypeVar("Group", bound=type)


def option_group(cls: Group) -> Group:
    """Mark a dataclass of typer-annotated fields as options a command takes together."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"an option group is a dataclass, not {cls!r}")
    cls.option_group = True
    return cls


def is_option_group(kind: Any) -> bool:
    return isinstance(kind, type) and dataclasses.is_dataclass(kind) and getattr(kind, "option_group", False)


def group_fields(group: type) -> list[tuple[str, Any, Any]]:
    """(name, typer annotation, default) of each field of ``group``, in order."""
    hints = typing.get_type_hints(group, include_extras=True)
    return [(field.name, hints[field.name], field.default) for field in dataclasses.fields(group)]


def with_option_groups(command: Callable) -> Callable:
    """``command`` with the fields of each option group it takes in place of
    that parameter, handed to it as one instance; unchanged when it takes none."""
    signature = inspect.signature(command, eval_str=True)
    hints = typing.get_type_hints(command, include_extras=True)
    groups = {name: kind for name, kind in hints.items() if is_option_group(kind)}
    if not groups:
        return command
    fields = {name: group_fields(kind) for name, kind in groups.items()}
    names = [field for group in fields.values() for field, _, _ in group]
    others = set(signature.parameters) - set(groups)
    clashing = sorted((set(names) & others) | {name for name in names if names.count(name) > 1})
    if clashing:
        raise ValueError(f"option group fields named like other options: {', '.join(clashing)}")

    @functools.wraps(command)
    def grouped(*args, **options):
        for name, kind in groups.items():
            options[name] = kind(**{field: options.pop(field) for field, _, _ in fields[name]})
        return command(*args, **options)

    splice_parameters(grouped, signature, hints, fields)
    return grouped
