"""Every command's help at 80 columns keeps every word whole: typer's
layout cuts a word longer than its cell with "…", and the help texts say
"..." where they mean "and so on"."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from oddnode.main import app
from support.cli import cli_commands

COMMANDS = [()] + cli_commands()


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
