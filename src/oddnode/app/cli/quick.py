"""The answers the command line gives before it loads: the root help
(``oddnode``, ``oddnode --help``) and the completion of a command's name.

Typer and its help layout take about 0.3 s to load, more than a whole
answer should (0.2 s).  These two answers need only the index of the
command line (oddnode.command_index, written by lazy.index_source) and,
for the help, rich: they print what typer prints, byte for byte (a unit
test compares them at several widths, in colour and without, for every
shell).  Anything else (a command, an option, a completion past the first
word, a usage line too long for the terminal) is left to the command line.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Mapping, Sequence
from typing import NamedTuple


class CommandEntry(NamedTuple):
    """One command as the index keeps it: enough to list it and to load it."""

    name: str
    module: str
    function: str
    panel: str | None
    hidden: bool
    help: str  # the help the root's listing shows (its first paragraph is shown)
    short_help: str  # the help completion shows beside the name


class StyledText(NamedTuple):
    """A rich ``Text`` as plain data: its characters, style, styled spans
    (start, end, style) and overflow, to be rebuilt as it was."""

    plain: str
    style: str
    spans: tuple[tuple[int, int, str], ...]
    overflow: str | None

    @classmethod
    def of(cls, text) -> StyledText:
        """The data of a rich ``Text``."""
        return cls(text.plain, str(text.style), tuple((span.start, span.end, str(span.style)) for span in text.spans),
                   text.overflow)

    def text(self):
        """The rich ``Text`` again."""
        from rich.text import Span, Text

        return Text(self.plain, style=self.style, overflow=self.overflow,
                    spans=[Span(start, end, style) for start, end, style in self.spans])


class RootOption(NamedTuple):
    """An option of the root command as its help shows it."""

    panel: str | None
    long: str  # the long names, comma-separated
    short: str
    negative_long: str  # a switch's off names (--no-x)
    negative_short: str
    value: str  # the value's placeholder, empty for a flag
    required: bool
    help: tuple[StyledText, ...]  # the help, then its default or environment variable


class Root(NamedTuple):
    """What the root's help shows besides its commands."""

    usage: str  # the usage after the program's name: [OPTIONS] COMMAND [ARGS]...
    help: str
    help_options: tuple[str, ...]  # -h, --help
    no_args_is_help: bool
    options: tuple[RootOption, ...]


# Typer's styles and panel titles (typer.rich_utils), which the quick help
# must share to print the same bytes.
_THEME = {"option": "bold cyan", "switch": "bold green", "negative_option": "bold magenta",
          "negative_switch": "bold red", "types": "bold yellow", "types_sep": "dim", "usage": "yellow"}
_OPTIONS_PANEL, _COMMANDS_PANEL = "Options", "Commands"
# Where typer highlights option names, types and the usage's prefix.
_OPTION_PATTERNS = (r"(^|\W)(?P<switch>\-\w+)(?![a-zA-Z0-9])", r"(^|\W)(?P<option>\-\-[\w\-]+)(?![a-zA-Z0-9])",
                    r"(?P<types>\<[^\>]+\>)", r"(?P<usage>Usage: )")
_NEGATIVE_PATTERNS = (r"(^|\W)(?P<negative_switch>\-\w+)(?![a-zA-Z0-9])",
                      r"(^|\W)(?P<negative_option>\-\-[\w\-]+)(?![a-zA-Z0-9])")
_TYPE_PATTERNS = (r"^(?P<types_sep>(\[|<))", r"(?P<types_sep>\|)", r"(?P<types_sep>(\]|>))(\.\.\.)?$")


def answer(args: Sequence[str], commands: Sequence[tuple], root: tuple | None,
           environ: Mapping[str, str] = os.environ, program: str | None = None) -> int | None:
    """Answer ``args`` from the index (``commands``, ``root``) and give the
    exit status, or None where the command line has to load to answer.
    ``program``: the command's name, as the script was run by default."""
    if root is None:
        return None
    root = Root(*root[:4], tuple(_option(row) for row in root[4]))
    entries = [CommandEntry(*row) for row in commands]
    program = program or program_name()
    instruction = environ.get(f"_{program}_COMPLETE".replace("-", "_").upper())
    if instruction:
        return _complete(instruction, entries, environ)
    if len(args) == 1 and args[0] in root.help_options:
        if not print_help(program, entries, root):
            return None
        print()  # click ends a help asked for with an empty line
        return 0
    if not args and root.no_args_is_help:
        return 2 if print_help(program, entries, root) else None
    return None


def program_name() -> str:
    """The command's name as click shows it: the script's file name, or
    ``python -m package`` when run as a module."""
    main = sys.modules["__main__"]
    path = sys.argv[0]
    package = getattr(main, "__package__", None)
    if not package:
        return os.path.basename(path)
    name = os.path.splitext(os.path.basename(path))[0]
    module = package if name == "__main__" else f"{package}.{name}"
    return f"python -m {module.lstrip('.')}"


def _option(row: tuple) -> RootOption:
    *head, texts = row
    return RootOption(*head, tuple(StyledText(*text) for text in texts))


# --- the root help --------------------------------------------------------

def _usage_line(program: str, usage: str) -> str | None:
    """Click's usage line, or None where click would wrap it: its help is
    the terminal's width less 2, 50 columns at least, 78 at most."""
    import shutil

    width = max(min(shutil.get_terminal_size().columns, 80) - 2, 50)
    line = f"Usage: {program} {usage}"
    return line if len(line) <= width else None


def help_console():
    """A console as typer's help has it: its theme, highlighter, colours,
    width (TERMINAL_WIDTH) and terminal forced by FORCE_COLOR and the like."""
    from rich.console import Console
    from rich.theme import Theme

    forced = True if any(os.environ.get(name) for name in ("GITHUB_ACTIONS", "FORCE_COLOR", "PY_COLORS")) else None
    if os.environ.get("_TYPER_FORCE_DISABLE_TERMINAL"):
        forced = False
    width = os.environ.get("TERMINAL_WIDTH")
    return Console(theme=Theme(_THEME), highlighter=_highlighter(_OPTION_PATTERNS), color_system="auto",
                   force_terminal=forced, width=int(width) if width else None)


@functools.cache
def _highlighter(patterns: tuple[str, ...]):
    from rich.highlighter import RegexHighlighter

    return type("Highlighter", (RegexHighlighter,), {"highlights": list(patterns)})()


def _rich_text(text: str, style: str = ""):
    """Help text as typer shows it: rich markup (or ANSI codes) with
    option names highlighted."""
    import inspect

    from rich.text import Text

    text = inspect.cleandoc(text)
    made = Text.from_ansi(text, style=style) if "\033[" in text else Text.from_markup(text, style=style)
    return _highlighter(_OPTION_PATTERNS)(made)


def _help_text(help_text: str):
    """The root's help: its first paragraph on lines of its own, the rest dim."""
    import inspect

    from rich.console import Group
    from rich.text import Text

    first, *rest = inspect.cleandoc(help_text).partition("\f")[0].split("\n\n")
    if not first.startswith("\b"):
        first = first.replace("\n", " ")
    parts = [_rich_text(first.strip())]
    if rest:
        parts += [Text(""), _rich_text("\n\n".join(rest), style="dim")]
    return Group(*parts, fit=True)


def _panel(table, title: str):
    from rich.panel import Panel

    return Panel(table, border_style="dim", title=title, title_align="left")


def _table(*, highlight: bool):
    from rich.table import Table

    return Table(highlight=highlight, show_header=False, expand=True, box=None, show_lines=False, leading=0,
                 border_style=None, row_styles=None, pad_edge=False, padding=(0, 1))


def _options_panel(title: str, options: Sequence[RootOption]):
    from rich.columns import Columns
    from rich.text import Text

    names, negative, types = (_highlighter(_OPTION_PATTERNS), _highlighter(_NEGATIVE_PATTERNS),
                              _highlighter(_TYPE_PATTERNS))
    table = _table(highlight=True)
    required = any(option.required for option in options)
    for option in options:
        row = [names(option.long), names(option.short), negative(option.negative_long),
               negative(option.negative_short), types(Text(option.value, style="bold yellow", overflow="fold")),
               Columns([text.text() for text in option.help])]
        if required:
            row.insert(0, Text("*", style="red") if option.required else "")
        table.add_row(*row)
    return _panel(table, title)


def _command_help(help_text: str):
    """A command's line in the listing: the first paragraph of its help."""
    import inspect

    first = inspect.cleandoc(help_text).split("\n\n")[0]
    if first.startswith("\b"):
        first = first.replace("\b\n", "")
    return _rich_text(first.strip())


def _commands_panel(title: str, entries: Sequence[CommandEntry], name_width: int):
    from rich.text import Text

    table = _table(highlight=False)
    table.add_column(style="bold cyan", no_wrap=True, width=name_width)
    table.add_column("Description", justify="left", no_wrap=False, ratio=10)
    for entry in entries:
        table.add_row(Text(entry.name), _command_help(entry.help))
    return _panel(table, title)


def _by_panel(items, default: str) -> dict[str, list]:
    """Items by their panel's title: the default panel first, then the
    others in the order they first appear."""
    panels: dict[str, list] = {default: []}
    for item in items:
        panels.setdefault(item.panel or default, []).append(item)
    return {title: listed for title, listed in panels.items() if listed}


def print_help(program: str, entries: Sequence[CommandEntry], root: Root) -> bool:
    """Print the root's help as typer lays it out; False (nothing printed)
    where the usage line would need click's wrapping."""
    usage = _usage_line(program, root.usage)
    if usage is None:
        return False
    from rich.align import Align
    from rich.padding import Padding

    console = help_console()
    console.print(Padding(_highlighter(_OPTION_PATTERNS)(usage), 1), style="bold")
    if root.help:
        console.print(Padding(Align(_help_text(root.help), pad=False), (0, 1, 1, 1)))
    for title, options in _by_panel(root.options, _OPTIONS_PANEL).items():
        console.print(_options_panel(title, options))
    listed = [entry for entry in entries if not entry.hidden]
    name_width = max((len(entry.name) for entry in listed), default=0)
    for title, panel_entries in _by_panel(listed, _COMMANDS_PANEL).items():
        console.print(_commands_panel(title, panel_entries, name_width))
    return True


# --- completion of a command's name --------------------------------------

def _split(words: str) -> list[str]:
    """Shell words as click splits them: a missing closing quote or a
    trailing escape keeps the partial word."""
    import shlex

    lexer = shlex.shlex(words, posix=True)
    lexer.whitespace_split, lexer.commenters = True, ""
    out = []
    try:
        out.extend(lexer)
    except ValueError:
        out.append(lexer.token)
    return out


def _words(shell: str, environ: Mapping[str, str]) -> tuple[list[str], str]:
    """The words before the one completed, and that word, as each shell's
    completion script hands them over."""
    if shell == "bash":
        words, current = _split(environ.get("COMP_WORDS", "")), int(environ.get("COMP_CWORD", "0"))
        return words[1:current], words[current] if current < len(words) else ""
    given = environ.get("_TYPER_COMPLETE_ARGS", "")
    words = _split(given)[1:]
    if shell in ("powershell", "pwsh"):
        incomplete = environ.get("_TYPER_COMPLETE_WORD_TO_COMPLETE", "")
        return (words[:-1] if incomplete else words), incomplete
    if words and not given.endswith(" "):
        return words[:-1], words[-1]
    return words, ""


def _plain(text: str) -> str:
    """Help as completion shows it: rich markup rendered to plain text."""
    console = help_console()
    return "".join(segment.text for segment in console.render(text)).rstrip("\n")


def _zsh_quoted(text: str) -> str:
    return (text.replace('"', '""').replace("'", "''").replace("$", "\\$").replace("`", "\\`")
            .replace(":", r"\\:"))


def _complete(instruction: str, entries: Sequence[CommandEntry], environ: Mapping[str, str]) -> int | None:
    """Complete the first word (a command's name) as typer's script for the
    shell expects it; None for anything else."""
    action, _, shell = instruction.partition("_")
    if action != "complete" or shell not in ("bash", "zsh", "fish", "powershell", "pwsh"):
        return None
    before, incomplete = _words(shell, environ)
    if before or (incomplete and not incomplete[0].isalnum()):  # past the command, or an option
        return None
    found = [entry for entry in entries if entry.name.startswith(incomplete) and not entry.hidden]
    if shell == "bash":
        print("\n".join(entry.name for entry in found))
    elif shell == "zsh":
        lines = [_zsh_line(entry) for entry in found]
        print("_arguments '*: :((" + "\n".join(lines) + "))'" if lines else "_files")
    elif shell == "fish":
        lines = [_fish_line(entry) for entry in found]
        fish_action = environ.get("_TYPER_COMPLETE_FISH_ACTION", "")
        if fish_action == "is-args":  # whether to offer these rather than files
            return 0 if lines else 1
        print("\n".join(lines) if fish_action == "get-args" else "")
    else:
        print("\n".join(f"{entry.name}:::{_plain(entry.short_help) if entry.short_help else ' '}"
                        for entry in found))
    return 0


def _zsh_line(entry: CommandEntry) -> str:
    name = _zsh_quoted(entry.name)
    return f'"{name}":"{_plain(_zsh_quoted(entry.short_help))}"' if entry.short_help else f'"{name}"'


def _fish_line(entry: CommandEntry) -> str:
    import re

    if not entry.short_help:
        return entry.name
    one_line = re.sub(r"\s", " ", entry.short_help)
    return f"{entry.name}\t{_plain(one_line)}"
