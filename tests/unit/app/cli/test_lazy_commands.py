"""The command line loads a family of commands only when one of them is
used: its help and the completion of command names read the index
(oddnode.command_index), which must say what the families themselves say."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import typer
from typer.testing import CliRunner

import pytest

import oddnode.main
from oddnode.command_index import COMMANDS
from oddnode.app.cli.lazy import CommandEntry, Registration, lazy_group_class

# What a family of commands brings in, and none of it is needed to list them.
HEAVY = ("numpy", "duckdb", "scipy", "matplotlib", "yaml", "oddnode.store", "oddnode.app.cli.check",
         "oddnode.app.cli.analysis", "oddnode.testbed.cli")
# Run the command line in a fresh interpreter, then print what it loaded.
LOADED = """\
import json, sys
import oddnode.main
try:
    oddnode.main.main()
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


def loaded_by(argv: list[str], env: dict[str, str] | None = None) -> tuple[str, set[str]]:
    done = subprocess.run([sys.executable, "-c", f"import sys; sys.argv = {['oddnode', *argv]!r}\n" + LOADED],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "COLUMNS": "80", **(env or {})})
    return done.stdout, set(json.loads(done.stderr.strip().splitlines()[-1]))


def test_the_index_is_what_the_families_say():
    assert oddnode.main.written_index() == oddnode.main.INDEX.read_text(encoding="utf-8"), \
        "the command index is out of date: run python -m oddnode.main (make man)"


@pytest.mark.slow
def test_the_help_lists_every_command_and_loads_none():
    out, modules = loaded_by(["--help"])
    assert "check" in out and "testbed" in out and "switchbench" in out
    assert not modules & set(HEAVY), modules & set(HEAVY)


@pytest.mark.slow
def test_the_completion_of_a_command_name_loads_none():
    out, modules = loaded_by([], {"_ODDNODE_COMPLETE": "complete_bash", "COMP_WORDS": "oddnode ch",
                                  "COMP_CWORD": "1"})
    assert out.split() == ["check"]
    assert not modules & set(HEAVY), modules & set(HEAVY)


@pytest.mark.slow
def test_a_command_loads_its_own_family_and_completes_its_options():
    out, modules = loaded_by([], {"_ODDNODE_COMPLETE": "complete_bash", "COMP_WORDS": "oddnode check --memory-m",
                                  "COMP_CWORD": "2"})
    assert set(out.split()) == {"--memory-min-seconds", "--memory-max-seconds"}
    assert "oddnode.app.cli.check" in modules and "oddnode.app.cli.sweep" not in modules


@pytest.mark.slow
def test_the_root_help_is_the_help_of_the_command_line_with_every_family_loaded():
    lazy = CliRunner().invoke(oddnode.main.app, ["--help"], terminal_width=80)
    full = CliRunner().invoke(oddnode.main.full_app(), ["--help"], terminal_width=80)
    assert lazy.exit_code == full.exit_code == 0
    assert lazy.output == full.output


def test_a_wrong_name_is_still_suggested_its_neighbour():
    result = CliRunner().invoke(oddnode.main.app, ["stat"])
    assert result.exit_code == 2 and "Did you mean 'stats'?" in result.output


def test_commands_registered_on_the_root_app_sit_beside_the_index():
    entries = [CommandEntry("greet", "tests.unit.app.cli.no_such_module", "register", None, False, "Say hello.",
                            "Say hello.")]
    app = typer.Typer(cls=lazy_group_class(entries))
    app.callback()(lambda: None)

    @app.command("ping")
    def ping() -> None:
        """Answer."""
        print("pong")

    root = typer.main.get_command(app)
    assert list(root.list_commands(typer.Context(root))) == ["greet", "ping"]
    assert CliRunner().invoke(app, ["ping"]).output == "pong\n"
    listing = CliRunner().invoke(app, ["--help"]).output
    assert "Say hello." in listing and "Answer." in listing  # the index's entry listed without loading it


def test_a_family_registers_what_the_index_says_it_does():
    entries = {row[0]: CommandEntry(*row) for row in COMMANDS}
    assert entries["pairs"][1:3] == Registration("oddnode.app.cli.interconnect")
    assert entries["switchbench"][1:3] == Registration("oddnode.app.cli.interconnect", "register_switchbench")
    assert entries["testbed"][1] == "oddnode.testbed.cli"
