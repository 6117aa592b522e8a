"""Every --json document a command prints follows the schema: which
documents the running command may print, and why a document is none of them."""

from __future__ import annotations

import functools


@functools.cache
def _canonical_commands() -> dict:
    """Each command's function (its code) → the command's full name as the
    schema's x-commands write it (a hidden STAB alias such as ``anal`` is
    the function of ``stats``)."""
    import inspect

    import typer

    from oddnode.main import app

    found = {}

    def walk(command, path):
        if hasattr(command, "commands"):
            for name, child in command.commands.items():
                walk(child, [*path, name])
        elif not command.hidden:
            found[inspect.unwrap(command.callback).__code__] = " ".join(path)

    walk(typer.main.get_command(app), [])
    return found


def documents_printed_by_caller() -> tuple[str, ...] | None:
    """The documents the command that is running may print with --json,
    found by its function on the stack (empty: it prints no document, as
    ``oddnode schema``); None outside a command: any document."""
    import inspect

    from oddnode.report.schema import DOCUMENTS, commands_of

    commands = _canonical_commands()
    frame = inspect.currentframe()
    while frame is not None and frame.f_code not in commands:
        frame = frame.f_back
    if frame is None:
        return None
    return tuple(name for name in DOCUMENTS if commands[frame.f_code] in commands_of(name))


def schema_errors(document, names) -> list[str]:
    """Why ``document`` is none of the documents ``names`` (empty: it is one of them)."""
    from oddnode.report.schema import errors

    found = [errors(document, name) for name in names]
    return [] if any(not refused for refused in found) else [line for refused in found for line in refused]
