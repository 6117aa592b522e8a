"""What the documentation says exists is what the command line has, and
the other way round: every command and sub-command, every tool that
``oddnode import`` reads."""

import re

import pytest

from oddnode.parsers import parsers
from support.cli import REPOSITORY, cli_commands

DOCS = REPOSITORY / "docs"
README = REPOSITORY / "README.md"
COMMANDS = (DOCS / "commands.md").read_text(encoding="utf-8")
# A command's name, or one of a README cell's alternatives (`testbed up\|down`).
_WORD = re.compile(r"^[a-z][a-z0-9-]*(\\\|[a-z][a-z0-9-]*)*$")


def section(command: str) -> str:
    """commands.md's text about a top-level command: its sections (the
    headings naming ``oddnode COMMAND``), or the whole file where it has none
    (``config show`` lives under "Configuration files")."""
    parts = re.split(r"^## ", COMMANDS, flags=re.MULTILINE)
    own = [part for part in parts if re.search(rf"`oddnode {re.escape(command)}[` ]", part.split("\n", 1)[0])]
    return "\n".join(own) or COMMANDS


def command_paths(cell: str) -> list[tuple[str, ...]]:
    """The command paths a table cell or heading names: ``import stab PATH…``
    names ("import", "stab"); ``testbed up\\|status`` names two."""
    words: list[str] = []
    for word in cell.split():
        if not _WORD.match(word):
            break
        words.append(word)
    if len(words) < 2:
        return [tuple(words)]
    return [(words[0], alternative) for alternative in words[1].split("\\|")]


def readme_table() -> list[tuple[str, ...]]:
    rows = re.findall(r"^\| `([^`]+)` \|", README.read_text(encoding="utf-8"), flags=re.MULTILINE)
    return [path for row in rows for path in command_paths(row)]


def headings() -> list[tuple[str, ...]]:
    named = re.findall(r"`oddnode ([^`]+)`", "\n".join(re.findall(r"^#+ .*$", COMMANDS, flags=re.MULTILINE)))
    return [path for text in named for path in command_paths(text)]


@pytest.mark.parametrize("path", cli_commands(), ids=" ".join)
def test_every_command_is_documented(path):
    text = section(path[0])
    if len(path) == 1:
        assert f"oddnode {path[0]}" in text, f"docs/commands.md has no section on oddnode {path[0]}"
        assert (path[0],) in {row[:1] for row in readme_table()}, f"README's command table lacks {path[0]}"
    else:
        assert f"oddnode {' '.join(path)}" in text or f"`{path[-1]}`" in text, \
            f"docs/commands.md does not document oddnode {' '.join(path)}"


def test_every_documented_command_exists():
    existing = set(cli_commands())
    for path in headings() + readme_table():
        if path == ("import", "TOOL"):  # the parsers' commands, checked below
            continue
        assert path in existing, f"the docs name oddnode {' '.join(path)}, which the command line lacks"


def documented_parsers() -> dict[str, set[str]]:
    """The tool names each document gives ``oddnode import``."""
    one_of = re.search(r"`TOOL` is one of (.*?)\.", COMMANDS, flags=re.DOTALL).group(1)
    formats = (DOCS / "formats.md").read_text(encoding="utf-8")
    table = formats[formats.index("## Tool imports"):].split("\n\n")[2]
    mentioned = re.findall(r"oddnode\s+import\s+([a-z][a-z0-9-]*)", "\n".join(
        path.read_text(encoding="utf-8") for path in (*DOCS.glob("*.md"), README)))
    return {
        "commands.md's list": set(re.findall(r"`([a-z0-9-]+)`", one_of)),
        "formats.md's table": set(re.findall(r"^\| `([a-z0-9-]+)`", table, flags=re.MULTILINE)),
        "the docs' oddnode import NAME": set(mentioned) - {"stab", "mpip", "itc"},
    }


def test_every_parser_is_documented_and_every_documented_one_exists():
    registered = set(parsers())
    for where, names in documented_parsers().items():
        assert names <= registered, f"{where} names parsers that do not exist: {sorted(names - registered)}"
        if where != "the docs' oddnode import NAME":
            assert registered <= names, f"{where} lacks {sorted(registered - names)}"
