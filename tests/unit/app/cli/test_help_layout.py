"""Every command's help at 80 columns keeps every word whole (typer's
layout cuts a word longer than its cell with "…", and the help texts say
"..." where they mean "and so on"), and names values as click does:
PATH, INTEGER, the choices, nothing for a flag."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from oddnode.app.cli.help_layout import plain_metavar
from oddnode.main import app
from support.cli import cli_commands

COMMANDS = [()] + cli_commands()


@pytest.mark.slow
@pytest.mark.parametrize("path", COMMANDS, ids=lambda path: " ".join(path) or "oddnode")
def test_help_at_80_columns_cuts_no_word(path):
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "80", "TERMINAL_WIDTH": "80"})
    assert result.exit_code == 0, result.output
    assert max(len(line) for line in result.output.splitlines()) <= 80
    cut = [line for line in result.output.splitlines() if "…" in line]
    assert cut == [], "\n".join(cut)


def test_a_long_default_is_folded_not_cut():
    # check's --stages default names six stages with no space between them.
    result = CliRunner().invoke(app, ["check", "--help"], env={"COLUMNS": "80"})
    joined = "".join(line.strip(" │") for line in result.output.splitlines())
    assert "memory,noise,compute,disk,interconnect,sets" in joined


@pytest.mark.slow
@pytest.mark.parametrize("path", COMMANDS, ids=lambda path: " ".join(path) or "oddnode")
def test_help_names_values_plainly_and_flags_by_nothing(path):
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
    typed = re.findall(r"<(?:bool|int|float|str|path|list\[\w+\])>", result.output)
    assert typed == [], typed


def test_the_analyze_help_shows_click_style_placeholders():
    lines = CliRunner().invoke(app, ["analyze", "--help"], env={"COLUMNS": "200"}).output.splitlines()

    def shown(option: str) -> str:
        """The first word after the option's name on its line."""
        (word,) = [m.group(1) for line in lines if (m := re.search(rf"│ +{option} +(\S+)", line))]
        return word

    assert shown("--json") == "Print"  # the help, straight after the flag
    assert shown("--fail-on") == "never|warning|error"
    assert shown("--since") == "WHEN"
    assert shown("--db") == "PATH"


@pytest.mark.parametrize(("typed", "plain"), [
    ("<int>", "INTEGER"), ("<int range>", "INTEGER"), ("<float>", "FLOAT"), ("<str>", "TEXT"), ("<path>", "PATH"),
    ("<list[Path]>", "PATH..."), ("<list[str]>", "TEXT..."), ("<never|warning|error>", "never|warning|error"),
    ("<%Y-%m-%d|%Y-%m-%dT%H:%M>", "WHEN"), ("<Quantity>", "QUANTITY")])
def test_plain_metavar(typed, plain):
    assert plain_metavar(typed) == plain
    assert plain_metavar(typed, flag=True) == ""
