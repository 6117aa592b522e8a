"""A roff man page, oddnode(1), written from the command line's own help:
every command and sub-command with its options, so the page never lags
behind the program.  ``python -m oddnode.manpage OUTPUT`` writes it for
the whole oddnode command."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import typer
from typer.core import TyperGroup

from oddnode import __version__

# The panel of the commands that name none, as the help lists them.
DEFAULT_PANEL = "Commands"
EXIT_STATUS = (
    ("0", "Success: the command ran (for check, analyze with --fail-on and diagnose: the cluster is ready)."),
    ("1", "Not ready: check found a problem, analyze a finding at its --fail-on severity or a mismatch with "
          "--truth, diagnose a failed expectation."),
    ("2", "Bad usage or input: an unknown option, a malformed or unreadable file, a damaged store, an output path "
          "that is not a file; the error is said in one line."),
    ("3", "Could not run: no node answered, the store is locked by another process, the transport cannot be used "
          "here, the testbed needs root, an output could not be written, or an unexpected error (its traceback "
          "printed)."),
    ("130", "Interrupted (SIGINT, Ctrl-C): what the command ran on the nodes is ended, every finished repetition "
            "is kept, check --resume goes on."),
    ("143", "Stopped by SIGTERM: as for 130."),
)
ENVIRONMENT = (
    ("ODDNODE_DB", "The results store, where --db is not given."),
    ("ODDNODE_TESTBED_DIR", "Where the testbed keeps its state, where --state-dir is not given "
                            "(default /run/oddnode/testbed)."),
    ("COLUMNS", "The width of the output; without it and without a terminal, lines are never wrapped."),
)
FILES = (
    ("oddnode.duckdb", "The results store in the current directory: every run, result, fact and finding."),
    ("oddnode-report.html", "The HTML report check writes by default."),
    ("/run/oddnode/testbed", "The testbed's state: its nodes, ssh configuration and topology file."),
)


def roff(text: str) -> str:
    """Text safe in a roff line: backslashes and hyphens escaped, other than
    ASCII as groff's Unicode escapes, no leading dot or quote taken for a
    request."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    text = "".join(ch if ord(ch) < 128 else f"\\[u{ord(ch):04X}]" for ch in text)
    return "\\&" + text if text.startswith((".", "'")) else text


def paragraph(text: str | None) -> str:
    """A docstring's lines as one paragraph."""
    return roff(" ".join((text or "").split()))


def panels(group: TyperGroup, ctx: typer.Context) -> dict[str, list[str]]:
    """The group's commands by help panel, in the order the help shows them."""
    by_panel: dict[str, list[str]] = {DEFAULT_PANEL: []}
    for name in group.list_commands(ctx):
        panel = getattr(group.commands[name], "rich_help_panel", None) or DEFAULT_PANEL
        by_panel.setdefault(panel, []).append(name)
    return {panel: names for panel, names in by_panel.items() if names}


def ordered_commands(group: TyperGroup, ctx: typer.Context) -> Iterator[str]:
    for names in panels(group, ctx).values():
        yield from names


def option_lines(command: Any, ctx: typer.Context) -> list[str]:
    """A tagged paragraph per option and argument, as the help words it."""
    lines = []
    for param in command.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is None or getattr(param, "hidden", False):
            continue
        term, help_text = record
        lines += [".TP", f"\\fB{roff(term)}\\fR", paragraph(help_text)]
    return lines


def command_section(command: Any, ctx: typer.Context) -> list[str]:
    """A command's usage, help and options; a group's sub-commands after it."""
    usage = " ".join([ctx.command_path, *command.collect_usage_pieces(ctx)])
    lines = [".PP", f"\\fB{roff(usage)}\\fR", ".RS", paragraph(command.help), *option_lines(command, ctx), ".RE"]
    if isinstance(command, TyperGroup):
        for name in ordered_commands(command, ctx):
            child = command.commands[name]
            lines += command_section(child, typer.Context(child, info_name=name, parent=ctx))
    return lines


def definitions(section: str, items: tuple[tuple[str, str], ...]) -> list[str]:
    lines = [f".SH {section}"]
    for term, text in items:
        lines += [".TP", f"\\fB{roff(term)}\\fR", roff(text)]
    return lines


def man_page(app: typer.Typer) -> str:
    """oddnode(1) in roff, from the command tree of ``app``."""
    root = typer.main.get_command(app)
    ctx = typer.Context(root, info_name="oddnode")
    lines = [
        f'.TH ODDNODE 1 "" "oddnode {__version__}" "User Commands"',
        ".SH NAME",
        f"oddnode \\- {paragraph(root.help)}",
        ".SH SYNOPSIS",
        ".B oddnode",
        "[\\fIOPTIONS\\fR] \\fICOMMAND\\fR [\\fIARGS\\fR]...",
        ".SH DESCRIPTION",
        paragraph(root.help),
        "Each command below is listed with its options; \\fBoddnode\\fR \\fICOMMAND\\fR \\fB\\-\\-help\\fR "
        "says the same.",
        ".SH OPTIONS",
        *option_lines(root, ctx),
        ".SH COMMANDS",
    ]
    for panel, names in panels(root, ctx).items():
        lines.append(f".SS {roff(panel)}")
        lines.append(", ".join(f"\\fB{roff(name)}\\fR" for name in names))
        for name in names:
            command = root.commands[name]
            lines += command_section(command, typer.Context(command, info_name=name, parent=ctx))
    lines += definitions("EXIT STATUS", EXIT_STATUS)
    lines += definitions("ENVIRONMENT", ENVIRONMENT)
    lines += definitions("FILES", FILES)
    return "\n".join(lines) + "\n"
